package audit

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

func sampleAttempt() *Attempt {
	return &Attempt{
		AttemptID: "0123456789abcdef0123456789abcdef", DeliveryID: "d-1", EventID: "evt-1", WebhookID: "msg_1",
		EventType: "invoice.paid", Tenant: "acme", EndpointID: "ep-é", URLHost: "hooks.example:8443",
		AttemptNumber: 3, AttemptedAt: time.UnixMilli(1796140000123).UTC(), LatencyMs: 42, HTTPStatus: 503,
		Outcome: RetryScheduled, ErrorClass: "http_503", ErrorMessage: "Service Unavailable \"quoted\" \x00",
		ResponseBody: strings.Repeat("x", MaxResponseBody), NextAttemptAt: time.Unix(1796140030, 987654321).UTC(),
	}
}

func TestAttemptCodecRoundTrip(t *testing.T) {
	for _, a := range []*Attempt{sampleAttempt(), {AttemptID: "a", Outcome: Sending}} {
		b, err := a.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if b[0] != codecV1 {
			t.Fatalf("first byte %#x, want the version byte %#x", b[0], codecV1)
		}
		var got Attempt
		if err := got.Unmarshal(b); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(&got, a) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, *a)
		}
	}
}

// Records written before the binary form (JSON) stay readable.
func TestAttemptCodecReadsJSON(t *testing.T) {
	a := sampleAttempt()
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range [][]byte{b, append([]byte(" \n"), b...)} {
		var got Attempt
		if err := got.Unmarshal(v); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(&got, a) {
			t.Fatalf("JSON:\n got %+v\nwant %+v", got, *a)
		}
	}
}

func TestAttemptCodecRejects(t *testing.T) {
	good, _ := sampleAttempt().Marshal()
	noID, _ := (&Attempt{Outcome: Delivered}).Marshal()
	badOutcome, _ := (&Attempt{AttemptID: "a", Outcome: "nope"}).Marshal()
	cases := map[string][]byte{
		"empty":           {},
		"version 2":       append([]byte{0x02}, good[1:]...),
		"truncated":       good[:len(good)/2],
		"only version":    {codecV1},
		"bad time flag":   append(append([]byte{codecV1}, make([]byte, 8)...), 0x00, 7),
		"empty id":        noID,
		"unknown outcome": badOutcome,
		"not JSON":        []byte("{nope"),
	}
	for name, v := range cases {
		var a Attempt
		if err := a.Unmarshal(v); err == nil {
			t.Errorf("%s: decoded without error: %+v", name, a)
		}
	}
	// A later version may append fields: version 1 readers skip them.
	var a Attempt
	if err := a.Unmarshal(append(append([]byte(nil), good...), 1, 2, 3)); err != nil {
		t.Errorf("trailing bytes: %v", err)
	}
}

func BenchmarkAttemptCodec(b *testing.B) {
	a := sampleAttempt()
	a.ResponseBody = "ok"
	js, _ := json.Marshal(a)
	bin, _ := a.Marshal()
	b.Run("binary", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			v, _ := a.Marshal()
			var x Attempt
			if err := x.Unmarshal(v); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(bin)), "bytes/record")
	})
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			v, _ := json.Marshal(a)
			var x Attempt
			if err := x.Unmarshal(v); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(js)), "bytes/record")
	})
}
