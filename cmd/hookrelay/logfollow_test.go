package main

import (
	"strings"
	"testing"
	"time"

	"github.com/hookrelay/hookrelay/audit"
)

// TestFollowLineColumns: a followed attempt prints in the header's columns,
// one line whatever its error holds, with "-" for no status or error.
func TestFollowLineColumns(t *testing.T) {
	header := followRow("TIME", "EVENT ID", "TYPE", "ATTEMPT", "STATUS", "OUTCOME", "LATENCY MS", "ERROR")
	at := time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC)
	lines := []string{
		followLine(audit.Attempt{AttemptedAt: at, EventID: "evt_1", EventType: "invoice.paid", AttemptNumber: 1,
			HTTPStatus: 500, Outcome: audit.RetryScheduled, LatencyMs: 12, ErrorClass: "http_500", ErrorMessage: "line1\nline2\ttab"}),
		followLine(audit.Attempt{AttemptedAt: at, EventID: "evt_2", EventType: "invoice.paid", AttemptNumber: 2,
			Outcome: audit.Delivered}),
	}
	for _, col := range []string{"EVENT ID", "TYPE", "ATTEMPT", "STATUS", "OUTCOME", "LATENCY MS", "ERROR"} {
		want := strings.Index(header, col)
		for _, l := range lines {
			if f := []rune(l); len(f) <= want || f[want] == ' ' || (want > 0 && f[want-1] != ' ') {
				t.Errorf("column %s (at %d) does not start a field in %q", col, want, l)
			}
		}
	}
	if strings.ContainsAny(lines[0], "\n\t") || !strings.HasSuffix(lines[0], "http_500: line1 line2 tab") {
		t.Errorf("line 0 = %q", lines[0])
	}
	if f := strings.Fields(lines[1]); f[4] != "-" || f[len(f)-1] != "-" || !strings.HasPrefix(lines[1], "2026-01-02T03:04:05.006Z") {
		t.Errorf("line 1 = %q", lines[1])
	}
}
