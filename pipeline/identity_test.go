package pipeline

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/pipeline/delivery"
	"github.com/hookrelay/hookrelay/pipeline/endpoints"
	"github.com/hookrelay/hookrelay/pipeline/events"
)

// TestCheckIdentity: what the dispatcher does before every attempt, per way
// the endpoint can have changed since fan-out (issue 8, item 4), and per
// status (items 6 and 8).
func TestCheckIdentity(t *testing.T) {
	ep := func(f func(e *endpoints.Endpoint)) *endpoints.Endpoint {
		e := testEndpoint("x", 4)
		e.Incarnation, e.TenantID, e.EventTypes, e.Version = "inc-1", "acme", []string{"c33.*"}, 7
		f(e)
		return e
	}
	m := &delivery.Meta{EndpointID: "x", Incarnation: "inc-1", EventType: "c33.paid", Tenant: "acme"}
	for _, c := range []struct {
		name    string
		ep      *endpoints.Endpoint
		outcome audit.Outcome
		class   string
		foreign bool
	}{
		{"same endpoint", ep(func(*endpoints.Endpoint) {}), "", "", false},
		{"URL and secret changed", ep(func(e *endpoints.Endpoint) { e.URL = "https://new.example/" }), "", "", false},
		{"deleted", nil, audit.Abandoned, endpoints.ReasonEndpointDeleted, true},
		{"re-created", ep(func(e *endpoints.Endpoint) { e.Incarnation = "inc-2" }), audit.Abandoned, endpoints.ReasonEndpointRecreated, true},
		{"rewritten without an incarnation, same tenant and filter", ep(func(e *endpoints.Endpoint) { e.Incarnation = "" }), "", "", false},
		{"re-created without an incarnation for another tenant", ep(func(e *endpoints.Endpoint) { e.Incarnation, e.TenantID = "", "globex" }), audit.Abandoned, endpoints.ReasonTenantMismatch, true},
		{"tenant changed", ep(func(e *endpoints.Endpoint) { e.TenantID = "globex" }), audit.Abandoned, endpoints.ReasonTenantMismatch, true},
		{"filter changed", ep(func(e *endpoints.Endpoint) { e.EventTypes = []string{"c33.other"} }), audit.Abandoned, endpoints.ReasonSubscriptionChanged, false},
		{"disabled by the operator", ep(func(e *endpoints.Endpoint) { e.Status = endpoints.Disabled }), audit.Abandoned, classDisabled, false},
		{"disabled after a 410", ep(func(e *endpoints.Endpoint) {
			e.PipelineStatus = &endpoints.Status{State: endpoints.Disabled, Reason: endpoints.ReasonGone, At: time.Now(), ConfigVersion: 7}
		}), audit.Abandoned, classGone, false},
		{"invalid", ep(func(e *endpoints.Endpoint) { e.ConfigError = errors.New("url: bad") }), audit.ConfigError, classInvalid, false},
	} {
		v := checkIdentity(m, c.ep)
		if v.outcome != c.outcome || v.class != c.class || v.foreign != c.foreign {
			t.Errorf("%s: verdict %+v, want %s %s foreign=%v", c.name, v, c.outcome, c.class, c.foreign)
		}
		if v.outcome != "" && v.message == "" {
			t.Errorf("%s: no message", c.name)
		}
	}
}

