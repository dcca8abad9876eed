package endpoints

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

// TestValidateUndialableHosts: a URL host that the Go resolver can never
// dial (an IP literal in a spelling it treats as a name, or a host that
// cannot be a name) is refused with a url field error that says why
// (issue 8, item 10).
func TestValidateUndialableHosts(t *testing.T) {
	for _, host := range []string{
		"2130706433", "0x7f000001", "017700000001", "0177.0.0.1", "0x7f.1", "0X7F.0.0.1", "127.1", "127.0.1",
		"127.0.0.1.", "2130706433.", "127.000.000.001", "8.8.8.08", "0x08.8.8.8", "134744072",
		"1.2.3.4.5", "256.0.0.1", "08.0.0.1", "0x100000000", "1.0x", "4294967296", "1.2.3.0x", "x0x7f.1",
		"１２７.０.０.１", "127。0。0。1",
	} {
		e := validEndpoint()
		e.URL = "http://" + host + ":8080/hook"
		e.SetDefaults()
		err := e.Validate()
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "url" {
			t.Errorf("%s: Validate = %v, want a url field error", e.URL, err)
			continue
		}
		if !strings.Contains(err.Error(), "host") {
			t.Errorf("%s: error %q does not say what is wrong with the host", e.URL, err)
		}
	}
	for _, host := range []string{"hooks.example", "127.0.0.1", "8.8.8.8", "[::1]", "[::ffff:127.0.0.1]", "1.2.3.example", "0x7f.example", "123abc", "a.123b"} {
		e := validEndpoint()
		e.URL = "http://" + host + ":8080/hook"
		e.SetDefaults()
		if err := e.Validate(); err != nil {
			t.Errorf("%s: Validate = %v, want valid (the SSRF ranges are checked with the allow-list)", e.URL, err)
		}
	}
}

// TestValidateAddress: an IP literal URL host, in any spelling, inside a
// refused range is refused unless the allow-list allows it, with a url field
// error that names the address and why (issue 8, item 10).
func TestValidateAddress(t *testing.T) {
	lo := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	tests := []struct {
		url    string
		allow  []netip.Prefix
		reason string // "" = accepted
	}{
		{"https://hooks.example/in", nil, ""},
		{"https://localhost/in", nil, ""}, // names are checked when dialled
		{"http://8.8.8.8/", nil, ""},
		{"http://[2606:4700::1111]/", nil, ""},
		{"http://127.0.0.1:8080/", nil, "loopback"},
		{"http://127.0.0.1:8080/", lo, ""},
		{"http://[::ffff:127.0.0.1]:8080/", nil, "loopback"},
		{"http://[::ffff:127.0.0.1]:8080/", lo, ""},
		{"http://[::ffff:7f00:1]/", nil, "loopback"},
		{"http://[::1]/", nil, "loopback"},
		{"http://[::1]/", lo, "loopback"},
		{"http://[::127.0.0.1]/", nil, "ipv4-compatible"},
		{"http://[64:ff9b::7f00:1]/", nil, "loopback"},
		{"http://[64:ff9b::a9fe:a9fe]/", nil, "link-local"},
		{"http://[fe80::1%25eth0]/", nil, "link-local"},
		{"http://2130706433/", nil, "loopback"},
		{"http://0x7f.1/", nil, "loopback"},
		{"http://0177.0.0.1/", nil, "loopback"},
		{"http://127.1/", nil, "loopback"},
		{"http://127.0.0.1./", nil, "loopback"},
		{"http://169.254.169.254/latest/meta-data", nil, "link-local"},
		{"http://0xa9fea9fe/", nil, "link-local"},
		{"http://10.0.0.1/", nil, "private"},
		{"http://192.168.1.1/", nil, "private"},
		{"http://[fd00::1]/", nil, "private"},
		{"http://0.0.0.0/", nil, "unspecified"},
		{"http://100.64.0.1/", nil, "cgnat"},
	}
	for _, tt := range tests {
		e := validEndpoint()
		e.URL = tt.url
		err := e.ValidateAddress(tt.allow)
		if tt.reason == "" {
			if err != nil {
				t.Errorf("%s allow %v: %v, want accepted", tt.url, tt.allow, err)
			}
			continue
		}
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "url" || !strings.Contains(fe.Reason, tt.reason) || !strings.Contains(fe.Reason, "SSRF") {
			t.Errorf("%s allow %v: %v, want a url field error naming %q", tt.url, tt.allow, err, tt.reason)
		}
	}
}

