package audit

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"
)

// Stats are the delivery log's aggregated figures: what the console's
// charts, the endpoints list (GET /v1/endpoints?include=stats) and the
// health route read. chstore serves them from the materialized views
// attempts_minute and attempts_hour (docs/ANALYTICS.md), never from the raw
// attempts table; [Memory] computes them from its rows.
//
// Buckets are whole UTC minutes. A range [Since, Until) selects the minutes
// whose start is in it, after Since is truncated down to its minute: a
// bucket is never split, so a window may include up to one minute before
// Since.
type Stats interface {
	// Stats returns one endpoint's buckets at q.Granularity, ascending by
	// Start, only those with at least one attempt. An invalid q returns an
	// error wrapping ErrInvalidQuery.
	Stats(ctx context.Context, q StatsQuery) ([]StatsBucket, error)

	// EndpointTotals returns one EndpointTotals per endpoint of eps with at
	// least one attempt in [since, until) (minute buckets, as above), in
	// one query for all of them, in no particular order. Each ref selects
	// the attempts of its endpoint under its tenant (see Query.Tenant);
	// eps names each endpoint ID once.
	EndpointTotals(ctx context.Context, eps []EndpointRef, since, until time.Time) ([]EndpointTotals, error)
}

// EndpointRef names one endpoint's log: its ID and its current tenant.
type EndpointRef struct {
	EndpointID string
	Tenant     string
}

// StatsQuery selects one endpoint's buckets for [Stats.Stats].
type StatsQuery struct {
	// EndpointID and Tenant select the log as in Query; Tenant nil means
	// every tenant. EndpointID is required.
	EndpointID string
	Tenant     *string
	// Since and Until bound the buckets: [Since, Until). Required, Since
	// before Until, both in MinTime..MaxTime.
	Since, Until time.Time
	// Granularity is the bucket width: time.Minute or time.Hour (UTC hours).
	Granularity time.Duration
}

// StatsBucket is one time bucket of an endpoint's attempts.
type StatsBucket struct {
	// Start is the bucket's first instant (UTC).
	Start time.Time
	// Figures of the bucket.
	Figures
}

// Figures are the counts and latency quantiles of a set of attempts.
type Figures struct {
	// Attempts counts attempts of every outcome (one per AttemptID and
	// outcome: an Interrupted attempt whose outcome came later counts
	// under both; docs/ANALYTICS.md).
	Attempts int64
	// Delivered counts Delivered attempts.
	Delivered int64
	// Failed counts attempts that reached for the endpoint and did not
	// deliver: RetryScheduled, Failed, Gone and Exhausted.
	Failed int64
	// Throttled counts attempts answered 429 Too Many Requests.
	Throttled int64
	// Latency holds whether any attempt went to the network
	// (Outcome.WentToNetwork); LatencyP50 and LatencyP99 are then the
	// quantiles of their LatencyMs (floor(q*n) as in EndpointSummary; the
	// ClickHouse views use quantilesTiming, exact to the millisecond up to
	// 30 s and capped at 30 s).
	Latency                bool
	LatencyP50, LatencyP99 time.Duration
}

// SuccessRate is Delivered / (Delivered + Failed); ok is false when both
// are zero.
func (f Figures) SuccessRate() (rate float64, ok bool) {
	if n := f.Delivered + f.Failed; n > 0 {
		return float64(f.Delivered) / float64(n), true
	}
	return 0, false
}

// EndpointTotals are one endpoint's figures over a window.
type EndpointTotals struct {
	EndpointID string
	Figures
	// LastAttemptAt is when its newest attempt in the window was made
	// (second precision).
	LastAttemptAt time.Time
}

// FailedOutcomes are the outcomes Figures.Failed counts.
var FailedOutcomes = []Outcome{RetryScheduled, Failed, Gone, Exhausted}

