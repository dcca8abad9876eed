// Package audittest is the conformance suite every [audit.Store] passes.
//
// A backend's test calls Run with a constructor that returns an empty store
// for each subtest (for ClickHouse: a throwaway, migrated database), so
// subtests share nothing:
//
//	func TestMemoryConformance(t *testing.T) {
//		audittest.Run(t, func(*testing.T) audit.Store { return audit.NewMemory() })
//	}
//
// The suite uses fixed instants, never the clock, and asserts only what the
// [audit.Store] documentation promises.
package audittest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookrelay/hookrelay/audit"
)

// base is the instant the suite's attempts are made around.
var base = time.Date(2025, 3, 1, 12, 0, 0, 123_000_000, time.UTC)

// Run runs the conformance suite against the stores newStore returns, one
// empty store per subtest. newStore registers any cleanup with t.Cleanup.
func Run(t *testing.T, newStore func(t *testing.T) audit.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s audit.Store)
	}{
		{"RoundTrip", testRoundTrip},
		{"Normalize", testNormalize},
		{"LogOrder", testLogOrder},
		{"LogFilters", testLogFilters},
		{"LogLimit", testLogLimit},
		{"LogPaging", testLogPaging},
		{"InvalidQuery", testInvalidQuery},
		{"InsertIdempotent", testInsertIdempotent},
		{"InsertInvalid", testInsertInvalid},
		{"InsertConcurrent", testInsertConcurrent},
		{"Count", testCount},
		{"Summary", testSummary},
		{"Quoting", testQuoting},
		{"Tenant", testTenant},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, newStore(t)) })
	}
}

// Attempt returns a valid attempt numbered i of endpoint ep, made i seconds
// after a fixed instant, for tests of this and other packages.
func Attempt(ep string, i int) audit.Attempt {
	return audit.Attempt{
		AttemptID:     fmt.Sprintf("%s-a%05d", ep, i),
		DeliveryID:    fmt.Sprintf("%s-d%05d", ep, i),
		EventID:       fmt.Sprintf("evt-%05d", i),
		WebhookID:     fmt.Sprintf("msg_%05d", i),
		EventType:     "invoice.paid",
		EndpointID:    ep,
		URLHost:       "example.com:8443",
		AttemptNumber: 1,
		AttemptedAt:   base.Add(time.Duration(i) * time.Second),
		LatencyMs:     int64(10 + i%7),
		HTTPStatus:    200,
		Outcome:       audit.Delivered,
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func insert(t *testing.T, s audit.Store, as ...audit.Attempt) {
	t.Helper()
	if err := s.Insert(ctx(t), as); err != nil {
		t.Fatalf("Insert(%d attempts): %v", len(as), err)
	}
}

func logOf(t *testing.T, s audit.Store, q audit.Query) []audit.Attempt {
	t.Helper()
	got, err := s.Log(ctx(t), q)
	if err != nil {
		t.Fatalf("Log(%+v): %v", q, err)
	}
	return got
}

func ids(as []audit.Attempt) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.AttemptID
	}
	return out
}

func count(t *testing.T, s audit.Store, f audit.Filter) int64 {
	t.Helper()
	n, err := s.Count(ctx(t), f)
	if err != nil {
		t.Fatalf("Count(%+v): %v", f, err)
	}
	return n
}

