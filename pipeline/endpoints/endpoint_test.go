package endpoints

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

const (
	secretA = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"             // 24 bytes
	secretB = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oDK0BOPc0Rv08=" // 32 bytes
)

func validEndpoint() Endpoint {
	return Endpoint{
		ID:         "acme-billing",
		URL:        "https://hooks.acme.example/billing?src=hookrelay",
		Secrets:    []Secret{{Value: secretA}},
		EventTypes: []string{"invoice.*"},
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(*Endpoint)
		field string // "" = valid
	}{
		{"defaults are valid", func(*Endpoint) {}, ""},
		{"http with port and IPv6 literal", func(e *Endpoint) { e.URL = "http://[2001:db8::1]:8080/hook" }, ""},
		{"tenant, two secrets, every type", func(e *Endpoint) {
			exp := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
			e.TenantID, e.Secrets, e.EventTypes = "tenant:42", []Secret{{Value: secretA}, {Value: secretB, ExpiresAt: &exp}}, []string{"*"}
		}, ""},
		{"64-byte secret", func(e *Endpoint) { e.Secrets = []Secret{{Value: "whsec_" + strings.Repeat("AAAA", 21) + "AA=="}} }, ""},
		{"empty id", func(e *Endpoint) { e.ID = "" }, "id"},
		{"id with slash", func(e *Endpoint) { e.ID = "a/b" }, "id"},
		{"id too long", func(e *Endpoint) { e.ID = strings.Repeat("a", 129) }, "id"},
		{"no url", func(e *Endpoint) { e.URL = "" }, "url"},
		{"ftp url", func(e *Endpoint) { e.URL = "ftp://example.com/x" }, "url"},
		{"javascript url", func(e *Endpoint) { e.URL = "javascript:alert(1)" }, "url"},
		{"credentials in url", func(e *Endpoint) { e.URL = "https://user:pw@example.com/x" }, "url"},
		{"user only in url", func(e *Endpoint) { e.URL = "https://user@example.com/x" }, "url"},
		{"no host", func(e *Endpoint) { e.URL = "https:///path" }, "url"},
		{"relative url", func(e *Endpoint) { e.URL = "/hooks" }, "url"},
		{"bad port", func(e *Endpoint) { e.URL = "https://example.com:99999/" }, "url"},
		{"empty port", func(e *Endpoint) { e.URL = "https://example.com:/" }, "url"},
		{"space in url", func(e *Endpoint) { e.URL = "https://example.com/a b" }, "url"},
		{"fragment", func(e *Endpoint) { e.URL = "https://example.com/#frag" }, "url"},
		{"no secrets", func(e *Endpoint) { e.Secrets = nil }, "secrets"},
		{"secret without prefix", func(e *Endpoint) { e.Secrets = []Secret{{Value: "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}} }, "secrets[0].value"},
		{"secret not base64", func(e *Endpoint) { e.Secrets = []Secret{{Value: "whsec_not*base64"}} }, "secrets[0].value"},
		{"secret without padding", func(e *Endpoint) { e.Secrets = []Secret{{Value: "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oDK0BOPc0Rv08"}} }, "secrets[0].value"},
		{"secret too short", func(e *Endpoint) { e.Secrets = []Secret{{Value: "whsec_" + "c2hvcnQ="}} }, "secrets[0].value"},
		{"secret too long", func(e *Endpoint) { e.Secrets = []Secret{{Value: "whsec_" + strings.Repeat("AAAA", 22)}} }, "secrets[0].value"},
		{"duplicate secret", func(e *Endpoint) { e.Secrets = []Secret{{Value: secretA}, {Value: secretA}} }, "secrets[1].value"},
		{"eleven secrets", func(e *Endpoint) {
			e.Secrets = nil
			for range 11 {
				e.Secrets = append(e.Secrets, Secret{Value: NewSecret()})
			}
		}, "secrets"},
		{"no event types", func(e *Endpoint) { e.EventTypes = nil }, "event_types"},
		{"empty pattern", func(e *Endpoint) { e.EventTypes = []string{"a", ""} }, "event_types[1]"},
		{"inner wildcard", func(e *Endpoint) { e.EventTypes = []string{"invoice.*.paid"} }, "event_types[0]"},
		{"leading wildcard", func(e *Endpoint) { e.EventTypes = []string{"*.paid"} }, "event_types[0]"},
		{"double wildcard", func(e *Endpoint) { e.EventTypes = []string{"**"} }, "event_types[0]"},
		{"space in pattern", func(e *Endpoint) { e.EventTypes = []string{"invoice paid"} }, "event_types[0]"},
		{"tenant with space", func(e *Endpoint) { e.TenantID = "a b" }, "tenantid"},
		{"negative rate", func(e *Endpoint) { e.RatePerSec = -1 }, "rate_per_sec"},
		{"NaN rate", func(e *Endpoint) { e.RatePerSec = math.NaN() }, "rate_per_sec"},
		{"infinite rate", func(e *Endpoint) { e.RatePerSec = math.Inf(1) }, "rate_per_sec"},
		{"max in flight 0 after defaults", func(e *Endpoint) { e.MaxInFlight = -1 }, "max_in_flight"},
		{"max in flight 1001", func(e *Endpoint) { e.MaxInFlight = 1001 }, "max_in_flight"},
		{"timeout too long", func(e *Endpoint) { e.Timeout = 2 * time.Minute }, "timeout"},
		{"negative timeout", func(e *Endpoint) { e.Timeout = -time.Second }, "timeout"},
		{"connect longer than timeout", func(e *Endpoint) { e.Timeout, e.ConnectTimeout = 2*time.Second, 3*time.Second }, "connect_timeout"},
		{"unknown status", func(e *Endpoint) { e.Status = "paused" }, "status"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := validEndpoint()
			tt.edit(&e)
			e.SetDefaults()
			err := e.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Validate = %v, want a *FieldError for %s", err, tt.field)
			}
			if fe.Field != tt.field {
				t.Errorf("field = %q (%v), want %q", fe.Field, err, tt.field)
			}
			if strings.Contains(err.Error(), strings.TrimPrefix(secretA, SecretPrefix)) {
				t.Errorf("error repeats a secret: %v", err)
			}
		})
	}
}

func TestValidateReportsEveryField(t *testing.T) {
	e := Endpoint{URL: "ftp://x", RatePerSec: -1}
	e.SetDefaults()
	err := e.Validate()
	for _, f := range []string{"id:", "url:", "secrets:", "event_types:", "rate_per_sec:"} {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error %q does not name %s", err, f)
		}
	}
}

func TestSetDefaults(t *testing.T) {
	e := validEndpoint()
	e.SetDefaults()
	if e.RatePerSec != 10 || e.MaxInFlight != 4 || e.Timeout != 10*time.Second || e.ConnectTimeout != 3*time.Second || e.Status != Active {
		t.Errorf("defaults = %v %v %v %v %v", e.RatePerSec, e.MaxInFlight, e.Timeout, e.ConnectTimeout, e.Status)
	}
	short := validEndpoint()
	short.Timeout = 2 * time.Second
	short.SetDefaults()
	if short.ConnectTimeout != 2*time.Second {
		t.Errorf("connect timeout with a 2s timeout = %v, want 2s", short.ConnectTimeout)
	}
}

func TestJSON(t *testing.T) {
	exp := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	e := validEndpoint()
	e.Secrets = append(e.Secrets, Secret{Value: secretB, ExpiresAt: &exp})
	e.TenantID = "acme"
	e.Timeout, e.ConnectTimeout = 1500*time.Millisecond, time.Second
	e.Version = 7
	e.PipelineStatus = &Status{State: Disabled}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"timeout":"1.5s"`, `"connect_timeout":"1s"`, `"tenantid":"acme"`, `"event_types":["invoice.*"]`, `"expires_at":"2026-07-01T00:00:00Z"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON %s lacks %s", b, want)
		}
	}
	for _, absent := range []string{"Version", "version", "PipelineStatus", "pipeline"} {
		if strings.Contains(string(b), absent) {
			t.Errorf("JSON %s contains %s", b, absent)
		}
	}
	var back Endpoint
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Timeout != e.Timeout || back.ConnectTimeout != e.ConnectTimeout || back.TenantID != "acme" ||
		len(back.Secrets) != 2 || !back.Secrets[1].ExpiresAt.Equal(exp) || back.Version != 0 || back.PipelineStatus != nil {
		t.Errorf("round trip = %+v", back)
	}

	var minimal Endpoint
	if err := json.Unmarshal([]byte(`{"id":"x","url":"https://a.example","secrets":[{"value":"`+secretA+`"}],"event_types":["*"],"future_field":{"a":1}}`), &minimal); err != nil {
		t.Fatalf("minimal record with an unknown member: %v", err)
	}
	minimal.SetDefaults()
	if err := minimal.Validate(); err != nil {
		t.Errorf("minimal record: %v", err)
	}
	var bad Endpoint
	err = json.Unmarshal([]byte(`{"id":"x","timeout":"10 seconds"}`), &bad)
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "timeout" {
		t.Errorf("bad duration: %v", err)
	}
}

