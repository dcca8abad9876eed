package events_test

import (
	"fmt"

	"github.com/hookrelay/hookrelay/pipeline/events"
	"github.com/twmb/franz-go/pkg/kgo"
)

func ExampleDecode() {
	rec := &kgo.Record{
		Topic: "hookrelay.events", Partition: 0, Offset: 41,
		Value: []byte(`{"invoice":"in_1","amount":4200}`),
		Headers: []kgo.RecordHeader{
			{Key: "ce_specversion", Value: []byte("1.0")},
			{Key: "ce_id", Value: []byte("evt_1")},
			{Key: "ce_source", Value: []byte("/billing")},
			{Key: "ce_type", Value: []byte("invoice.paid")},
			{Key: "ce_tenantid", Value: []byte("acme")},
			{Key: "content-type", Value: []byte("application/json")},
		},
	}
	ev, err := events.Decode(rec, 0)
	if err != nil {
		panic(err)
	}
	data, _ := events.DataJSON(ev)
	fmt.Println(ev.Type(), events.Tenant(ev), string(data))

	bad := &kgo.Record{Topic: "hookrelay.events", Partition: 0, Offset: 42, Value: []byte("not an event")}
	_, err = events.Decode(bad, 0)
	inv := events.InvalidRecord(bad, "hookrelay.events.invalid", err)
	for _, h := range inv.Headers {
		if h.Key != events.HeaderReasonDetail {
			fmt.Printf("%s: %s\n", h.Key, h.Value)
		}
	}
	// Output:
	// invoice.paid acme {"invoice":"in_1","amount":4200}
	// hookrelay-reason: missing_attribute
	// hookrelay-original-topic: hookrelay.events
	// hookrelay-original-partition: 0
	// hookrelay-original-offset: 42
}