// TestFanoutRecordsEveryMatch: every (event, endpoint) match leaves a
// record in fan-out's transaction: a delivery carrying the incarnation for
// an active endpoint; an attempt row (skipped or config_error, with the
// reason) and a DLQ record with the whole delivery for one that is not
// (items 6 and 8). Tenants: an event with a tenantid matches only that
// tenant's endpoints, one without matches only endpoints without a tenant.
func TestFanoutRecordsEveryMatch(t *testing.T) {
	topics := NewTopics("fr.")
	mk := func(id, tenant string, f func(e *endpoints.Endpoint)) *endpoints.Endpoint {
		e := testEndpoint(id, 4)
		e.Incarnation, e.TenantID, e.Version = "inc-"+id, tenant, 3
		f(e)
		return e
	}
	active := mk("active", "acme", func(*endpoints.Endpoint) {})
	off := mk("off", "acme", func(e *endpoints.Endpoint) { e.Status, e.DisabledReason = endpoints.Disabled, "customer request" })
	gone := mk("gone", "acme", func(e *endpoints.Endpoint) {
		e.PipelineStatus = &endpoints.Status{State: endpoints.Disabled, Reason: endpoints.ReasonGone, At: time.Now(), ConfigVersion: 3}
	})
	bad := mk("bad", "acme", func(e *endpoints.Endpoint) {
		e.ConfigError = &endpoints.FieldError{Field: "secrets[0].value", Reason: "not base64"}
	})
	notenant := mk("notenant", "", func(*endpoints.Endpoint) {})
	other := mk("other", "globex", func(*endpoints.Endpoint) {})
	f := &Fanout{o: FanoutOptions{Topics: topics, Endpoints: fakeMatcher{active, off, gone, bad, notenant, other},
		MaxEventBytes: events.DefaultMaxBytes, Logger: slog.Default()}, m: newMetrics(nil)}

	ce := func(id, tenant string) *kgo.Record {
		v := `{"specversion":"1.0","id":"` + id + `","source":"/qa","type":"c35.paid","data":{"n":1}`
		if tenant != "" {
			v += `,"tenantid":"` + tenant + `"`
		}
		return &kgo.Record{Topic: topics.Events, Value: []byte(v + "}"), Timestamp: time.Now(),
			Headers: []kgo.RecordHeader{{Key: "content-type", Value: []byte("application/cloudevents+json")}}}
	}
	out := f.expand(context.Background(), ce("e-acme", "acme"), nil)
	got := map[string]string{}
	for _, r := range out {
		switch r.Topic {
		case topics.Deliveries:
			m, err := delivery.ParseMeta(r.Headers)
			if err != nil || m.Incarnation != "inc-"+m.EndpointID {
				t.Errorf("delivery to %s: incarnation %q, %v; want inc-%s", m.EndpointID, m.Incarnation, err, m.EndpointID)
			}
			got[string(r.Key)] += "delivery;"
		case topics.Attempts:
			var a audit.Attempt
			if err := a.Unmarshal(r.Value); err != nil {
				t.Fatal(err)
			}
			if a.EventID != "e-acme" || a.Tenant != "acme" || a.DeliveryID != DeliveryID(a.WebhookID, a.EndpointID) || a.ErrorMessage == "" {
				t.Errorf("attempt row %+v", a)
			}
			got[string(r.Key)] += "row " + string(a.Outcome) + " " + a.ErrorClass + ";"
		case topics.DLQ:
			m, err := delivery.ParseMeta(r.Headers)
			if err != nil || m.EventID != "e-acme" || m.Incarnation != "inc-"+m.EndpointID || len(m.History) != 1 || string(r.Value) == "" {
				t.Errorf("DLQ record %+v, %v", m, err)
			}
			got[string(r.Key)] += "dlq " + m.Reason + ";"
		default:
			t.Errorf("record to %s", r.Topic)
		}
	}
	want := map[string]string{
		"active": "delivery;",
		"off":    "row skipped endpoint_disabled;dlq skipped;",
		"gone":   "row skipped endpoint_gone;dlq skipped;",
		"bad":    "row config_error invalid_endpoint;dlq config_error;",
	}
	for id := range want {
		if got[id] != want[id] {
			t.Errorf("%s: %q, want %q", id, got[id], want[id])
		}
	}
	if len(got) != len(want) {
		t.Errorf("records for %v, want only %v (another tenant's and tenantless endpoints get nothing)", got, want)
	}

	// Without a tenantid: only the endpoints without a tenant.
	out = f.expand(context.Background(), ce("e-none", ""), nil)
	if len(out) != 1 || string(out[0].Key) != "notenant" || out[0].Topic != topics.Deliveries {
		var keys []string
		for _, r := range out {
			keys = append(keys, r.Topic+"/"+string(r.Key))
		}
		t.Errorf("tenantless event: records %v, want one delivery to notenant", keys)
	}
}
