package pipeline

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/pipeline/delivery"
	"github.com/hookrelay/hookrelay/pipeline/endpoints"
	"github.com/hookrelay/hookrelay/pipeline/operational"
)

// TestFanoutOperationalEvents: fan-out reads the operational topic through
// the same decode and match path, and an event about endpoint a of tenant
// acme reaches only b (same tenant, subscribed by name): never a itself,
// nor a catch-all "*" endpoint, nor another tenant's or a tenantless
// subscriber. An ordinary event still reaches the "*" endpoint.
func TestFanoutOperationalEvents(t *testing.T) {
	topics := NewTopics("fo.")
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topics.Events, topics.Operational, topics.Deliveries, topics.Invalid, topics.Attempts, topics.DLQ))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	seeds := kgo.SeedBrokers(c.ListenAddrs()...)
	mk := func(id, tenant string, types ...string) *endpoints.Endpoint {
		e := testEndpoint(id, 1)
		e.TenantID, e.EventTypes = tenant, types
		return e
	}
	eps := fakeMatcher{
		mk("a", "acme", "hookrelay.endpoint.*"),   // the failing one itself
		mk("b", "acme", "hookrelay.endpoint.*"),   // the owner's notification endpoint
		mk("c", "acme", "*"),                      // catch-all: not operational events
		mk("d", "other", "hookrelay.*"),           // another tenant
		mk("e", "", "hookrelay.endpoint.failing"), // no tenant
	}
	f, err := NewFanout(FanoutOptions{
		Brokers: c.ListenAddrs(), KafkaOptions: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())},
		Topics:          topics,
		TransactionalID: "fo.fanout-test",
		Endpoints:       eps,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	defer func() { cancel(); <-done }()

	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ev, err := operational.New(operational.TypeEndpointFailing, "acme", since, operational.Data{EndpointID: "a", FailingSince: &since, Reason: "http_500"})
	if err != nil {
		t.Fatal(err)
	}
	op, err := OperationalRecord(topics, ev)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(seeds, kgo.ConsumeTopics(topics.Deliveries), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	plain := &kgo.Record{Topic: topics.Events, Value: []byte(`{"specversion":"1.0","id":"e1","source":"/billing","type":"invoice.paid","tenantid":"acme"}`),
		Headers: []kgo.RecordHeader{{Key: "content-type", Value: []byte("application/cloudevents+json")}}}
	if err := cl.ProduceSync(context.Background(), op, plain).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var got []string
	waitFor(t, "two deliveries", func() bool {
		pctx, pcancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer pcancel()
		cl.PollFetches(pctx).EachRecord(func(r *kgo.Record) {
			m, err := delivery.ParseMeta(r.Headers)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, m.EndpointID+":"+m.EventType)
		})
		return len(got) >= 2
	})
	// Anything else would have been produced in the same transactions.
	pctx, pcancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	cl.PollFetches(pctx).EachRecord(func(r *kgo.Record) { got = append(got, "extra:"+string(r.Key)) })
	pcancel()
	sort.Strings(got)
	if want := []string{"b:" + operational.TypeEndpointFailing, "c:invoice.paid"}; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("deliveries %v; want %v", got, want)
	}
}
