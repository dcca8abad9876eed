package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/audit/chstore"
)

// endpointCheck is what the demo reads from ClickHouse per endpoint, beyond
// audit's summary, to check the run.
type endpointCheck struct {
	deliveredFinal uint64 // deliveries whose final attempt is "delivered"
	answered       uint64 // attempts that got an HTTP response (http_status > 0)
	otherFinal     uint64 // deliveries whose final attempt is another outcome
	maxAttempt     uint16 // highest attempt_number
}

func readChecks(ctx context.Context, conn driver.Conn, db string) (map[string]endpointCheck, error) {
	rows, err := conn.Query(ctx, fmt.Sprintf(`SELECT endpoint_id,
  uniqExactIf(delivery_id, outcome = 'delivered'),
  countIf(http_status > 0),
  uniqExactIf(delivery_id, outcome NOT IN ('delivered', 'retry_scheduled')),
  max(attempt_number)
FROM %s.attempts FINAL
GROUP BY endpoint_id`, db))
	if err != nil {
		return nil, fmt.Errorf("read %s.attempts: %w", db, err)
	}
	defer rows.Close()
	out := make(map[string]endpointCheck)
	for rows.Next() {
		var (
			id string
			c  endpointCheck
		)
		if err := rows.Scan(&id, &c.deliveredFinal, &c.answered, &c.otherFinal, &c.maxAttempt); err != nil {
			return nil, fmt.Errorf("read %s.attempts: %w", db, err)
		}
		out[id] = c
	}
	return out, rows.Err()
}

// summarize prints the run's summary to w: per endpoint from ClickHouse
// (audit's Store.Summary over the attempts table, read with FINAL), per
// receiver from GET /stats. It returns the problems found (the demo then
// fails); err is for a summary that could not be read at all.
func summarize(ctx context.Context, w io.Writer, conn driver.Conn, dsn, db string, evs []demoEvent, want map[pair]bool, receivers []*receiver) (problems []string, err error) {
	store, err := chstore.New(ctx, chstore.Options{DSN: dsn})
	if err != nil {
		return nil, err
	}
	defer store.Close()
	sums, err := store.Summary(ctx, audit.Filter{})
	if err != nil {
		return nil, err
	}
	checks, err := readChecks(ctx, conn, db)
	if err != nil {
		return nil, err
	}
	expected := map[string]int{}
	for p := range want {
		expected[p.EndpointID]++
	}
	byID := map[string]audit.EndpointSummary{}
	for _, s := range sums {
		byID[s.EndpointID] = s
	}

	fmt.Fprintf(w, "\nPer endpoint (ClickHouse %s.attempts, FINAL; latency = request start to response headers):\n", db)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "endpoint\tfilter\texpected\tdeliveries\tattempts\tmax attempt #\tp50\tp99\toutcomes\t")
	for _, ep := range demoEndpoints {
		s, c := byID[ep.ID], checks[ep.ID]
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t\n", ep.ID, strings.Join(ep.Events, ","), expected[ep.ID],
			s.Deliveries, s.Attempts, c.maxAttempt, ms(s.LatencyP50), ms(s.LatencyP99), outcomes(s.Outcomes))
		if int(c.deliveredFinal) != expected[ep.ID] {
			problems = append(problems, fmt.Sprintf("endpoint %s: %d of %d expected deliveries delivered (%d ended otherwise: %s)",
				ep.ID, c.deliveredFinal, expected[ep.ID], c.otherFinal, outcomes(s.Outcomes)))
		}
	}
	tw.Flush()

	fmt.Fprintln(w, "\nPer receiver (GET /stats; every request verified with the standardwebhooks npm package; answered rows = its endpoint's attempt rows with an HTTP status):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "receiver\turl\trequests\tanswered rows\tevents\tverified\tfailed\tduplicates\tpeak in-flight\tstatuses\t")
	for i, r := range receivers {
		ep := demoEndpoints[i]
		st, err := r.stats(ctx)
		if err != nil {
			problems = append(problems, fmt.Sprintf("receiver %s: GET /stats: %v", r.behaviour, err))
			continue
		}
		c := checks[ep.ID]
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n", st.Name, r.url, st.Requests, c.answered, st.WebhookIDs,
			st.Verified, st.Failed, st.Duplicates, st.PeakInFlight, statuses(st.Statuses))
		if st.Failed > 0 {
			var ex []string
			for _, f := range st.Failures[:min(3, len(st.Failures))] {
				ex = append(ex, f.WebhookID+": "+f.Error)
			}
			problems = append(problems, fmt.Sprintf("receiver %s: %d of %d signatures FAILED verification (e.g. %s; see %s)",
				r.behaviour, st.Failed, st.Requests, strings.Join(ex, "; "), r.requests))
		}
		if st.Duplicates > 0 {
			problems = append(problems, fmt.Sprintf("receiver %s: %d events were delivered successfully more than once (see %s)", r.behaviour, st.Duplicates, r.requests))
		}
		if uint64(st.Requests) != c.answered {
			problems = append(problems, fmt.Sprintf("receiver %s saw %d requests but ClickHouse holds %d answered attempts of endpoint %s",
				r.behaviour, st.Requests, c.answered, ep.ID))
		}
		if st.WebhookIDs != expected[ep.ID] {
			problems = append(problems, fmt.Sprintf("receiver %s saw %d distinct webhook-ids, want %d", r.behaviour, st.WebhookIDs, expected[ep.ID]))
		}
	}
	tw.Flush()

	binary := 0
	for _, ev := range evs {
		if ev.Binary {
			binary++
		}
	}
	fmt.Fprintf(w, "\n%d events published (%d structured, %d binary mode), %d deliveries expected.\n", len(evs), len(evs)-binary, binary, len(want))
	return problems, nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%d ms", d.Milliseconds()) }

// outcomes formats counts in audit.Outcomes order: "delivered=12 retry_scheduled=3".
func outcomes(m map[audit.Outcome]int64) string {
	var parts []string
	for _, o := range audit.Outcomes {
		if n := m[o]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", o, n))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

// statuses formats status counts, sorted by status: "200=12 500=3".
func statuses(m map[string]int) string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}
