package publish_test

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/publish"
)

// A record checked with hookrelay's own validation, without a broker: what
// an upstream service's unit test can assert.
func ExamplePublisher_Record() {
	cl, _ := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:9092")) // does not connect until it produces
	defer cl.Close()
	p, _ := publish.New(cl, publish.Options{Mode: publish.Binary})

	ev, _ := publish.NewEvent("/billing", "invoice.paid", map[string]any{"invoice": "in_1"})
	ev.SetID("evt_1")
	ev.SetTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	publish.SetTenant(&ev, "acme")
	r, err := p.Record(context.Background(), ev, publish.Key("in_1"))
	fmt.Println(r.Topic, string(r.Key), err)
	for _, h := range r.Headers {
		fmt.Printf("%s: %s\n", h.Key, h.Value)
	}
	fmt.Println(string(r.Value))

	ev.SetType("")
	_, err = p.Record(context.Background(), ev)
	fmt.Println(err)
	// Output:
	// hookrelay.events in_1 <nil>
	// ce_id: evt_1
	// ce_source: /billing
	// ce_specversion: 1.0
	// ce_type: invoice.paid
	// content-type: application/json
	// ce_time: 2026-01-02T03:04:05Z
	// ce_tenantid: acme
	// {"invoice":"in_1"}
	// invalid cloudevent: missing_attribute: type: missing
}
