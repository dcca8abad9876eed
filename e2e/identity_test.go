package e2e

// Endpoint identity and the matches that are not sent (issue 8, items 4, 6
// and 8): a pending delivery goes out only to the endpoint it was fanned out
// for; a match with a non-active or unusable endpoint leaves an attempt row
// and a DLQ record, never silence.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// inFlightTimeout is the endpoint timeout of the receivers whose attempt 1
// hangs while a test changes the endpoint under it; the test releases them
// (503) once its changes are written, so a slow CLI cannot race attempt 2.
const inFlightTimeout = 60 * time.Second

// writeEndpointRecord writes an endpoint record to the endpoints topic as another
// producer would (no incarnation, no CLI checks); value nil is a tombstone.
func (h *harness) writeEndpointRecord(id string, value map[string]any) {
	h.t.Helper()
	var b []byte
	if value != nil {
		var err error
		if b, err = json.Marshal(value); err != nil {
			h.t.Fatal(err)
		}
	}
	h.produce(&kgo.Record{Topic: h.topic("endpoints"), Key: []byte(id), Value: b})
}

// finalRowOf waits for the final (not retry_scheduled) attempt row of endpoint
// id and event ev and returns it.
func (h *harness) finalRowOf(timeout time.Duration, id, ev string) attemptRow {
	h.t.Helper()
	var final attemptRow
	h.waitAttempts(timeout, "the final row of "+id+"/"+ev, func(rows []attemptRow) (bool, string) {
		var seen []string
		for _, r := range rows {
			if r.EndpointID != id || r.EventID != ev {
				continue
			}
			seen = append(seen, fmt.Sprintf("%d %s %s", r.AttemptNumber, r.Outcome, r.ErrorClass))
			if r.Outcome != "retry_scheduled" {
				final = r
				return true, ""
			}
		}
		return false, fmt.Sprintf("rows %v", seen)
	})
	return final
}

// dlqSummary reads the DLQ until want records are there and returns
// "endpoint event-id reason" for each.
func (h *harness) dlqSummary(want int) []string {
	h.t.Helper()
	recs := h.readTopic(h.topic("dlq"), 60*time.Second, func(got []*kgo.Record) (bool, string) {
		return len(got) >= want, fmt.Sprintf("%d of %d DLQ records", len(got), want)
	})
	var out []string
	for _, r := range recs {
		ep, _ := header(r, hdrEndpointID)
		ev, _ := header(r, "hookrelay-event-id")
		reason, _ := header(r, hdrReason)
		out = append(out, ep+" "+ev+" "+reason)
	}
	return out
}

