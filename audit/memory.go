package audit

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"
)

// Memory is an in-process [Store] for tests: other packages' unit tests and
// the conformance suite. It keeps every attempt in a map keyed by AttemptID
// (a repeated AttemptID replaces the earlier one) and scans it on every read,
// so it suits thousands of attempts, not millions. The zero value is not
// usable; call NewMemory. Safe for concurrent use.
type Memory struct {
	mu   sync.RWMutex
	rows map[string]Attempt
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty Memory store.
func NewMemory() *Memory { return &Memory{rows: make(map[string]Attempt)} }

// Insert implements [Store.Insert].
func (m *Memory) Insert(ctx context.Context, attempts []Attempt) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := ValidateAll(attempts); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, a := range attempts {
		m.rows[a.AttemptID] = Normalize(a)
	}
	return nil
}

// Log implements [Store.Log].
func (m *Memory) Log(ctx context.Context, q Query) ([]Attempt, error) {
	q, err := q.Validate()
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	before := CursorOf(Attempt{AttemptedAt: q.Before.AttemptedAt, AttemptID: q.Before.AttemptID})
	m.mu.RLock()
	var out []Attempt
	for _, a := range m.rows {
		switch {
		case a.EndpointID != q.EndpointID,
			q.Tenant != nil && a.Tenant != *q.Tenant,
			q.EventID != "" && a.EventID != q.EventID,
			q.DeliveryID != "" && a.DeliveryID != q.DeliveryID,
			q.WebhookID != "" && a.WebhookID != q.WebhookID,
			q.EventType != "" && a.EventType != q.EventType,
			!q.Until.IsZero() && !a.AttemptedAt.Before(q.Until.Truncate(time.Millisecond)),
			len(q.Outcomes) > 0 && !slices.Contains(q.Outcomes, a.Outcome),
			!q.Since.IsZero() && a.AttemptedAt.Before(q.Since.Truncate(time.Millisecond)),
			!q.Before.IsZero() && compareLog(a, before) >= 0:
			continue
		}
		out = append(out, a)
	}
	m.mu.RUnlock()
	slices.SortFunc(out, func(x, y Attempt) int { return -compareLog(x, CursorOf(y)) })
	if len(out) > q.Limit {
		out = out[:q.Limit]
	}
	return out, nil
}

// compareLog orders a against position c in the log's ascending order.
func compareLog(a Attempt, c Cursor) int {
	return cmp.Or(a.AttemptedAt.Compare(c.AttemptedAt), cmp.Compare(a.AttemptID, c.AttemptID))
}

// Count implements [Store.Count].
func (m *Memory) Count(ctx context.Context, f Filter) (int64, error) {
	if err := f.Validate(); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	var n int64
	for _, a := range m.rows {
		if f.match(a) {
			n++
		}
	}
	return n, nil
}

// Summary implements [Store.Summary].
func (m *Memory) Summary(ctx context.Context, f Filter) ([]EndpointSummary, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	type acc struct {
		sum        EndpointSummary
		deliveries map[string]bool
		latencies  []int64
	}
	byEndpoint := make(map[string]*acc)
	m.mu.RLock()
	for _, a := range m.rows {
		if !f.match(a) {
			continue
		}
		e := byEndpoint[a.EndpointID]
		if e == nil {
			e = &acc{sum: EndpointSummary{EndpointID: a.EndpointID, Outcomes: make(map[Outcome]int64)}, deliveries: make(map[string]bool)}
			byEndpoint[a.EndpointID] = e
		}
		e.sum.Attempts++
		e.sum.Outcomes[a.Outcome]++
		e.deliveries[a.DeliveryID] = true
		if a.Outcome.WentToNetwork() {
			e.latencies = append(e.latencies, a.LatencyMs)
		}
	}
	m.mu.RUnlock()
	out := make([]EndpointSummary, 0, len(byEndpoint))
	for _, e := range byEndpoint {
		e.sum.Deliveries = int64(len(e.deliveries))
		slices.Sort(e.latencies)
		e.sum.LatencyP50 = time.Duration(quantileExact(e.latencies, p50)) * time.Millisecond
		e.sum.LatencyP99 = time.Duration(quantileExact(e.latencies, p99)) * time.Millisecond
		out = append(out, e.sum)
	}
	slices.SortFunc(out, func(x, y EndpointSummary) int { return cmp.Compare(x.EndpointID, y.EndpointID) })
	return out, nil
}

// quantileExact returns the level-quantile of sorted as ClickHouse's
// quantileExact does: the element at index floor(level*n), 0 when empty.
func quantileExact(sorted []int64, level float64) int64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(level * float64(len(sorted)))
	if i >= len(sorted) {
		i = len(sorted) - 1
	}
	return sorted[i]
}

func (f Filter) match(a Attempt) bool {
	switch {
	case f.EndpointID != "" && a.EndpointID != f.EndpointID,
		f.Tenant != nil && a.Tenant != *f.Tenant,
		!f.Since.IsZero() && a.AttemptedAt.Before(f.Since.Truncate(time.Millisecond)),
		!f.Until.IsZero() && !a.AttemptedAt.Before(f.Until.Truncate(time.Millisecond)):
		return false
	}
	return true
}
