package chstore_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hookrelay/hookrelay/audit"
)

// TestReadLatencyAtScale loads HOOKRELAY_SCALE_ROWS attempt rows (default
// 20,000; 10,000,000 for BENCHMARKS.md) and logs the server-side time of
// the reads the API and console make: one busy endpoint's delivery log
// (first page, filtered, by event id, by webhook id, after a cursor), its
// 24 h per-minute stats, and the 24 h totals of 1,000 endpoints in one
// query; and the insert rate with the views attached. Half the rows belong
// to the busy endpoint "ep-busy" (spread over 3 days, like
// e2e.TestAPIAttemptsLatency), the rest to 1,000 others over the last day.
// It asserts only that each read returns what was loaded, never a time.
func TestReadLatencyAtScale(t *testing.T) {
	rows, _ := strconv.Atoi(os.Getenv("HOOKRELAY_SCALE_ROWS"))
	if rows <= 0 {
		rows = 20_000
	}
	s := newClickHouse(t)
	ctx := context.Background()
	now := time.Now().UTC()
	busy := rows / 2
	mk := func(j int) audit.Attempt {
		a := audit.Attempt{AttemptID: fmt.Sprintf("att-%09d", j), DeliveryID: fmt.Sprintf("dlv-%09d", j/2), EventID: fmt.Sprintf("evt-%d", j),
			WebhookID: fmt.Sprintf("msg_%09d", j/2), EventType: "invoice.paid", Tenant: "acme", URLHost: "hooks.example.com", AttemptNumber: 1 + j%2,
			LatencyMs: int64(j % 300), HTTPStatus: 200, Outcome: audit.Delivered, ResponseBody: `{"ok":true,"padding":"` + fmt.Sprintf("%080d", j) + `"}`}
		if j < busy {
			a.EndpointID = "ep-busy"
			a.AttemptedAt = now.Add(-time.Duration(busy-j) * (72 * time.Hour / time.Duration(busy)))
		} else {
			a.EndpointID = fmt.Sprintf("ep-%04d", j%1000)
			a.AttemptedAt = now.Add(-time.Duration(rows-j) * (24 * time.Hour / time.Duration(rows-busy)))
		}
		a.FirstAttemptAt = a.AttemptedAt
		if j%10 == 0 {
			a.Outcome, a.HTTPStatus = audit.Failed, 400
		}
		return a
	}
	const batch = 100_000
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	next := make(chan int)
	for range 2 { // two inserters, like the sink's batches in flight
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				as := make([]audit.Attempt, 0, batch)
				for j := i; j < min(i+batch, rows); j++ {
					as = append(as, mk(j))
				}
				if err := s.Insert(ctx, as); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := 0; i < rows; i += batch {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("inserted %d rows in %v: %.0f rows/s with the views attached (attempts_minute, attempts_hour, attempts_by_number, attempt_ids)", rows, took.Round(time.Millisecond), float64(rows)/took.Seconds())

	measure := func(what string, n int, f func(i int) (int, error), want func(got int) bool) {
		var ds []time.Duration
		for i := range n {
			t0 := time.Now()
			got, err := f(i)
			ds = append(ds, time.Since(t0))
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if !want(got) {
				t.Fatalf("%s: %d results", what, got)
			}
		}
		slices.Sort(ds)
		t.Logf("%d rows, %s: p50 %v p99 %v (n=%d, Go client round trip)", rows, what,
			ds[len(ds)/2].Round(100*time.Microsecond), ds[len(ds)*99/100].Round(100*time.Microsecond), n)
	}
	is := func(n int) func(int) bool { return func(got int) bool { return got == n } }
	logN := func(q audit.Query) (int, error) { as, err := s.Log(ctx, q); return len(as), err }
	measure("log: first page of 100", 100, func(int) (int, error) { return logN(audit.Query{EndpointID: "ep-busy"}) }, is(100))
	measure("log: outcome=failed, 50", 100, func(int) (int, error) {
		return logN(audit.Query{EndpointID: "ep-busy", Outcomes: []audit.Outcome{audit.Failed}, Limit: 50})
	}, is(50))
	measure("log: event_id", 100, func(i int) (int, error) {
		return logN(audit.Query{EndpointID: "ep-busy", EventID: fmt.Sprintf("evt-%d", i*7919%busy)})
	}, is(1))
	measure("log: webhook_id (a message)", 100, func(i int) (int, error) {
		return logN(audit.Query{EndpointID: "ep-busy", WebhookID: fmt.Sprintf("msg_%09d", i*7919%busy/2), Limit: audit.MaxLimit})
	}, is(2))
	measure("log: page after a cursor 2 days back", 100, func(i int) (int, error) {
		c := audit.Cursor{AttemptedAt: now.Add(-48*time.Hour - time.Duration(i)*time.Minute), AttemptID: "att-999999999"}
		return logN(audit.Query{EndpointID: "ep-busy", Before: c})
	}, is(100))
	tenant := "acme"
	measure("stats: 24 h per minute, one endpoint", 100, func(int) (int, error) {
		bs, err := s.Stats(ctx, audit.StatsQuery{EndpointID: "ep-busy", Tenant: &tenant, Since: now.Add(-24 * time.Hour), Until: now, Granularity: time.Minute})
		return len(bs), err
	}, func(n int) bool { return n >= 1439 })
	measure("stats: 24 h per hour, one endpoint", 100, func(int) (int, error) {
		bs, err := s.Stats(ctx, audit.StatsQuery{EndpointID: "ep-busy", Tenant: &tenant, Since: now.Add(-24 * time.Hour), Until: now, Granularity: time.Hour})
		return len(bs), err
	}, func(n int) bool { return n >= 24 })
	refs := make([]audit.EndpointRef, 1000)
	for i := range refs {
		refs[i] = audit.EndpointRef{EndpointID: fmt.Sprintf("ep-%04d", i), Tenant: "acme"}
	}
	measure("totals: 24 h of 1,000 endpoints (include=stats)", 50, func(int) (int, error) {
		h := now.Truncate(time.Hour) // the endpoints page's window (whole hours)
		ts, err := s.EndpointTotals(ctx, refs, h.Add(-24*time.Hour), h.Add(time.Hour))
		return len(ts), err
	}, func(n int) bool { return n == min(1000, rows-busy) })
}