func testRoundTrip(t *testing.T, s audit.Store) {
	full := audit.Attempt{
		AttemptID:       "0123456789abcdef0123456789abcdef",
		DeliveryID:      "dlv_1",
		EventID:         "evt-1",
		WebhookID:       "msg_2f1a",
		EventType:       "invoice.paid",
		Tenant:          "tenant-7",
		EndpointID:      "ep-1",
		URLHost:         "hooks.example.com:8443",
		AttemptNumber:   3,
		AttemptedAt:     base,
		LatencyMs:       1234,
		HTTPStatus:      503,
		Outcome:         audit.RetryScheduled,
		ErrorClass:      "http_503",
		ErrorMessage:    "service unavailable\nretry later",
		ResponseBody:    `{"error":"busy"}`,
		NextAttemptAt:   base.Add(90*time.Second + 456*time.Millisecond),
		FirstAttemptAt:  base.Add(-10*time.Minute - 789*time.Millisecond),
		RequestHeaders:  "Content-Type: application/json\nWebhook-Id: msg_2f1a\nWebhook-Timestamp: 1740830400\n",
		BodyPreview:     `{"type":"invoice.paid","data":{"q":"it's \\ é"}}`,
		ResponseHeaders: "Retry-After: 90\nSet-Cookie: " + audit.Redacted + "\n",
	}
	bare := audit.Attempt{ // every optional field empty
		AttemptID:   "bare",
		EndpointID:  "ep-1",
		AttemptedAt: base.Add(-time.Hour),
		Outcome:     audit.Abandoned,
	}
	insert(t, s, full, bare)
	got := logOf(t, s, audit.Query{EndpointID: "ep-1"})
	want := []audit.Attempt{full, bare}
	if len(got) != len(want) {
		t.Fatalf("Log returned %d attempts %v, want 2", len(got), ids(got))
	}
	for i := range want {
		if !equal(got[i], want[i]) {
			t.Errorf("attempt %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
		if got[i].AttemptedAt.Location() != time.UTC {
			t.Errorf("attempt %d: AttemptedAt in %v, want UTC", i, got[i].AttemptedAt.Location())
		}
	}
	if !got[1].NextAttemptAt.IsZero() || !got[1].FirstAttemptAt.IsZero() {
		t.Errorf("zero NextAttemptAt, FirstAttemptAt read back as %v, %v", got[1].NextAttemptAt, got[1].FirstAttemptAt)
	}
}

// equal compares attempts field by field, times by instant.
func equal(a, b audit.Attempt) bool {
	ta, tb, na, nb, fa, fb := a.AttemptedAt, b.AttemptedAt, a.NextAttemptAt, b.NextAttemptAt, a.FirstAttemptAt, b.FirstAttemptAt
	a.AttemptedAt, b.AttemptedAt, a.NextAttemptAt, b.NextAttemptAt, a.FirstAttemptAt, b.FirstAttemptAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}, time.Time{}, time.Time{}
	return a == b && ta.Equal(tb) && na.Equal(nb) && fa.Equal(fb)
}

func testNormalize(t *testing.T, s audit.Store) {
	a := Attempt("ep-1", 1)
	a.AttemptedAt = base.Add(987_654 * time.Nanosecond) // 123.987654 ms past the second
	a.NextAttemptAt = base.Add(time.Minute + 999_999*time.Nanosecond)
	a.ResponseBody = strings.Repeat("x", audit.MaxResponseBody+100)
	a.AttemptedAt = a.AttemptedAt.In(time.FixedZone("CET", 3600))
	insert(t, s, a)
	got := logOf(t, s, audit.Query{EndpointID: "ep-1"})
	if len(got) != 1 {
		t.Fatalf("Log returned %d attempts, want 1", len(got))
	}
	if want := base; !got[0].AttemptedAt.Equal(want) || got[0].AttemptedAt.Location() != time.UTC {
		t.Errorf("AttemptedAt = %v, want %v (truncated to ms, UTC)", got[0].AttemptedAt, want)
	}
	if want := base.Add(time.Minute); !got[0].NextAttemptAt.Equal(want) {
		t.Errorf("NextAttemptAt = %v, want %v (truncated to ms)", got[0].NextAttemptAt, want)
	}
	if n := len(got[0].ResponseBody); n != audit.MaxResponseBody {
		t.Errorf("ResponseBody has %d bytes, want %d", n, audit.MaxResponseBody)
	}
	if n := len(got[0].BodyPreview) + len(got[0].RequestHeaders) + len(got[0].ResponseHeaders); n != 0 {
		t.Errorf("empty request/response detail read back as %d bytes", n)
	}
}

func testLogOrder(t *testing.T, s audit.Store) {
	at := func(id string, d time.Duration) audit.Attempt {
		a := Attempt("ep-1", 0)
		a.AttemptID, a.AttemptedAt = id, base.Add(d)
		return a
	}
	insert(t, s,
		at("c", 0),
		at("a", time.Millisecond),                 // same second as c, 1 ms later
		at("b", time.Millisecond),                 // tie with a at the ms: AttemptID breaks it
		at("d", -time.Millisecond),                // 1 ms before c
		at("e", time.Second-124*time.Millisecond), // the last ms of c's second

		at("f", 2*time.Hour),
		at("g", -25*time.Hour), // previous day's partition
	)
	got := ids(logOf(t, s, audit.Query{EndpointID: "ep-1"}))
	want := []string{"f", "e", "b", "a", "c", "d", "g"}
	if !slices.Equal(got, want) {
		t.Errorf("Log order = %v, want %v (newest first, then AttemptID descending)", got, want)
	}
}

func testLogFilters(t *testing.T, s audit.Store) {
	var batch []audit.Attempt
	for i := range 10 {
		a := Attempt("ep-1", i)
		a.EventID = fmt.Sprintf("evt-%d", i%3)
		a.DeliveryID = fmt.Sprintf("dlv-%d", i%2)
		a.WebhookID = fmt.Sprintf("msg-%d", i%5)
		a.EventType = []string{"invoice.paid", "invoice.sent"}[i%2]
		if i%4 == 0 {
			a.Outcome, a.HTTPStatus = audit.Failed, 400
		}
		batch = append(batch, a)
	}
	for i := range 3 {
		batch = append(batch, Attempt("ep-2", i)) // another endpoint, same event ids
	}
	insert(t, s, batch...)

	pick := func(keep func(a audit.Attempt) bool) []string {
		var out []string
		for i := len(batch) - 1; i >= 0; i-- { // batch is oldest first per endpoint
			if batch[i].EndpointID == "ep-1" && keep(batch[i]) {
				out = append(out, batch[i].AttemptID)
			}
		}
		return out
	}
	tests := []struct {
		name string
		q    audit.Query
		want []string
	}{
		{"endpoint", audit.Query{EndpointID: "ep-1"}, pick(func(audit.Attempt) bool { return true })},
		{"other endpoint", audit.Query{EndpointID: "ep-2"}, []string{"ep-2-a00002", "ep-2-a00001", "ep-2-a00000"}},
		{"unknown endpoint", audit.Query{EndpointID: "nope"}, nil},
		{"event", audit.Query{EndpointID: "ep-1", EventID: "evt-1"}, pick(func(a audit.Attempt) bool { return a.EventID == "evt-1" })},
		{"delivery", audit.Query{EndpointID: "ep-1", DeliveryID: "dlv-0"}, pick(func(a audit.Attempt) bool { return a.DeliveryID == "dlv-0" })},
		{"event and delivery", audit.Query{EndpointID: "ep-1", EventID: "evt-0", DeliveryID: "dlv-1"},
			pick(func(a audit.Attempt) bool { return a.EventID == "evt-0" && a.DeliveryID == "dlv-1" })},
		{"outcomes", audit.Query{EndpointID: "ep-1", Outcomes: []audit.Outcome{audit.Failed, audit.Gone}},
			pick(func(a audit.Attempt) bool { return a.Outcome == audit.Failed })},
		{"since inclusive at the ms", audit.Query{EndpointID: "ep-1", Since: base.Add(7*time.Second + 999*time.Microsecond)},
			pick(func(a audit.Attempt) bool { return !a.AttemptedAt.Before(base.Add(7 * time.Second)) })},
		{"since 1 ms later", audit.Query{EndpointID: "ep-1", Since: base.Add(7*time.Second + time.Millisecond)},
			pick(func(a audit.Attempt) bool { return a.AttemptedAt.After(base.Add(7 * time.Second)) })},
		{"webhook id", audit.Query{EndpointID: "ep-1", WebhookID: "msg-2"}, pick(func(a audit.Attempt) bool { return a.WebhookID == "msg-2" })},
		{"event type", audit.Query{EndpointID: "ep-1", EventType: "invoice.sent"}, pick(func(a audit.Attempt) bool { return a.EventType == "invoice.sent" })},
		{"until exclusive at the ms", audit.Query{EndpointID: "ep-1", Until: base.Add(7*time.Second + 999*time.Microsecond)},
			pick(func(a audit.Attempt) bool { return a.AttemptedAt.Before(base.Add(7 * time.Second)) })},
		{"since and until", audit.Query{EndpointID: "ep-1", Since: base.Add(2 * time.Second), Until: base.Add(5 * time.Second)},
			pick(func(a audit.Attempt) bool {
				return !a.AttemptedAt.Before(base.Add(2*time.Second)) && a.AttemptedAt.Before(base.Add(5*time.Second))
			})},
		{"since and outcome", audit.Query{EndpointID: "ep-1", Since: base.Add(3 * time.Second), Outcomes: []audit.Outcome{audit.Delivered}},
			pick(func(a audit.Attempt) bool {
				return a.Outcome == audit.Delivered && !a.AttemptedAt.Before(base.Add(3*time.Second))
			})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ids(logOf(t, s, tt.q)); !slices.Equal(got, tt.want) {
				t.Errorf("Log(%+v) = %v, want %v", tt.q, got, tt.want)
			}
		})
	}
}