// TestRecreatedEndpointGetsNoPendingDelivery is the field report of item 4
// through the CLI: endpoint x (tenant acme) is deleted and re-created as
// tenant globex while attempt 1 of acme's event is in flight; attempt 2 must
// not go to globex's URL. Beside it, under the same in-flight attempt: y's
// tenant is changed by `endpoints update`, z is deleted and re-created for
// the same tenant and filter at another URL (a new endpoint all the same),
// and w gets a new URL and a rotated secret (the same endpoint: its retry
// follows the change).
func TestRecreatedEndpointGetsNoPendingDelivery(t *testing.T) {
	h := newHarness(t, config{RetrySchedule: "1s,1s"})
	first := map[string]*receiver{}
	for _, id := range []string{"x", "y", "z", "w"} {
		first[id] = newReceiver(t, "first-"+id, hang())
		h.addEndpoint(endpoint{ID: id, URL: first[id].URL, Secret: first[id].Secret, Events: []string{"c33." + id + ".*"}, Tenant: "acme", Timeout: inFlightTimeout})
	}
	globex := newReceiver(t, "globex", always(http.StatusOK))
	again := newReceiver(t, "again", always(http.StatusOK))
	moved := newReceiver(t, "moved", always(http.StatusOK))
	h.start("identity-1")
	for id := range first {
		ev := "c33-" + id
		h.produce(cloudEvent{ID: ev, Source: "/qa", Type: "c33." + id + ".paid", Tenant: "acme", Time: time.Now(), Data: map[string]string{"e": id}}.
			structured(h.topic("events"), []byte(ev)))
	}
	eventually(t, 60*time.Second, "attempt 1 at every endpoint", func() (bool, string) {
		var missing []string
		for id, rc := range first {
			if rc.Count() == 0 {
				missing = append(missing, id)
			}
		}
		return len(missing) == 0, fmt.Sprintf("no request yet at %v", missing)
	})
	h.cli("endpoints", "delete", "x")
	h.cli("endpoints", "add", "--id", "x", "--url", globex.URL, "--secret", globex.Secret, "--events", "c33.other", "--tenant", "globex")
	h.cli("endpoints", "update", "--id", "y", "--tenant", "globex")
	h.cli("endpoints", "delete", "z")
	h.cli("endpoints", "add", "--id", "z", "--url", again.URL, "--secret", again.Secret, "--events", "c33.z.*", "--tenant", "acme")
	h.cli("endpoints", "update", "--id", "w", "--url", moved.URL, "--secret", moved.Secret)
	for _, rc := range first {
		rc.Release() // attempt 1 ends with a 503; attempt 2 meets the changed endpoints
	}

	want := map[string]string{
		"x": "abandoned endpoint_recreated",
		"y": "abandoned tenant_mismatch",
		"z": "abandoned endpoint_recreated",
		"w": "delivered ",
	}
	for id, w := range want {
		final := h.finalRowOf(60*time.Second, id, "c33-"+id)
		if got := final.Outcome + " " + final.ErrorClass; got != w {
			t.Errorf("final row of %s/c33-%s: %q, want %q", id, id, got, w)
		}
		if final.Tenant != "acme" {
			t.Errorf("final row of %s: tenant %q, want acme", id, final.Tenant)
		}
	}
	if n := globex.Count(); n != 0 {
		t.Errorf("globex received %d requests carrying acme's event, want 0", n)
	}
	if n := again.Count(); n != 0 {
		t.Errorf("the re-created z received %d requests for the old z's event, want 0", n)
	}
	if n := moved.Count(); n != 1 {
		t.Errorf("w's new URL received %d requests, want 1", n)
	}
	for _, rq := range moved.Requests() {
		if rq.VerifyErr != nil {
			t.Errorf("w's retry does not verify with the rotated secret: %v", rq.VerifyErr)
		}
	}
	for id, rc := range first {
		if n := rc.Count(); n != 1 {
			t.Errorf("%s's first URL received %d requests, want 1 (attempt 1 only)", id, n)
		}
	}
	got := map[string]bool{}
	for _, e := range h.dlqSummary(3) {
		got[e] = true
	}
	for _, id := range []string{"x", "y", "z"} {
		if e := id + " c33-" + id + " abandoned"; !got[e] {
			t.Errorf("DLQ %v lacks %q", got, e)
		}
	}
}

