package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	ghPayload   = `{"action":"opened","number":2,"pull_request":{"url":"https://api.github.com/repos/Codertocat/Hello-World/pulls/2","id":279147437,"title":"Update the README with new information.","user":{"login":"Codertocat","id":21031067}},"repository":{"id":186853002,"full_name":"Codertocat/Hello-World","private":false},"sender":{"login":"Codertocat","type":"User"}}`
	traceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
)

func hdrs(kv ...string) []kgo.RecordHeader {
	hs := make([]kgo.RecordHeader, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		hs = append(hs, kgo.RecordHeader{Key: kv[i], Value: []byte(kv[i+1])})
	}
	return hs
}

// binaryHeaders are the headers of a typical binary-mode GitHub event.
func binaryHeaders(extra ...string) []kgo.RecordHeader {
	return hdrs(append([]string{
		"ce_specversion", "1.0",
		"ce_id", "72d3162e-cc78-11e3-81ab-4c9367dc0958",
		"ce_source", "https://github.com/Codertocat/Hello-World",
		"ce_type", "com.github.pull_request.opened",
		"ce_time", "2019-05-15T15:20:33Z",
		"content-type", "application/json",
	}, extra...)...)
}

func structured(members string) []byte {
	return []byte(`{"specversion":"1.0","id":"A234-1234-1234","source":"/mycontext/subcontext","type":"com.example.someevent",` +
		`"time":"2018-04-05T17:31:00Z"` + members + `}`)
}

var ceJSON = hdrs("content-type", "application/cloudevents+json; charset=UTF-8")