func testLogLimit(t *testing.T, s audit.Store) {
	var batch []audit.Attempt
	for i := range audit.MaxLimit + 5 {
		batch = append(batch, Attempt("ep-1", i))
	}
	insert(t, s, batch...)
	for _, tt := range []struct{ limit, want int }{{0, audit.DefaultLimit}, {7, 7}, {audit.MaxLimit, audit.MaxLimit}} {
		got := logOf(t, s, audit.Query{EndpointID: "ep-1", Limit: tt.limit})
		if len(got) != tt.want {
			t.Errorf("Limit %d: got %d attempts, want %d", tt.limit, len(got), tt.want)
			continue
		}
		if got[0].AttemptID != batch[len(batch)-1].AttemptID {
			t.Errorf("Limit %d: first is %s, want the newest %s", tt.limit, got[0].AttemptID, batch[len(batch)-1].AttemptID)
		}
	}
}

func testLogPaging(t *testing.T, s audit.Store) {
	var batch []audit.Attempt
	for i := range 25 {
		a := Attempt("ep-1", i)
		a.AttemptedAt = base.Add(time.Duration(i/3) * time.Millisecond) // ties of 3 at each ms
		batch = append(batch, a)
	}
	insert(t, s, batch...)
	all := ids(logOf(t, s, audit.Query{EndpointID: "ep-1", Limit: 100}))
	if len(all) != 25 {
		t.Fatalf("Log returned %d attempts, want 25", len(all))
	}
	var paged []string
	q := audit.Query{EndpointID: "ep-1", Limit: 10}
	for range 5 {
		page := logOf(t, s, q)
		if len(page) == 0 {
			break
		}
		paged = append(paged, ids(page)...)
		q.Before = audit.CursorOf(page[len(page)-1])
	}
	if !slices.Equal(paged, all) {
		t.Errorf("pages of 10 = %v\nwant %v", paged, all)
	}
}