// Validate checks q. The error wraps ErrInvalidQuery and names the field.
func (q StatsQuery) Validate() error {
	switch {
	case q.EndpointID == "":
		return fmt.Errorf("%w: StatsQuery.EndpointID is required", ErrInvalidQuery)
	case q.Granularity != time.Minute && q.Granularity != time.Hour:
		return fmt.Errorf("%w: StatsQuery.Granularity %s: want 1m or 1h", ErrInvalidQuery, q.Granularity)
	case !inTimeRange(q.Since) || !inTimeRange(q.Until):
		return fmt.Errorf("%w: StatsQuery.Since and Until must be in %s..%s", ErrInvalidQuery, MinTime.Format(time.RFC3339), MaxTime.Format(time.RFC3339))
	case !q.Since.Before(q.Until):
		return fmt.Errorf("%w: StatsQuery.Since must be before Until", ErrInvalidQuery)
	}
	return nil
}

// inMinutes reports whether t's minute bucket is in [since, until).
func inMinutes(t, since, until time.Time) bool {
	m := t.Truncate(time.Minute)
	return !m.Before(since.Truncate(time.Minute)) && m.Before(until)
}

// figuresAcc accumulates Figures.
type figuresAcc struct {
	f         Figures
	latencies []int64
	last      time.Time
}

func (acc *figuresAcc) add(a Attempt) {
	acc.f.Attempts++
	switch {
	case a.Outcome == Delivered:
		acc.f.Delivered++
	case slices.Contains(FailedOutcomes, a.Outcome):
		acc.f.Failed++
	}
	if a.HTTPStatus == 429 {
		acc.f.Throttled++
	}
	if a.Outcome.WentToNetwork() {
		acc.latencies = append(acc.latencies, a.LatencyMs)
	}
	if a.AttemptedAt.After(acc.last) {
		acc.last = a.AttemptedAt
	}
}

func (acc *figuresAcc) figures() Figures {
	f := acc.f
	if len(acc.latencies) > 0 {
		slices.Sort(acc.latencies)
		f.Latency = true
		f.LatencyP50 = time.Duration(quantileExact(acc.latencies, p50)) * time.Millisecond
		f.LatencyP99 = time.Duration(quantileExact(acc.latencies, p99)) * time.Millisecond
	}
	return f
}

var _ Stats = (*Memory)(nil)

// Stats implements [Stats.Stats].
func (m *Memory) Stats(ctx context.Context, q StatsQuery) ([]StatsBucket, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	buckets := make(map[time.Time]*figuresAcc)
	m.mu.RLock()
	for _, a := range m.rows {
		if a.EndpointID != q.EndpointID || q.Tenant != nil && a.Tenant != *q.Tenant || !inMinutes(a.AttemptedAt, q.Since, q.Until) {
			continue
		}
		start := a.AttemptedAt.Truncate(q.Granularity)
		if buckets[start] == nil {
			buckets[start] = &figuresAcc{}
		}
		buckets[start].add(a)
	}
	m.mu.RUnlock()
	out := make([]StatsBucket, 0, len(buckets))
	for start, acc := range buckets {
		out = append(out, StatsBucket{Start: start, Figures: acc.figures()})
	}
	slices.SortFunc(out, func(x, y StatsBucket) int { return x.Start.Compare(y.Start) })
	return out, nil
}

// EndpointTotals implements [Stats.EndpointTotals].
func (m *Memory) EndpointTotals(ctx context.Context, eps []EndpointRef, since, until time.Time) ([]EndpointTotals, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	tenantOf := make(map[string]string, len(eps))
	for _, e := range eps {
		tenantOf[e.EndpointID] = e.Tenant
	}
	accs := make(map[string]*figuresAcc)
	m.mu.RLock()
	for _, a := range m.rows {
		t, ok := tenantOf[a.EndpointID]
		if !ok || a.Tenant != t || !inMinutes(a.AttemptedAt, since, until) {
			continue
		}
		if accs[a.EndpointID] == nil {
			accs[a.EndpointID] = &figuresAcc{}
		}
		accs[a.EndpointID].add(a)
	}
	m.mu.RUnlock()
	out := make([]EndpointTotals, 0, len(accs))
	for id, acc := range accs {
		out = append(out, EndpointTotals{EndpointID: id, Figures: acc.figures(), LastAttemptAt: acc.last.Truncate(time.Second)})
	}
	slices.SortFunc(out, func(x, y EndpointTotals) int { return cmp.Compare(x.EndpointID, y.EndpointID) })
	return out, nil
}