func TestDecodeValid(t *testing.T) {
	tests := []struct {
		name        string
		rec         *kgo.Record
		wantType    string
		wantID      string
		wantTenant  string
		wantTrace   string
		wantData    string // DataJSON, compacted for comparison
		wantSubject string
	}{
		{
			name: "binary mode GitHub webhook with tenant and trace",
			rec: &kgo.Record{Key: []byte("Codertocat/Hello-World"), Value: []byte(ghPayload),
				Headers: binaryHeaders("ce_tenantid", "acme", "ce_traceparent", traceParent, "ce_tracestate", "rojo=00f067aa0ba902b7", "ce_subject", "pulls/2")},
			wantType: "com.github.pull_request.opened", wantID: "72d3162e-cc78-11e3-81ab-4c9367dc0958",
			wantTenant: "acme", wantTrace: traceParent, wantData: ghPayload, wantSubject: "pulls/2",
		},
		{
			name: "binary mode header names in mixed case",
			rec: &kgo.Record{Value: []byte(`{"a":1}`), Headers: hdrs(
				"CE_SpecVersion", "1.0", "ce_ID", "1", "Ce_Source", "urn:x", "ce_type", "t", "Content-Type", "application/json; charset=utf-8")},
			wantType: "t", wantID: "1", wantData: `{"a":1}`,
		},
		{
			name:     "binary mode without data",
			rec:      &kgo.Record{Headers: hdrs("ce_specversion", "1.0", "ce_id", "1", "ce_source", "urn:x", "ce_type", "ping")},
			wantType: "ping", wantID: "1", wantData: `null`,
		},
		{
			name:     "binary mode text/plain data becomes a JSON string",
			rec:      &kgo.Record{Value: []byte("order 42 shipped <fast> & \"tracked\""), Headers: hdrs("ce_specversion", "1.0", "ce_id", "1", "ce_source", "urn:x", "ce_type", "t", "content-type", "text/plain; charset=utf-8")},
			wantType: "t", wantID: "1", wantData: `"order 42 shipped <fast> & \"tracked\""`,
		},
		{
			name:     "binary mode octet-stream becomes base64 even when it is UTF-8",
			rec:      &kgo.Record{Value: []byte("abc"), Headers: hdrs("ce_specversion", "1.0", "ce_id", "1", "ce_source", "urn:x", "ce_type", "t", "content-type", "application/octet-stream")},
			wantType: "t", wantID: "1", wantData: `"YWJj"`,
		},
		{
			name:     "binary mode protobuf bytes become base64",
			rec:      &kgo.Record{Value: []byte{0x0a, 0x03, 0xff, 0x00, 0x10}, Headers: hdrs("ce_specversion", "1.0", "ce_id", "1", "ce_source", "urn:x", "ce_type", "t", "content-type", "application/protobuf")},
			wantType: "t", wantID: "1", wantData: `"CgP/ABA="`,
		},
		{
			name:     "binary mode no content type and JSON value is inline",
			rec:      &kgo.Record{Value: []byte(` [1, 2] `), Headers: hdrs("ce_specversion", "1.0", "ce_id", "1", "ce_source", "urn:x", "ce_type", "t")},
			wantType: "t", wantID: "1", wantData: `[1,2]`,
		},
		{
			name:     "binary mode no content type and text value is a string",
			rec:      &kgo.Record{Value: []byte(`hello`), Headers: hdrs("ce_specversion", "1.0", "ce_id", "1", "ce_source", "urn:x", "ce_type", "t")},
			wantType: "t", wantID: "1", wantData: `"hello"`,
		},
		{
			name:     "binary mode xml is text",
			rec:      &kgo.Record{Value: []byte(`<a>1</a>`), Headers: hdrs("ce_specversion", "1.0", "ce_id", "1", "ce_source", "urn:x", "ce_type", "t", "content-type", "application/atom+xml")},
			wantType: "t", wantID: "1", wantData: `"<a>1</a>"`,
		},
		{
			name: "structured mode with tenant and trace",
			rec: &kgo.Record{Value: structured(`,"datacontenttype":"application/json","tenantid":"t-9","traceparent":"` + traceParent + `","data":{"invoice":"in_1","amount":4200}`),
				Headers: ceJSON},
			wantType: "com.example.someevent", wantID: "A234-1234-1234", wantTenant: "t-9", wantTrace: traceParent,
			wantData: `{"invoice":"in_1","amount":4200}`,
		},
		{
			name:     "structured mode data before datacontenttype",
			rec:      &kgo.Record{Value: []byte(`{"data":{"x":[1,2]},"specversion":"1.0","id":"1","source":"urn:x","type":"t","datacontenttype":"application/json"}`), Headers: ceJSON},
			wantType: "t", wantID: "1", wantData: `{"x":[1,2]}`,
		},
		{
			name:     "structured mode no datacontenttype means JSON",
			rec:      &kgo.Record{Value: structured(`,"data":[true,null]`), Headers: ceJSON},
			wantType: "com.example.someevent", wantID: "A234-1234-1234", wantData: `[true,null]`,
		},
		{
			name:     "structured mode +json datacontenttype keeps object data",
			rec:      &kgo.Record{Value: structured(`,"datacontenttype":"application/vnd.github+json","data":{"zen":"Keep it logically awesome."}`), Headers: ceJSON},
			wantType: "com.example.someevent", wantID: "A234-1234-1234", wantData: `{"zen":"Keep it logically awesome."}`,
		},
		{
			name:     "structured mode text/plain data",
			rec:      &kgo.Record{Value: structured(`,"datacontenttype":"text/plain","data":"line1\nline2 \"q\""`), Headers: ceJSON},
			wantType: "com.example.someevent", wantID: "A234-1234-1234", wantData: `"line1\nline2 \"q\""`,
		},
		{
			name:     "structured mode data_base64 octet-stream",
			rec:      &kgo.Record{Value: structured(`,"datacontenttype":"application/octet-stream","data_base64":"3q2+7w=="`), Headers: ceJSON},
			wantType: "com.example.someevent", wantID: "A234-1234-1234", wantData: `"3q2+7w=="`,
		},
		{
			name:     "structured mode data_base64 of JSON is inline",
			rec:      &kgo.Record{Value: structured(`,"datacontenttype":"application/json","data_base64":"eyJhIjoxfQ=="`), Headers: ceJSON},
			wantType: "com.example.someevent", wantID: "A234-1234-1234", wantData: `{"a":1}`,
		},
		{
			name:     "structured mode without content-type header (lenient)",
			rec:      &kgo.Record{Value: append([]byte("\n  "), structured(`,"data":{"k":"v"}`)...)},
			wantType: "com.example.someevent", wantID: "A234-1234-1234", wantData: `{"k":"v"}`,
		},
		{
			name:     "structured mode ignores ce_ headers and an invalid traceparent",
			rec:      &kgo.Record{Value: structured(`,"traceparent":"00-xyz","data":1`), Headers: append(hdrs("ce_type", "other"), ceJSON...)},
			wantType: "com.example.someevent", wantID: "A234-1234-1234", wantData: `1`,
		},
		{
			name:     "empty tenantid is no tenant",
			rec:      &kgo.Record{Headers: hdrs("ce_specversion", "1.0", "ce_id", "1", "ce_source", "urn:x", "ce_type", "t", "ce_tenantid", "")},
			wantType: "t", wantID: "1", wantData: `null`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := Decode(tt.rec, 0)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if ev.Type() != tt.wantType || ev.ID() != tt.wantID || ev.SpecVersion() != "1.0" {
				t.Errorf("type/id/specversion = %q/%q/%q, want %q/%q/1.0", ev.Type(), ev.ID(), ev.SpecVersion(), tt.wantType, tt.wantID)
			}
			if got := Tenant(ev); got != tt.wantTenant {
				t.Errorf("Tenant = %q, want %q", got, tt.wantTenant)
			}
			if tp, _ := Trace(ev); tp != tt.wantTrace {
				t.Errorf("Trace = %q, want %q", tp, tt.wantTrace)
			}
			if ev.Subject() != tt.wantSubject {
				t.Errorf("Subject = %q, want %q", ev.Subject(), tt.wantSubject)
			}
			data, err := DataJSON(ev)
			if err != nil {
				t.Fatalf("DataJSON: %v", err)
			}
			var buf bytes.Buffer
			if err := json.Compact(&buf, data); err != nil {
				t.Fatalf("DataJSON gave invalid JSON %q: %v", data, err)
			}
			if buf.String() != tt.wantData {
				t.Errorf("DataJSON = %s, want %s", buf.String(), tt.wantData)
			}
		})
	}
}

