package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// demoEndpoint is one endpoint the demo registers, served by one receiver.
type demoEndpoint struct {
	ID          string
	Behaviour   string   // of its receiver (see e2e/receiver/receiver.js)
	Events      []string // subscription filter, as given to --events
	Rate        int      // --rate, requests per second
	MaxInFlight int      // --max-in-flight
}

// matches reports whether an event of type typ matches filter, with the
// rules of the delivery-path issue: an exact type, a prefix wildcard "x.*"
// matching every type that starts with "x.", or "*" matching every type.
// The demo computes its expected deliveries with it, independently of
// hookrelay's own matcher.
func matches(filter []string, typ string) bool {
	for _, f := range filter {
		switch {
		case f == "*":
			return true
		case strings.HasSuffix(f, ".*"):
			if strings.HasPrefix(typ, strings.TrimSuffix(f, "*")) {
				return true
			}
		case f == typ:
			return true
		}
	}
	return false
}

// pair is one expected delivery: an event to an endpoint.
type pair struct{ EventID, EndpointID string }

// expectedPairs returns every (event, endpoint) pair the filters select.
func expectedPairs(evs []demoEvent, eps []demoEndpoint) map[pair]bool {
	want := make(map[pair]bool)
	for _, ev := range evs {
		for _, ep := range eps {
			if matches(ep.Events, ev.Type) {
				want[pair{ev.ID, ep.ID}] = true
			}
		}
	}
	return want
}

// finalPairs reads the (event, endpoint) pairs of db.attempts that have a
// final attempt (any outcome but retry_scheduled), with FINAL so a row
// inserted twice counts once.
func finalPairs(ctx context.Context, conn driver.Conn, db string) (map[pair]bool, error) {
	rows, err := conn.Query(ctx, fmt.Sprintf(
		"SELECT DISTINCT event_id, endpoint_id FROM %s.attempts FINAL WHERE outcome != 'retry_scheduled'", db))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	got := make(map[pair]bool)
	for rows.Next() {
		var p pair
		if err := rows.Scan(&p.EventID, &p.EndpointID); err != nil {
			return nil, err
		}
		got[p] = true
	}
	return got, rows.Err()
}

// waitFinal polls ClickHouse until every pair of want has a final attempt
// row, printing progress to out every few seconds. On timeout it returns an
// error listing what is missing (with the latest row of each, if any). A
// final row for a pair not in want is an error too (a filter mismatch).
func waitFinal(ctx context.Context, conn driver.Conn, db string, want map[pair]bool, timeout time.Duration, out io.Writer) error {
	start := time.Now()
	deadline := start.Add(timeout)
	lastPrint := time.Time{}
	wantBy := map[string]int{}
	for p := range want {
		wantBy[p.EndpointID]++
	}
	progress := func(done int, doneBy map[string]int) {
		var b strings.Builder
		fmt.Fprintf(&b, "  final %4d/%d ", done, len(want))
		for _, ep := range sortedKeys(wantBy) {
			fmt.Fprintf(&b, "  %s %d/%d", ep, doneBy[ep], wantBy[ep])
		}
		fmt.Fprintf(out, "%s  (%s)\n", b.String(), time.Since(start).Round(100*time.Millisecond))
		lastPrint = time.Now()
	}
	var got map[pair]bool
	for {
		var err error
		got, err = finalPairs(ctx, conn, db)
		if err != nil && !isMissingTable(err) {
			return fmt.Errorf("read %s.attempts: %w", db, err)
		}
		done, doneBy := 0, map[string]int{}
		var extra []pair
		for p := range got {
			if want[p] {
				done++
				doneBy[p.EndpointID]++
			} else {
				extra = append(extra, p)
			}
		}
		if len(extra) > 0 {
			return fmt.Errorf("%d deliveries the filters do not select have attempt rows, e.g. %v", len(extra), firstPairs(extra, 5))
		}
		if done == len(want) {
			progress(done, doneBy)
			return nil
		}
		if time.Since(lastPrint) >= 2*time.Second {
			progress(done, doneBy)
		}
		if time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	var missing []pair
	for p := range want {
		if !got[p] {
			missing = append(missing, p)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "timed out after %s: %d of %d expected deliveries have no final attempt row in %s.attempts", timeout, len(missing), len(want), db)
	byEndpoint := map[string]int{}
	for _, p := range missing {
		byEndpoint[p.EndpointID]++
	}
	for _, ep := range sortedKeys(byEndpoint) {
		fmt.Fprintf(&b, "\n  endpoint %s: %d missing", ep, byEndpoint[ep])
	}
	for _, p := range firstPairs(missing, 10) {
		fmt.Fprintf(&b, "\n  missing event %s -> endpoint %s: %s", p.EventID, p.EndpointID, latestAttempt(ctx, conn, db, p))
	}
	return fmt.Errorf("%s", b.String())
}

// latestAttempt describes the newest attempt row of p, for error messages.
func latestAttempt(ctx context.Context, conn driver.Conn, db string, p pair) string {
	var (
		n              uint16
		outcome, class string
		status         uint16
		at             time.Time
	)
	err := conn.QueryRow(ctx, fmt.Sprintf(
		"SELECT attempt_number, outcome, http_status, error_class, attempted_at FROM %s.attempts FINAL "+
			"WHERE event_id = ? AND endpoint_id = ? ORDER BY attempted_at DESC, attempted_ms DESC LIMIT 1", db),
		p.EventID, p.EndpointID).Scan(&n, &outcome, &status, &class, &at)
	if err != nil {
		if strings.Contains(err.Error(), "no rows") {
			return "no attempt row at all"
		}
		return "(" + err.Error() + ")"
	}
	return fmt.Sprintf("latest attempt #%d %s (http %d %s) at %s", n, outcome, status, class, at.Format(time.TimeOnly))
}

// isMissingTable reports whether err says the attempts table does not exist
// yet (hookrelay migrates at start-up, so this is brief).
func isMissingTable(err error) bool {
	s := err.Error()
	return strings.Contains(s, "doesn't exist") || strings.Contains(s, "UNKNOWN_TABLE") || strings.Contains(s, "UNKNOWN_DATABASE")
}

func firstPairs(ps []pair, n int) []pair {
	slices.SortFunc(ps, func(a, b pair) int {
		return strings.Compare(a.EndpointID+"\x00"+a.EventID, b.EndpointID+"\x00"+b.EventID)
	})
	return ps[:min(n, len(ps))]
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