func TestMatches(t *testing.T) {
	tests := []struct {
		patterns   []string
		epTenant   string
		eventType  string
		evTenant   string
		wantResult bool
	}{
		{[]string{"invoice.paid"}, "", "invoice.paid", "", true},
		{[]string{"invoice.paid"}, "", "invoice.paid.v2", "", false},
		{[]string{"invoice.*"}, "", "invoice.paid", "", true},
		{[]string{"invoice.*"}, "", "invoice.paid.v2", "", true},
		{[]string{"invoice.*"}, "", "invoice.", "", false},
		{[]string{"invoice.*"}, "", "invoice", "", false},
		{[]string{"invoice.*"}, "", "invoices.paid", "", false},
		{[]string{"invoice*"}, "", "invoices.paid", "", true},
		{[]string{"*"}, "", "anything", "", true},
		{[]string{"customer.created", "invoice.*"}, "", "customer.created", "", true},
		{nil, "", "invoice.paid", "", false},
		{[]string{"*"}, "acme", "invoice.paid", "acme", true},
		{[]string{"*"}, "acme", "invoice.paid", "", false}, // event without tenant: only endpoints without one
		{[]string{"*"}, "", "invoice.paid", "acme", false}, // event with tenant: only that tenant's endpoints
		{[]string{"*"}, "acme", "invoice.paid", "globex", false},
		{[]string{"Invoice.Paid"}, "", "invoice.paid", "", false}, // types are case-sensitive
	}
	for _, tt := range tests {
		e := Endpoint{EventTypes: tt.patterns, TenantID: tt.epTenant}
		if got := e.Matches(tt.eventType, tt.evTenant); got != tt.wantResult {
			t.Errorf("%v tenant %q: Matches(%q, %q) = %v, want %v", tt.patterns, tt.epTenant, tt.eventType, tt.evTenant, got, tt.wantResult)
		}
	}
}