func TestDecodeBinaryAttributes(t *testing.T) {
	ev, err := Decode(&kgo.Record{Value: []byte(ghPayload), Headers: binaryHeaders(
		"ce_dataschema", "https://schemas.example.com/pr.json", "ce_tracestate", "rojo=1", "ce_traceparent", traceParent,
		"ce_comexampleextension1", "value", "x-other", "ignored")}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2019, 5, 15, 15, 20, 33, 0, time.UTC); !ev.Time().Equal(want) {
		t.Errorf("Time = %v, want %v", ev.Time(), want)
	}
	if ev.Source() != "https://github.com/Codertocat/Hello-World" {
		t.Errorf("Source = %q", ev.Source())
	}
	if ev.DataSchema() != "https://schemas.example.com/pr.json" || ev.DataContentType() != "application/json" {
		t.Errorf("dataschema/datacontenttype = %q/%q", ev.DataSchema(), ev.DataContentType())
	}
	if tp, ts := Trace(ev); tp != traceParent || ts != "rojo=1" {
		t.Errorf("Trace = %q, %q", tp, ts)
	}
	if v := ev.Extensions()["comexampleextension1"]; v != "value" {
		t.Errorf("extension = %v", v)
	}
	if _, ok := ev.Extensions()["x-other"]; ok {
		t.Error("a non-ce_ header became an extension")
	}
}

