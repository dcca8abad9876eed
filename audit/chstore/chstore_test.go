package chstore_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/audit/audittest"
	"github.com/hookrelay/hookrelay/audit/chstore"
	"github.com/hookrelay/hookrelay/e2e/stack"
)

// newClickHouse returns a store on the test's own database (stack.Database),
// migrated, closed when the test ends.
func newClickHouse(t testing.TB) *chstore.Store {
	t.Helper()
	s := openClickHouse(t, stack.Database(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

// openClickHouse returns a store on database db of the test server, closed
// when the test ends.
func openClickHouse(t testing.TB, db string) *chstore.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := chstore.New(ctx, chstore.Options{DSN: stack.ClickHouseDSN(t), Database: db})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestClickHouseConformance(t *testing.T) {
	audittest.Run(t, func(t *testing.T) audit.Store { return newClickHouse(t) })
}

func TestNewClickHouseOptions(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		opts  chstore.Options
		field string
	}{
		{chstore.Options{}, "DSN"},
		{chstore.Options{DSN: "://nope"}, "DSN"},
		{chstore.Options{DSN: "http://127.0.0.1:8123/default"}, "native protocol"},
		{chstore.Options{DSN: "clickhouse://127.0.0.1:1/default", Database: "bad-name"}, "Database"},
		{chstore.Options{DSN: "clickhouse://127.0.0.1:1/x;y"}, "Database"},
		{chstore.Options{DSN: "clickhouse://127.0.0.1:1/default", MaxOpenConns: -1}, "MaxOpenConns"},
		{chstore.Options{DSN: "clickhouse://127.0.0.1:1/default", DialTimeout: -time.Second}, "DialTimeout"},
		{chstore.Options{DSN: "clickhouse://127.0.0.1:1/default", DialTimeout: 100 * time.Millisecond}, "127.0.0.1:1"},
	}
	for _, tt := range tests {
		_, err := chstore.New(ctx, tt.opts)
		if err == nil || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("New(%+v) error = %v, want one naming %q", tt.opts, err, tt.field)
		}
	}
}

func TestClickHouseMigrate(t *testing.T) {
	s := newClickHouse(t) // migrated once already
	ctx := context.Background()
	latest := chstore.Migrations()[len(chstore.Migrations())-1].Version
	v, err := s.SchemaVersion(ctx)
	if err != nil || v != latest {
		t.Fatalf("SchemaVersion = %d, %v; want %d", v, err, latest)
	}
	applied, err := s.Migrate(ctx)
	if err != nil || len(applied) != 0 {
		t.Fatalf("second Migrate applied %v, %v; want nothing", applied, err)
	}

	// Concurrent first migrations of a database that does not exist yet
	// all succeed.
	db := stack.Database(t) + "_fresh"
	var stores []*chstore.Store
	for range 3 {
		stores = append(stores, openClickHouse(t, db))
	}
	t.Cleanup(func() {
		if err := stores[0].DropDatabase(context.Background()); err != nil {
			t.Errorf("drop %s: %v", db, err)
		}
	})
	var wg sync.WaitGroup
	errs := make([]error, len(stores))
	for i, st := range stores {
		wg.Go(func() { _, errs[i] = st.Migrate(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("concurrent Migrate: %v", err)
	}
	if v, err := stores[1].SchemaVersion(ctx); err != nil || v != latest {
		t.Fatalf("SchemaVersion after concurrent Migrate = %d, %v; want %d", v, err, latest)
	}
	if err := stores[2].Insert(ctx, []audit.Attempt{audittest.Attempt("ep", 1)}); err != nil {
		t.Fatalf("Insert after concurrent Migrate: %v", err)
	}
}

// TestClickHouseLaterOutcomeReplacesInterrupted checks on the real server
// (18.16 in the local stack) what the audit sink relies on: an attempt's
// real outcome inserted after its Interrupted row (same key) replaces it,
// in Count and Summary (FINAL keeps the row of the latest insert), in Log
// (which prefers a real outcome to Interrupted), and after the merge.
func TestClickHouseLaterOutcomeReplacesInterrupted(t *testing.T) {
	s := newClickHouse(t)
	ctx := context.Background()
	var first, later []audit.Attempt
	for i := range 50 {
		a := audittest.Attempt("ep-1", i)
		a.Outcome, a.HTTPStatus, a.ErrorClass, a.ErrorMessage = audit.Interrupted, 0, "interrupted", "stopped"
		first = append(first, a)
		a = audittest.Attempt("ep-1", i)
		a.Outcome, a.HTTPStatus, a.ErrorClass = audit.Failed, 400, "http_400"
		later = append(later, a)
	}
	check := func(when string) {
		t.Helper()
		sum, err := s.Summary(ctx, audit.Filter{EndpointID: "ep-1"})
		if err != nil || len(sum) != 1 {
			t.Fatalf("%s: Summary = %+v, %v", when, sum, err)
		}
		if sum[0].Outcomes[audit.Interrupted] != 0 || sum[0].Outcomes[audit.Failed] != 50 {
			t.Errorf("%s: Summary outcomes = %v, want 50 failed, 0 interrupted", when, sum[0].Outcomes)
		}
		rows, err := s.Log(ctx, audit.Query{EndpointID: "ep-1", Limit: 100})
		if err != nil || len(rows) != 50 {
			t.Fatalf("%s: Log = %d rows, %v; want 50", when, len(rows), err)
		}
		for _, r := range rows {
			if r.Outcome != audit.Failed {
				t.Errorf("%s: Log shows %s as %s, want failed", when, r.AttemptID, r.Outcome)
				break
			}
		}
	}
	for _, b := range [][]audit.Attempt{first, later} {
		if err := s.Insert(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	check("before the merge")
	if err := s.Optimize(ctx); err != nil {
		t.Fatal(err)
	}
	check("after OPTIMIZE FINAL")
}

func TestClickHouseMigrationFiles(t *testing.T) {
	ms := chstore.Migrations()
	if len(ms) == 0 || ms[0].Version != 1 || ms[0].Name != "create_attempts" {
		t.Fatalf("Migrations() = %+v, want 0001_create_attempts first", ms)
	}
}

// TestClickHouseDuplicatesCollapse checks the engine itself, without the
// store's FINAL: after the background merge (forced with OPTIMIZE … FINAL),
// a batch inserted twice leaves one row per attempt_id.
func TestClickHouseDuplicatesCollapse(t *testing.T) {
	s := newClickHouse(t)
	ctx := context.Background()
	var batch []audit.Attempt
	for i := range 1000 {
		batch = append(batch, audittest.Attempt([]string{"ep-1", "ep-2"}[i%2], i))
	}
	for range 2 {
		if err := s.Insert(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := s.RawRowCount(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if raw != 2000 {
		t.Logf("raw rows before merge = %d (the engine may collapse on insert)", raw)
	}
	if n, err := s.Count(ctx, audit.Filter{}); err != nil || n != 1000 {
		t.Fatalf("Count (FINAL) = %d, %v; want 1000", n, err)
	}
	if err := s.Optimize(ctx); err != nil {
		t.Fatal(err)
	}
	if raw, err := s.RawRowCount(ctx); err != nil || raw != 1000 {
		t.Fatalf("raw rows after OPTIMIZE FINAL = %d, %v; want 1000", raw, err)
	}
}

func TestClickHouseDropPartitionsBefore(t *testing.T) {
	s := newClickHouse(t)
	ctx := context.Background()
	day := func(d int) time.Time { return time.Date(2025, 3, d, 23, 59, 59, 999e6, time.UTC) }
	var batch []audit.Attempt
	for d := 1; d <= 4; d++ {
		a := audittest.Attempt("ep-1", d)
		a.AttemptedAt = day(d)
		batch = append(batch, a)
		a.AttemptID += "-midnight"
		a.AttemptedAt = time.Date(2025, 3, d, 0, 0, 0, 0, time.UTC)
		batch = append(batch, a)
	}
	if err := s.Insert(ctx, batch); err != nil {
		t.Fatal(err)
	}
	dropped, err := s.DropPartitionsBefore(ctx, time.Date(2025, 3, 3, 12, 0, 0, 0, time.FixedZone("X", 0)))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"20250301", "20250302"}; !slices.Equal(dropped, want) {
		t.Errorf("dropped %v, want %v", dropped, want)
	}
	got, err := s.Log(ctx, audit.Query{EndpointID: "ep-1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || !got[len(got)-1].AttemptedAt.Equal(time.Date(2025, 3, 3, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("after dropping, Log = %v; want the 4 attempts of 3 and 4 March", got)
	}
	if again, err := s.DropPartitionsBefore(ctx, day(3)); err != nil || len(again) != 0 {
		t.Errorf("second DropPartitionsBefore = %v, %v; want nothing", again, err)
	}
}

// TestClickHouseLogWindows compares ClickHouse's windowed Log with Memory's
// plain scan on endpoints whose attempts fall inside and outside each window
// (hour, day, week before the clock or the cursor), in the future included.
func TestClickHouseLogWindows(t *testing.T) {
	now := time.Date(2025, 3, 10, 12, 0, 0, 0, time.UTC)
	s := newClickHouse(t)
	s.SetNow(func() time.Time { return now })
	mem := audit.NewMemory()
	ctx := context.Background()
	var batch []audit.Attempt
	add := func(ep string, n int, newest time.Time, step time.Duration) {
		for i := range n {
			a := audittest.Attempt(ep, len(batch))
			a.AttemptedAt = newest.Add(-time.Duration(i) * step)
			if i%7 == 0 {
				a.Outcome = audit.Failed
			}
			batch = append(batch, a)
		}
	}
	add("busy", 300, now.Add(5*time.Minute), 10*time.Second) // some in the future
	add("day", 50, now, time.Minute)
	add("day", 80, now.Add(-2*time.Hour), 10*time.Minute)
	add("week", 30, now.Add(-49*time.Hour), 4*time.Hour)
	add("week", 20, now.Add(-8*24*time.Hour), 24*time.Hour)
	add("old", 10, now.Add(-30*24*time.Hour), time.Hour)
	for _, st := range []audit.Store{s, mem} {
		if err := st.Insert(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	for _, ep := range []string{"busy", "day", "week", "old", "none"} {
		for _, q := range []audit.Query{
			{EndpointID: ep},
			{EndpointID: ep, Limit: 10},
			{EndpointID: ep, Limit: audit.MaxLimit},
			{EndpointID: ep, Since: now.Add(-90 * time.Minute)},
			{EndpointID: ep, Since: now.Add(-72 * time.Hour), Limit: 40},
			{EndpointID: ep, Outcomes: []audit.Outcome{audit.Failed}},
			{EndpointID: ep, Before: audit.Cursor{AttemptedAt: now.Add(-3 * time.Hour)}},
			{EndpointID: ep, Before: audit.Cursor{AttemptedAt: now.Add(-50 * time.Hour)}, Limit: 5},
		} {
			want, err := mem.Log(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.Log(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if g, w := ids(got), ids(want); !slices.Equal(g, w) {
				t.Errorf("Log(%+v):\n got %d %v\nwant %d %v", q, len(g), g, len(w), w)
			}
		}
	}
}

func ids(as []audit.Attempt) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.AttemptID
	}
	return out
}

func TestClickHouseStats(t *testing.T) {
	audittest.RunStats(t, func(t *testing.T) audittest.StatsStore { return newClickHouse(t) })
}
