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

// The fields appended in issue 12 round-trip, and a record written before
// them (version 1 without the optional tail) still decodes, with them empty.
func TestAttemptCodecOptionalFields(t *testing.T) {
	a := sampleAttempt()
	a.FirstAttemptAt = time.UnixMilli(1796139000456).UTC()
	a.RequestHeaders = "Content-Type: application/json\nWebhook-Id: msg_1\n"
	a.BodyPreview = `{"id":"evt-1"}`
	a.ResponseHeaders = "Set-Cookie: [redacted]\n"
	b, _ := a.Marshal()
	var got Attempt
	if err := got.Unmarshal(b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&got, a) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, *a)
	}

	old := sampleAttempt()
	b, _ = old.Marshal()
	b = b[:len(b)-4] // the tail of an attempt without them: zero time, three empty strings
	var got2 Attempt
	if err := got2.Unmarshal(b); err != nil {
		t.Fatalf("record without the optional tail: %v", err)
	}
	if !reflect.DeepEqual(&got2, old) {
		t.Fatalf("old record:\n got %+v\nwant %+v", got2, *old)
	}
	// A cut inside the tail is corrupt, not silently short.
	b, _ = a.Marshal()
	if err := new(Attempt).Unmarshal(b[:len(b)-3]); err == nil {
		t.Fatal("a record cut inside its optional fields decoded")
	}
}

func TestFormatHeaders(t *testing.T) {
	h := map[string][]string{
		"Webhook-Signature": {"v1,secret"}, "Authorization": {"Bearer x"}, "Set-Cookie": {"a=1", "b=2"},
		"Content-Type": {"application/json"}, "X-Long": {strings.Repeat("é", 3000)},
	}
	got := FormatHeaders(h)
	if strings.Contains(got, "secret") || strings.Contains(got, "Bearer") || strings.Contains(got, "a=1") {
		t.Fatalf("a credential was kept: %q", got)
	}
	fs := ParseHeaders(got)
	if len(fs) != 6 || fs[0] != (HeaderField{"Authorization", Redacted}) || fs[1].Name != "Content-Type" {
		t.Fatalf("fields %+v", fs)
	}
	if len(got) > MaxHeaders || !utf8Valid(got) {
		t.Fatalf("len %d valid %v", len(got), utf8Valid(got))
	}
	big := map[string][]string{}
	for i := 0; i < 200; i++ {
		big[strings.Repeat("X", 20)+string(rune('A'+i%26))+string(rune('a'+i/26))] = []string{"v"}
	}
	if got := FormatHeaders(big); len(got) > MaxHeaders || !strings.HasSuffix(got, "\n") {
		t.Fatalf("not cut at a line within %d: %d bytes", MaxHeaders, len(got))
	}
	if p := BodyPreview([]byte(strings.Repeat("é", 400))); len(p) != 512 || !utf8Valid(p) {
		t.Fatalf("preview %d bytes", len(p))
	}
	if p := BodyPreview([]byte("a\xffb")); p != "a\uFFFDb" {
		t.Fatalf("preview %q", p)
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "") == s }