func TestDecodeInvalid(t *testing.T) {
	binary := func(extra ...string) []kgo.RecordHeader {
		return hdrs(append([]string{"ce_specversion", "1.0", "ce_id", "1", "ce_source", "urn:x", "ce_type", "t"}, extra...)...)
	}
	tests := []struct {
		name   string
		rec    *kgo.Record
		max    int
		reason string
		detail string // substring of Detail
	}{
		{"over the default size", &kgo.Record{Value: bytes.Repeat([]byte("a"), DefaultMaxBytes), Key: []byte("k"), Headers: binary()}, 0, ReasonTooLarge, "limit 262144"},
		{"headers count toward the size", &kgo.Record{Value: []byte("{}"), Headers: binary("ce_big", strings.Repeat("x", 100))}, 100, ReasonTooLarge, ""},
		{"structured bad JSON", &kgo.Record{Value: []byte(`{"specversion":"1.0","id":"1",`), Headers: ceJSON}, 0, ReasonBadJSON, ""},
		{"structured not an object", &kgo.Record{Value: []byte(`[{"specversion":"1.0"}]`), Headers: ceJSON}, 0, ReasonBadJSON, "not a JSON object"},
		{"structured empty value", &kgo.Record{Headers: ceJSON}, 0, ReasonBadJSON, ""},
		{"structured data_base64 number (an SDK panic once)", &kgo.Record{Value: []byte(`{"data_base64":1,"specversion":"1.0"}`), Headers: ceJSON}, 0, ReasonMissingAttribute, "id"},
		{"structured data_base64 not base64", &kgo.Record{Value: structured(`,"data_base64":"%%%"`), Headers: ceJSON}, 0, ReasonInvalidAttribute, ""},
		{"structured missing type", &kgo.Record{Value: []byte(`{"specversion":"1.0","id":"1","source":"urn:x"}`), Headers: ceJSON}, 0, ReasonMissingAttribute, "type"},
		{"structured missing id", &kgo.Record{Value: []byte(`{"specversion":"1.0","type":"t","source":"urn:x"}`), Headers: ceJSON}, 0, ReasonMissingAttribute, "id"},
		{"structured missing specversion", &kgo.Record{Value: []byte(`{"id":"1","type":"t","source":"urn:x"}`), Headers: ceJSON}, 0, ReasonMissingAttribute, "specversion"},
		{"structured blank id", &kgo.Record{Value: []byte(`{"specversion":"1.0","id":"  ","type":"t","source":"urn:x"}`), Headers: ceJSON}, 0, ReasonInvalidAttribute, "id"},
		{"structured specversion 0.3", &kgo.Record{Value: []byte(`{"specversion":"0.3","id":"1","type":"t","source":"urn:x"}`), Headers: ceJSON}, 0, ReasonUnsupportedSpecVersion, "0.3"},
		{"structured specversion 2.0", &kgo.Record{Value: []byte(`{"specversion":"2.0","id":"1","type":"t","source":"urn:x"}`), Headers: ceJSON}, 0, ReasonUnsupportedSpecVersion, ""},
		{"structured id of wrong type", &kgo.Record{Value: []byte(`{"specversion":"1.0","id":7,"type":"t","source":"urn:x"}`), Headers: ceJSON}, 0, ReasonInvalidAttribute, ""},
		{"structured bad time", &kgo.Record{Value: []byte(`{"specversion":"1.0","id":"1","type":"t","source":"urn:x","time":"yesterday"}`), Headers: ceJSON}, 0, ReasonInvalidAttribute, ""},
		{"structured tenantid not a string", &kgo.Record{Value: structured(`,"tenantid":42`), Headers: ceJSON}, 0, ReasonInvalidAttribute, "tenantid"},
		{"structured text data not a string", &kgo.Record{Value: structured(`,"datacontenttype":"text/plain","data":{"a":1}`), Headers: ceJSON}, 0, ReasonInvalidAttribute, ""},
		{"structured data_base64 declared JSON but not JSON", &kgo.Record{Value: structured(`,"datacontenttype":"application/json","data_base64":"bm90IGpzb24="`), Headers: ceJSON}, 0, ReasonBadJSON, ""},
		{"batch format", &kgo.Record{Value: []byte(`[]`), Headers: hdrs("content-type", "application/cloudevents-batch+json")}, 0, ReasonUnsupportedFormat, ""},
		{"avro format", &kgo.Record{Value: []byte{1, 2}, Headers: hdrs("content-type", "Application/CloudEvents+Avro")}, 0, ReasonUnsupportedFormat, ""},
		{"no headers, not JSON", &kgo.Record{Value: []byte("hello")}, 0, ReasonMissingAttribute, "specversion"},
		{"plain JSON content type without ce_ headers", &kgo.Record{Value: []byte(`{"a":1}`), Headers: hdrs("content-type", "application/json")}, 0, ReasonMissingAttribute, "specversion"},
		{"binary missing type", &kgo.Record{Headers: hdrs("ce_specversion", "1.0", "ce_id", "1", "ce_source", "urn:x")}, 0, ReasonMissingAttribute, "type"},
		{"binary missing source", &kgo.Record{Headers: hdrs("ce_specversion", "1.0", "ce_id", "1", "ce_type", "t")}, 0, ReasonMissingAttribute, "source"},
		{"binary empty specversion", &kgo.Record{Headers: hdrs("ce_specversion", "", "ce_id", "1", "ce_source", "urn:x", "ce_type", "t")}, 0, ReasonMissingAttribute, "specversion"},
		{"binary specversion 0.3", &kgo.Record{Headers: hdrs("ce_specversion", "0.3", "ce_id", "1", "ce_source", "urn:x", "ce_type", "t")}, 0, ReasonUnsupportedSpecVersion, ""},
		{"binary JSON data not JSON", &kgo.Record{Value: []byte(`{"a":`), Headers: binary("content-type", "application/json")}, 0, ReasonBadJSON, "data"},
		{"binary +json data not JSON", &kgo.Record{Value: []byte(`nope`), Headers: binary("content-type", "application/vnd.api+json")}, 0, ReasonBadJSON, ""},
		{"binary duplicate ce_id", &kgo.Record{Headers: binary("ce_id", "2")}, 0, ReasonBadHeader, "ce_id"},
		{"binary duplicate specversion", &kgo.Record{Headers: binary("CE_SPECVERSION", "1.0")}, 0, ReasonBadHeader, "specversion"},
		{"binary duplicate content-type", &kgo.Record{Headers: binary("content-type", "text/plain", "Content-Type", "text/plain")}, 0, ReasonBadHeader, "content-type"},
		{"binary non-UTF-8 header", &kgo.Record{Headers: binary("ce_subject", "\xff\xfe")}, 0, ReasonBadHeader, "ce_subject"},
		{"binary bad extension name", &kgo.Record{Headers: binary("ce_my-ext", "x")}, 0, ReasonBadHeader, "ce_my-ext"},
		{"binary ce_data header", &kgo.Record{Headers: binary("ce_data", "x")}, 0, ReasonBadHeader, ""},
		{"binary bad time", &kgo.Record{Headers: binary("ce_time", "15 May 2019")}, 0, ReasonInvalidAttribute, "time"},
		{"binary bad dataschema", &kgo.Record{Headers: binary("ce_dataschema", "::not a uri")}, 0, ReasonInvalidAttribute, "dataschema"},
		{"binary bad datacontenttype", &kgo.Record{Value: []byte("x"), Headers: binary("content-type", "not a media type;;")}, 0, ReasonInvalidAttribute, "datacontenttype"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(tt.rec, tt.max)
			var ie *InvalidError
			if !errors.As(err, &ie) {
				t.Fatalf("Decode error = %v (%T), want *InvalidError", err, err)
			}
			if ie.Reason != tt.reason {
				t.Errorf("Reason = %q (%s), want %q", ie.Reason, ie.Detail, tt.reason)
			}
			if !strings.Contains(ie.Detail, tt.detail) {
				t.Errorf("Detail = %q, want it to contain %q", ie.Detail, tt.detail)
			}
		})
	}
}

