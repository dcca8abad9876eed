package e2e

// Black-box tests (config{BlackBox: true}): they need only a running
// hookrelay with any configuration, so they run both against the
// hookrelay the harness starts and against an existing deployment
// (HOOKRELAY_E2E_TARGET=existing, see target_test.go and README.md). Every
// endpoint, tenant and event is named in the test's namespace (h.name), and
// every event carries a tenant of that namespace: no endpoint of the
// deployment's own can receive it (tenants must be equal to match).

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestBlackBoxDelivery: events of two tenants in both content modes to
// three endpoints (exact filter, prefix filter, the other tenant). Each
// endpoint gets exactly the events it subscribes to, each exactly once,
// signed so that the Standard Webhooks library verifies them, and the
// attempts table holds exactly one delivered row per request.
func TestBlackBoxDelivery(t *testing.T) {
	h := newHarness(t, config{BlackBox: true})
	acme, globex := h.name("acme"), h.name("globex")
	eps := []endpoint{
		{ID: h.name("exact"), Events: []string{"bb.order.paid"}, Tenant: acme},
		{ID: h.name("prefix"), Events: []string{"bb.order.*"}, Tenant: acme},
		{ID: h.name("other"), Events: []string{"bb.order.*"}, Tenant: globex},
	}
	recv := map[string]*receiver{}
	for i := range eps {
		rc := newReceiver(t, eps[i].ID, always(http.StatusOK))
		eps[i].URL, eps[i].Secret = rc.URL, rc.Secret
		recv[eps[i].ID] = rc
		h.addEndpoint(eps[i])
	}
	h.start("blackbox-1")

	var evs []cloudEvent
	var recs []*kgo.Record
	for i := range 24 {
		tenant, typ := acme, "bb.order.paid"
		if i%2 == 1 {
			typ = "bb.order.shipped"
		}
		if i%4 == 3 {
			tenant = globex
		}
		id := h.name(fmt.Sprintf("evt-%02d", i))
		e := cloudEvent{ID: id, Source: "urn:hookrelay:e2e:blackbox", Type: typ, Tenant: tenant, Time: time.Now(), Data: eventData{Event: id, N: i}}
		evs = append(evs, e)
		if i%3 == 0 {
			recs = append(recs, e.binary(h.topic("events"), []byte(id)))
		} else {
			recs = append(recs, e.structured(h.topic("events"), []byte(id)))
		}
	}
	want := map[string]map[string]bool{} // endpoint -> events
	total := 0
	for _, ep := range eps {
		want[ep.ID] = map[string]bool{}
		for _, e := range evs {
			if matches(ep, e) {
				want[ep.ID][e.ID] = true
				total++
			}
		}
		if len(want[ep.ID]) == 0 {
			t.Fatalf("test data: %s matches no event", ep.ID)
		}
	}
	h.produce(recs...)

	eventually(t, 2*time.Minute, "every subscribed event at its endpoint", func() (bool, string) {
		n := 0
		for _, rc := range recv {
			n += rc.Distinct()
		}
		return n >= total, fmt.Sprintf("%d of %d (endpoint, event) pairs arrived", n, total)
	})
	rows := h.waitAttempts(time.Minute, "an attempt row per request", func(rows []attemptRow) (bool, string) {
		return len(rows) >= total, fmt.Sprintf("%d of %d rows", len(rows), total)
	})
	for _, ep := range eps {
		got := byEvent(t, recv[ep.ID].Requests())
		for id, reqs := range got {
			if !want[ep.ID][id] {
				t.Errorf("%s received %s, which it does not subscribe to", ep.ID, id)
			}
			if len(reqs) != 1 {
				t.Errorf("%s received %s %d times, want once", ep.ID, id, len(reqs))
			}
			for _, r := range reqs {
				if r.VerifyErr != nil {
					t.Errorf("%s: %s: signature does not verify: %v", ep.ID, id, r.VerifyErr)
				}
			}
		}
		for id := range want[ep.ID] {
			if len(got[id]) == 0 {
				t.Errorf("%s never received %s", ep.ID, id)
			}
		}
		byEv := rowsByEvent(rows, ep.ID)
		for id := range want[ep.ID] {
			rs := byEv[id]
			if len(rs) != 1 || rs[0].Outcome != "delivered" || rs[0].HTTPStatus != http.StatusOK {
				t.Errorf("%s %s: attempt rows %+v, want one delivered 200", ep.ID, id, rs)
			}
		}
	}
	if len(rows) != total {
		t.Errorf("%d attempt rows in the test's namespace, want %d", len(rows), total)
	}
}

