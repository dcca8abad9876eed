package webhook_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/hookrelay/hookrelay/pipeline/webhook"
)

// The reference test vector of the Standard Webhooks libraries (shared by the
// Go, JavaScript and Python test suites).
const (
	vectorSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vectorMsgID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorUnix      = 1614265330
	vectorPayload   = `{"test": 2432232314}`
	vectorSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func mustSecret(t testing.TB, s string) webhook.Secret {
	t.Helper()
	sec, err := webhook.ParseSecret(s)
	if err != nil {
		t.Fatal(err)
	}
	return sec
}

func TestWebhookID(t *testing.T) {
	id := webhook.WebhookID("https://billing.example/api", "evt-42")
	// Golden: the webhook-id is the consumers' idempotency key, so its
	// derivation must never change between releases.
	const golden = "msg_xnyyebvvjjxfv3yfenxzqfnxri"
	if id != golden {
		t.Errorf("WebhookID = %q, want %q (changing the derivation breaks consumers' deduplication)", id, golden)
	}
	if again := webhook.WebhookID("https://billing.example/api", "evt-42"); again != id {
		t.Errorf("not deterministic: %q then %q", id, again)
	}
	cases := [][2]string{{"a", "bc"}, {"ab", "c"}, {"", "abc"}, {"abc", ""}, {"src.with.dots", "id.with.dots"}}
	seen := map[string][2]string{}
	for _, c := range cases {
		got := webhook.WebhookID(c[0], c[1])
		if strings.Contains(got, ".") {
			t.Errorf("WebhookID(%q, %q) = %q contains '.'", c[0], c[1], got)
		}
		if !strings.HasPrefix(got, "msg_") || len(got) != 30 {
			t.Errorf("WebhookID(%q, %q) = %q: want msg_ + 26 chars", c[0], c[1], got)
		}
		if prev, dup := seen[got]; dup {
			t.Errorf("WebhookID collision: %q and %q both give %q", prev, c, got)
		}
		seen[got] = c
	}
}

func TestParseSecret(t *testing.T) {
	b64 := func(n int) string {
		return "whsec_" + strings.Repeat("QUFB", n/3) // "AAA" per 4 chars
	}
	tests := []struct {
		name, in string
		wantErr  string
	}{
		{"reference vector, 24 bytes", vectorSecret, ""},
		{"24 bytes", b64(24), ""},
		{"63 bytes", b64(63), ""},
		{"32 bytes padded", "whsec_" + strings.Repeat("A", 42) + "A=", ""},
		{"empty", "", "must start with"},
		{"no prefix", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "must start with"},
		{"wrong prefix", "whsk_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "must start with"},
		{"not base64", "whsec_not*base64!", "not standard base64"},
		{"url-safe alphabet", "whsec_" + strings.Repeat("-_-_", 8), "not standard base64"},
		{"missing padding", "whsec_" + strings.Repeat("A", 43), "not standard base64"},
		{"21 bytes", b64(21), "21 bytes, must be 24 to 64"},
		{"66 bytes", b64(66), "66 bytes, must be 24 to 64"},
		{"prefix only", "whsec_", "0 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := webhook.ParseSecret(tt.in)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("ParseSecret: %v", err)
				}
				if s.String() != tt.in {
					t.Errorf("String() = %q, want the input back", s.String())
				}
				return
			}
			if err == nil || !errors.Is(err, webhook.ErrInvalidSecret) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("ParseSecret(%q) error = %v, want ErrInvalidSecret containing %q", tt.in, err, tt.wantErr)
			}
			if len(tt.in) > 12 && strings.Contains(err.Error(), tt.in[6:]) {
				t.Errorf("error %q repeats the secret", err)
			}
		})
	}
}