func TestValidTraceParent(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{traceParent, true},
		{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future", true},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x", false}, // version 00 is exactly 55
		{"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false},
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", false},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", false},
		{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", false},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := ValidTraceParent(tt.in); got != tt.want {
			t.Errorf("ValidTraceParent(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestInvalidRecord(t *testing.T) {
	orig := &kgo.Record{
		Topic: "hookrelay.events", Partition: 3, Offset: 12345,
		Key: []byte("k1"), Value: []byte(`{"broken`),
		Timestamp: time.UnixMilli(1700000000123),
		Headers:   hdrs("content-type", "application/cloudevents+json", HeaderReason, "stale", "trace", "x"),
	}
	_, err := Decode(orig, 0)
	out := InvalidRecord(orig, "hookrelay.events.invalid", err)
	if out.Topic != "hookrelay.events.invalid" || string(out.Key) != "k1" || string(out.Value) != `{"broken` || !out.Timestamp.Equal(orig.Timestamp) {
		t.Errorf("record = %+v", out)
	}
	got := map[string][]string{}
	for _, h := range out.Headers {
		got[h.Key] = append(got[h.Key], string(h.Value))
	}
	want := map[string]string{
		"content-type":          "application/cloudevents+json",
		"trace":                 "x",
		HeaderReason:            ReasonBadJSON,
		HeaderOriginalTopic:     "hookrelay.events",
		HeaderOriginalPartition: "3",
		HeaderOriginalOffset:    "12345",
	}
	for k, v := range want {
		if len(got[k]) != 1 || got[k][0] != v {
			t.Errorf("header %s = %q, want [%q]", k, got[k], v)
		}
	}
	if len(got[HeaderReasonDetail]) != 1 || got[HeaderReasonDetail][0] == "" {
		t.Errorf("detail header = %q", got[HeaderReasonDetail])
	}
	if len(orig.Headers) != 3 {
		t.Errorf("original record modified: %d headers", len(orig.Headers))
	}

	other := InvalidRecord(orig, "inv", errors.New(strings.Repeat("é", 2000)))
	for _, h := range other.Headers {
		switch h.Key {
		case HeaderReason:
			if string(h.Value) != ReasonUnknown {
				t.Errorf("reason of a plain error = %q", h.Value)
			}
		case HeaderReasonDetail:
			if len(h.Value) > MaxDetailBytes+len("…") {
				t.Errorf("detail is %d bytes", len(h.Value))
			}
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	recs := map[string]*kgo.Record{
		"binary":     {Value: []byte(ghPayload), Headers: binaryHeaders("ce_tenantid", "acme", "ce_traceparent", traceParent)},
		"structured": {Value: structured(`,"datacontenttype":"application/json","tenantid":"acme","data":` + ghPayload), Headers: ceJSON},
	}
	for name, r := range recs {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ev, err := Decode(r, 0)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := DataJSON(ev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
