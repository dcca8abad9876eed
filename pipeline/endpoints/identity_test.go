package endpoints

import (
	"strings"
	"testing"
)

// TestMismatch is the identity rule a pending delivery is checked against
// before every attempt (issue 8, item 4), one row per way an endpoint can
// change under it.
func TestMismatch(t *testing.T) {
	base := Endpoint{ID: "x", URL: "https://a.example/", Incarnation: "inc-1", TenantID: "acme", EventTypes: []string{"c33.*"},
		Secrets: []Secret{{Value: secretA}}, RatePerSec: 10, MaxInFlight: 4}
	with := func(f func(e *Endpoint)) *Endpoint { e := base.Clone(); f(e); return e }
	for _, c := range []struct {
		name        string
		ep          *Endpoint
		incarnation string
		typ, tenant string
		want        string
	}{
		{"unchanged", &base, "inc-1", "c33.paid", "acme", ""},
		{"URL, secret, rate and timeout changes keep the identity", with(func(e *Endpoint) {
			e.URL, e.Secrets, e.RatePerSec, e.Timeout = "https://b.example/", []Secret{{Value: secretB}}, 99, 1
		}), "inc-1", "c33.paid", "acme", ""},
		{"deleted", nil, "inc-1", "c33.paid", "acme", ReasonEndpointDeleted},
		{"re-created through the Store", with(func(e *Endpoint) { e.Incarnation = "inc-2" }), "inc-1", "c33.paid", "acme", ReasonEndpointRecreated},
		{"updated in place by another producer (no incarnation): identity unknown, same tenant and filter", with(func(e *Endpoint) {
			e.Incarnation, e.URL = "", "https://b.example/"
		}), "inc-1", "c33.paid", "acme", ""},
		{"an endpoint without incarnation stays itself", with(func(e *Endpoint) { e.Incarnation = "" }), "", "c33.paid", "acme", ""},
		{"delivery from before incarnations, endpoint re-created since", with(func(e *Endpoint) { e.Incarnation = "inc-2" }), "", "c33.paid", "acme", ""},
		{"re-created without incarnation, other filter", with(func(e *Endpoint) { e.Incarnation, e.EventTypes = "", []string{"c33.other"} }), "inc-1", "c33.paid", "acme", ReasonSubscriptionChanged},
		{"tenant changed in place (no incarnation)", with(func(e *Endpoint) { e.Incarnation, e.TenantID = "", "globex" }), "", "c33.paid", "acme", ReasonTenantMismatch},
		{"tenant changed, incarnation kept", with(func(e *Endpoint) { e.TenantID = "globex" }), "inc-1", "c33.paid", "acme", ReasonTenantMismatch},
		{"tenant added to an endpoint of tenantless events", with(func(e *Endpoint) { e.TenantID = "acme" }), "inc-1", "c33.paid", "", ReasonTenantMismatch},
		{"tenant removed: a tenant's event never goes to a tenantless endpoint", with(func(e *Endpoint) { e.TenantID = "" }), "inc-1", "c33.paid", "acme", ReasonTenantMismatch},
		{"filter changed", with(func(e *Endpoint) { e.EventTypes = []string{"c33.other"} }), "inc-1", "c33.paid", "acme", ReasonSubscriptionChanged},
		{"filter widened", with(func(e *Endpoint) { e.EventTypes = []string{"*"} }), "inc-1", "c33.paid", "acme", ""},
		{"re-created without incarnation, other tenant", with(func(e *Endpoint) { e.Incarnation, e.TenantID = "", "globex" }), "inc-1", "c33.paid", "acme", ReasonTenantMismatch},
	} {
		if got := c.ep.Mismatch(c.incarnation, c.typ, c.tenant); got != c.want {
			t.Errorf("%s: Mismatch = %q, want %q", c.name, got, c.want)
		}
	}
}

// TestStoreIncarnation: a created endpoint gets an incarnation, updates keep
// it (whatever the caller passes), a delete and re-create gets a new one.
func TestStoreIncarnation(t *testing.T) {
	e, _ := newKfakeEnv(t, 1)
	v, s, _ := e.start(t)
	ctx := ctxT(t)
	waitReady(t, v)
	created, err := s.Create(ctx, Endpoint{ID: "x", URL: "https://a.example/", Secrets: []Secret{{Value: secretA}}, EventTypes: []string{"*"}, TenantID: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if len(created.Incarnation) != 32 {
		t.Fatalf("created incarnation %q, want 32 hex characters", created.Incarnation)
	}
	upd := created.Clone()
	upd.URL, upd.Incarnation = "https://b.example/", "forged"
	updated, err := s.Put(ctx, *upd)
	if err != nil {
		t.Fatal(err)
	}
	if updated.Incarnation != created.Incarnation {
		t.Errorf("update changed the incarnation %q to %q", created.Incarnation, updated.Incarnation)
	}
	disabled, err := s.Disable(ctx, "x", "")
	if err != nil || disabled.Incarnation != created.Incarnation {
		t.Errorf("Disable: incarnation %q, %v; want %q", disabled.Incarnation, err, created.Incarnation)
	}
	if err := s.Delete(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	again, err := s.Create(ctx, Endpoint{ID: "x", URL: "https://c.example/", Secrets: []Secret{{Value: secretB}}, EventTypes: []string{"*"}, TenantID: "acme", Incarnation: created.Incarnation})
	if err != nil {
		t.Fatal(err)
	}
	if again.Incarnation == created.Incarnation || len(again.Incarnation) != 32 {
		t.Errorf("re-created incarnation %q, want a new one (was %q)", again.Incarnation, created.Incarnation)
	}
}

// TestMaskedHidesCredentials: get and list output never shows a URL's
// password or a short (invalid) secret whole.
func TestMaskedHidesCredentials(t *testing.T) {
	e := Endpoint{ID: "x", URL: "http://user:pass@h.example/in", Secrets: []Secret{{Value: "whsec_abc!"}, {Value: secretA}}}
	m := e.Masked()
	if strings.Contains(m.URL, "pass") {
		t.Errorf("masked URL %q shows the password", m.URL)
	}
	if m.Secrets[0].Value != "…" {
		t.Errorf("masked short secret %q, want …", m.Secrets[0].Value)
	}
	if m.Secrets[1].Value != "whsec_MfKQ…" {
		t.Errorf("masked secret %q, want whsec_MfKQ…", m.Secrets[1].Value)
	}
}
