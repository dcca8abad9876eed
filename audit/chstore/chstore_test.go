package chstore_test

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
	// The views lost the same days.
	tot, err := s.EndpointTotals(ctx, []audit.EndpointRef{{EndpointID: "ep-1"}}, day(1).Add(-48*time.Hour), day(4).Add(time.Hour))
	if err != nil || len(tot) != 1 || tot[0].Attempts != 4 {
		t.Errorf("after dropping, attempts_minute totals %+v, %v; want 4 attempts", tot, err)
	}
	if n := viewRows(t, s, "attempts_by_number", "hour < toDateTime('2025-03-03 00:00:00', 'UTC')"); n != 0 {
		t.Errorf("attempts_by_number keeps %d rows of dropped days", n)
	}
	if again, err := s.DropPartitionsBefore(ctx, day(3)); err != nil || len(again) != 0 {
		t.Errorf("second DropPartitionsBefore = %v, %v; want nothing", again, err)
	}
}

// TestClickHouseRetention: on 18.16 (no TTL) ApplyRetention and the
// Retainer drop whole day partitions older than the retention; the TTL
// path's DDL is checked on a current engine by testdata/chdb_check.py.
func TestClickHouseRetention(t *testing.T) {
	s := newClickHouse(t)
	ctx := context.Background()
	v, err := s.ServerVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2025, 3, 31, 10, 0, 0, 0, time.UTC)
	var batch []audit.Attempt
	for d := 0; d < 5; d++ { // 27 … 31 March
		a := audittest.Attempt("ep-1", d)
		a.AttemptedAt = now.Add(-time.Duration(4-d) * 24 * time.Hour)
		batch = append(batch, a)
	}
	if err := s.Insert(ctx, batch); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ApplyRetention(ctx, time.Hour, now); err == nil {
		t.Error("ApplyRetention(1h): no error")
	}
	if chstore.SupportsTTL(v) {
		t.Skipf("server %v has TTL: the drop path runs on 18.16 only", v)
	}
	// 2 days as of 31 March 10:00: the cutoff is 29 March 10:00, so 27 and
	// 28 March go, 29 March (partly younger) stays.
	res, err := s.ApplyRetention(ctx, 48*time.Hour, now)
	if err != nil || res.TTL || !slices.Equal(res.Dropped, []string{"20250327", "20250328"}) {
		t.Fatalf("ApplyRetention = %+v, %v; want 20250327 and 20250328 dropped", res, err)
	}
	r := &chstore.Retainer{Store: s, Retention: 24 * time.Hour, Interval: time.Hour, Now: func() time.Time { return now }}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for viewRows(t, s, "attempts", "1") != 2 { // 30 and 31 March
		if time.Now().After(deadline) {
			t.Fatalf("Retainer left %d attempts, want 2", viewRows(t, s, "attempts", "1"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Retainer.Run: %v", err)
	}
	if n := viewRows(t, s, "attempts_minute", "1"); n != 2 {
		t.Errorf("attempts_minute has %d rows after retention, want 2", n)
	}
}

// viewRows counts the rows of table in s's database matching cond.
func viewRows(t *testing.T, s *chstore.Store, table, cond string) uint64 {
	t.Helper()
	var n uint64
	if err := s.QueryRow(context.Background(), "SELECT count() FROM "+s.Database()+"."+table+" WHERE "+cond, &n); err != nil {
		t.Fatal(err)
	}
	return n
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

// TestClickHouseHTTPDetailMigration: rows stored before migration 0006
// (request_headers, body_preview, response_headers) read back with them
// empty after it, and new rows keep them (18.16 in the local stack; chdb
// runs the DDL on a current engine, testdata/chdb_check.py).
func TestClickHouseHTTPDetailMigration(t *testing.T) {
	ctx := context.Background()
	db := stack.Database(t) + "_v5"
	s := openClickHouse(t, db)
	t.Cleanup(func() { _ = s.DropDatabase(context.Background()) })
	if err := s.MigrateUpTo(ctx, 5); err != nil {
		t.Fatal(err)
	}
	old := audittest.Attempt("ep", 1)
	// The columns of version 5: the insert a binary of that version sends.
	v4 := strings.TrimSuffix(chstore.Columns, ", request_headers, body_preview, response_headers")
	if v4 == chstore.Columns {
		t.Fatal("the column list no longer ends with the 0006 columns")
	}
	if err := s.InsertRow(ctx, v4, old.AttemptID, "d", "e", "msg_old", "t", "", "ep", "h", uint16(1), old.AttemptedAt.Unix(), uint16(0),
		uint32(5), uint16(200), "delivered", "", "", "ok", int64(0), uint16(0), int64(0), uint16(0)); err != nil {
		t.Fatal(err)
	}
	applied, err := s.Migrate(ctx)
	if err != nil || len(applied) == 0 || applied[0].Version != 6 {
		t.Fatalf("Migrate from 5 applied %v, %v", applied, err)
	}
	fresh := audittest.Attempt("ep", 2)
	fresh.RequestHeaders, fresh.BodyPreview, fresh.ResponseHeaders = "Webhook-Id: msg_new\n", `{"a":1}`, "X-Seen: yes\n"
	if err := s.Insert(ctx, []audit.Attempt{fresh}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Log(ctx, audit.Query{EndpointID: "ep"})
	if err != nil || len(got) != 2 {
		t.Fatalf("Log = %d attempts, %v", len(got), err)
	}
	for _, a := range got {
		switch a.AttemptID {
		case old.AttemptID:
			if a.RequestHeaders != "" || a.BodyPreview != "" || a.ResponseHeaders != "" || a.ResponseBody != "ok" {
				t.Errorf("row stored before 0006: %+v", a)
			}
		case fresh.AttemptID:
			if a.RequestHeaders != fresh.RequestHeaders || a.BodyPreview != fresh.BodyPreview || a.ResponseHeaders != fresh.ResponseHeaders {
				t.Errorf("row stored after 0006: %+v", a)
			}
		}
	}
}

// TestClickHouseUnstored: Unstored keeps the rows without a stored row of
// the same attempt ID and outcome, across endpoints and days, in order, and
// takes a large batch (5,000 IDs, sent as external tables) and a small
// one (IDs inlined).
func TestClickHouseUnstored(t *testing.T) {
	s := newClickHouse(t)
	ctx := context.Background()
	var rows []audit.Attempt
	for i := range 5000 {
		a := audittest.Attempt(fmt.Sprintf("ep-%d", i%7), i*40) // i*40 s: several days
		a.AttemptID = fmt.Sprintf("unstored-%s-%05d", strings.Repeat("x", 40), i)
		rows = append(rows, a)
	}
	if err := s.Insert(ctx, rows[:2500]); err != nil {
		t.Fatal(err)
	}
	outcome := rows[10]
	outcome.Outcome, outcome.HTTPStatus = audit.Failed, 400 // another outcome of a stored attempt
	got, err := s.Unstored(ctx, append(append([]audit.Attempt{}, rows...), outcome))
	if err != nil {
		t.Fatal(err)
	}
	want := append(append([]audit.Attempt{}, rows[2500:]...), outcome)
	if len(got) != len(want) {
		t.Fatalf("Unstored kept %d rows, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].AttemptID != want[i].AttemptID || got[i].Outcome != want[i].Outcome {
			t.Fatalf("row %d: %s/%s, want %s/%s", i, got[i].AttemptID, got[i].Outcome, want[i].AttemptID, want[i].Outcome)
		}
	}
	// A small batch (its IDs are inlined, not sent as a table).
	small, err := s.Unstored(ctx, rows[2490:2510])
	if err != nil {
		t.Fatal(err)
	}
	if g, w := ids(small), ids(rows[2500:2510]); !slices.Equal(g, w) {
		t.Errorf("Unstored of 20 rows kept %v, want %v", g, w)
	}
}
