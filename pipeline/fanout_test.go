package pipeline

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/pipeline/delivery"
	"github.com/hookrelay/hookrelay/pipeline/endpoints"
)

type fakeMatcher []*endpoints.Endpoint

func (f fakeMatcher) Subscribed(eventType, tenant string) []*endpoints.Endpoint {
	var out []*endpoints.Endpoint
	for _, e := range f {
		if e.Matches(eventType, tenant) {
			out = append(out, e)
		}
	}
	return out
}

// TestFanout checks the fan-out stage against kfake: a structured and a
// binary event each become one delivery per matching endpoint, keyed by
// endpoint, with identical body bytes and webhook-id across endpoints; an
// event matching nothing produces nothing; a malformed record goes to
// events.invalid with its reason and origin; the consumed offsets commit.
func TestFanout(t *testing.T) {
	topics := NewTopics("f.")
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, topics.Events, topics.Deliveries, topics.Invalid))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	seeds := kgo.SeedBrokers(c.ListenAddrs()...)
	a := testEndpoint("a", 4)
	a.EventTypes = []string{"invoice.*"}
	b := testEndpoint("b", 4)
	b.EventTypes = []string{"*"}
	ten := testEndpoint("t1", 4)
	ten.EventTypes = []string{"*"}
	ten.TenantID = "acme"

	f, err := NewFanout(FanoutOptions{
		Brokers:         c.ListenAddrs(),
		KafkaOptions:    []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())},
		Topics:          topics,
		TransactionalID: "f.fanout-test",
		Endpoints:       fakeMatcher{a, b, ten},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	defer func() { cancel(); <-done }()

	cl, err := kgo.NewClient(seeds, kgo.ConsumeTopics(topics.Deliveries, topics.Invalid),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	structured := `{"specversion":"1.0","id":"e1","source":"/billing","type":"invoice.paid","time":"2026-01-02T03:04:05Z","datacontenttype":"application/json","data":{"amount":12}}`
	recs := []*kgo.Record{
		{Topic: topics.Events, Value: []byte(structured), Headers: []kgo.RecordHeader{{Key: "content-type", Value: []byte("application/cloudevents+json")}}},
		{Topic: topics.Events, Value: []byte(`{"x":1}`), Headers: []kgo.RecordHeader{
			{Key: "ce_specversion", Value: []byte("1.0")}, {Key: "ce_id", Value: []byte("e2")},
			{Key: "ce_source", Value: []byte("/crm")}, {Key: "ce_type", Value: []byte("customer.created")},
			{Key: "content-type", Value: []byte("application/json")}}},
		{Topic: topics.Events, Value: []byte(`{"specversion":"1.0","id":"e3","source":"/x","type":"nobody.cares","tenantid":"other"}`),
			Headers: []kgo.RecordHeader{{Key: "content-type", Value: []byte("application/cloudevents+json")}}},
		{Topic: topics.Events, Value: []byte(`{not json`), Headers: []kgo.RecordHeader{{Key: "content-type", Value: []byte("application/cloudevents+json")}}},
	}
	for _, r := range recs {
		r.Partition = 0
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	got := map[string][]*kgo.Record{}
	deadline := time.Now().Add(30 * time.Second)
	for n := 0; n < 4 && time.Now().Before(deadline); {
		pctx, pcancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(pctx)
		pcancel()
		fs.EachRecord(func(r *kgo.Record) { got[r.Topic] = append(got[r.Topic], r); n++ })
	}
	dels := got[topics.Deliveries]
	if len(dels) != 3 { // e1 -> a, b; e2 -> b
		t.Fatalf("deliveries = %d; want 3", len(dels))
	}
	byKey := map[string][]delivery.Meta{}
	bodies := map[string][]string{}
	for _, r := range dels {
		m, err := delivery.ParseMeta(r.Headers)
		if err != nil {
			t.Fatal(err)
		}
		if string(r.Key) != m.EndpointID {
			t.Fatalf("record key %q != endpoint %q", r.Key, m.EndpointID)
		}
		byKey[m.EndpointID] = append(byKey[m.EndpointID], m)
		bodies[m.EventID] = append(bodies[m.EventID], string(r.Value))
	}
	if len(byKey["a"]) != 1 || len(byKey["b"]) != 2 || len(byKey["t1"]) != 0 {
		t.Fatalf("per endpoint: a=%d b=%d t1=%d; want 1, 2, 0", len(byKey["a"]), len(byKey["b"]), len(byKey["t1"]))
	}
	if byKey["a"][0].WebhookID == "" || bodies["e1"][0] != bodies["e1"][1] {
		t.Fatalf("e1's deliveries differ: %q", bodies["e1"])
	}
	if want := `{"type":"invoice.paid","timestamp":"2026-01-02T03:04:05Z","data":{"amount":12}}`; bodies["e1"][0] != want {
		t.Fatalf("body = %s; want %s", bodies["e1"][0], want)
	}
	inv := got[topics.Invalid]
	if len(inv) != 1 || string(inv[0].Value) != `{not json` {
		t.Fatalf("invalid records = %d; want the malformed one", len(inv))
	}
	var reason string
	for _, h := range inv[0].Headers {
		if h.Key == delivery.HeaderReason {
			reason = string(h.Value)
		}
	}
	if reason == "" {
		t.Fatal("invalid record has no reason header")
	}
}