// TestBlackBoxRetry: an endpoint that answers 500 to each first attempt
// gets exactly two attempts per event, the second no earlier than the first
// row's next_attempt_at, both with the same webhook-id and body, re-signed;
// ClickHouse shows retry_scheduled (500) then delivered (200). It waits for
// the deployment's first retry delay, whatever it is (bounded by
// HOOKRELAY_E2E_RETRY_WAIT in black-box mode).
func TestBlackBoxRetry(t *testing.T) {
	const events = 3
	h := newHarness(t, config{BlackBox: true})
	rc := newReceiver(t, h.name("flaky"), failFirst())
	ep := endpoint{ID: h.name("flaky"), URL: rc.URL, Secret: rc.Secret, Events: []string{"bb.retry.*"}, Tenant: h.name("retry")}
	h.addEndpoint(ep)
	h.start("blackbox-retry-1")

	var recs []*kgo.Record
	for i := range events {
		id := h.name(fmt.Sprintf("retry-%d", i))
		recs = append(recs, cloudEvent{ID: id, Source: "urn:hookrelay:e2e:blackbox", Type: "bb.retry.thing", Tenant: ep.Tenant, Time: time.Now(), Data: eventData{Event: id, N: i}}.structured(h.topic("events"), []byte(id)))
	}
	h.produce(recs...)

	wait := 2 * time.Minute
	if tg := e2eTarget(t); tg.existing {
		wait = tg.retryWait + time.Minute
	}
	rows := h.waitAttempts(wait, "two attempt rows per event", func(rows []attemptRow) (bool, string) {
		done := 0
		for _, rs := range rowsByEvent(rows, ep.ID) {
			if len(rs) >= 2 {
				done++
			}
		}
		return done >= events, fmt.Sprintf("%d of %d events have two attempt rows (%d rows)", done, events, len(rows))
	})
	reqs := byEvent(t, rc.Requests())
	if len(reqs) != events {
		t.Errorf("requests for %d events, want %d", len(reqs), events)
	}
	for id, rs := range rowsByEvent(rows, ep.ID) {
		if len(rs) != 2 {
			t.Errorf("%s: %d attempt rows, want 2: %+v", id, len(rs), rs)
			continue
		}
		if rs[0].Outcome != "retry_scheduled" || rs[0].HTTPStatus != 500 || rs[1].Outcome != "delivered" || rs[1].HTTPStatus != 200 {
			t.Errorf("%s: attempts (%s %d), (%s %d); want (retry_scheduled 500), (delivered 200)", id, rs[0].Outcome, rs[0].HTTPStatus, rs[1].Outcome, rs[1].HTTPStatus)
		}
		if rs[1].AttemptedAt.Before(rs[0].NextAttemptAt) {
			t.Errorf("%s: attempt 2 at %v, before attempt 1's next_attempt_at %v (early retry)", id, rs[1].AttemptedAt.Format(time.RFC3339Nano), rs[0].NextAttemptAt.Format(time.RFC3339Nano))
		}
		if len(reqs[id]) != 2 {
			t.Errorf("%s: %d requests, want 2", id, len(reqs[id]))
			continue
		}
		checkSameDelivery(t, id, reqs[id])
	}
	checkFirstAttemptAt(t, h, ep.ID)
}

// checkFirstAttemptAt: every attempt row of ep carries its delivery's
// first-attempt time (first_attempt_at, for time to success): attempt 1's
// own time, and on later attempts the same as attempt 1's (±1 s: the
// dispatcher takes it from the request start in the delivery's metadata).
func checkFirstAttemptAt(t *testing.T, h *harness, ep string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := h.clickhouse().Query(ctx, `SELECT delivery_id, toUInt32(attempt_number),
       toInt64(toUInt32(attempted_at)) * 1000 + attempted_ms, toInt64(toUInt32(first_attempt_at)) * 1000 + first_attempt_ms
FROM `+h.db+`.attempts FINAL WHERE endpoint_id = '`+ep+`' ORDER BY delivery_id, attempt_number`)
	if err != nil {
		t.Fatalf("query first_attempt_at: %v", err)
	}
	defer rows.Close()
	firstOf := map[string]int64{}
	for rows.Next() {
		var dlv string
		var n uint32
		var at, first int64
		if err := rows.Scan(&dlv, &n, &at, &first); err != nil {
			t.Fatal(err)
		}
		switch {
		case first == 0:
			t.Errorf("delivery %s attempt %d: first_attempt_at is 0", dlv, n)
		case n == 1 && first != at:
			t.Errorf("delivery %s attempt 1: first_attempt_at %d, want its attempted_at %d", dlv, first, at)
		case n == 1:
			firstOf[dlv] = at
		case firstOf[dlv] == 0 || first < firstOf[dlv]-1000 || first > firstOf[dlv]+1000:
			t.Errorf("delivery %s attempt %d: first_attempt_at %d, want attempt 1's time %d (±1 s)", dlv, n, first, firstOf[dlv])
		}
	}
}