// TestIdentityChangesByAnotherProducer changes endpoints under pending
// deliveries with raw records on the endpoints topic (no incarnation field):
// a tenant change in place, a filter change in place, a delete and re-create
// of a CLI-made endpoint with another tenant, and a URL change in place
// (identity kept: the delivery follows it). The records carry no
// incarnation: the tenant and subscription checks must catch the dangerous
// ones without it.
func TestIdentityChangesByAnotherProducer(t *testing.T) {
	h := newHarness(t, config{RetrySchedule: "1s,1s"})
	slow := map[string]*receiver{}
	for _, id := range []string{"r-tenant", "r-filter", "r-recreate", "r-url"} {
		slow[id] = newReceiver(t, id, hang())
		h.addEndpoint(endpoint{ID: id, URL: slow[id].URL, Secret: slow[id].Secret, Events: []string{"c34." + id + ".*"}, Tenant: "acme", Timeout: inFlightTimeout})
	}
	other := newReceiver(t, "other", always(http.StatusOK))
	moved := newReceiver(t, "moved", always(http.StatusOK))
	h.start("identity-raw-1")
	for id := range slow {
		ev := "c34-" + id
		h.produce(cloudEvent{ID: ev, Source: "/qa", Type: "c34." + id + ".paid", Tenant: "acme", Time: time.Now(), Data: map[string]string{"e": id}}.
			structured(h.topic("events"), []byte(ev)))
	}
	eventually(t, 60*time.Second, "attempt 1 at every endpoint", func() (bool, string) {
		var missing []string
		for id, rc := range slow {
			if rc.Count() == 0 {
				missing = append(missing, id)
			}
		}
		return len(missing) == 0, fmt.Sprintf("no request yet at %v", missing)
	})
	raw := func(id, url, secret, tenant string, events ...string) map[string]any {
		return map[string]any{"id": id, "url": url, "secrets": []map[string]string{{"value": secret}},
			"event_types": events, "tenantid": tenant}
	}
	h.writeEndpointRecord("r-tenant", raw("r-tenant", other.URL, other.Secret, "globex", "c34.r-tenant.*"))
	h.writeEndpointRecord("r-filter", raw("r-filter", other.URL, other.Secret, "acme", "c34.other"))
	h.writeEndpointRecord("r-recreate", nil)
	h.writeEndpointRecord("r-recreate", raw("r-recreate", other.URL, other.Secret, "globex", "c34.r-recreate.*"))
	h.writeEndpointRecord("r-url", raw("r-url", moved.URL, moved.Secret, "acme", "c34.r-url.*"))
	for _, rc := range slow {
		rc.Release()
	}

	want := map[string]string{
		"r-tenant":   "abandoned tenant_mismatch",
		"r-filter":   "abandoned subscription_changed",
		"r-recreate": "abandoned tenant_mismatch", // no incarnation in the new record: the tenant check catches it
		"r-url":      "delivered ",
	}
	for id, w := range want {
		r := h.finalRowOf(60*time.Second, id, "c34-"+id)
		if got := r.Outcome + " " + r.ErrorClass; got != w {
			t.Errorf("%s: final row %q, want %q", id, got, w)
		}
	}
	if n := other.Count(); n != 0 {
		t.Errorf("the other tenant's receiver got %d requests, want 0", n)
	}
	if n := moved.Count(); n != 1 {
		t.Errorf("the moved URL got %d requests, want 1 (a URL change keeps the identity)", n)
	}
	for _, rq := range moved.Requests() {
		if rq.VerifyErr != nil {
			t.Errorf("request at the moved URL does not verify with its new secret: %v", rq.VerifyErr)
		}
	}
}

// TestNotSentMatchesLeaveATrace is item 6: matches of an endpoint disabled
// by the operator, and of one disabled by the pipeline after a 410, each get
// a skipped attempt row with the reason and a DLQ record.
func TestNotSentMatchesLeaveATrace(t *testing.T) {
	h := newHarness(t, config{})
	off := newReceiver(t, "off", always(http.StatusOK))
	gone := newReceiver(t, "gone", always(http.StatusGone))
	h.addEndpoint(endpoint{ID: "off", URL: off.URL, Secret: off.Secret, Events: []string{"c35.*"}})
	h.addEndpoint(endpoint{ID: "gone", URL: gone.URL, Secret: gone.Secret, Events: []string{"c35.*"}})
	h.cli("endpoints", "disable", "off", "--reason", "customer request")
	p := h.start("skipped-1")
	h.produce(cloudEvent{ID: "c35-0", Source: "/qa", Type: "c35.paid", Time: time.Now(), Data: 0}.structured(h.topic("events"), nil))
	h.finalRowOf(60*time.Second, "gone", "c35-0")
	eventually(t, 30*time.Second, "gone disabled by the pipeline", func() (bool, string) {
		out := h.cli("endpoints", "get", "gone")
		return strings.Contains(out, `"effective_status": "disabled"`), out
	})
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("c35-%d", i)
		h.produce(cloudEvent{ID: id, Source: "/qa", Type: "c35.paid", Time: time.Now(), Data: i}.structured(h.topic("events"), nil))
	}
	rows := h.waitAttempts(60*time.Second, "7 skipped rows", func(rows []attemptRow) (bool, string) {
		n := 0
		for _, r := range rows {
			if r.Outcome == "skipped" {
				n++
			}
		}
		return n >= 7, fmt.Sprintf("%d skipped rows", n)
	})
	classes := map[string]int{}
	for _, r := range rows {
		if r.Outcome == "skipped" {
			classes[r.EndpointID+" "+r.ErrorClass]++
		}
	}
	wantClasses := map[string]int{"off endpoint_disabled": 4, "gone endpoint_gone": 3}
	if fmt.Sprint(classes) != fmt.Sprint(wantClasses) {
		t.Errorf("skipped rows by endpoint and class %v, want %v", classes, wantClasses)
	}
	if off.Count() != 0 || gone.Count() != 1 {
		t.Errorf("requests: off %d, gone %d; want 0 and 1", off.Count(), gone.Count())
	}
	dlq := map[string]int{}
	for _, e := range h.dlqSummary(8) {
		f := strings.Fields(e)
		dlq[f[0]+" "+f[2]]++
	}
	if want := map[string]int{"off skipped": 4, "gone gone": 1, "gone skipped": 3}; fmt.Sprint(dlq) != fmt.Sprint(want) {
		t.Errorf("DLQ by endpoint and reason %v, want %v", dlq, want)
	}
	if v, _ := p.metric("hookrelay_deliveries_not_sent_total", `outcome="skipped"`); v != 7 {
		t.Errorf("hookrelay_deliveries_not_sent_total{outcome=skipped} = %v, want 7", v)
	}
}