func TestNewSecret(t *testing.T) {
	a, b := webhook.NewSecret(), webhook.NewSecret()
	if a.String() == b.String() {
		t.Fatal("two NewSecret calls gave the same secret")
	}
	back, err := webhook.ParseSecret(a.String())
	if err != nil {
		t.Fatalf("NewSecret's String does not parse: %v", err)
	}
	if back.String() != a.String() {
		t.Errorf("round trip changed the secret")
	}
	if n := len(strings.TrimPrefix(a.String(), "whsec_")); n != 44 { // 32 bytes
		t.Errorf("base64 length %d, want 44 (32 bytes)", n)
	}
	if m := a.Masked(); !strings.HasPrefix(m, "whsec_") || strings.Contains(a.String(), strings.TrimSuffix(m, "…")) == false || len(m) > 14 {
		t.Errorf("Masked() = %q", m)
	}
	var zero webhook.Secret
	if !zero.IsZero() || zero.String() != "" || zero.Masked() != "" {
		t.Errorf("zero Secret: IsZero=%v String=%q Masked=%q", zero.IsZero(), zero.String(), zero.Masked())
	}
}

func TestSecretJSON(t *testing.T) {
	type cfg struct {
		Secrets []webhook.Secret `json:"secrets"`
	}
	in := `{"secrets":["` + vectorSecret + `"]}`
	var c cfg
	if err := json.Unmarshal([]byte(in), &c); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != in {
		t.Errorf("round trip = %s, want %s", out, in)
	}
	if err := json.Unmarshal([]byte(`{"secrets":["whsec_short"]}`), &c); !errors.Is(err, webhook.ErrInvalidSecret) {
		t.Errorf("decoding a bad secret: err = %v, want ErrInvalidSecret", err)
	}
}

func TestSignReferenceVector(t *testing.T) {
	got := webhook.Sign(vectorMsgID, time.Unix(vectorUnix, 0), []byte(vectorPayload), mustSecret(t, vectorSecret))
	if got != vectorSignature {
		t.Errorf("Sign = %q, want the reference %q", got, vectorSignature)
	}
}

// TestSignThirdPartyVerifier checks Sign against the standard-webhooks
// project's own Go library: every secret's entry verifies, and any change to
// the body, id or timestamp fails.
func TestSignThirdPartyVerifier(t *testing.T) {
	old, cur := webhook.NewSecret(), webhook.NewSecret()
	id := webhook.WebhookID("urn:test", "1")
	ts := time.Now()
	body, err := webhook.Body("invoice.paid", time.Date(2026, 5, 1, 12, 0, 0, 123e6, time.UTC), json.RawMessage(`{"amount": 42, "note": "<b>&</b>"}`))
	if err != nil {
		t.Fatal(err)
	}
	sig := webhook.Sign(id, ts, body, old, webhook.Secret{}, cur)
	if n := len(strings.Fields(sig)); n != 2 {
		t.Fatalf("signature %q has %d entries, want 2 (zero secret skipped)", sig, n)
	}
	header := func(id string, unix int64) http.Header {
		h := http.Header{}
		h.Set("webhook-id", id)
		h.Set("webhook-timestamp", strconv.FormatInt(unix, 10))
		h.Set("webhook-signature", sig)
		return h
	}
	for i, s := range []webhook.Secret{old, cur} {
		wh, err := standardwebhooks.NewWebhook(s.String())
		if err != nil {
			t.Fatal(err)
		}
		if err := wh.Verify(body, header(id, ts.Unix())); err != nil {
			t.Errorf("secret %d: third-party Verify: %v", i, err)
		}
		tampered := append([]byte(nil), body...)
		tampered[len(tampered)-2] ^= 1
		if err := wh.Verify(tampered, header(id, ts.Unix())); err == nil {
			t.Errorf("secret %d: tampered body verified", i)
		}
		if err := wh.Verify(body, header(id+"x", ts.Unix())); err == nil {
			t.Errorf("secret %d: other webhook-id verified", i)
		}
		if err := wh.Verify(body, header(id, ts.Unix()+1)); err == nil {
			t.Errorf("secret %d: other timestamp verified", i)
		}
	}
	other, _ := standardwebhooks.NewWebhook(webhook.NewSecret().String())
	if err := other.Verify(body, header(id, ts.Unix())); err == nil {
		t.Error("a secret that did not sign verified")
	}
}