func TestEffectiveStatus(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name       string
		status     State
		reason     string
		version    int64
		pipeline   *Status
		wantState  State
		wantReason string
	}{
		{"active, no status record", Active, "", 5, nil, Active, ""},
		{"operator disabled", Disabled, "customer request", 5, nil, Disabled, "customer request"},
		{"operator disabled without reason", Disabled, "", 5, nil, Disabled, ReasonOperator},
		{"pipeline disabled this version", Active, "", 5, &Status{State: Disabled, Reason: ReasonGone, At: at, ConfigVersion: 5}, Disabled, ReasonGone},
		{"pipeline status of a newer version read first", Active, "", 5, &Status{State: Disabled, Reason: ReasonGone, At: at, ConfigVersion: 9}, Disabled, ReasonGone},
		{"operator wrote after the pipeline's verdict", Active, "", 12, &Status{State: Disabled, Reason: ReasonGone, At: at, ConfigVersion: 5}, Active, ""},
		{"pipeline active record", Active, "", 5, &Status{State: Active, At: at, ConfigVersion: 5}, Active, ""},
		{"operator disabled beats pipeline", Disabled, "billing", 5, &Status{State: Disabled, Reason: ReasonGone, At: at, ConfigVersion: 5}, Disabled, "billing"},
	}
	for _, tt := range tests {
		e := Endpoint{Status: tt.status, DisabledReason: tt.reason, Version: tt.version, PipelineStatus: tt.pipeline}
		st, reason := e.EffectiveStatus()
		if st != tt.wantState || reason != tt.wantReason || e.Active() != (tt.wantState == Active) {
			t.Errorf("%s: EffectiveStatus = %q, %q; want %q, %q", tt.name, st, reason, tt.wantState, tt.wantReason)
		}
	}
}