// TestValidateUnusableRecords: the records issue 8 item 8 names, as another
// producer could write them, are refused with the field named, and
// FieldErrors lists every problem.
func TestValidateUnusableRecords(t *testing.T) {
	for _, tt := range []struct {
		json, field string
	}{
		{`{"id":"x","url":"https://hooks.example/","secrets":[{"value":"whsec_abc!"}],"event_types":["*"]}`, "secrets[0].value"},
		{`{"id":"x","url":"https://hooks.example/","secrets":[{"value":"whsec_AAECAwQFBgcICQoLDA0ODw=="}],"event_types":["*"]}`, "secrets[0].value"},
		{`{"id":"x","url":"https://user:pass@hooks.example/","secrets":[{"value":"` + secretA + `"}],"event_types":["*"]}`, "url"},
		{`{"id":"x","url":"http://2130706433/","secrets":[{"value":"` + secretA + `"}],"event_types":["*"]}`, "url"},
		{`{"id":"x","url":"gopher://hooks.example/","secrets":[{"value":"` + secretA + `"}],"event_types":["*"]}`, "url"},
		{`{"id":"x","url":"https://hooks.example/","secrets":[],"event_types":["*"]}`, "secrets"},
	} {
		var e Endpoint
		if err := json.Unmarshal([]byte(tt.json), &e); err != nil {
			t.Fatal(err)
		}
		e.SetDefaults()
		fes := FieldErrors(e.Validate())
		if len(fes) != 1 || fes[0].Field != tt.field || fes[0].Reason == "" {
			t.Errorf("%s: FieldErrors = %v, want one for %s", tt.json, fes, tt.field)
		}
		for _, fe := range fes {
			if strings.Contains(fe.Error(), "pass@") || strings.Contains(fe.Error(), "abc!") {
				t.Errorf("%s: error repeats the bad value: %v", tt.json, fe)
			}
		}
	}
	e := Endpoint{URL: "ftp://x", RatePerSec: -1}
	e.SetDefaults()
	fes := FieldErrors(fmt.Errorf("wrapped: %w", e.Validate()))
	var fields []string
	for _, fe := range fes {
		fields = append(fields, fe.Field)
	}
	if got := strings.Join(fields, ","); got != "id,url,secrets,event_types,rate_per_sec" {
		t.Errorf("FieldErrors fields = %s", got)
	}
	if FieldErrors(nil) != nil || FieldErrors(errors.New("x")) != nil {
		t.Error("FieldErrors of an error without field errors is not nil")
	}
}

// TestStoreChecksAddresses: with CheckAddresses, Create and a URL change are
// refused for a refused literal; a write that keeps the URL is not.
func TestStoreChecksAddresses(t *testing.T) {
	env, _ := newKfakeEnv(t, 1)
	v, plain, _ := env.start(t)
	ctx := context.Background()
	strict := NewStore(v, CheckAddresses(nil))
	ep := validEndpoint()
	ep.URL = "http://2130706433/in"
	var fe *FieldError
	if _, err := strict.Create(ctx, ep); !errors.As(err, &fe) || fe.Field != "url" || !strings.Contains(fe.Reason, "loopback") {
		t.Fatalf("Create %s: %v, want a url field error", ep.URL, err)
	}
	ep.URL = "http://[::ffff:127.0.0.1]:8080/in"
	if _, err := strict.Create(ctx, ep); !errors.As(err, &fe) || fe.Field != "url" {
		t.Fatalf("Create %s: %v, want a url field error", ep.URL, err)
	}
	if _, err := NewStore(v, CheckAddresses([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")})).Create(ctx, ep); err != nil {
		t.Fatalf("Create %s with 127.0.0.0/8 allowed: %v", ep.URL, err)
	}
	if _, err := strict.Disable(ctx, ep.ID, "pause"); err != nil {
		t.Errorf("Disable keeps the URL, want accepted: %v", err)
	}
	cur, _ := plain.Get(ctx, ep.ID)
	next := *cur.Clone()
	next.URL = "http://10.1.2.3/in"
	if _, err := strict.Put(ctx, next); !errors.As(err, &fe) || fe.Field != "url" || !strings.Contains(fe.Reason, "private") {
		t.Errorf("Put with a private URL: %v, want a url field error", err)
	}
	next.URL = "https://hooks.example/in"
	if _, err := strict.Put(ctx, next); err != nil {
		t.Errorf("Put with a public name: %v", err)
	}
}