func testInvalidQuery(t *testing.T, s audit.Store) {
	for _, q := range []audit.Query{
		{},
		{EndpointID: "ep-1", Limit: -1},
		{EndpointID: "ep-1", Limit: audit.MaxLimit + 1},
		{EndpointID: "ep-1", Outcomes: []audit.Outcome{"bogus"}},
		{EndpointID: "ep-1", Since: time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		if _, err := s.Log(ctx(t), q); !errors.Is(err, audit.ErrInvalidQuery) {
			t.Errorf("Log(%+v) error = %v, want ErrInvalidQuery", q, err)
		}
	}
	if _, err := s.Count(ctx(t), audit.Filter{Until: time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)}); !errors.Is(err, audit.ErrInvalidQuery) {
		t.Errorf("Count with Until in 2200: error = %v, want ErrInvalidQuery", err)
	}
	if _, err := s.Summary(ctx(t), audit.Filter{Since: time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC)}); !errors.Is(err, audit.ErrInvalidQuery) {
		t.Errorf("Summary with Since in 1960: error = %v, want ErrInvalidQuery", err)
	}
}

func testInsertIdempotent(t *testing.T, s audit.Store) {
	var batch []audit.Attempt
	for i := range 50 {
		batch = append(batch, Attempt("ep-1", i))
	}
	insert(t, s, batch...)
	insert(t, s, batch...)                     // a retried batch
	insert(t, s, batch[10:20]...)              // a partial retry
	insert(t, s, batch[0], batch[0], batch[1]) // duplicates within one batch
	if n := count(t, s, audit.Filter{}); n != 50 {
		t.Errorf("Count after inserting 50 attempts several times = %d, want 50", n)
	}
	if n := count(t, s, audit.Filter{EndpointID: "ep-1"}); n != 50 {
		t.Errorf("Count(ep-1) = %d, want 50", n)
	}
	got := ids(logOf(t, s, audit.Query{EndpointID: "ep-1"}))
	if len(got) != 50 {
		t.Errorf("Log returned %d attempts, want 50", len(got))
	}
	if c := slices.Compact(slices.Clone(got)); len(c) != len(got) {
		t.Errorf("Log returned duplicates: %v", got)
	}
	sum, err := s.Summary(ctx(t), audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sum) != 1 || sum[0].Attempts != 50 || sum[0].Deliveries != 50 {
		t.Errorf("Summary = %+v, want one endpoint with 50 attempts and 50 deliveries", sum)
	}
}