func TestStatusValidate(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		st    Status
		field string
	}{
		{Status{State: Disabled, Reason: ReasonGone, At: at, ConfigVersion: 3}, ""},
		{Status{State: Active, At: at}, ""},
		{Status{State: "gone", At: at, ConfigVersion: 3}, "state"},
		{Status{State: Disabled, At: at}, "config_version"},
		{Status{State: Disabled, ConfigVersion: 3}, "at"},
		{Status{State: Disabled, At: at, ConfigVersion: 3, Reason: strings.Repeat("r", 65)}, "reason"},
	}
	for _, tt := range tests {
		err := tt.st.Validate()
		var fe *FieldError
		switch {
		case tt.field == "" && err != nil:
			t.Errorf("%+v: %v", tt.st, err)
		case tt.field != "" && (!errors.As(err, &fe) || fe.Field != tt.field):
			t.Errorf("%+v: error %v, want field %s", tt.st, err, tt.field)
		}
	}
}

func TestSecrets(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	past, future := now.Add(-time.Second), now.Add(time.Hour)
	e := Endpoint{Secrets: []Secret{{Value: secretA, ExpiresAt: &past}, {Value: secretB}, {Value: "whsec_x", ExpiresAt: &future}, {Value: "whsec_y", ExpiresAt: &now}}}
	got := e.ActiveSecrets(now)
	if len(got) != 2 || got[0].Value != secretB || got[1].Value != "whsec_x" {
		t.Errorf("ActiveSecrets = %+v", got)
	}

	s := NewSecret()
	if err := ParseSecret(s); err != nil || len(s) != len(SecretPrefix)+44 {
		t.Errorf("NewSecret %q: %v, want a 32-byte key", s, err)
	}
	if NewSecret() == s {
		t.Error("NewSecret repeated itself")
	}

	for in, want := range map[string]string{secretA: "whsec_MfKQ…", "whsec_ab": "…", "plain": "…", "": "…"} {
		if got := MaskSecret(in); got != want {
			t.Errorf("MaskSecret(%q) = %q, want %q", in, got, want)
		}
	}
	m := (&Endpoint{Secrets: []Secret{{Value: secretA}}}).Masked()
	if m.Secrets[0].Value != "whsec_MfKQ…" {
		t.Errorf("Masked = %q", m.Secrets[0].Value)
	}
	if err := m.Validate(); err == nil || !strings.Contains(err.Error(), "secrets[0].value") {
		t.Errorf("a masked endpoint validated: %v", err)
	}
}

func TestClone(t *testing.T) {
	exp := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	e := validEndpoint()
	e.Secrets[0].ExpiresAt = &exp
	e.PipelineStatus = &Status{State: Disabled}
	c := e.Clone()
	c.Secrets[0].Value = "changed"
	*c.Secrets[0].ExpiresAt = exp.Add(time.Hour)
	c.EventTypes[0] = "changed"
	c.PipelineStatus.State = Active
	if e.Secrets[0].Value != secretA || !e.Secrets[0].ExpiresAt.Equal(exp) || e.EventTypes[0] != "invoice.*" || e.PipelineStatus.State != Disabled {
		t.Errorf("Clone shares memory with the original: %+v", e)
	}
}
