package chstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/hookrelay/hookrelay/audit"
)

var _ audit.Stats = (*Store)(nil)

// figuresSQL are the columns of audit.Figures over attempts_minute rows:
// attempts, delivered, failed, throttled, network rows, latency quantiles
// [p50, p90, p99].
func figuresSQL() string {
	var failed, offNet []string
	for _, o := range audit.FailedOutcomes {
		failed = append(failed, quote(string(o)))
	}
	for _, o := range audit.Outcomes {
		if !o.WentToNetwork() {
			offNet = append(offNet, quote(string(o)))
		}
	}
	net := fmt.Sprintf("outcome NOT IN (%s)", strings.Join(offNet, ", "))
	return fmt.Sprintf("uniqExactMerge(attempts) AS n_attempts,\n  uniqExactMergeIf(attempts, outcome = 'delivered') AS n_delivered,\n"+
		"  uniqExactMergeIf(attempts, outcome IN (%s)) AS n_failed,\n  uniqExactMergeIf(attempts, http_status = 429) AS n_throttled,\n"+
		"  countIf(%s) AS n_network,\n  quantilesTimingMergeIf(0.5, 0.9, 0.99)(latency, %s) AS latency_q", strings.Join(failed, ", "), net, net)
}

// minuteRange selects the minute buckets of [since, until).
func minuteRange(since, until time.Time) string {
	return fmt.Sprintf("minute >= %d AND minute < %d", since.Truncate(time.Minute).Unix(), untilSecond(until))
}

// untilSecond is the first whole second at or after t: a minute start m is
// before t exactly when m < untilSecond(t).
func untilSecond(t time.Time) int64 {
	s := t.Unix()
	if t.After(time.Unix(s, 0)) {
		s++
	}
	return s
}

func (c *Store) statsSQL(q audit.StatsQuery) string {
	start := "minute"
	if q.Granularity == time.Hour {
		start = "toStartOfHour(minute)"
	}
	var w strings.Builder
	fmt.Fprintf(&w, "SELECT toUInt32(%s) AS start,\n  %s\nFROM %s.attempts_minute\nWHERE endpoint_id = %s", start, figuresSQL(), c.db, quote(q.EndpointID))
	if q.Tenant != nil {
		fmt.Fprintf(&w, "\n  AND tenant = %s", quote(*q.Tenant))
	}
	fmt.Fprintf(&w, "\n  AND %s\nGROUP BY start\nORDER BY start", minuteRange(q.Since, q.Until))
	return w.String()
}

// Stats implements [audit.Stats.Stats] from the attempts_minute view (one
// key range of the endpoint: its minutes in the window).
func (c *Store) Stats(ctx context.Context, q audit.StatsQuery) ([]audit.StatsBucket, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	rows, err := c.conn.Query(ctx, c.statsSQL(q))
	if err != nil {
		return nil, fmt.Errorf("audit: read stats of endpoint %q: %w", q.EndpointID, err)
	}
	defer rows.Close()
	var out []audit.StatsBucket
	for rows.Next() {
		var (
			start uint32
			f     audit.Figures
		)
		if err := scanFigures(rows, &f, &start); err != nil {
			return nil, fmt.Errorf("audit: read stats of endpoint %q: %w", q.EndpointID, err)
		}
		out = append(out, audit.StatsBucket{Start: time.Unix(int64(start), 0).UTC(), Figures: f})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("audit: read stats of endpoint %q: %w", q.EndpointID, err)
	}
	return out, nil
}

type scanner interface{ Scan(dest ...any) error }

// scanFigures scans the columns before figuresSQL's into head, then the
// figures into f.
func scanFigures(rows scanner, f *audit.Figures, head ...any) error {
	var (
		attempts, delivered, failed, throttled, network uint64
		q                                               []float32
	)
	if err := rows.Scan(append(head, &attempts, &delivered, &failed, &throttled, &network, &q)...); err != nil {
		return err
	}
	f.Attempts, f.Delivered, f.Failed, f.Throttled = int64(attempts), int64(delivered), int64(failed), int64(throttled)
	if network > 0 && len(q) == 3 {
		f.Latency = true
		f.LatencyP50 = time.Duration(q[0]) * time.Millisecond
		f.LatencyP99 = time.Duration(q[2]) * time.Millisecond
	}
	return nil
}

func (c *Store) totalsSQL(eps []audit.EndpointRef, since, until time.Time) string {
	ids := make([]string, len(eps))
	pairs := make([]string, len(eps))
	for i, e := range eps {
		ids[i] = quote(e.EndpointID)
		pairs[i] = "(" + quote(e.EndpointID) + ", " + quote(e.Tenant) + ")"
	}
	return fmt.Sprintf("SELECT endpoint_id, toUInt32(maxMerge(last_attempt_at)),\n  %s\nFROM %s.attempts_minute\n"+
		"WHERE endpoint_id IN (%s)\n  AND (endpoint_id, tenant) IN (%s)\n  AND %s\nGROUP BY endpoint_id\nORDER BY endpoint_id",
		figuresSQL(), c.db, strings.Join(ids, ", "), strings.Join(pairs, ", "), minuteRange(since, until))
}

// EndpointTotals implements [audit.Stats.EndpointTotals] in one query over
// the attempts_minute view, however many endpoints eps lists (the query's
// text grows with eps; max_query_size is raised to fit).
func (c *Store) EndpointTotals(ctx context.Context, eps []audit.EndpointRef, since, until time.Time) ([]audit.EndpointTotals, error) {
	if len(eps) == 0 || !since.Before(until) {
		return nil, nil
	}
	sql := c.totalsSQL(eps, since, until)
	ctx = clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{"max_query_size": max(262144, 2*len(sql))}))
	rows, err := c.conn.Query(ctx, sql)
	if err != nil {
		return nil, fmt.Errorf("audit: read totals of %d endpoints: %w", len(eps), err)
	}
	defer rows.Close()
	var out []audit.EndpointTotals
	for rows.Next() {
		var (
			t    audit.EndpointTotals
			last uint32
		)
		if err := scanFigures(rows, &t.Figures, &t.EndpointID, &last); err != nil {
			return nil, fmt.Errorf("audit: read totals of %d endpoints: %w", len(eps), err)
		}
		if last > 0 {
			t.LastAttemptAt = time.Unix(int64(last), 0).UTC()
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("audit: read totals of %d endpoints: %w", len(eps), err)
	}
	return out, nil
}