func TestVerify(t *testing.T) {
	sec := mustSecret(t, vectorSecret)
	at := time.Unix(vectorUnix, 0)
	good := func() http.Header {
		h := http.Header{}
		h.Set("webhook-id", vectorMsgID)
		h.Set("webhook-timestamp", strconv.Itoa(vectorUnix))
		h.Set("webhook-signature", "v1,bogus v1a,ignored "+vectorSignature)
		return h
	}
	tests := []struct {
		name   string
		mutate func(http.Header)
		body   string
		now    time.Time
		want   error
	}{
		{"valid among other entries", nil, vectorPayload, at, nil},
		{"valid at the edge of tolerance", nil, vectorPayload, at.Add(5 * time.Minute), nil},
		{"too old", nil, vectorPayload, at.Add(5*time.Minute + time.Second), webhook.ErrTimestampTolerance},
		{"too new", nil, vectorPayload, at.Add(-5*time.Minute - time.Second), webhook.ErrTimestampTolerance},
		{"tampered body", nil, `{"test": 2432232315}`, at, webhook.ErrNoMatchingSignature},
		{"no id", func(h http.Header) { h.Del("webhook-id") }, vectorPayload, at, webhook.ErrMissingHeaders},
		{"bad timestamp", func(h http.Header) { h.Set("webhook-timestamp", "1.5") }, vectorPayload, at, webhook.ErrInvalidTimestamp},
		{"only v1a", func(h http.Header) { h.Set("webhook-signature", "v1a,"+vectorSignature[3:]) }, vectorPayload, at, webhook.ErrNoMatchingSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := good()
			if tt.mutate != nil {
				tt.mutate(h)
			}
			err := webhook.Verify(h, []byte(tt.body), tt.now, 0, webhook.NewSecret(), sec)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Errorf("Verify = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestBody(t *testing.T) {
	ts := time.Date(2022, 11, 3, 21, 26, 10, 344522000, time.FixedZone("CET", 3600))
	tests := []struct {
		name    string
		typ     string
		ts      time.Time
		data    string
		want    string
		wantErr bool
	}{
		{"spec example, compacted, UTC", "contact.created", ts, "{\n  \"id\": \"1f81eb52\" }",
			`{"type":"contact.created","timestamp":"2022-11-03T20:26:10.344522Z","data":{"id":"1f81eb52"}}`, false},
		{"whole seconds", "a.b", time.Unix(1700000000, 0), `[1, 2]`,
			`{"type":"a.b","timestamp":"2023-11-14T22:13:20Z","data":[1,2]}`, false},
		{"no HTML escaping", "x<y>&z", time.Unix(0, 0), `"<a href='&'>"`,
			`{"type":"x<y>&z","timestamp":"1970-01-01T00:00:00Z","data":"<a href='&'>"}`, false},
		{"nil data is null", "t", time.Unix(0, 1e6), ``,
			`{"type":"t","timestamp":"1970-01-01T00:00:00.001Z","data":null}`, false},
		{"invalid data", "t", ts, `{"a":`, "", true},
		{"empty type", "", ts, `{}`, "", true},
		{"zero timestamp", "t", time.Time{}, `{}`, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := webhook.Body(tt.typ, tt.ts, json.RawMessage(tt.data))
			if tt.wantErr {
				if err == nil {
					t.Fatalf("Body = %s, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("Body =\n %s\nwant\n %s", got, tt.want)
			}
			var v map[string]any
			if err := json.Unmarshal(got, &v); err != nil || len(v) != 3 {
				t.Errorf("Body is not a 3-member JSON object: %v %v", v, err)
			}
		})
	}
}