func testInsertInvalid(t *testing.T, s audit.Store) {
	good := Attempt("ep-1", 1)
	for name, mutate := range map[string]func(*audit.Attempt){
		"no AttemptID":        func(a *audit.Attempt) { a.AttemptID = "" },
		"no EndpointID":       func(a *audit.Attempt) { a.EndpointID = "" },
		"unknown Outcome":     func(a *audit.Attempt) { a.Outcome = "sent" },
		"zero AttemptedAt":    func(a *audit.Attempt) { a.AttemptedAt = time.Time{} },
		"AttemptedAt in 1969": func(a *audit.Attempt) { a.AttemptedAt = time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC) },
		"negative latency":    func(a *audit.Attempt) { a.LatencyMs = -1 },
		"AttemptNumber 70000": func(a *audit.Attempt) { a.AttemptNumber = 70000 },
	} {
		bad := Attempt("ep-1", 2)
		mutate(&bad)
		if err := s.Insert(ctx(t), []audit.Attempt{good, bad}); !errors.Is(err, audit.ErrInvalidAttempt) {
			t.Errorf("%s: Insert error = %v, want ErrInvalidAttempt", name, err)
		}
	}
	if n := count(t, s, audit.Filter{}); n != 0 {
		t.Errorf("Count after rejected batches = %d, want 0 (a rejected batch stores nothing)", n)
	}
	if err := s.Insert(ctx(t), nil); err != nil {
		t.Errorf("Insert(nil) = %v, want nil", err)
	}
}

func testInsertConcurrent(t *testing.T, s audit.Store) {
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Go(func() {
			var batch []audit.Attempt
			for i := range 100 {
				batch = append(batch, Attempt(fmt.Sprintf("ep-%d", w%2), w*1000+i))
			}
			errs <- s.Insert(ctx(t), batch)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent Insert: %v", err)
		}
	}
	if n := count(t, s, audit.Filter{}); n != 400 {
		t.Errorf("Count = %d, want 400", n)
	}
	if n := count(t, s, audit.Filter{EndpointID: "ep-1"}); n != 200 {
		t.Errorf("Count(ep-1) = %d, want 200", n)
	}
}

func testCount(t *testing.T, s audit.Store) {
	var batch []audit.Attempt
	for i := range 20 {
		batch = append(batch, Attempt("ep-1", i), Attempt("ep-2", i))
	}
	insert(t, s, batch...)
	tests := []struct {
		f    audit.Filter
		want int64
	}{
		{audit.Filter{}, 40},
		{audit.Filter{EndpointID: "ep-2"}, 20},
		{audit.Filter{EndpointID: "nope"}, 0},
		{audit.Filter{Since: base.Add(15 * time.Second)}, 10},
		{audit.Filter{Until: base.Add(15 * time.Second)}, 30},
		{audit.Filter{Until: base.Add(15*time.Second + time.Millisecond)}, 32},
		{audit.Filter{EndpointID: "ep-1", Since: base.Add(5 * time.Second), Until: base.Add(10 * time.Second)}, 5},
	}
	for _, tt := range tests {
		if got := count(t, s, tt.f); got != tt.want {
			t.Errorf("Count(%+v) = %d, want %d", tt.f, got, tt.want)
		}
	}
}

