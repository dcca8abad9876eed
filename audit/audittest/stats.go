package audittest

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookrelay/hookrelay/audit"
)

// StatsStore is a Store that also serves [audit.Stats].
type StatsStore interface {
	audit.Store
	audit.Stats
}

// RunStats checks newStore's [audit.Stats] on known attempts inserted
// twice, the second time as the sink retries a batch (audit.InsertUnstored:
// only the rows not yet stored): every count is of distinct attempts, buckets
// are whole minutes or hours ascending, only buckets with attempts appear,
// the tenant scopes, and EndpointTotals reads many endpoints at once.
func RunStats(t *testing.T, newStore func(t *testing.T) StatsStore) {
	s := newStore(t)
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	var rows []audit.Attempt
	add := func(ep, tenant string, at time.Duration, o audit.Outcome, status int, latency int64) {
		a := Attempt(ep, len(rows))
		a.Tenant, a.AttemptedAt, a.Outcome, a.HTTPStatus, a.LatencyMs = tenant, t0.Add(at), o, status, latency
		if o == audit.RetryScheduled {
			a.NextAttemptAt = a.AttemptedAt.Add(time.Minute)
		}
		rows = append(rows, a)
	}
	// ep-1 of t1: minute 12:00 has 3 delivered (10, 20, 30 ms) and one 429;
	// minute 12:01 one 503 and one abandoned (no latency); 13:05 one delivered.
	add("ep-1", "t1", 5*time.Second, audit.Delivered, 200, 10)
	add("ep-1", "t1", 15*time.Second, audit.Delivered, 200, 20)
	add("ep-1", "t1", 59*time.Second, audit.Delivered, 204, 30)
	add("ep-1", "t1", 30*time.Second, audit.RetryScheduled, 429, 5)
	add("ep-1", "t1", 61*time.Second, audit.RetryScheduled, 503, 40)
	add("ep-1", "t1", 62*time.Second, audit.Abandoned, 0, 0)
	add("ep-1", "t1", 65*time.Minute, audit.Delivered, 200, 50)
	// ep-1 rows of another tenant (an earlier owner of the ID) and ep-2.
	add("ep-1", "t2", 10*time.Second, audit.Failed, 400, 7)
	add("ep-2", "t1", 2*time.Minute, audit.Exhausted, 500, 100)
	if err := s.Insert(ctx(t), rows); err != nil {
		t.Fatal(err)
	}
	if err := audit.InsertUnstored(ctx(t), s, rows); err != nil {
		t.Fatal(err)
	}
	t1 := "t1"
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	fig := func(att, del, fail, thr int64, p50, p99 int64) audit.Figures {
		f := audit.Figures{Attempts: att, Delivered: del, Failed: fail, Throttled: thr}
		if p50 >= 0 {
			f.Latency, f.LatencyP50, f.LatencyP99 = true, ms(p50), ms(p99)
		}
		return f
	}
	for _, tc := range []struct {
		name string
		q    audit.StatsQuery
		want []audit.StatsBucket
	}{
		{"minute", audit.StatsQuery{EndpointID: "ep-1", Tenant: &t1, Since: t0, Until: t0.Add(2 * time.Hour), Granularity: time.Minute},
			[]audit.StatsBucket{
				{Start: t0, Figures: fig(4, 3, 1, 1, 20, 30)},
				{Start: t0.Add(time.Minute), Figures: fig(2, 0, 1, 0, 40, 40)},
				{Start: t0.Add(65 * time.Minute), Figures: fig(1, 1, 0, 0, 50, 50)},
			}},
		{"hour", audit.StatsQuery{EndpointID: "ep-1", Tenant: &t1, Since: t0, Until: t0.Add(2 * time.Hour), Granularity: time.Hour},
			[]audit.StatsBucket{
				{Start: t0, Figures: fig(6, 3, 2, 1, 20, 40)},
				{Start: t0.Add(time.Hour), Figures: fig(1, 1, 0, 0, 50, 50)},
			}},
		// Since inside 12:01 selects that whole minute; Until 13:05 excludes it.
		{"window", audit.StatsQuery{EndpointID: "ep-1", Tenant: &t1, Since: t0.Add(90 * time.Second), Until: t0.Add(65 * time.Minute), Granularity: time.Minute},
			[]audit.StatsBucket{{Start: t0.Add(time.Minute), Figures: fig(2, 0, 1, 0, 40, 40)}}},
		{"every tenant", audit.StatsQuery{EndpointID: "ep-1", Since: t0, Until: t0.Add(time.Minute), Granularity: time.Minute},
			[]audit.StatsBucket{{Start: t0, Figures: fig(5, 3, 2, 1, 10, 30)}}},
	} {
		got, err := s.Stats(ctx(t), tc.q)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: Stats =\n%+v\nwant\n%+v", tc.name, got, tc.want)
		}
	}
	if _, err := s.Stats(ctx(t), audit.StatsQuery{EndpointID: "ep-1", Since: t0, Until: t0, Granularity: time.Minute}); err == nil {
		t.Error("Stats with Since == Until: no error")
	}
	refs := []audit.EndpointRef{{EndpointID: "ep-1", Tenant: "t1"}, {EndpointID: "ep-2", Tenant: "t1"}, {EndpointID: "ep-3", Tenant: "t1"}}
	for i := range 500 { // many endpoints in one query
		refs = append(refs, audit.EndpointRef{EndpointID: fmt.Sprintf("ep-none-%03d", i), Tenant: "t1"})
	}
	want := []audit.EndpointTotals{
		{EndpointID: "ep-1", Figures: fig(7, 4, 2, 1, 30, 50), LastAttemptAt: t0.Add(65 * time.Minute)},
		{EndpointID: "ep-2", Figures: fig(1, 0, 1, 0, 100, 100), LastAttemptAt: t0.Add(2 * time.Minute)},
	}
	// Few endpoints and many (a store may send them differently: the
	// ClickHouse store inlines a few and sends many as a table).
	for _, refs := range [][]audit.EndpointRef{refs[:3], refs} {
		got, err := s.EndpointTotals(ctx(t), refs, t0, t0.Add(2*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("EndpointTotals of %d endpoints =\n%+v\nwant\n%+v", len(refs), got, want)
		}
	}
	// A window with minutes at both ends ([12:01, 13:00) and [14:00,
	// 14:01) around the whole hour 13:00) gives what a plain scan of the
	// rows (Memory) gives.
	mem := audit.NewMemory()
	if err := mem.Insert(ctx(t), rows); err != nil {
		t.Fatal(err)
	}
	since, until := t0.Add(time.Minute), t0.Add(2*time.Hour+time.Minute)
	for _, refs := range [][]audit.EndpointRef{refs[:3], refs} {
		got, err := s.EndpointTotals(ctx(t), refs, since, until)
		if err != nil {
			t.Fatal(err)
		}
		want, err := mem.EndpointTotals(ctx(t), refs, since, until)
		if err != nil {
			t.Fatal(err)
		}
		sortTotals(got)
		sortTotals(want)
		if len(want) != 2 || !reflect.DeepEqual(got, want) {
			t.Errorf("EndpointTotals of %d endpoints over [12:01, 14:01) =\n%+v\nwant (a scan)\n%+v", len(refs), got, want)
		}
	}
}

func sortTotals(ts []audit.EndpointTotals) {
	slices.SortFunc(ts, func(a, b audit.EndpointTotals) int { return strings.Compare(a.EndpointID, b.EndpointID) })
}
