package pipeline

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/pipeline/events"
)

// TestRematchIsFanoutsDelivery: for every endpoint, Rematch of an events
// record gives exactly the delivery fan-out produces for it (body,
// headers, hence webhook-id and delivery ID), and nothing where fan-out
// sends nothing: another tenant's event, a type the filter does not
// select, an invalid record.
func TestRematchIsFanoutsDelivery(t *testing.T) {
	topics := NewTopics("rm.")
	acme := testEndpoint("acme-ep", 4)
	acme.TenantID, acme.Incarnation, acme.EventTypes = "acme", "inc-acme", []string{"inv.*"}
	globex := testEndpoint("globex-ep", 4)
	globex.TenantID, globex.Incarnation, globex.EventTypes = "globex", "inc-globex", []string{"inv.*"}
	f := &Fanout{o: FanoutOptions{Topics: topics, Endpoints: fakeMatcher{acme, globex},
		MaxEventBytes: events.DefaultMaxBytes, Logger: slog.Default()}, m: newMetrics(nil)}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rec := func(v string) *kgo.Record {
		return &kgo.Record{Topic: topics.Events, Value: []byte(v), Timestamp: at,
			Headers: []kgo.RecordHeader{{Key: "content-type", Value: []byte("application/cloudevents+json")}}}
	}
	ev := rec(`{"specversion":"1.0","id":"e1","source":"/billing","type":"inv.paid","tenantid":"acme","data":{"n":1},"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}`)

	out := f.expand(context.Background(), ev, nil)
	if len(out) != 1 || string(out[0].Key) != "acme-ep" {
		t.Fatalf("fan-out produced %d records, want one delivery to acme-ep", len(out))
	}
	m, body, ok := Rematch(ev, acme, 0)
	if !ok {
		t.Fatal("Rematch: acme-ep does not match acme's event")
	}
	if !bytes.Equal(body, out[0].Value) || !slices.EqualFunc(m.Headers(), out[0].Headers, func(a, b kgo.RecordHeader) bool { return a.Key == b.Key && bytes.Equal(a.Value, b.Value) }) {
		t.Errorf("Rematch gives\n body %s headers %v\nfan-out gave\n body %s headers %v", body, m.Headers(), out[0].Value, out[0].Headers)
	}
	if m.DeliveryID != DeliveryID(m.WebhookID, "acme-ep") || m.Incarnation != "inc-acme" {
		t.Errorf("meta %+v", m)
	}
	for _, c := range []struct {
		name string
		r    *kgo.Record
	}{
		{"another tenant's endpoint", ev},
		{"a type the filter does not select", rec(`{"specversion":"1.0","id":"e2","source":"/b","type":"customer.created","tenantid":"globex","data":{}}`)},
		{"an invalid record", rec(`{"id":"e3","type":"inv.paid","tenantid":"globex"}`)},
	} {
		if _, _, ok := Rematch(c.r, globex, 0); ok {
			t.Errorf("%s: Rematch matched globex-ep", c.name)
		}
	}
}
