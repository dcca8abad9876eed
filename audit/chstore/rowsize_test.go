package chstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/hookrelay/hookrelay/audit"
)

// TestClickHouseBytesPerAttemptRow measures what one attempt row costs on
// the real ClickHouse (docs/SCALING.md): it inserts
// HOOKRELAY_ROWSIZE_ROWS (default 100,000) realistic rows in batches of
// 5,000 (the audit sink's batch until 2026-12, now up to 50,000): random
// 32-hex attempt and delivery IDs,
// a webhook-id and event ID per event, 1,000 endpoints over 100 tenants,
// ten event types, 95 % delivered with a short JSON response body, 5 %
// retry_scheduled (HTTP 503, an error message), spread over one day's
// hours — merges them (OPTIMIZE FINAL), and reads system.parts. It
// asserts that every row is stored and logs bytes per row.
func TestClickHouseBytesPerAttemptRow(t *testing.T) {
	n := 100_000
	if s := os.Getenv("HOOKRELAY_ROWSIZE_ROWS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n <= 0 {
			t.Fatalf("HOOKRELAY_ROWSIZE_ROWS=%q: want a positive count", s)
		}
	}
	s := newClickHouse(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rng := rand.New(rand.NewPCG(1, 2))
	hex := func() string { return fmt.Sprintf("%016x%016x", rng.Uint64(), rng.Uint64()) }
	day := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	const batch = 5000
	var maxParts uint64
	for i := 0; i < n; i += batch {
		rows := make([]audit.Attempt, 0, batch)
		for j := i; j < min(i+batch, n); j++ {
			ep := rng.IntN(1000)
			ev := hex()
			a := audit.Attempt{
				AttemptID: hex(), DeliveryID: hex(), EventID: "evt_" + ev[:24], WebhookID: "msg_" + ev,
				EventType: fmt.Sprintf("invoice.event_%d", rng.IntN(10)), Tenant: fmt.Sprintf("tenant_%03d", ep/10),
				EndpointID: fmt.Sprintf("ep_%06d", ep), URLHost: fmt.Sprintf("hooks.customer-%d.example.com", ep),
				AttemptNumber: 1, AttemptedAt: day.Add(time.Duration(j) * 24 * time.Hour / time.Duration(n)),
				LatencyMs: int64(20 + rng.IntN(200)), HTTPStatus: 200, Outcome: audit.Delivered, ResponseBody: `{"ok":true}`,
			}
			if rng.IntN(20) == 0 {
				a.HTTPStatus, a.Outcome, a.ErrorClass, a.ErrorMessage, a.ResponseBody = 503, audit.RetryScheduled, "http_503", "503 Service Unavailable from hooks.customer.example.com", "upstream unavailable"
				a.NextAttemptAt = a.AttemptedAt.Add(30 * time.Second)
			}
			rows = append(rows, a)
		}
		if err := s.Insert(ctx, rows); err != nil {
			t.Fatal(err)
		}
		p, _, _, _, _, err := s.Parts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		maxParts = max(maxParts, p)
	}
	if err := s.Optimize(ctx); err != nil {
		t.Fatal(err)
	}
	parts, rows, disk, comp, raw, err := s.Parts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rows != uint64(n) {
		t.Fatalf("system.parts has %d rows, want %d", rows, n)
	}
	t.Logf("attempts table: %d rows in %d part(s) after OPTIMIZE (at most %d active parts during %d inserts of %d): %.1f bytes per row on disk, %.1f compressed, %.1f uncompressed (ratio %.2f)",
		rows, parts, maxParts, (n+batch-1)/batch, batch, float64(disk)/float64(rows), float64(comp)/float64(rows), float64(raw)/float64(rows), float64(raw)/float64(comp))
}
