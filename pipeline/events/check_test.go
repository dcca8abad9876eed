package events_test

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/pipeline/events"
)

// TestCheckIsFanoutsVerdict: Check accepts what Decode and DataJSON accept
// and refuses with Decode's reason otherwise.
func TestCheckIsFanoutsVerdict(t *testing.T) {
	ct := []kgo.RecordHeader{{Key: "content-type", Value: []byte("application/cloudevents+json")}}
	cases := []struct {
		name   string
		r      *kgo.Record
		reason string // "" for accepted
	}{
		{"structured", &kgo.Record{Headers: ct, Value: []byte(`{"specversion":"1.0","id":"1","source":"/s","type":"t","data":{"a":1}}`)}, ""},
		{"binary", &kgo.Record{Value: []byte(`{"a":1}`), Headers: []kgo.RecordHeader{
			{Key: "ce_specversion", Value: []byte("1.0")}, {Key: "ce_id", Value: []byte("1")},
			{Key: "ce_source", Value: []byte("/s")}, {Key: "ce_type", Value: []byte("t")},
			{Key: "content-type", Value: []byte("application/json")}}}, ""},
		{"no type", &kgo.Record{Headers: ct, Value: []byte(`{"specversion":"1.0","id":"1","source":"/s"}`)}, events.ReasonMissingAttribute},
		{"too large for the limit", &kgo.Record{Headers: ct, Value: []byte(`{"specversion":"1.0","id":"1","source":"/s","type":"t"}`)}, events.ReasonTooLarge},
		{"binary data not JSON", &kgo.Record{Value: []byte(`{nope`), Headers: []kgo.RecordHeader{
			{Key: "ce_specversion", Value: []byte("1.0")}, {Key: "ce_id", Value: []byte("1")},
			{Key: "ce_source", Value: []byte("/s")}, {Key: "ce_type", Value: []byte("t")},
			{Key: "content-type", Value: []byte("application/json")}}}, events.ReasonBadJSON},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			limit := 0
			if c.reason == events.ReasonTooLarge {
				limit = 40
			}
			err := events.Check(c.r, limit)
			var ie *events.InvalidError
			switch {
			case c.reason == "" && err != nil:
				t.Fatalf("Check = %v, want accepted", err)
			case c.reason != "" && (!errors.As(err, &ie) || ie.Reason != c.reason):
				t.Fatalf("Check = %v, want reason %s", err, c.reason)
			}
			_, derr := events.Decode(c.r, limit)
			if c.reason != "" && derr != nil && !errors.As(derr, &ie) {
				t.Fatalf("Decode = %v", derr)
			}
		})
	}
}
