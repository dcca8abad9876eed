package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/pipeline"
	"github.com/hookrelay/hookrelay/pipeline/api"
	"github.com/hookrelay/hookrelay/pipeline/api/apitest"
	"github.com/hookrelay/hookrelay/pipeline/delivery"
	"github.com/hookrelay/hookrelay/pipeline/endpoints"
	"github.com/hookrelay/hookrelay/pipeline/operational"
)

// env is an API server over kfake and the memory audit store.
type env struct {
	srv      *httptest.Server
	v        *apitest.Validator
	store    *endpoints.Store
	keys     *api.Keys
	attempts *audit.Memory
	admin    string
	seeds    []string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	seeds := apitest.FakeKafka(t, []string{"t.dlq", "t.deliveries", "t.operational"},
		[]string{"t.endpoints", "t.endpoint-status", "t.apikeys", "t.idempotency", "t.recoveries"})
	opts := []kgo.Opt{kgo.SeedBrokers(seeds...)}
	view, err := endpoints.NewView(endpoints.Config{Brokers: seeds, EndpointsTopic: "t.endpoints", StatusTopic: "t.endpoint-status"})
	if err != nil {
		t.Fatal(err)
	}
	keys := api.NewKeys("t.apikeys", opts, nil)
	idem := api.NewIdempotency("t.idempotency", opts, 0, nil)
	recs := api.NewRecoveries("t.recoveries", opts, nil)
	apitest.RunAll(t, view.Run, keys.Run, idem.Run, recs.Run)
	resender, err := api.NewResender(api.ResenderOptions{ClientOpts: opts, DLQ: "t.dlq", Deliveries: "t.deliveries"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(resender.Close)
	pcl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pcl.Close)
	ops, err := pipeline.NewOperatorEvents(pcl, pipeline.Topics{Operational: "t.operational"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{store: endpoints.NewStore(view), keys: keys, attempts: audit.NewMemory(), seeds: seeds}
	s, err := api.New(api.Options{Endpoints: e.store, Keys: keys, Attempts: e.attempts, Idempotency: idem, Resender: resender, Recoveries: recs,
		OperatorEvents: ops})
	if err != nil {
		t.Fatal(err)
	}
	e.srv = httptest.NewServer(s.Handler())
	t.Cleanup(e.srv.Close)
	e.v = apitest.New(t, nil)
	e.admin = e.newKey(t, true, "")
	return e
}

func (e *env) newKey(t *testing.T, admin bool, tenant string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, key, err := e.keys.Create(ctx, admin, tenant, "test")
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// call makes one validated request; hdr are extra header pairs.
func (e *env) call(t *testing.T, method, path, key, body string, hdr ...string) *apitest.Response {
	t.Helper()
	return e.do(t, false, method, path, key, body, hdr...)
}

// callInvalid makes a request that violates the document on purpose.
func (e *env) callInvalid(t *testing.T, method, path, key, body string, hdr ...string) *apitest.Response {
	t.Helper()
	return e.do(t, true, method, path, key, body, hdr...)
}

func (e *env) do(t *testing.T, invalid bool, method, path, key, body string, hdr ...string) *apitest.Response {
	t.Helper()
	req := apitest.NewRequest(t, method, e.srv.URL+path, key, body)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return e.v.Do(t, req, invalid)
}

func want(t *testing.T, r *apitest.Response, status int) {
	t.Helper()
	if r.StatusCode != status {
		t.Fatalf("%s %s: status %d, want %d: %s", r.Request.Method, r.Request.URL.Path, r.StatusCode, status, r.Body)
	}
}

func decodeBody[T any](t *testing.T, r *apitest.Response) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.Body, &v); err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
	return v
}

type endpointJSON struct {
	ID           string   `json:"id"`
	URL          string   `json:"url"`
	TenantID     string   `json:"tenantid"`
	EventTypes   []string `json:"event_types"`
	Status       string   `json:"status"`
	StatusReason string   `json:"status_reason"`
	Version      int64    `json:"version"`
	RatePerSec   float64  `json:"rate_per_sec"`
	Secrets      []struct {
		Masked    string     `json:"masked"`
		ExpiresAt *time.Time `json:"expires_at"`
	} `json:"secrets"`
}

type createdJSON struct {
	Endpoint endpointJSON `json:"endpoint"`
	Secret   string       `json:"secret"`
}

type problemJSON struct {
	Type   string `json:"type"`
	Status int    `json:"status"`
	Errors []struct {
		Field  string `json:"field"`
		Reason string `json:"reason"`
	} `json:"errors"`
}

func (e *env) create(t *testing.T, key, body string) endpointJSON {
	t.Helper()
	r := e.call(t, "POST", "/v1/endpoints", key, body)
	want(t, r, http.StatusCreated)
	c := decodeBody[createdJSON](t, r)
	if !strings.HasPrefix(c.Secret, "whsec_") {
		t.Fatalf("created without a generated secret: %s", r.Body)
	}
	return c.Endpoint
}

func TestOpenAPIDocumentIsValid31(t *testing.T) {
	doc, err := apitest.LoadDocument(context.Background())
	if err != nil {
		t.Fatalf("the document fails kin-openapi's validation: %v", err)
	}
	if !doc.IsOpenAPI31OrLater() || doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi = %q, want 3.1.0", doc.OpenAPI)
	}
	// A 3.1-only form is used (type arrays), so the document is not a 3.0
	// document labelled 3.1.
	if !strings.Contains(string(api.OpenAPI), `"null"`) {
		t.Fatal("no type array with null: the document uses no OpenAPI 3.1 form")
	}
	e := newEnv(t)
	r := e.call(t, "GET", "/v1/openapi.json", "", "")
	want(t, r, http.StatusOK)
	if string(r.Body) != string(api.OpenAPI) {
		t.Fatal("GET /v1/openapi.json does not serve the embedded document")
	}
}

func TestAuth(t *testing.T) {
	e := newEnv(t)
	want(t, e.call(t, "GET", "/v1/endpoints", "", ""), http.StatusUnauthorized)
	want(t, e.call(t, "GET", "/v1/endpoints", "hrk_0123456789abcdef_nope", ""), http.StatusUnauthorized)
	key := e.newKey(t, false, "acme")
	// A key with the right ID but a wrong secret part.
	forged := key[:len(key)-4] + "AAAA"
	if forged == key {
		forged = key[:len(key)-4] + "BBBB"
	}
	want(t, e.call(t, "GET", "/v1/endpoints", forged, ""), http.StatusUnauthorized)
	want(t, e.call(t, "GET", "/v1/endpoints", key, ""), http.StatusOK)
	ks, err := e.keys.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range ks {
		if k.Tenant == "acme" {
			if strings.Contains(k.Hash, key) || len(k.Hash) != 64 {
				t.Fatalf("stored key record %+v is not a SHA-256 hash", k)
			}
			if err := e.keys.Revoke(context.Background(), k.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	want(t, e.call(t, "GET", "/v1/endpoints", key, ""), http.StatusUnauthorized)
}

func TestTenantIsolation(t *testing.T) {
	e := newEnv(t)
	a, b := e.newKey(t, false, "acme"), e.newKey(t, false, "globex")
	epA := e.create(t, a, `{"url":"https://a.example/hook","event_types":["invoice.*"]}`)
	epB := e.create(t, b, `{"url":"https://b.example/hook"}`)
	if epA.TenantID != "acme" || epB.TenantID != "globex" {
		t.Fatalf("tenant keys created endpoints of tenants %q and %q", epA.TenantID, epB.TenantID)
	}
	list := decodeBody[struct{ Data []endpointJSON }](t, e.call(t, "GET", "/v1/endpoints", a, ""))
	if len(list.Data) != 1 || list.Data[0].ID != epA.ID {
		t.Fatalf("tenant acme lists %+v, want only %s", list.Data, epA.ID)
	}
	all := decodeBody[struct{ Data []endpointJSON }](t, e.call(t, "GET", "/v1/endpoints", e.admin, ""))
	if len(all.Data) != 2 {
		t.Fatalf("admin lists %d endpoints, want 2", len(all.Data))
	}
	e.attempts.Insert(context.Background(), []audit.Attempt{{AttemptID: "x1", EndpointID: epB.ID, Tenant: "globex", WebhookID: "msg_1", Outcome: audit.Delivered, AttemptedAt: time.Now()}})
	p := "/v1/endpoints/" + epB.ID
	for _, c := range []struct{ method, path, body string }{
		{"GET", p, ""}, {"PATCH", p, `{"url":"https://evil.example/"}`}, {"DELETE", p, ""},
		{"POST", p + "/enable", ""}, {"POST", p + "/disable", ""}, {"POST", p + "/secret/rotate", ""},
		{"GET", p + "/health", ""}, {"GET", p + "/attempts", ""}, {"GET", p + "/messages/msg_1", ""},
	} {
		r := e.call(t, c.method, c.path, a, c.body)
		want(t, r, http.StatusNotFound)
		missing := e.call(t, c.method, strings.Replace(c.path, epB.ID, "ep_nosuch", 1), a, c.body)
		if pb, pm := decodeBody[problemJSON](t, r), decodeBody[problemJSON](t, missing); pb.Type != pm.Type || pb.Status != pm.Status {
			t.Errorf("%s %s: another tenant's endpoint answers %+v, a missing one %+v", c.method, c.path, pb, pm)
		}
	}
	got := decodeBody[endpointJSON](t, e.call(t, "GET", p, b, ""))
	if got.URL != "https://b.example/hook" || got.Status != "active" {
		t.Fatalf("the other tenant's endpoint changed: %+v", got)
	}
	// A tenant key can neither choose an ID nor set another tenant.
	r := e.call(t, "POST", "/v1/endpoints", a, `{"url":"https://a.example/2","tenantid":"globex"}`)
	want(t, r, http.StatusBadRequest)
	if pr := decodeBody[problemJSON](t, r); len(pr.Errors) != 1 || pr.Errors[0].Field != "tenantid" {
		t.Fatalf("problem %s does not name tenantid", r.Body)
	}
	want(t, e.call(t, "POST", "/v1/endpoints", a, `{"id":"`+epB.ID+`","url":"https://a.example/2"}`), http.StatusBadRequest)
	want(t, e.call(t, "PATCH", "/v1/endpoints/"+epA.ID, a, `{"tenantid":"globex"}`), http.StatusBadRequest)
}

func TestValidationProblems(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct {
		body, field string
		docInvalid  bool
	}{
		{`{"url":"ftp://x.example/"}`, "url", false},
		{`{"url":"https://x.example/","event_types":["in voice"]}`, "event_types[0]", false},
		{`{"url":"https://x.example/","rate_per_sec":-1}`, "rate_per_sec", true},
		{`{"url":"https://x.example/","timeout":"soon"}`, "timeout", true},
		{`{"url":"https://x.example/","colour":"red"}`, "colour", true},
		{`{"url":"https://x.example/","max_in_flight":"4"}`, "max_in_flight", true},
		{`{"event_types":["*"]}`, "url", true},
	} {
		r := e.do(t, c.docInvalid, "POST", "/v1/endpoints", e.admin, c.body)
		want(t, r, http.StatusBadRequest)
		pr := decodeBody[problemJSON](t, r)
		if pr.Type != "/problems/validation" || !slices.ContainsFunc(pr.Errors, func(f struct {
			Field  string `json:"field"`
			Reason string `json:"reason"`
		}) bool {
			return f.Field == c.field
		}) {
			t.Errorf("body %s: problem %s does not name field %q", c.body, r.Body, c.field)
		}
	}
	want(t, e.callInvalid(t, "POST", "/v1/endpoints", e.admin, `{"url":`), http.StatusBadRequest)
}

func TestIfMatch(t *testing.T) {
	e := newEnv(t)
	ep := e.create(t, e.admin, `{"id":"acme","url":"https://a.example/hook"}`)
	p := "/v1/endpoints/acme"
	r := e.call(t, "GET", p, e.admin, "")
	tag := r.Header.Get("ETag")
	if tag != fmt.Sprintf(`"%d"`, ep.Version) {
		t.Fatalf("ETag %q, version %d", tag, ep.Version)
	}
	r = e.call(t, "PATCH", p, e.admin, `{"rate_per_sec":20}`, "If-Match", tag)
	want(t, r, http.StatusOK)
	if got := decodeBody[endpointJSON](t, r); got.RatePerSec != 20 || r.Header.Get("ETag") == tag {
		t.Fatalf("PATCH gave %+v with ETag %s", got, r.Header.Get("ETag"))
	}
	want(t, e.call(t, "PATCH", p, e.admin, `{"rate_per_sec":30}`, "If-Match", tag), http.StatusPreconditionFailed)
	want(t, e.call(t, "DELETE", p, e.admin, "", "If-Match", tag), http.StatusPreconditionFailed)
	want(t, e.call(t, "PATCH", p, e.admin, `{"rate_per_sec":30}`, "If-Match", "12"), http.StatusBadRequest)
	if got := decodeBody[endpointJSON](t, e.call(t, "GET", p, e.admin, "")); got.RatePerSec != 20 {
		t.Fatalf("a refused PATCH changed the endpoint: %+v", got)
	}
	want(t, e.call(t, "DELETE", p, e.admin, "", "If-Match", e.call(t, "GET", p, e.admin, "").Header.Get("ETag")), http.StatusNoContent)
	want(t, e.call(t, "GET", p, e.admin, ""), http.StatusNotFound)
}

func TestPatchKeepsPipelineDisable(t *testing.T) {
	e := newEnv(t)
	ep := e.create(t, e.admin, `{"id":"gone","url":"https://a.example/hook"}`)
	ctx := context.Background()
	if err := e.store.SetStatus(ctx, "gone", endpoints.Status{State: endpoints.Disabled, Reason: endpoints.ReasonGone, At: time.Now(), ConfigVersion: ep.Version}); err != nil {
		t.Fatal(err)
	}
	r := e.call(t, "PATCH", "/v1/endpoints/gone", e.admin, `{"url":"https://a.example/new"}`)
	want(t, r, http.StatusOK)
	if got := decodeBody[endpointJSON](t, r); got.Status != "disabled" || got.StatusReason != endpoints.ReasonGone {
		t.Fatalf("PATCH re-enabled a pipeline-disabled endpoint: %+v", got)
	}
	r = e.call(t, "POST", "/v1/endpoints/gone/enable", e.admin, "")
	if got := decodeBody[endpointJSON](t, r); got.Status != "active" {
		t.Fatalf("enable left %+v", got)
	}
	r = e.call(t, "POST", "/v1/endpoints/gone/disable", e.admin, `{"reason":"customer request"}`)
	if got := decodeBody[endpointJSON](t, r); got.Status != "disabled" || got.StatusReason != "customer request" {
		t.Fatalf("disable left %+v", got)
	}
}

func TestIdempotencyKey(t *testing.T) {
	e := newEnv(t)
	body := `{"url":"https://a.example/hook"}`
	r1 := e.call(t, "POST", "/v1/endpoints", e.admin, body, "Idempotency-Key", "k1")
	want(t, r1, http.StatusCreated)
	r2 := e.call(t, "POST", "/v1/endpoints", e.admin, body, "Idempotency-Key", "k1")
	want(t, r2, http.StatusCreated)
	if string(r1.Body) != string(r2.Body) || r2.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("repeat answered %s, first %s", r2.Body, r1.Body)
	}
	list := decodeBody[struct{ Data []endpointJSON }](t, e.call(t, "GET", "/v1/endpoints", e.admin, ""))
	if len(list.Data) != 1 {
		t.Fatalf("%d endpoints after a repeated create, want 1", len(list.Data))
	}
	want(t, e.call(t, "POST", "/v1/endpoints", e.admin, `{"url":"https://b.example/hook"}`, "Idempotency-Key", "k1"), http.StatusUnprocessableEntity)
	// Keys are per principal: a tenant's k1 is another key.
	tk := e.newKey(t, false, "acme")
	want(t, e.call(t, "POST", "/v1/endpoints", tk, body, "Idempotency-Key", "k1"), http.StatusCreated)
	// Rotation is idempotent too: one new secret for two calls.
	ep := decodeBody[createdJSON](t, r1).Endpoint
	p := "/v1/endpoints/" + ep.ID + "/secret/rotate"
	s1 := e.call(t, "POST", p, e.admin, `{"overlap":"1h"}`, "Idempotency-Key", "rot-1")
	s2 := e.call(t, "POST", p, e.admin, `{"overlap":"1h"}`, "Idempotency-Key", "rot-1")
	want(t, s1, http.StatusOK)
	if string(s1.Body) != string(s2.Body) {
		t.Fatal("a repeated rotation answered differently")
	}
	if got := decodeBody[endpointJSON](t, e.call(t, "GET", "/v1/endpoints/"+ep.ID, e.admin, "")); len(got.Secrets) != 2 {
		t.Fatalf("%d secrets after one rotation repeated, want 2", len(got.Secrets))
	}
}

func TestRotateSecret(t *testing.T) {
	e := newEnv(t)
	e.create(t, e.admin, `{"id":"r","url":"https://a.example/hook"}`)
	before := time.Now()
	r := e.call(t, "POST", "/v1/endpoints/r/secret/rotate", e.admin, "")
	want(t, r, http.StatusOK)
	got := decodeBody[struct {
		Endpoint endpointJSON `json:"endpoint"`
		Secret   string       `json:"secret"`
	}](t, r)
	if len(got.Endpoint.Secrets) != 2 || got.Endpoint.Secrets[1].ExpiresAt != nil || got.Endpoint.Secrets[0].ExpiresAt == nil {
		t.Fatalf("after rotation: %+v", got.Endpoint.Secrets)
	}
	if exp := *got.Endpoint.Secrets[0].ExpiresAt; exp.Before(before.Add(24*time.Hour-time.Second)) || exp.After(time.Now().Add(24*time.Hour)) {
		t.Fatalf("old secret expires at %s, want 24 h from now", exp)
	}
	if strings.Contains(string(e.call(t, "GET", "/v1/endpoints/r", e.admin, "").Body), got.Secret) {
		t.Fatal("GET shows the new secret unmasked")
	}
	want(t, e.callInvalid(t, "POST", "/v1/endpoints/r/secret/rotate", e.admin, `{"overlap":"-1h"}`), http.StatusBadRequest)
}

func TestAttemptsMessagesHealth(t *testing.T) {
	e := newEnv(t)
	tk := e.newKey(t, false, "acme")
	ep := e.create(t, tk, `{"url":"https://a.example/hook"}`)
	now := time.Now().UTC().Truncate(time.Millisecond)
	var rows []audit.Attempt
	for i := range 25 {
		a := audit.Attempt{AttemptID: fmt.Sprintf("a%02d", i), DeliveryID: fmt.Sprintf("d%d", i/2), EventID: fmt.Sprintf("e%d", i/2),
			WebhookID: fmt.Sprintf("msg_%d", i/2), EventType: []string{"invoice.paid", "invoice.sent"}[i%2], EndpointID: ep.ID, Tenant: "acme",
			AttemptNumber: 1 + i%2, AttemptedAt: now.Add(-time.Duration(25-i)*3*time.Minute + 30*time.Second), Outcome: audit.Delivered, HTTPStatus: 200}
		if i%2 == 0 {
			a.Outcome, a.HTTPStatus, a.NextAttemptAt = audit.RetryScheduled, 503, a.AttemptedAt.Add(time.Minute)
		}
		rows = append(rows, a)
	}
	if err := e.attempts.Insert(context.Background(), rows); err != nil {
		t.Fatal(err)
	}
	p := "/v1/endpoints/" + ep.ID
	type page struct {
		Data []struct {
			AttemptID string    `json:"attempt_id"`
			Outcome   string    `json:"outcome"`
			At        time.Time `json:"attempted_at"`
		}
		NextCursor *string `json:"next_cursor"`
	}
	var ids []string
	q := p + "/attempts?limit=10"
	for range 5 {
		pg := decodeBody[page](t, e.call(t, "GET", q, tk, ""))
		for _, a := range pg.Data {
			ids = append(ids, a.AttemptID)
		}
		if pg.NextCursor == nil {
			break
		}
		q = p + "/attempts?limit=10&cursor=" + url.QueryEscape(*pg.NextCursor)
	}
	if len(ids) != 25 || ids[0] != "a24" || ids[24] != "a00" {
		t.Fatalf("paged attempts %v, want a24 … a00", ids)
	}
	f := decodeBody[page](t, e.call(t, "GET", p+"/attempts?outcome=retry_scheduled&event_type=invoice.paid&since="+url.QueryEscape(now.Add(-30*time.Minute).Format(time.RFC3339Nano)), tk, ""))
	for _, a := range f.Data {
		if a.Outcome != "retry_scheduled" || a.At.Before(now.Add(-30*time.Minute)) {
			t.Errorf("filter let through %+v", a)
		}
	}
	if len(f.Data) != 5 {
		t.Errorf("filtered %d attempts, want 5", len(f.Data))
	}
	want(t, e.callInvalid(t, "GET", p+"/attempts?outcome=lost", tk, ""), http.StatusBadRequest)
	want(t, e.call(t, "GET", p+"/attempts?cursor=zz", tk, ""), http.StatusBadRequest)

	m := decodeBody[struct {
		Attempts []struct {
			AttemptID string `json:"attempt_id"`
		} `json:"attempts"`
	}](t, e.call(t, "GET", p+"/messages/msg_3", tk, ""))
	if len(m.Attempts) != 2 || m.Attempts[0].AttemptID != "a07" || m.Attempts[1].AttemptID != "a06" {
		t.Fatalf("message msg_3: %+v", m.Attempts)
	}
	want(t, e.call(t, "GET", p+"/messages/msg_none", tk, ""), http.StatusNotFound)

	h := decodeBody[struct {
		Status        string     `json:"status"`
		LastSuccessAt *time.Time `json:"last_success_at"`
		LastHour      struct {
			Attempts, Delivered, Failed int64
			SuccessRate                 *float64 `json:"success_rate"`
		} `json:"last_hour"`
		LastDay struct{ Attempts int64 } `json:"last_day"`
	}](t, e.call(t, "GET", p+"/health", tk, ""))
	// Attempts i = 5 … 24 are within the hour (3 minutes apart, the oldest 74.5 minutes ago).
	if h.Status != "active" || h.LastSuccessAt == nil || !h.LastSuccessAt.Equal(rows[23].AttemptedAt) ||
		h.LastHour.Attempts != 20 || h.LastHour.Delivered != 10 || h.LastHour.Failed != 10 ||
		h.LastHour.SuccessRate == nil || *h.LastHour.SuccessRate != 0.5 || h.LastDay.Attempts != 25 {
		t.Fatalf("health %+v", h)
	}
}

func TestResendFromDLQ(t *testing.T) {
	e := newEnv(t)
	tk, other := e.newKey(t, false, "acme"), e.newKey(t, false, "globex")
	ep := e.create(t, tk, `{"url":"https://a.example/hook"}`)
	cur, err := e.store.Get(context.Background(), ep.ID)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	old := time.Now().Add(-72 * time.Hour).UTC()
	m := delivery.Meta{DeliveryID: "dlv-1", WebhookID: "msg_1", EndpointID: ep.ID, Incarnation: "old", EventID: "e1", EventType: "invoice.paid",
		Tenant: "acme", EventTime: old, Attempt: 11, FirstAttemptAt: old, LastError: "http_503", Reason: "exhausted",
		History: []delivery.AttemptSummary{{Number: 10, At: old, Outcome: "exhausted"}}}
	body := []byte(`{"type":"invoice.paid","data":{"n":1}}`)
	// Another message and another endpoint's record around it.
	m2 := m
	m2.WebhookID = "msg_2"
	for _, r := range []*kgo.Record{
		{Topic: "t.dlq", Key: []byte(ep.ID), Value: []byte(`{}`), Headers: m2.Headers()},
		{Topic: "t.dlq", Key: []byte(ep.ID), Value: body, Headers: m.Headers()},
		{Topic: "t.dlq", Key: []byte("other"), Value: []byte(`{}`), Headers: m.Headers()},
	} {
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	e.attempts.Insert(ctx, []audit.Attempt{{AttemptID: "x1", EndpointID: ep.ID, Tenant: "acme", WebhookID: "msg_1", Outcome: audit.Exhausted, AttemptedAt: time.Now().Add(-time.Hour)},
		{AttemptID: "x2", EndpointID: ep.ID, Tenant: "acme", WebhookID: "msg_ok", Outcome: audit.Delivered, AttemptedAt: time.Now().Add(-time.Hour)}})
	p := "/v1/endpoints/" + ep.ID + "/messages/"
	want(t, e.call(t, "POST", p+"msg_1/resend", other, ""), http.StatusNotFound)
	want(t, e.call(t, "POST", p+"msg_none/resend", tk, ""), http.StatusNotFound)
	want(t, e.call(t, "POST", p+"msg_ok/resend", tk, ""), http.StatusConflict)
	r1 := e.call(t, "POST", p+"msg_1/resend", tk, "", "Idempotency-Key", "rs-1")
	want(t, r1, http.StatusAccepted)
	r2 := e.call(t, "POST", p+"msg_1/resend", tk, "", "Idempotency-Key", "rs-1")
	if string(r1.Body) != string(r2.Body) {
		t.Fatalf("repeat answered %s, first %s", r2.Body, r1.Body)
	}
	res := decodeBody[struct {
		ResendID string `json:"resend_id"`
	}](t, r1)

	// Exactly one record on deliveries: the same body and webhook-id, a fresh attempt count.
	rd, err := kgo.NewClient(kgo.SeedBrokers(e.seeds...), kgo.ConsumeTopics("t.deliveries"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var got []*kgo.Record
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		rd.PollFetches(pctx).EachRecord(func(r *kgo.Record) { got = append(got, r) })
		cancel()
		if len(got) > 1 {
			break
		}
	}
	if len(got) != 1 {
		t.Fatalf("%d records on deliveries, want 1 (the repeat must send nothing)", len(got))
	}
	gm, err := delivery.ParseMeta(got[0].Headers)
	if err != nil {
		t.Fatal(err)
	}
	var marker string
	for _, h := range got[0].Headers {
		if h.Key == api.HeaderResend {
			marker = string(h.Value)
		}
	}
	if string(got[0].Value) != string(body) || string(got[0].Key) != ep.ID || gm.WebhookID != "msg_1" || gm.Attempt != 1 ||
		len(gm.History) != 0 || gm.Reason != "" || !gm.FirstAttemptAt.IsZero() || gm.EventTime.Before(time.Now().Add(-time.Minute)) ||
		gm.Incarnation != cur.Incarnation || gm.DeliveryID != res.ResendID || marker != res.ResendID {
		t.Fatalf("resent record: key %s, value %s, meta %+v, marker %q", got[0].Key, got[0].Value, gm, marker)
	}
}

func TestDLQListAndReplay(t *testing.T) {
	e := newEnv(t)
	acme, globex := e.newKey(t, false, "acme"), e.newKey(t, false, "globex")
	epA := e.create(t, acme, `{"url":"https://a.example/hook"}`)
	epB := e.create(t, globex, `{"url":"https://b.example/hook"}`)
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	put := func(ep, tenant, msg, reason string) {
		m := delivery.Meta{DeliveryID: "d-" + msg, WebhookID: msg, EndpointID: ep, Tenant: tenant, EventType: "invoice.paid", Reason: reason}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t.dlq", Key: []byte(ep), Value: []byte(`{"m":"` + msg + `"}`), Headers: m.Headers()}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	put(epA.ID, "acme", "msg_a1", "exhausted")
	put(epA.ID, "acme", "msg_a2", "skipped")
	put(epA.ID, "acme", "msg_a1", "failed") // the same message again: replayed once
	put(epB.ID, "globex", "msg_b1", "abandoned")
	type list struct {
		Data []struct {
			EndpointID string `json:"endpoint_id"`
			WebhookID  string `json:"webhook_id"`
			Reason     string `json:"reason"`
		} `json:"data"`
		Truncated bool `json:"truncated"`
	}
	la := decodeBody[list](t, e.call(t, "GET", "/v1/dlq", acme, ""))
	if len(la.Data) != 3 || slices.ContainsFunc(la.Data, func(d struct {
		EndpointID string `json:"endpoint_id"`
		WebhookID  string `json:"webhook_id"`
		Reason     string `json:"reason"`
	}) bool {
		return d.EndpointID != epA.ID
	}) {
		t.Fatalf("acme's DLQ: %+v", la.Data)
	}
	if all := decodeBody[list](t, e.call(t, "GET", "/v1/dlq?limit=2", e.admin, "")); len(all.Data) != 2 || !all.Truncated {
		t.Fatalf("admin, limit 2: %+v", all)
	}
	want(t, e.call(t, "GET", "/v1/dlq?endpoint_id="+epB.ID, acme, ""), http.StatusNotFound)
	since := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	want(t, e.call(t, "POST", "/v1/dlq/replay", acme, `{"endpoint_id":"`+epB.ID+`","since":"`+since+`"}`), http.StatusNotFound)
	r := e.call(t, "POST", "/v1/dlq/replay", acme, `{"endpoint_id":"`+epA.ID+`","since":"`+since+`"}`, "Idempotency-Key", "rp-1")
	want(t, r, http.StatusAccepted)
	if got := decodeBody[struct{ Replayed int }](t, r); got.Replayed != 2 {
		t.Fatalf("replayed %d, want 2 (msg_a1 once, msg_a2): %s", got.Replayed, r.Body)
	}
	want(t, e.call(t, "POST", "/v1/dlq/replay", acme, `{"endpoint_id":"`+epA.ID+`","since":"`+since+`"}`, "Idempotency-Key", "rp-1"), http.StatusAccepted)
	rd, err := kgo.NewClient(kgo.SeedBrokers(e.seeds...), kgo.ConsumeTopics("t.deliveries"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	got := map[string]string{}
	n := 0
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && n < 3 {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		rd.PollFetches(pctx).EachRecord(func(r *kgo.Record) {
			m, _ := delivery.ParseMeta(r.Headers)
			got[m.WebhookID] = string(r.Value)
			n++
		})
		cancel()
	}
	if n != 2 || got["msg_a1"] != `{"m":"msg_a1"}` || got["msg_a2"] != `{"m":"msg_a2"}` {
		t.Fatalf("deliveries got %d records %v, want msg_a1 and msg_a2 once", n, got)
	}
	want(t, e.callInvalid(t, "POST", "/v1/dlq/replay", acme, `{"endpoint_id":"`+epA.ID+`"}`), http.StatusBadRequest)
}

func TestRecover(t *testing.T) {
	e := newEnv(t)
	acme, globex := e.newKey(t, false, "acme"), e.newKey(t, false, "globex")
	ep := e.create(t, acme, `{"url":"https://a.example/hook"}`)
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	for _, c := range []struct{ msg, reason string }{{"msg_1", "exhausted"}, {"msg_2", "skipped"}, {"msg_3", "failed"}, {"msg_4", "exhausted"}, {"msg_5", "abandoned"}} {
		m := delivery.Meta{DeliveryID: "d-" + c.msg, WebhookID: c.msg, EndpointID: ep.ID, Tenant: "acme", EventType: "invoice.paid", Reason: c.reason}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t.dlq", Key: []byte(ep.ID), Value: []byte(c.msg), Headers: m.Headers()}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// msg_4 was delivered since (an earlier resend): not recovered again.
	e.attempts.Insert(ctx, []audit.Attempt{{AttemptID: "x4", EndpointID: ep.ID, Tenant: "acme", WebhookID: "msg_4", Outcome: audit.Delivered, AttemptedAt: time.Now()}})
	since := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	p := "/v1/endpoints/" + ep.ID + "/recover"
	want(t, e.call(t, "POST", p, globex, `{"since":"`+since+`"}`), http.StatusNotFound)
	r1 := e.call(t, "POST", p, acme, `{"since":"`+since+`"}`, "Idempotency-Key", "rec-1")
	want(t, r1, http.StatusAccepted)
	r2 := e.call(t, "POST", p, acme, `{"since":"`+since+`"}`, "Idempotency-Key", "rec-1")
	if string(r1.Body) != string(r2.Body) {
		t.Fatalf("repeat answered %s, first %s", r2.Body, r1.Body)
	}
	res := decodeBody[struct {
		ID     string `json:"id"`
		Found  int    `json:"found"`
		Queued int    `json:"queued"`
	}](t, r1)
	if res.Found != 3 || res.Queued != 3 {
		t.Fatalf("recover: %s, want msg_1, msg_2 and msg_5", r1.Body)
	}
	// F7: a since older than the events topic's retention is refused,
	// naming since, before anything is read.
	old := time.Now().Add(-api.MaxRecoverRange - time.Hour).UTC().Format(time.RFC3339)
	tooOld := e.call(t, "POST", p, acme, `{"since":"`+old+`"}`)
	want(t, tooOld, http.StatusBadRequest)
	if pr := decodeBody[api.Problem](t, tooOld); len(pr.Errors) != 1 || pr.Errors[0].Field != "since" {
		t.Fatalf("recover with since %s: %s, want a problem naming since", old, tooOld.Body)
	}
	withFailed := decodeBody[struct{ Found int }](t, e.call(t, "POST", p, acme, `{"since":"`+since+`","include_failed":true}`))
	if withFailed.Found != 4 {
		t.Fatalf("recover with include_failed found %d, want 4", withFailed.Found)
	}
	rd, err := kgo.NewClient(kgo.SeedBrokers(e.seeds...), kgo.ConsumeTopics("t.deliveries"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	n := 0
	var first delivery.Meta
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && n <= 7 {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		rd.PollFetches(pctx).EachRecord(func(r *kgo.Record) {
			if n == 0 {
				first, _ = delivery.ParseMeta(r.Headers)
			}
			n++
		})
		cancel()
	}
	if n != 7 {
		t.Fatalf("%d records on deliveries, want 3 + 4 (the repeated request sends nothing)", n)
	}
	e.attempts.Insert(ctx, []audit.Attempt{{AttemptID: "y1", EndpointID: ep.ID, Tenant: "acme", DeliveryID: first.DeliveryID, WebhookID: first.WebhookID, Outcome: audit.Delivered, AttemptedAt: time.Now()}})
	want(t, e.call(t, "GET", "/v1/recoveries/"+res.ID, globex, ""), http.StatusNotFound)
	got := decodeBody[struct {
		Found, Queued, Delivered, Failed int
	}](t, e.call(t, "GET", "/v1/recoveries/"+res.ID, acme, ""))
	if got.Found != 3 || got.Queued != 3 || got.Delivered != 1 || got.Failed != 0 {
		t.Fatalf("recovery progress %+v", got)
	}
}

// TestLogIsTheCurrentTenants: an endpoint moved from one tenant to another
// (an admin's PATCH of tenantid, or an ID re-created for another tenant)
// shows, to every caller, only the attempts of its current tenant: the new
// tenant never reads the old one's delivery log.
func TestLogIsTheCurrentTenants(t *testing.T) {
	e := newEnv(t)
	acme, globex := e.newKey(t, false, "acme"), e.newKey(t, false, "globex")
	r := e.call(t, "POST", "/v1/endpoints", e.admin, `{"id":"ep-moved","url":"https://a.example/hook","tenantid":"acme"}`)
	want(t, r, http.StatusCreated)
	p := "/v1/endpoints/ep-moved"
	now := time.Now().UTC().Truncate(time.Millisecond)
	ctx := context.Background()
	if err := e.attempts.Insert(ctx, []audit.Attempt{
		{AttemptID: "acme-1", DeliveryID: "d1", EndpointID: "ep-moved", Tenant: "acme", WebhookID: "msg_acme", EventType: "invoice.paid",
			Outcome: audit.Delivered, AttemptedAt: now.Add(-2 * time.Minute), ResponseBody: "acme's secret"},
		// Refused by the dispatcher after the move: still acme's row.
		{AttemptID: "acme-2", DeliveryID: "d2", EndpointID: "ep-moved", Tenant: "acme", WebhookID: "msg_acme2",
			Outcome: audit.Abandoned, ErrorClass: "tenant_mismatch", AttemptedAt: now.Add(-time.Minute)},
	}); err != nil {
		t.Fatal(err)
	}
	type page struct {
		Data []struct {
			AttemptID string `json:"attempt_id"`
		} `json:"data"`
	}
	seen := func(key string) []string {
		var ids []string
		for _, a := range decodeBody[page](t, e.call(t, "GET", p+"/attempts", key, "")).Data {
			ids = append(ids, a.AttemptID)
		}
		return ids
	}
	if got := seen(acme); !slices.Equal(got, []string{"acme-2", "acme-1"}) {
		t.Fatalf("acme before the move sees %v", got)
	}
	want(t, e.call(t, "PATCH", p, e.admin, `{"tenantid":"globex"}`), http.StatusOK)
	if err := e.attempts.Insert(ctx, []audit.Attempt{{AttemptID: "globex-1", DeliveryID: "d3", EndpointID: "ep-moved", Tenant: "globex",
		WebhookID: "msg_globex", Outcome: audit.Delivered, AttemptedAt: now}}); err != nil {
		t.Fatal(err)
	}
	for who, key := range map[string]string{"globex": globex, "admin": e.admin} {
		if got := seen(key); !slices.Equal(got, []string{"globex-1"}) {
			t.Errorf("%s after the move sees %v, want only globex-1", who, got)
		}
		want(t, e.call(t, "GET", p+"/messages/msg_acme", key, ""), http.StatusNotFound)
		want(t, e.call(t, "GET", p+"/messages/msg_globex", key, ""), http.StatusOK)
		h := decodeBody[struct {
			LastAttemptAt *time.Time               `json:"last_attempt_at"`
			LastDay       struct{ Attempts int64 } `json:"last_day"`
		}](t, e.call(t, "GET", p+"/health", key, ""))
		if h.LastDay.Attempts != 1 || h.LastAttemptAt == nil || !h.LastAttemptAt.Equal(now) {
			t.Errorf("%s's health after the move counts %d attempts (last %v), want globex's 1", who, h.LastDay.Attempts, h.LastAttemptAt)
		}
	}
	want(t, e.call(t, "GET", p+"/attempts", acme, ""), http.StatusNotFound)
}

// TestDLQIsTheCurrentTenants: DLQ records made while an endpoint ID
// belonged to one tenant are never listed, resent, replayed or recovered
// for it once it belongs to another, whoever asks.
func TestDLQIsTheCurrentTenants(t *testing.T) {
	e := newEnv(t)
	globex := e.newKey(t, false, "globex")
	want(t, e.call(t, "POST", "/v1/endpoints", e.admin, `{"id":"ep-moved","url":"https://a.example/hook","tenantid":"acme"}`), http.StatusCreated)
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	put := func(tenant, msg string) {
		m := delivery.Meta{DeliveryID: "d-" + tenant + msg, WebhookID: msg, EndpointID: "ep-moved", Tenant: tenant, EventType: "invoice.paid", Reason: "exhausted"}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t.dlq", Key: []byte("ep-moved"), Value: []byte(tenant + "'s " + msg), Headers: m.Headers()}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	put("acme", "msg_1")
	put("acme", "msg_shared") // a message id both tenants have
	want(t, e.call(t, "PATCH", "/v1/endpoints/ep-moved", e.admin, `{"tenantid":"globex"}`), http.StatusOK)
	put("globex", "msg_2")
	now := time.Now().UTC()
	if err := e.attempts.Insert(ctx, []audit.Attempt{
		{AttemptID: "g1", EndpointID: "ep-moved", Tenant: "globex", WebhookID: "msg_shared", Outcome: audit.Exhausted, AttemptedAt: now.Add(-time.Minute)},
		{AttemptID: "g2", EndpointID: "ep-moved", Tenant: "globex", WebhookID: "msg_2", Outcome: audit.Exhausted, AttemptedAt: now.Add(-time.Minute)},
	}); err != nil {
		t.Fatal(err)
	}
	since := now.Add(-time.Hour).Format(time.RFC3339)
	for who, key := range map[string]string{"globex": globex, "admin": e.admin} {
		l := decodeBody[struct {
			Data []struct {
				WebhookID string `json:"webhook_id"`
			} `json:"data"`
		}](t, e.call(t, "GET", "/v1/dlq?endpoint_id=ep-moved&since="+url.QueryEscape(since), key, ""))
		if len(l.Data) != 1 || l.Data[0].WebhookID != "msg_2" {
			t.Errorf("%s lists the DLQ of ep-moved as %+v, want only globex's msg_2", who, l.Data)
		}
		// globex's msg_shared has no DLQ record of globex: acme's is not it.
		if r := e.call(t, "POST", "/v1/endpoints/ep-moved/messages/msg_shared/resend", key, ""); r.StatusCode != http.StatusConflict {
			t.Errorf("%s's resend of msg_shared: status %d, want 409 (no DLQ record of globex): %s", who, r.StatusCode, r.Body)
		}
		rp := e.call(t, "POST", "/v1/dlq/replay", key, `{"endpoint_id":"ep-moved","since":"`+since+`"}`)
		want(t, rp, http.StatusAccepted)
		if got := decodeBody[struct{ Replayed int }](t, rp); got.Replayed != 1 {
			t.Errorf("%s's replay resent %d messages, want 1 (globex's msg_2): %s", who, got.Replayed, rp.Body)
		}
		rc := e.call(t, "POST", "/v1/endpoints/ep-moved/recover", key, `{"since":"`+since+`"}`)
		want(t, rc, http.StatusAccepted)
		if got := decodeBody[struct{ Found int }](t, rc); got.Found != 1 {
			t.Errorf("%s's recovery found %d messages, want 1 (globex's msg_2): %s", who, got.Found, rc.Body)
		}
	}
	// Nothing of acme's reached the deliveries topic.
	rd, err := kgo.NewClient(kgo.SeedBrokers(e.seeds...), kgo.ConsumeTopics("t.deliveries"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	n := 0
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && n < 4 {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		rd.PollFetches(pctx).EachRecord(func(r *kgo.Record) {
			n++
			if m, _ := delivery.ParseMeta(r.Headers); m.Tenant != "globex" || !strings.HasPrefix(string(r.Value), "globex's") {
				t.Errorf("resent %q of tenant %q to globex's endpoint", r.Value, m.Tenant)
			}
		})
		cancel()
	}
	if n != 4 {
		t.Errorf("%d records on deliveries, want 4 (globex's msg_2, replayed and recovered by each caller)", n)
	}
}

// TestOperatorEvents: enable, disable and secret rotation through the API
// publish the operational events the CLI publishes (on <prefix>operational,
// the endpoint's tenant, only on a real transition).
func TestOperatorEvents(t *testing.T) {
	e := newEnv(t)
	acme := e.newKey(t, false, "acme")
	ep := e.create(t, acme, `{"url":"https://a.example/hook"}`)
	p := "/v1/endpoints/" + ep.ID
	want(t, e.call(t, "POST", p+"/enable", acme, ""), http.StatusOK) // already active: no event
	want(t, e.call(t, "POST", p+"/disable", acme, `{"reason":"maintenance"}`), http.StatusOK)
	want(t, e.call(t, "POST", p+"/disable", acme, ""), http.StatusOK) // already disabled: no event
	want(t, e.call(t, "POST", p+"/enable", acme, ""), http.StatusOK)
	want(t, e.call(t, "POST", p+"/secret/rotate", acme, `{"overlap":"1h"}`), http.StatusOK)
	rd, err := kgo.NewClient(kgo.SeedBrokers(e.seeds...), kgo.ConsumeTopics("t.operational"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	type event struct {
		Type     string `json:"type"`
		TenantID string `json:"tenantid"`
		Subject  string `json:"subject"`
		Data     operational.Data
	}
	var got []event
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && len(got) < 4 {
		pctx, cancel := context.WithTimeout(context.Background(), time.Second)
		rd.PollFetches(pctx).EachRecord(func(r *kgo.Record) {
			var ev event
			if err := json.Unmarshal(r.Value, &ev); err != nil || string(r.Key) != ep.ID {
				t.Errorf("record key %s value %s: %v", r.Key, r.Value, err)
			}
			got = append(got, ev)
		})
		cancel()
	}
	types := make([]string, len(got))
	for i, ev := range got {
		types[i] = ev.Type
		if ev.TenantID != "acme" || ev.Data.EndpointID != ep.ID {
			t.Errorf("event %+v: want tenant acme, endpoint %s", ev, ep.ID)
		}
	}
	wantTypes := []string{operational.TypeEndpointDisabled, operational.TypeEndpointEnabled, operational.TypeEndpointSecretRotated}
	if !slices.Equal(types, wantTypes) {
		t.Fatalf("operational events %v, want %v", types, wantTypes)
	}
	if x := got[2].Data.OldSecretsExpireAt; x == nil || x.Before(time.Now().Add(50*time.Minute)) || x.After(time.Now().Add(time.Hour)) {
		t.Errorf("secret_rotated old_secrets_expire_at %v, want in about 1 h", x)
	}
}

// Issue 12's console needs: GET /v1/me, the webhook_id filter, the request
// and response detail of an attempt, and the health of every endpoint in
// the list.
func TestConsoleNeeds(t *testing.T) {
	e := newEnv(t)
	tk := e.newKey(t, false, "acme")
	ak := e.newKey(t, true, "")
	type me struct {
		KeyID  string  `json:"key_id"`
		Role   string  `json:"role"`
		Tenant *string `json:"tenantid"`
	}
	if m := decodeBody[me](t, e.call(t, "GET", "/v1/me", tk, "")); m.Role != "tenant" || m.Tenant == nil || *m.Tenant != "acme" ||
		m.KeyID == "" || !strings.Contains(tk, m.KeyID) {
		t.Fatalf("tenant key: /v1/me %+v", m)
	}
	if m := decodeBody[me](t, e.call(t, "GET", "/v1/me", ak, "")); m.Role != "admin" || m.Tenant != nil {
		t.Fatalf("admin key: /v1/me %+v", m)
	}
	want(t, e.call(t, "GET", "/v1/me", "", ""), http.StatusUnauthorized)

	ep := e.create(t, tk, `{"url":"https://a.example/hook"}`)
	now := time.Now().UTC().Truncate(time.Millisecond)
	var rows []audit.Attempt
	for i := range 4 {
		rows = append(rows, audit.Attempt{AttemptID: fmt.Sprintf("a%d", i), DeliveryID: "d", EventID: fmt.Sprintf("e%d", i),
			WebhookID: fmt.Sprintf("msg_%d", i%2), EventType: "invoice.paid", EndpointID: ep.ID, Tenant: "acme", AttemptNumber: 1,
			AttemptedAt: now.Add(-time.Duration(i) * time.Second), Outcome: audit.Delivered, HTTPStatus: 200,
			RequestHeaders:  audit.FormatHeaders(map[string][]string{"Webhook-Id": {fmt.Sprintf("msg_%d", i%2)}, "Content-Type": {"application/json"}}),
			BodyPreview:     `{"n":1}`,
			ResponseHeaders: audit.FormatHeaders(map[string][]string{"Set-Cookie": {"s=secret"}, "X-Served-By": {"r1"}})})
	}
	if err := e.attempts.Insert(context.Background(), rows); err != nil {
		t.Fatal(err)
	}
	type page struct {
		Data []struct {
			AttemptID       string              `json:"attempt_id"`
			WebhookID       string              `json:"webhook_id"`
			RequestHeaders  []audit.HeaderField `json:"request_headers"`
			BodyPreview     string              `json:"body_preview"`
			ResponseHeaders []audit.HeaderField `json:"response_headers"`
		}
	}
	pg := decodeBody[page](t, e.call(t, "GET", "/v1/endpoints/"+ep.ID+"/attempts?webhook_id=msg_1", tk, ""))
	if len(pg.Data) != 2 || pg.Data[0].AttemptID != "a1" || pg.Data[1].AttemptID != "a3" {
		t.Fatalf("webhook_id=msg_1: %+v", pg.Data)
	}
	a := pg.Data[0]
	if len(a.RequestHeaders) != 2 || a.RequestHeaders[1] != (audit.HeaderField{Name: "Webhook-Id", Value: "msg_1"}) ||
		a.BodyPreview != `{"n":1}` || len(a.ResponseHeaders) != 2 || a.ResponseHeaders[0] != (audit.HeaderField{Name: "Set-Cookie", Value: audit.Redacted}) {
		t.Fatalf("attempt detail %+v", a)
	}

	type list struct {
		Data []struct {
			ID     string `json:"id"`
			Health string `json:"health"`
		}
	}
	l := decodeBody[list](t, e.call(t, "GET", "/v1/endpoints", tk, ""))
	if len(l.Data) != 1 || l.Data[0].Health != "active" {
		t.Fatalf("list %+v", l.Data)
	}
	since := now.Add(-time.Minute)
	if err := e.store.SetStatus(context.Background(), ep.ID, endpoints.Status{State: endpoints.Active, At: now, FailingSince: &since}); err != nil {
		t.Fatal(err)
	}
	if l = decodeBody[list](t, e.call(t, "GET", "/v1/endpoints", tk, "")); len(l.Data) != 1 || l.Data[0].Health != "failing" {
		t.Fatalf("failing endpoint listed %+v", l.Data)
	}
	want(t, e.call(t, "POST", "/v1/endpoints/"+ep.ID+"/disable", tk, ""), http.StatusOK)
	if l = decodeBody[list](t, e.call(t, "GET", "/v1/endpoints", tk, "")); len(l.Data) != 1 || l.Data[0].Health != "disabled" {
		t.Fatalf("disabled endpoint listed %+v", l.Data)
	}
}
