package api

import (
	"net/http"
	"time"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/pipeline/endpoints"
)

// Stats windows and limits (issue 12).
const (
	// defaultStatsRange is the range of GET …/stats without from.
	defaultStatsRange = 24 * time.Hour
	// maxMinuteRange is the widest range served per minute (1,440 buckets).
	maxMinuteRange = 24 * time.Hour
)

// bucketView is one bucket of GET …/stats (schema StatsBucket).
type bucketView struct {
	Start        time.Time `json:"start"`
	Attempts     int64     `json:"attempts"`
	Delivered    int64     `json:"delivered"`
	Failed       int64     `json:"failed"`
	Throttled    int64     `json:"throttled"`
	SuccessRate  *float64  `json:"success_rate"`
	LatencyP50Ms *int64    `json:"latency_p50_ms"`
	LatencyP99Ms *int64    `json:"latency_p99_ms"`
}

// stats24hView is the stats_24h of an endpoint listed with include=stats
// (schema EndpointStats24h).
type stats24hView struct {
	Attempts      int64      `json:"attempts"`
	Delivered     int64      `json:"delivered"`
	SuccessRate   *float64   `json:"success_rate"`
	LatencyP99Ms  *int64     `json:"latency_p99_ms"`
	LastAttemptAt *time.Time `json:"last_attempt_at"`
}

func rateOf(f audit.Figures) *float64 {
	if r, ok := f.SuccessRate(); ok {
		return &r
	}
	return nil
}

func msOf(f audit.Figures, d time.Duration) *int64 {
	if !f.Latency {
		return nil
	}
	ms := d.Milliseconds()
	return &ms
}

// statsOf returns the stats_24h of t (the zero view when t is nil: no
// attempt in the window).
func statsOf(t *audit.EndpointTotals) *stats24hView {
	if t == nil {
		return &stats24hView{}
	}
	v := &stats24hView{Attempts: t.Attempts, Delivered: t.Delivered, SuccessRate: rateOf(t.Figures), LatencyP99Ms: msOf(t.Figures, t.LatencyP99)}
	if !t.LastAttemptAt.IsZero() {
		at := t.LastAttemptAt.UTC()
		v.LastAttemptAt = &at
	}
	return v
}

// refOf is e's log for the stats reads (see logQuery).
func refOf(e *endpoints.Endpoint) audit.EndpointRef {
	return audit.EndpointRef{EndpointID: e.ID, Tenant: e.TenantID}
}

// endpointStats answers GET /v1/endpoints/{id}/stats: one endpoint's
// attempts per minute or hour, from the aggregated views (audit.Stats).
func (s *Server) endpointStats(w http.ResponseWriter, r *http.Request, p Principal) {
	e, ok := s.lookup(w, r, p)
	if !ok {
		return
	}
	v := r.URL.Query()
	var bad []FieldDetail
	to := s.o.Now().UTC()
	if t := v.Get("to"); t != "" {
		ts, err := time.Parse(time.RFC3339Nano, t)
		if err != nil {
			bad = append(bad, FieldDetail{"to", "must be an RFC 3339 date-time, e.g. 2026-01-02T03:04:05Z"})
		}
		to = ts.UTC()
	}
	from := to.Add(-defaultStatsRange)
	if f := v.Get("from"); f != "" {
		ts, err := time.Parse(time.RFC3339Nano, f)
		if err != nil {
			bad = append(bad, FieldDetail{"from", "must be an RFC 3339 date-time, e.g. 2026-01-02T03:04:05Z"})
		}
		from = ts.UTC()
	}
	gran := time.Hour
	switch g := v.Get("granularity"); g {
	case "", "hour":
	case "minute":
		gran = time.Minute
	default:
		bad = append(bad, FieldDetail{"granularity", "must be minute or hour"})
	}
	if len(bad) == 0 {
		switch {
		case !from.Before(to):
			bad = append(bad, FieldDetail{"from", "must be before to"})
		case from.Before(audit.MinTime) || to.After(audit.MaxTime):
			bad = append(bad, FieldDetail{"from", "from and to must be within 1970-01-01 … 2106-02-07"})
		case gran == time.Minute && to.Sub(from) > maxMinuteRange:
			bad = append(bad, FieldDetail{"granularity", "minute is allowed for ranges of at most 24 h; use hour"})
		}
	}
	if len(bad) > 0 {
		writeProblem(w, r, probValidation, "invalid query parameters", bad...)
		return
	}
	tenant := e.TenantID
	buckets, err := s.o.Attempts.Stats(r.Context(), audit.StatsQuery{EndpointID: e.ID, Tenant: &tenant, Since: from, Until: to, Granularity: gran})
	if err != nil {
		s.unavailable(w, r, err)
		return
	}
	out := make([]bucketView, 0, len(buckets))
	for _, b := range buckets {
		out = append(out, bucketView{Start: b.Start.UTC(), Attempts: b.Attempts, Delivered: b.Delivered, Failed: b.Failed,
			Throttled: b.Throttled, SuccessRate: rateOf(b.Figures), LatencyP50Ms: msOf(b.Figures, b.LatencyP50), LatencyP99Ms: msOf(b.Figures, b.LatencyP99)})
	}
	name := map[time.Duration]string{time.Minute: "minute", time.Hour: "hour"}[gran]
	writeJSON(w, http.StatusOK, map[string]any{"endpoint_id": e.ID, "granularity": name, "from": from, "to": to, "buckets": out})
}

// stats24hWindow is the window of the endpoints page's stats_24h at now:
// the 24 whole UTC hours before now's hour, and now's hour so far. Whole
// hours are read from the attempts_hour view alone; a window of the exact
// last 24 h would also read a minute of every endpoint for each of ~60
// minutes at its edges, which at 1,000 endpoints doubled the page's
// query (BENCHMARKS.md, issue 12). The endpoint's own /health and /stats
// keep minute precision.
func stats24hWindow(now time.Time) (since, until time.Time) {
	h := now.UTC().Truncate(time.Hour)
	return h.Add(-24 * time.Hour), h.Add(time.Hour)
}

// totalsOf reads the stats_24h of every endpoint of es (stats24hWindow)
// in one query.
func (s *Server) totalsOf(r *http.Request, es []*endpoints.Endpoint) (map[string]*audit.EndpointTotals, error) {
	refs := make([]audit.EndpointRef, len(es))
	for i, e := range es {
		refs[i] = refOf(e)
	}
	since, until := stats24hWindow(s.o.Now())
	ts, err := s.o.Attempts.EndpointTotals(r.Context(), refs, since, until)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*audit.EndpointTotals, len(ts))
	for i := range ts {
		out[ts[i].EndpointID] = &ts[i]
	}
	return out, nil
}
