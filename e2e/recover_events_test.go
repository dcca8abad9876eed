package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/hookrelay/hookrelay/e2e/stack"
	"github.com/hookrelay/hookrelay/pipeline/api/apitest"
)

// TestRecoverFromEventsTopic: a message whose only trace is its event in
// the events topic (its DLQ record and its attempt rows are gone: the DLQ
// purged, the attempts table's rows deleted) is found by recover, which
// re-runs fan-out's match for the endpoint, and is sent once with its
// original webhook-id; another tenant's event of a matching type in the same
// range is never sent to it; the same recover with its Idempotency-Key, and
// a fresh recover after the delivery, send nothing more.
func TestRecoverFromEventsTopic(t *testing.T) {
	h := newHarness(t, config{})
	rcA := newReceiver(t, "ev-acme", always(http.StatusOK))
	rcG := newReceiver(t, "ev-globex", always(http.StatusOK))
	h.addEndpoint(endpoint{ID: "ev-acme", URL: rcA.URL, Secret: rcA.Secret, Events: []string{"inv.*"}, Tenant: "acme"})
	h.addEndpoint(endpoint{ID: "ev-globex", URL: rcG.URL, Secret: rcG.Secret, Events: []string{"inv.*"}, Tenant: "globex"})
	key := h.apiKey("--tenant", "acme")
	p := h.start("ev-1")
	c := apiClient{t: t, base: "http://" + p.apiAddr, key: key, v: apitest.New(t, nil)}
	since := time.Now().UTC()

	// While acme's endpoint is disabled its event is skipped (a row and a
	// DLQ record); globex's event of the same type is delivered to globex.
	c.want(c.call("POST", "/v1/endpoints/ev-acme/disable", ""), http.StatusOK)
	h.produce(h.events([]cloudEvent{
		{ID: "ev-a1", Source: "urn:ev", Type: "inv.paid", Tenant: "acme", Data: eventData{Event: "ev-a1"}},
		{ID: "ev-g1", Source: "urn:ev", Type: "inv.paid", Tenant: "globex", Data: eventData{Event: "ev-g1"}},
	})...)
	var webhookID string
	h.waitAttempts(60*time.Second, "acme's skipped row and globex's delivery", func(rows []attemptRow) (bool, string) {
		skipped, delivered := 0, 0
		for _, r := range rows {
			switch {
			case r.EndpointID == "ev-acme" && r.Outcome == "skipped":
				skipped++
				webhookID = r.WebhookID
			case r.EndpointID == "ev-globex" && r.Outcome == "delivered":
				delivered++
			}
		}
		return skipped == 1 && delivered == 1, fmt.Sprintf("%d skipped, %d delivered", skipped, delivered)
	})
	dlq := "/v1/dlq?endpoint_id=ev-acme&since=" + url.QueryEscape(since.Format(time.RFC3339Nano))
	eventually(t, 30*time.Second, "acme's DLQ record", func() (bool, string) {
		data := c.want(c.call("GET", dlq, ""), http.StatusOK)["data"].([]any)
		return len(data) == 1, fmt.Sprintf("%v", data)
	})

	// Erase every trace but the event: purge the DLQ, delete acme's rows.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := stack.Admin(t)
	ends, err := adm.ListEndOffsets(ctx, h.topic("dlq"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := adm.DeleteRecords(ctx, ends.Offsets()); err != nil {
		t.Fatalf("purge the DLQ: %v", err)
	}
	if err := h.clickhouse().Exec(ctx, "ALTER TABLE "+h.db+".attempts DELETE WHERE endpoint_id = 'ev-acme'"); err != nil {
		t.Fatalf("delete acme's attempt rows: %v", err)
	}
	h.waitAttempts(60*time.Second, "acme's rows deleted", func(rows []attemptRow) (bool, string) {
		for _, r := range rows {
			if r.EndpointID == "ev-acme" {
				return false, "still " + r.Outcome
			}
		}
		return true, ""
	})
	if data := c.want(c.call("GET", dlq, ""), http.StatusOK)["data"].([]any); len(data) != 0 {
		t.Fatalf("acme's DLQ after the purge: %v", data)
	}
	c.want(c.call("POST", "/v1/endpoints/ev-acme/enable", ""), http.StatusOK)

	body := `{"since":"` + since.Format(time.RFC3339Nano) + `"}`
	rec := c.want(c.call("POST", "/v1/endpoints/ev-acme/recover", body, "Idempotency-Key", "ev-recover-1"), http.StatusAccepted)
	if rec["found"].(float64) != 1 || rec["queued"].(float64) != 1 {
		t.Fatalf("recover: %v, want 1 found and queued (acme's event, from the events topic; never globex's)", rec)
	}
	again := c.want(c.call("POST", "/v1/endpoints/ev-acme/recover", body, "Idempotency-Key", "ev-recover-1"), http.StatusAccepted)
	if again["id"] != rec["id"] {
		t.Errorf("repeated recover: %v, want the first answer %v", again, rec)
	}
	eventually(t, 60*time.Second, "the recovery delivered", func() (bool, string) {
		m := c.want(c.call("GET", "/v1/recoveries/"+rec["id"].(string), ""), http.StatusOK)
		return m["delivered"].(float64) == 1, fmt.Sprintf("%v", m)
	})
	// Delivered now: a fresh recover finds nothing to resend.
	fresh := c.want(c.call("POST", "/v1/endpoints/ev-acme/recover", body, "Idempotency-Key", "ev-recover-2"), http.StatusAccepted)
	if fresh["found"].(float64) != 0 {
		t.Errorf("recover after the delivery: %v, want nothing found", fresh)
	}
	time.Sleep(3 * time.Second) // a quiet period to catch a duplicate; no latency is asserted
	reqs := rcA.Requests()
	if len(reqs) != 1 || eventOf(reqs[0]) != "ev-a1" || reqs[0].WebhookID != webhookID || reqs[0].VerifyErr != nil {
		for _, r := range reqs {
			t.Logf("acme got %s webhook-id %s (verify %v)", eventOf(r), r.WebhookID, r.VerifyErr)
		}
		t.Fatalf("acme's receiver got %d requests, want ev-a1 once with its original webhook-id %s, verified", len(reqs), webhookID)
	}
	if n := rcG.Count(); n != 1 {
		t.Errorf("globex's receiver got %d requests, want its own event once", n)
	}
}
