package chstore

import (
	"strings"
	"testing"
	"time"
)

// TestPendingTTLStatements: retention issues MODIFY TTL only for tables
// whose engine_full (as a current server renders it; the text below is
// chdb's, 25.x) does not carry that TTL already; an unchanged TTL starts no
// MATERIALIZE TTL mutation at each audit start (F10).
func TestPendingTTLStatements(t *testing.T) {
	c := &Store{db: "hr"}
	month := 30 * 24 * time.Hour
	engines := map[string]string{
		// the same TTL: skipped
		"attempts":        "ReplacingMergeTree PARTITION BY toYYYYMMDD(attempted_at) ORDER BY (endpoint_id, attempted_at) TTL attempted_at + toIntervalSecond(2592000) SETTINGS index_granularity = 8192",
		"attempts_minute": "AggregatingMergeTree PARTITION BY toYYYYMMDD(minute) ORDER BY (endpoint_id, minute) TTL minute + toIntervalSecond(2592000)",
		// another retention: changed
		"attempts_hour": "AggregatingMergeTree ORDER BY (endpoint_id, hour) TTL hour + toIntervalSecond(604800) SETTINGS index_granularity = 8192",
		// no TTL yet: set; a longer number with the same prefix is not the same
		"attempts_by_number": "AggregatingMergeTree ORDER BY (endpoint_id, hour) SETTINGS index_granularity = 8192",
		"attempt_ids":        "MergeTree ORDER BY attempt_id TTL attempted_at + toIntervalSecond(25920000) SETTINGS index_granularity = 8192",
	}
	got := c.pendingTTLStatements(month, engines)
	want := []string{
		"ALTER TABLE hr.attempts_hour MODIFY TTL hour + INTERVAL 2592000 SECOND",
		"ALTER TABLE hr.attempts_by_number MODIFY TTL hour + INTERVAL 2592000 SECOND",
		"ALTER TABLE hr.attempt_ids MODIFY TTL attempted_at + INTERVAL 2592000 SECOND",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("pending TTL statements:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := c.pendingTTLStatements(month, nil); len(got) != len(retainedTables) {
		t.Errorf("unknown engines: %d statements, want all %d", len(got), len(retainedTables))
	}
	for name := range engines {
		engines[name] = strings.Replace(strings.Replace(engines[name], "604800", "2592000", 1), "25920000", "2592000", 1)
	}
	engines["attempts_by_number"] = "AggregatingMergeTree ORDER BY (endpoint_id, hour) TTL hour + toIntervalSecond(2592000) SETTINGS index_granularity = 8192"
	if got := c.pendingTTLStatements(month, engines); len(got) != 0 {
		t.Errorf("every TTL current: %q, want none", got)
	}
}
