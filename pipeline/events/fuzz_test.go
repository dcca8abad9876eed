package events

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// FuzzDecode checks that Decode never panics and keeps its contract on any
// record: an *InvalidError with a known reason, or a valid 1.0 event whose
// DataJSON is valid JSON. Run it with
//
//	go test ./pipeline/events -run '^$' -fuzz FuzzDecode -fuzztime 60s
//
// headers is a list of "key=value" lines.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(ghPayload), "ce_specversion=1.0\nce_id=1\nce_source=urn:x\nce_type=t\ncontent-type=application/json\nce_tenantid=a")
	f.Add(structured(`,"data":{"a":1}`), "content-type=application/cloudevents+json")
	f.Add(structured(`,"datacontenttype":"text/plain","data":"x"`), "content-type=application/cloudevents+json")
	f.Add(structured(`,"datacontenttype":"application/vnd.x+json","data":[1]`), "")
	f.Add(structured(`,"data_base64":"AAEC"`), "content-type=application/cloudevents+json")
	f.Add([]byte(`{"data_base64":1,"specversion":"1.0"}`), "content-type=application/cloudevents+json")
	f.Add([]byte{0xff, 0x00}, "ce_specversion=1.0\nce_id=1\nce_source=urn:x\nce_type=t\ncontent-type=application/octet-stream")
	f.Add([]byte("hello"), "ce_specversion=0.3")
	f.Add([]byte(`{"specversion":"1.0","id":"1","source":"%zz","type":"t","time":"x"}`), "")
	f.Add([]byte(`{"specversion": "1.0", "id": "b64", "source": "/qa", "type": "t", "data_base64": "AAECAw=="}`), "content-type=application/cloudevents+json")
	f.Add([]byte(`{"specversion":"1.0","\u0069d":"x","id":"y","source":"\/qa","type":"t","data":{"a":"\u00e9\ud83d\ude00"},"data_base64":null}`), "content-type=application/cloudevents+json")
	f.Add([]byte(`{"specversion":"1.0","id":"t","source":"/qa","type":"t","datacontenttype":"text/plain","data":"a\udead","ext":1e3}`), "")
	f.Add([]byte("{\"s\":\"\xff\xfe ok\"}"), "ce_specversion=1.0\nce_id=e1\nce_source=/qa\nce_type=t.a\ncontent-type=application/json")
	f.Fuzz(func(t *testing.T, value []byte, headers string) {
		r := &kgo.Record{Value: value}
		for line := range strings.SplitSeq(headers, "\n") {
			if line == "" {
				continue
			}
			k, v, _ := strings.Cut(line, "=")
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
		}
		ev, err := Decode(r, 4096)
		if err != nil {
			var ie *InvalidError
			if !errors.As(err, &ie) {
				t.Fatalf("error %v is %T, want *InvalidError", err, err)
			}
			if !slices.Contains(Reasons, ie.Reason) || ie.Reason == ReasonUnknown {
				t.Fatalf("unknown reason %q", ie.Reason)
			}
			if inv := InvalidRecord(r, "inv", err); len(inv.Headers) < 5 {
				t.Fatalf("invalid record has %d headers", len(inv.Headers))
			}
			return
		}
		if verr := ev.Validate(); verr != nil {
			t.Fatalf("Decode accepted an event that fails Validate: %v", verr)
		}
		if ev.SpecVersion() != "1.0" || ev.ID() == "" || ev.Type() == "" || ev.Source() == "" {
			t.Fatalf("accepted event lacks a required attribute: %s", ev)
		}
		data, err := DataJSON(ev)
		if err != nil {
			t.Fatalf("DataJSON of an accepted event: %v", err)
		}
		if !json.Valid(data) {
			t.Fatalf("DataJSON gave invalid JSON %q", data)
		}
		_ = Tenant(ev)
		_, _ = Trace(ev)
	})
}
