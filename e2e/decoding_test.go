package e2e

// Acceptance tests of CloudEvent decoding (issue 8 items 1, 2, 3 and 9) on
// the real stack: equivalent serialisations of an event give byte-identical
// webhook bodies; events that break a MUST of the spec, or whose JSON would
// not be UTF-8, go to events.invalid with their reason and their identity.

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Headers of an events.invalid record that name the event (the contract).
const (
	hdrEventID     = "hookrelay-event-id"
	hdrEventSource = "hookrelay-event-source"
	hdrEventType   = "hookrelay-event-type"
)

// TestEquivalentFormsSameBody publishes one JSON-data event and one
// data_base64 event, each in several equivalent serialisations (compact,
// Python's json.dumps defaults, pretty-printed with CRLF and reordered
// members, escaped names and values, binary mode), plus three invalid
// events. Every form is delivered once with the same body bytes (valid
// UTF-8, verified by the Standard Webhooks library); each invalid event is
// in events.invalid with its reason and its id, and nothing else is.
func TestEquivalentFormsSameBody(t *testing.T) {
	h := newHarness(t, config{Partitions: 1})
	rc := newReceiver(t, "eq", always(http.StatusOK))
	h.addEndpoint(endpoint{ID: "eq", URL: rc.URL, Secret: rc.Secret, Events: []string{"eq.*"}})
	h.start("decoding-1")

	topic := h.topic("events")
	key := []byte("one-partition")
	ceJSON := []kgo.RecordHeader{{Key: "content-type", Value: []byte("application/cloudevents+json")}}
	// The event time, within the queue TTL; {TIME+01} is the same instant
	// written with a +01:00 offset.
	now := time.Now().UTC().Truncate(time.Second)
	times := strings.NewReplacer("{TIME}", now.Format(time.RFC3339), "{TIME+01}", now.In(time.FixedZone("", 3600)).Format(time.RFC3339))
	structured := func(v string) *kgo.Record {
		return &kgo.Record{Topic: topic, Key: key, Headers: ceJSON, Value: []byte(times.Replace(v))}
	}
	binaryRec := func(id, typ, ct, v string) *kgo.Record {
		return &kgo.Record{Topic: topic, Key: key, Value: []byte(v), Headers: []kgo.RecordHeader{
			{Key: "ce_specversion", Value: []byte("1.0")}, {Key: "ce_id", Value: []byte(id)},
			{Key: "ce_source", Value: []byte("/e2e/decoding")}, {Key: "ce_type", Value: []byte(typ)},
			{Key: "ce_time", Value: []byte(times.Replace("{TIME}"))}, {Key: "content-type", Value: []byte(ct)},
		}}
	}

	groups := map[string][]*kgo.Record{
		"eq.json": {
			structured(`{"specversion":"1.0","id":"json-compact","source":"/e2e/decoding","type":"eq.json","time":"{TIME}","datacontenttype":"application/json","data":{"name":"Zoë 😀","path":"a/b","n":[1,2.5]}}`),
			structured(`{"specversion": "1.0", "id": "json-python", "source": "/e2e/decoding", "type": "eq.json", "time": "{TIME}", "datacontenttype": "application/json", "data": {"name": "Zo\u00eb \ud83d\ude00", "path": "a/b", "n": [1, 2.5]}}`),
			structured("{\r\n  \"data\" : {\r\n    \"name\" : \"Zoë 😀\",\r\n    \"path\" : \"a\\/b\",\r\n    \"n\" : [ 1, 2.5 ]\r\n  },\r\n  \"id\" : \"json-pretty\",\r\n" +
				"  \"type\" : \"eq.json\",\r\n  \"source\" : \"\\/e2e\\/decoding\",\r\n  \"specversion\" : \"1.0\",\r\n  \"datacontenttype\" : \"application\\/json\",\r\n" +
				"  \"time\" : \"{TIME+01}\"\r\n}\r\n"),
			structured(`{"\u0073pecversion":"1.0","\u0069d":"json-escaped","source":"/e2e/decoding","typ\u0065":"eq.json","time":"{TIME}","datacontenttype":"application/json","data":{"n\u0061me":"Zo\u00EB \uD83D\uDE00","path":"a\/b","n":[1,2.5]}}`),
			binaryRec("json-binary", "eq.json", "application/json", "{\n  \"name\": \"Zoë 😀\",\n  \"path\": \"a/b\",\n  \"n\": [1, 2.5]\n}\n"),
		},
		"eq.bin": {
			structured(`{"specversion":"1.0","id":"bin-compact","source":"/e2e/decoding","type":"eq.bin","time":"{TIME}","data_base64":"AAECA//+"}`),
			structured(`{"specversion": "1.0", "id": "bin-python", "source": "/e2e/decoding", "type": "eq.bin", "time": "{TIME}", "data_base64": "AAECA//+"}`),
			structured("{\n\t\"data_base64\": \"AAECA\\/\\/+\",\n\t\"time\": \"{TIME}\",\n\t\"type\": \"eq.bin\",\n\t\"source\": \"/e2e/decoding\",\n\t\"id\": \"bin-pretty\",\n\t\"specversion\": \"1.0\"\n}"),
			binaryRec("bin-binary", "eq.bin", "application/octet-stream", "\x00\x01\x02\x03\xff\xfe"),
		},
	}
	type bad struct {
		rec            *kgo.Record
		reason, id, ty string
	}
	bads := []bad{
		{binaryRec("bad-utf8", "eq.json", "application/json", "{\"s\":\"\xff\xfe ok\"}"), "invalid_utf8", "bad-utf8", "eq.json"},
		{structured(`{"specversion":"1.0","type":"eq.json","source":"/e2e/decoding","id":"both-data","data":{"x":1},"data_base64":"eyJ5IjoyfQ=="}`), "conflicting_data", "both-data", "eq.json"},
		{structured(`{"specversion":"1.0","id":"c20-big","source":"/e2e/decoding","type":"eq.json","data":"` + strings.Repeat("x", 400<<10) + `"}`), "too_large", "c20-big", "eq.json"},
	}
	var recs []*kgo.Record
	valid := 0
	for _, typ := range []string{"eq.json", "eq.bin"} {
		recs = append(recs, groups[typ]...)
		valid += len(groups[typ])
	}
	for _, b := range bads {
		recs = append(recs, b.rec)
	}
	h.produce(recs...)

	invalid := h.readTopic(h.topic("events.invalid"), 60*time.Second, func(got []*kgo.Record) (bool, string) {
		return len(got) >= len(bads), fmt.Sprintf("%d of %d invalid records", len(got), len(bads))
	})
	// The invalid records come after the valid ones on the one partition,
	// so fan-out has handled every form by now; wait for the requests.
	waitFor(t, 60*time.Second, "a request per form", func() (bool, string) {
		return rc.Distinct() >= valid, fmt.Sprintf("%d of %d", rc.Distinct(), valid)
	})

	if len(invalid) != len(bads) {
		t.Errorf("events.invalid holds %d records, want %d", len(invalid), len(bads))
	}
	byID := map[string]*kgo.Record{}
	for _, r := range invalid {
		id, _ := header(r, hdrEventID)
		byID[id] = r
	}
	for _, b := range bads {
		r, ok := byID[b.id]
		if !ok {
			t.Errorf("%s: no events.invalid record with %s=%s", b.reason, hdrEventID, b.id)
			continue
		}
		if v, _ := header(r, hdrReason); v != b.reason {
			t.Errorf("%s: %s = %q, want %q", b.id, hdrReason, v, b.reason)
		}
		if v, _ := header(r, hdrEventSource); v != "/e2e/decoding" {
			t.Errorf("%s: %s = %q", b.id, hdrEventSource, v)
		}
		if v, _ := header(r, hdrEventType); v != b.ty {
			t.Errorf("%s: %s = %q, want %q", b.id, hdrEventType, v, b.ty)
		}
	}

	bodies := map[string]map[string]int{} // type -> body -> requests
	perID := map[string]int{}
	for _, r := range rc.Requests() {
		if r.VerifyErr != nil {
			t.Errorf("request %s: signature does not verify: %v", r.WebhookID, r.VerifyErr)
		}
		if !utf8.Valid(r.Body) {
			t.Errorf("request %s: body is not UTF-8: %q", r.WebhookID, r.Body)
		}
		perID[r.WebhookID]++
		typ := "eq.bin"
		if bytes.Contains(r.Body, []byte(`"type":"eq.json"`)) {
			typ = "eq.json"
		}
		if bodies[typ] == nil {
			bodies[typ] = map[string]int{}
		}
		bodies[typ][string(r.Body)]++
	}
	for id, n := range perID {
		if n != 1 {
			t.Errorf("webhook-id %s: %d requests, want 1", id, n)
		}
	}
	if len(perID) != valid {
		t.Errorf("%d distinct webhook-ids, want %d", len(perID), valid)
	}
	want := map[string]string{
		"eq.json": `{"type":"eq.json","timestamp":"{TIME}","data":{"name":"Zoë 😀","path":"a/b","n":[1,2.5]}}`,
		"eq.bin":  `{"type":"eq.bin","timestamp":"{TIME}","data":"AAECA//+"}`,
	}
	for typ, w := range want {
		w = times.Replace(w)
		if len(bodies[typ]) != 1 || bodies[typ][w] != len(groups[typ]) {
			t.Errorf("%s: bodies %v, want %d × %s", typ, bodies[typ], len(groups[typ]), w)
		}
	}
}
