package chstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/ext"

	"github.com/hookrelay/hookrelay/audit"
)

var _ audit.Stats = (*Store)(nil)

// Stats queries read attempts_minute in two steps: an inner GROUP BY of
// the bucket's (outcome, http_status) groups that merges each group's
// count state once (merging every state four times, once per figure,
// is what made a day of minutes slow), then an outer sum over the groups.
// innerFigures are the inner step's columns, outerFigures the outer's:
// attempts, delivered, failed, throttled, network rows, latency
// quantiles [p50, p90, p99].
const innerFigures = "outcome, http_status, countMerge(attempts) AS n, count() AS k,\n" +
	"    quantilesTimingMergeState(0.5, 0.9, 0.99)(latency) AS lat"

func outerFigures() string {
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
	return fmt.Sprintf("sum(n) AS n_attempts,\n  sumIf(n, outcome = 'delivered') AS n_delivered,\n"+
		"  sumIf(n, outcome IN (%s)) AS n_failed,\n  sumIf(n, http_status = 429) AS n_throttled,\n"+
		"  sumIf(k, %s) AS n_network,\n  quantilesTimingMergeIf(0.5, 0.9, 0.99)(lat, %s) AS latency_q", strings.Join(failed, ", "), net, net)
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
	fmt.Fprintf(&w, "SELECT start,\n  %s\nFROM\n(\n  SELECT toUInt32(%s) AS start, %s\n  FROM %s.attempts_minute\n  WHERE endpoint_id = %s",
		outerFigures(), start, innerFigures, c.db, quote(q.EndpointID))
	if q.Tenant != nil {
		fmt.Fprintf(&w, "\n    AND tenant = %s", quote(*q.Tenant))
	}
	fmt.Fprintf(&w, "\n    AND %s\n  GROUP BY start, outcome, http_status\n)\nGROUP BY start\nORDER BY start", minuteRange(q.Since, q.Until))
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

// scanFigures scans the columns before outerFigures' into head, then the
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

// refsTable is the name of EndpointTotals' external table of (endpoint_id,
// tenant) pairs, sent with the query when it lists more than
// maxLiteralRefs endpoints.
const refsTable = "endpoint_refs"

// maxLiteralRefs is the most (endpoint, tenant) pairs EndpointTotals writes
// into its query's text. Parsing a literal tuple list costs 18.16 about
// 0.1 s at 1,000 pairs (a list of the endpoints alone still ~0.05 s);
// the same pairs sent as an external table cost it nothing measurable.
const maxLiteralRefs = 64

// totalsSQL renders EndpointTotals' query; with external set, the pairs
// are read from refsTable (sent with the query), otherwise they are
// inlined.
func (c *Store) totalsSQL(eps []audit.EndpointRef, since, until time.Time, external bool) string {
	scope := "(endpoint_id, tenant) IN " + refsTable
	if !external {
		pairs := make([]string, len(eps))
		for i, e := range eps {
			pairs[i] = "(" + quote(e.EndpointID) + ", " + quote(e.Tenant) + ")"
		}
		scope = "(endpoint_id, tenant) IN (" + strings.Join(pairs, ", ") + ")"
	}
	part := func(table, cond string) string {
		return fmt.Sprintf("  SELECT endpoint_id, tenant, toUInt32(maxMerge(last_attempt_at)) AS last, %s\n  FROM %s.%s\n"+
			"  WHERE %s\n    AND %s\n  GROUP BY endpoint_id, tenant, outcome, http_status", innerFigures, c.db, table, scope, cond)
	}
	// Whole hours from attempts_hour, the minutes before the first and
	// after the last whole hour from attempts_minute: the same minute
	// buckets as a read of attempts_minute alone.
	lo := since.Truncate(time.Minute)
	h0, h1 := lo.Truncate(time.Hour), until.Truncate(time.Hour)
	if h0.Before(lo) {
		h0 = h0.Add(time.Hour)
	}
	var parts []string
	if h0.Before(h1) {
		// An edge with no minutes (since or until on a whole hour, as
		// the endpoints page asks) is not read.
		parts = append(parts, part("attempts_hour", fmt.Sprintf("hour >= %d AND hour < %d", h0.Unix(), h1.Unix())))
		if lo.Before(h0) {
			parts = append(parts, part("attempts_minute", minuteRange(lo, h0)))
		}
		if h1.Before(until) {
			parts = append(parts, part("attempts_minute", minuteRange(h1, until)))
		}
	} else {
		parts = append(parts, part("attempts_minute", minuteRange(lo, until)))
	}
	return fmt.Sprintf("SELECT endpoint_id, tenant, max(last) AS last_at,\n  %s\nFROM\n(\n%s\n)\nGROUP BY endpoint_id, tenant\nORDER BY endpoint_id, tenant",
		outerFigures(), strings.Join(parts, "\n  UNION ALL\n"))
}

// EndpointTotals implements [audit.Stats.EndpointTotals] in one query over
// the attempts_hour view (whole hours) and attempts_minute (the minutes at
// either end), however many endpoints eps lists: up to maxLiteralRefs
// (endpoint, tenant) pairs are written into the query, more are sent with
// it as an external table.
func (c *Store) EndpointTotals(ctx context.Context, eps []audit.EndpointRef, since, until time.Time) ([]audit.EndpointTotals, error) {
	if len(eps) == 0 || !since.Before(until) {
		return nil, nil
	}
	external := len(eps) > maxLiteralRefs
	sql := c.totalsSQL(eps, since, until, external)
	if external {
		refs, err := ext.NewTable(refsTable, ext.Column("endpoint_id", "String"), ext.Column("tenant", "String"))
		if err != nil {
			return nil, fmt.Errorf("audit: read totals of %d endpoints: %w", len(eps), err)
		}
		for _, e := range eps {
			if err := refs.Append(e.EndpointID, e.Tenant); err != nil {
				return nil, fmt.Errorf("audit: read totals of %d endpoints: %w", len(eps), err)
			}
		}
		ctx = clickhouse.Context(ctx, clickhouse.WithExternalTable(refs))
	}
	rows, err := c.conn.Query(ctx, sql)
	if err != nil {
		return nil, fmt.Errorf("audit: read totals of %d endpoints: %w", len(eps), err)
	}
	defer rows.Close()
	var out []audit.EndpointTotals
	for rows.Next() {
		var (
			t      audit.EndpointTotals
			tenant string
			last   uint32
		)
		if err := scanFigures(rows, &t.Figures, &t.EndpointID, &tenant, &last); err != nil {
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