func testSummary(t *testing.T, s audit.Store) {
	var batch []audit.Attempt
	// ep-1: 100 deliveries, latencies 1..100 ms, all delivered; plus 3
	// abandoned attempts whose latency must not count.
	for i := range 100 {
		a := Attempt("ep-1", i)
		a.LatencyMs = int64(100 - i) // inserted out of order
		batch = append(batch, a)
	}
	for i := range 3 {
		a := Attempt("ep-1", 1000+i)
		a.Outcome, a.HTTPStatus, a.LatencyMs = audit.Abandoned, 0, 99999
		batch = append(batch, a)
	}
	// ep-2: 2 deliveries with 5 attempts: retry, retry, delivered; retry, exhausted.
	outcomes := []audit.Outcome{audit.RetryScheduled, audit.RetryScheduled, audit.Delivered, audit.RetryScheduled, audit.Exhausted}
	for i, o := range outcomes {
		a := Attempt("ep-2", i)
		a.DeliveryID = fmt.Sprintf("d%d", i/3)
		a.Outcome, a.LatencyMs = o, int64(10*(i+1))
		batch = append(batch, a)
	}
	insert(t, s, batch...)

	got, err := s.Summary(ctx(t), audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	want := []audit.EndpointSummary{
		{EndpointID: "ep-1", Attempts: 103, Deliveries: 103,
			Outcomes:   map[audit.Outcome]int64{audit.Delivered: 100, audit.Abandoned: 3},
			LatencyP50: 51 * time.Millisecond, LatencyP99: 100 * time.Millisecond},
		{EndpointID: "ep-2", Attempts: 5, Deliveries: 2,
			Outcomes:   map[audit.Outcome]int64{audit.RetryScheduled: 3, audit.Delivered: 1, audit.Exhausted: 1},
			LatencyP50: 30 * time.Millisecond, LatencyP99: 50 * time.Millisecond},
	}
	checkSummary(t, "Summary(all)", got, want)

	got, err = s.Summary(ctx(t), audit.Filter{EndpointID: "ep-2", Since: base.Add(3 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	checkSummary(t, "Summary(ep-2 since +3s)", got, []audit.EndpointSummary{
		{EndpointID: "ep-2", Attempts: 2, Deliveries: 1,
			Outcomes:   map[audit.Outcome]int64{audit.RetryScheduled: 1, audit.Exhausted: 1},
			LatencyP50: 50 * time.Millisecond, LatencyP99: 50 * time.Millisecond},
	})

	got, err = s.Summary(ctx(t), audit.Filter{EndpointID: "nope"})
	if err != nil || len(got) != 0 {
		t.Errorf("Summary(unknown endpoint) = %+v, %v; want none", got, err)
	}
}

func checkSummary(t *testing.T, what string, got, want []audit.EndpointSummary) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s = %+v, want %+v", what, got, want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.EndpointID != w.EndpointID || g.Attempts != w.Attempts || g.Deliveries != w.Deliveries ||
			g.LatencyP50 != w.LatencyP50 || g.LatencyP99 != w.LatencyP99 || !mapsEqual(g.Outcomes, w.Outcomes) {
			t.Errorf("%s[%d] = %+v, want %+v", what, i, g, w)
		}
	}
}

func mapsEqual(a, b map[audit.Outcome]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// testQuoting stores and filters on values that need escaping in SQL.
func testQuoting(t *testing.T, s audit.Store) {
	nasty := []string{`it's`, `back\slash`, `'; DROP TABLE attempts; --`, "nul\x00byte", "ünïcødé ✓", `\'`, `?`, `{db}`}
	var batch []audit.Attempt
	for i, v := range nasty {
		a := Attempt(v, i)
		a.AttemptID, a.EventID, a.DeliveryID, a.ErrorMessage = "q"+v, v, v, v
		batch = append(batch, a)
	}
	insert(t, s, batch...)
	for _, v := range nasty {
		got := logOf(t, s, audit.Query{EndpointID: v, EventID: v, DeliveryID: v})
		if len(got) != 1 || got[0].AttemptID != "q"+v || got[0].ErrorMessage != v {
			t.Errorf("Log for %q = %+v, want its one attempt", v, got)
			continue
		}
		page := logOf(t, s, audit.Query{EndpointID: v, Before: audit.CursorOf(audit.Attempt{AttemptedAt: got[0].AttemptedAt, AttemptID: "q" + v + "~"})})
		if len(page) != 1 {
			t.Errorf("Log for %q before a cursor after it = %d attempts, want 1", v, len(page))
		}
	}
	if n := count(t, s, audit.Filter{EndpointID: nasty[2]}); n != 1 {
		t.Errorf("Count(%q) = %d, want 1", nasty[2], n)
	}
}

// testTenant: one endpoint ID used by two tenants over time (and rows
// without a tenant); Query.Tenant and Filter.Tenant keep only the named
// tenant's rows, "" only the rows without one, nil all of them.
func testTenant(t *testing.T, s audit.Store) {
	var as []audit.Attempt
	for i := range 9 {
		a := Attempt("ep-1", i)
		a.Tenant = []string{"acme", "globex", ""}[i%3]
		as = append(as, a)
	}
	other := Attempt("ep-2", 20)
	other.Tenant = "acme"
	insert(t, s, append(as, other)...)
	tenant := func(s string) *string { return &s }
	for _, tt := range []struct {
		tenant *string
		want   []string
	}{
		{tenant("acme"), []string{"ep-1-a00006", "ep-1-a00003", "ep-1-a00000"}},
		{tenant("globex"), []string{"ep-1-a00007", "ep-1-a00004", "ep-1-a00001"}},
		{tenant(""), []string{"ep-1-a00008", "ep-1-a00005", "ep-1-a00002"}},
		{tenant("initech"), nil},
		{nil, []string{"ep-1-a00008", "ep-1-a00007", "ep-1-a00006", "ep-1-a00005", "ep-1-a00004", "ep-1-a00003", "ep-1-a00002", "ep-1-a00001", "ep-1-a00000"}},
	} {
		what := "nil"
		if tt.tenant != nil {
			what = fmt.Sprintf("%q", *tt.tenant)
		}
		if got := ids(logOf(t, s, audit.Query{EndpointID: "ep-1", Tenant: tt.tenant})); !slices.Equal(got, tt.want) {
			t.Errorf("Log(Tenant %s) = %v, want %v", what, got, tt.want)
		}
		if n := count(t, s, audit.Filter{EndpointID: "ep-1", Tenant: tt.tenant}); n != int64(len(tt.want)) {
			t.Errorf("Count(Tenant %s) = %d, want %d", what, n, len(tt.want))
		}
	}
	// Combined with the other filters, and in Summary.
	got := ids(logOf(t, s, audit.Query{EndpointID: "ep-1", Tenant: tenant("acme"), Since: base.Add(3 * time.Second), Limit: 1}))
	if !slices.Equal(got, []string{"ep-1-a00006"}) {
		t.Errorf("Log(acme, since 3 s, limit 1) = %v, want [ep-1-a00006]", got)
	}
	if n := count(t, s, audit.Filter{Tenant: tenant("acme")}); n != 4 {
		t.Errorf("Count(acme, every endpoint) = %d, want 4", n)
	}
	sum, err := s.Summary(ctx(t), audit.Filter{Tenant: tenant("globex")})
	if err != nil {
		t.Fatal(err)
	}
	if len(sum) != 1 || sum[0].EndpointID != "ep-1" || sum[0].Attempts != 3 {
		t.Errorf("Summary(globex) = %+v, want ep-1 with 3 attempts", sum)
	}
}
