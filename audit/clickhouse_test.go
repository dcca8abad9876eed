package audit_test

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
	"github.com/hookrelay/hookrelay/e2e/stack"
)

// newClickHouse returns a store on the test's own database (stack.Database),
// migrated, closed when the test ends.
func newClickHouse(t testing.TB) *audit.ClickHouse {
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
func openClickHouse(t testing.TB, db string) *audit.ClickHouse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := audit.NewClickHouse(ctx, audit.ClickHouseOptions{DSN: stack.ClickHouseDSN(t), Database: db})
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
		opts  audit.ClickHouseOptions
		field string
	}{
		{audit.ClickHouseOptions{}, "DSN"},
		{audit.ClickHouseOptions{DSN: "://nope"}, "DSN"},
		{audit.ClickHouseOptions{DSN: "http://127.0.0.1:8123/default"}, "native protocol"},
		{audit.ClickHouseOptions{DSN: "clickhouse://127.0.0.1:1/default", Database: "bad-name"}, "Database"},
		{audit.ClickHouseOptions{DSN: "clickhouse://127.0.0.1:1/x;y"}, "Database"},
		{audit.ClickHouseOptions{DSN: "clickhouse://127.0.0.1:1/default", MaxOpenConns: -1}, "MaxOpenConns"},
		{audit.ClickHouseOptions{DSN: "clickhouse://127.0.0.1:1/default", DialTimeout: -time.Second}, "DialTimeout"},
		{audit.ClickHouseOptions{DSN: "clickhouse://127.0.0.1:1/default", DialTimeout: 100 * time.Millisecond}, "127.0.0.1:1"},
	}
	for _, tt := range tests {
		_, err := audit.NewClickHouse(ctx, tt.opts)
		if err == nil || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("NewClickHouse(%+v) error = %v, want one naming %q", tt.opts, err, tt.field)
		}
	}
}

func TestClickHouseMigrate(t *testing.T) {
	s := newClickHouse(t) // migrated once already
	ctx := context.Background()
	latest := audit.Migrations()[len(audit.Migrations())-1].Version
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
	var stores []*audit.ClickHouse
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

func TestClickHouseMigrationFiles(t *testing.T) {
	ms := audit.Migrations()
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
