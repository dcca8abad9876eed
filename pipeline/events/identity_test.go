package events

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestInvalidRecordIdentity (issue 8 item 9): an events.invalid record
// carries the id, source, type (and tenantid) that can be recovered
// cheaply: binary-mode ce_ headers, or a bounded scan of the top-level
// members of a structured value, whatever else is wrong with it.
func TestInvalidRecordIdentity(t *testing.T) {
	big := strings.Repeat("x", 1536<<10) // 1.5 MiB
	const (
		hID     = "hookrelay-event-id"
		hSource = "hookrelay-event-source"
		hType   = "hookrelay-event-type"
		hTenant = "hookrelay-tenant"
	)
	tests := []struct {
		name string
		rec  *kgo.Record
		want map[string]string // header -> value; "" means absent
	}{
		{"oversize structured (the issue's c20-big)", &kgo.Record{Headers: ceJSON,
			Value: []byte(`{"specversion":"1.0","id":"c20-big","source":"/qa","type":"c20.big","data":"` + big + `"}`)},
			map[string]string{hID: "c20-big", hSource: "/qa", hType: "c20.big", hTenant: ""}},
		{"oversize structured, pretty and reordered, tenant", &kgo.Record{Headers: ceJSON,
			Value: []byte("{\r\n  \"type\" : \"c20.big\",\r\n  \"tenantid\": \"acme\",\r\n  \"source\": \"\\/qa\",\r\n  \"id\": \"c20-\\u0062ig\",\r\n  \"data\": \"" + big + "\"\r\n}")},
			map[string]string{hID: "c20-big", hSource: "/qa", hType: "c20.big", hTenant: "acme"}},
		{"oversize binary", &kgo.Record{Value: []byte(big), Headers: bin("ce_tenantid", "acme")},
			map[string]string{hID: "e1", hSource: "/qa", hType: "t.a", hTenant: "acme"}},
		{"broken JSON: truncated", &kgo.Record{Headers: ceJSON,
			Value: []byte(`{"specversion":"1.0","id":"broken-1","source":"/qa","type":"t","data":{"a":[1,2`)},
			map[string]string{hID: "broken-1", hSource: "/qa", hType: "t"}},
		{"broken JSON: garbage after two members", &kgo.Record{Headers: ceJSON,
			Value: []byte(`{"id":"broken-2","source":"/qa" oops "type":"t"}`)},
			map[string]string{hID: "broken-2", hSource: "/qa", hType: ""}},
		{"missing type", &kgo.Record{Headers: ceJSON, Value: []byte(`{"specversion":"1.0","id":"no-type","source":"/qa"}`)},
			map[string]string{hID: "no-type", hSource: "/qa", hType: ""}},
		{"binary missing ce_id", &kgo.Record{Value: []byte(`{"no":"id"}`), Headers: hdrs("ce_specversion", "1.0", "ce_source", "urn:x", "ce_type", "good.thing", "content-type", "application/json")},
			map[string]string{hID: "", hSource: "urn:x", hType: "good.thing"}},
		{"binary: top-level members of the data are not attributes", &kgo.Record{Value: []byte(`{"id":"data-id","type":"data-type"}`), Headers: hdrs("ce_specversion", "1.0", "ce_source", "urn:x", "content-type", "application/json")},
			map[string]string{hID: "", hSource: "urn:x", hType: ""}},
		{"nested members are not attributes", &kgo.Record{Headers: ceJSON,
			Value: []byte(`{"data":{"id":"inner","type":"inner","x":["id","type"]},"id":"outer","specversion":"1.0","source":"/qa","type":7}`)},
			map[string]string{hID: "outer", hSource: "/qa", hType: ""}},
		{"invalid UTF-8 and control characters are not copied raw", &kgo.Record{Headers: ceJSON,
			Value: []byte("{\"specversion\":\"1.0\",\"id\":\"a\xffb\\nc\",\"source\":\"/qa\",\"type\":\"t\"}")},
			map[string]string{hID: "a\uFFFDb\uFFFDc", hSource: "/qa", hType: "t"}},
		{"structured with some ce_ headers (Kafka binding §3.3.3): headers first, the value for the rest", &kgo.Record{
			Value:   []byte(`{"specversion":"1.0","id":"from-value","source":"/qa","type":"t",`),
			Headers: hdrs("content-type", "application/cloudevents+json", "ce_id", "from-header")},
			map[string]string{hID: "from-header", hSource: "/qa", hType: "t"}},
		{"not JSON at all", &kgo.Record{Value: []byte("hello")},
			map[string]string{hID: "", hSource: "", hType: ""}},
		{"stale identity headers of the original are replaced", &kgo.Record{
			Value:   []byte(`{"specversion":"1.0","id":"fresh","source":"/qa"}`),
			Headers: hdrs("content-type", "application/cloudevents+json", hID, "stale", hType, "stale")},
			map[string]string{hID: "fresh", hSource: "/qa", hType: ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(tt.rec, 0)
			if err == nil {
				t.Fatal("test bug: the record is valid")
			}
			out := InvalidRecord(tt.rec, "inv", err)
			got := map[string][]string{}
			for _, h := range out.Headers {
				got[h.Key] = append(got[h.Key], string(h.Value))
			}
			for k, v := range tt.want {
				switch {
				case v == "" && len(got[k]) != 0:
					t.Errorf("header %s = %q, want none", k, got[k])
				case v != "" && (len(got[k]) != 1 || got[k][0] != v):
					t.Errorf("header %s = %q, want [%q]", k, got[k], v)
				}
			}
		})
	}
}

// TestInvalidRecordIdentityBounded: the scan reads at most
// MaxIdentityScanBytes of the value; an id after that is not looked for.
func TestInvalidRecordIdentityBounded(t *testing.T) {
	pad := strings.Repeat("x", MaxIdentityScanBytes)
	r := &kgo.Record{Headers: ceJSON, Value: []byte(`{"source":"/qa","data":"` + pad + `","id":"late"}`)}
	out := InvalidRecord(r, "inv", &InvalidError{Reason: ReasonTooLarge})
	for _, h := range out.Headers {
		if h.Key == HeaderEventID {
			t.Errorf("%s = %q past the scan bound", h.Key, h.Value)
		}
		if h.Key == HeaderEventSource && string(h.Value) != "/qa" {
			t.Errorf("%s = %q, want /qa", h.Key, h.Value)
		}
	}
}
