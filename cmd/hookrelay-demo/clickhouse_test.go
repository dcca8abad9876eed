package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/audit/chstore"
	"github.com/hookrelay/hookrelay/e2e/stack"
)

// TestClickHouseQueries runs the demo's own queries (waitFinal, readChecks)
// against a real ClickHouse with hookrelay's schema.
func TestClickHouseQueries(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	db := stack.Database(t)
	store, err := chstore.New(ctx, chstore.Options{DSN: stack.ClickHouseDSN(t), Database: db})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if _, err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	attempt := func(id, event, endpoint string, n, status int, o audit.Outcome) audit.Attempt {
		return audit.Attempt{AttemptID: id, DeliveryID: event + "/" + endpoint, EventID: event, EndpointID: endpoint,
			AttemptNumber: n, AttemptedAt: at.Add(time.Duration(n) * time.Second), HTTPStatus: status, Outcome: o, LatencyMs: 3}
	}
	rows := []audit.Attempt{
		attempt("a1", "e1", "fast", 1, 200, audit.Delivered),
		attempt("a2", "e1", "ff", 1, 500, audit.RetryScheduled),
		attempt("a3", "e1", "ff", 2, 200, audit.Delivered),
		attempt("a4", "e2", "ff", 1, 500, audit.RetryScheduled),
	}
	// Inserted twice, as a retried audit batch would be: FINAL reads it once.
	for range 2 {
		if err := store.Insert(ctx, rows); err != nil {
			t.Fatal(err)
		}
	}
	conn := stack.ClickHouse(t)

	want := map[pair]bool{{"e1", "fast"}: true, {"e1", "ff"}: true}
	if err := waitFinal(ctx, conn, db, want, 5*time.Second, io.Discard); err != nil {
		t.Errorf("waitFinal with every pair final: %v", err)
	}
	want[pair{"e2", "ff"}] = true
	err = waitFinal(ctx, conn, db, want, time.Second, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "1 of 3 expected") || !strings.Contains(err.Error(), "latest attempt #1 retry_scheduled (http 500") {
		t.Errorf("waitFinal with e2->ff pending: got %v, want a timeout naming it", err)
	}
	// e1->fast has a final row but is not expected: a filter mismatch.
	want = map[pair]bool{{"e1", "ff"}: true}
	if err := waitFinal(ctx, conn, db, want, time.Second, io.Discard); err == nil || !strings.Contains(err.Error(), "do not select") {
		t.Errorf("waitFinal with an unexpected final row: got %v, want an error", err)
	}

	checks, err := readChecks(ctx, conn, db)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := checks["ff"], (endpointCheck{deliveredFinal: 1, answered: 3, otherFinal: 0, maxAttempt: 2}); got != want {
		t.Errorf("checks[ff] = %+v, want %+v", got, want)
	}
	if got, want := checks["fast"], (endpointCheck{deliveredFinal: 1, answered: 1, maxAttempt: 1}); got != want {
		t.Errorf("checks[fast] = %+v, want %+v", got, want)
	}
}