// TestInvalidEndpointIsVisible is the visibility half of item 8: endpoint
// records another producer wrote with an unusable secret, key or URL are
// shown as invalid with the reason by get and list, and their matches get a
// config_error row and a DLQ record; nothing is sent.
func TestInvalidEndpointIsVisible(t *testing.T) {
	h := newHarness(t, config{})
	rc := newReceiver(t, "rc", always(http.StatusOK))
	h.addEndpoint(endpoint{ID: "ok", URL: rc.URL, Secret: rc.Secret, Events: []string{"c36.*"}})
	bad := map[string]map[string]any{
		"bad-secret": {"url": rc.URL, "secrets": []map[string]string{{"value": "whsec_abc!"}}, "event_types": []string{"c36.*"}},
		"short-key":  {"url": rc.URL, "secrets": []map[string]string{{"value": "whsec_AAECAwQFBgcICQoLDA0ODw=="}}, "event_types": []string{"c36.*"}},
		"userinfo":   {"url": strings.Replace(rc.URL, "http://", "http://user:pass@", 1), "secrets": []map[string]string{{"value": rc.Secret}}, "event_types": []string{"c36.*"}},
	}
	wantField := map[string]string{"bad-secret": "secrets[0].value", "short-key": "secrets[0].value", "userinfo": "url"}
	for id, v := range bad {
		v["id"] = id
		h.writeEndpointRecord(id, v)
	}
	for id, field := range wantField {
		out := h.cli("endpoints", "get", id)
		if !strings.Contains(out, `"effective_status": "invalid"`) || !strings.Contains(out, field) {
			t.Errorf("endpoints get %s: want effective_status invalid naming %s, got\n%s", id, field, out)
		}
		if strings.Contains(out, "user:pass") || strings.Contains(out, rc.Secret) {
			t.Errorf("endpoints get %s shows a credential:\n%s", id, out)
		}
	}
	list := h.cli("endpoints", "list")
	for id := range bad {
		var line string
		for _, l := range strings.Split(list, "\n") {
			if strings.HasPrefix(l, id+" ") {
				line = l
			}
		}
		if !strings.Contains(line, "invalid") {
			t.Errorf("endpoints list: line of %s %q does not say invalid\n%s", id, line, list)
		}
	}
	h.start("invalid-1")
	h.produce(cloudEvent{ID: "c36-1", Source: "/qa", Type: "c36.paid", Time: time.Now(), Data: 1}.structured(h.topic("events"), nil))
	for id := range bad {
		r := h.finalRowOf(60*time.Second, id, "c36-1")
		if r.Outcome != "config_error" {
			t.Errorf("%s: outcome %s %q, want config_error", id, r.Outcome, r.ErrorClass)
		}
	}
	h.finalRowOf(60*time.Second, "ok", "c36-1")
	dlq := map[string]bool{}
	for _, e := range h.dlqSummary(3) {
		dlq[e] = true
	}
	for id := range bad {
		if !dlq[id+" c36-1 config_error"] {
			t.Errorf("no DLQ record %q in %v", id+" c36-1 config_error", dlq)
		}
	}
	if n := rc.Count(); n != 1 {
		t.Errorf("receiver got %d requests, want 1 (from ok only)", n)
	}
}
