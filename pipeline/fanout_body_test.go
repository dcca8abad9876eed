package pipeline

import (
	"bytes"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/pipeline/events"
	"github.com/hookrelay/hookrelay/pipeline/webhook"
)

// TestDecodeEventBodyIsBody: fan-out builds the body without compacting
// events.DataJSON's result again (webhook.BodyOfCompact); for every kind of
// data (inline JSON with whitespace and escapes, JSON in binary mode, text,
// binary, none) its bytes are exactly webhook.Body's.
func TestDecodeEventBodyIsBody(t *testing.T) {
	ce := []kgo.RecordHeader{{Key: "content-type", Value: []byte("application/cloudevents+json")}}
	bin := func(ct string) []kgo.RecordHeader {
		return []kgo.RecordHeader{{Key: "ce_specversion", Value: []byte("1.0")}, {Key: "ce_id", Value: []byte("b1")},
			{Key: "ce_source", Value: []byte("/crm")}, {Key: "ce_type", Value: []byte("customer.created")},
			{Key: "content-type", Value: []byte(ct)}}
	}
	ts := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	recs := []*kgo.Record{
		{Value: []byte(`{"specversion":"1.0","id":"e1","source":"/b","type":"t","time":"2026-01-02T03:04:05Z","datacontenttype":"application/json","data": { "a" : [1, 2.50, "x\u00e9\n<>&"] ,"b":{ } } }`), Headers: ce, Timestamp: ts},
		{Value: []byte(`{"specversion":"1.0","id":"e2","source":"/b","type":"t","data":"plain \"text\""}`), Headers: ce, Timestamp: ts},
		{Value: []byte(`{"specversion":"1.0","id":"e3","source":"/b","type":"t","data_base64":"AAEC"}`), Headers: ce, Timestamp: ts},
		{Value: []byte(`{"specversion":"1.0","id":"e4","source":"/b","type":"t"}`), Headers: ce, Timestamp: ts},
		{Value: []byte(" {\n \"x\" : 1 ,\"s\":\"\\u2028\\/\" }\n"), Headers: bin("application/json"), Timestamp: ts},
		{Value: []byte("hello\x01"), Headers: bin("text/plain; charset=utf-8"), Timestamp: ts},
		{Value: []byte{0xff, 0x00}, Headers: bin("application/octet-stream"), Timestamp: ts},
	}
	for i, r := range recs {
		ev, body, _, err := decodeEvent(r, 1<<20)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		data, err := events.DataJSON(ev)
		if err != nil {
			t.Fatalf("record %d: DataJSON: %v", i, err)
		}
		at := ev.Time()
		if at.IsZero() {
			at = r.Timestamp
		}
		want, err := webhook.Body(ev.Type(), at, data)
		if err != nil {
			t.Fatalf("record %d: Body: %v", i, err)
		}
		if !bytes.Equal(body, want) {
			t.Errorf("record %d: fan-out's body\n %s\nis not webhook.Body's\n %s", i, body, want)
		}
	}
}
