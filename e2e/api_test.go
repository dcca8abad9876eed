package e2e

// The management API (pipeline/api) on the real stack: a `hookrelay run`
// with the api role, keys made with `hookrelay apikeys create`, deliveries
// read back from ClickHouse through the API. Every request and response is
// checked against the OpenAPI document (pipeline/api/apitest).

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/audit/chstore"
	"github.com/hookrelay/hookrelay/e2e/stack"
	"github.com/hookrelay/hookrelay/pipeline/api/apitest"
)

// apiClient calls one process's API as one key.
type apiClient struct {
	t    *testing.T
	base string
	key  string
	v    *apitest.Validator
}

func (c apiClient) as(key string) apiClient { c.key = key; return c }

// call makes one request (validated against the document) and returns the
// response; hdr are header pairs.
func (c apiClient) call(method, path, body string, hdr ...string) *apitest.Response {
	c.t.Helper()
	return c.send(false, method, path, body, hdr...)
}

func (c apiClient) send(invalid bool, method, path, body string, hdr ...string) *apitest.Response {
	c.t.Helper()
	req := apitest.NewRequest(c.t, method, c.base+path, c.key, body)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return c.v.Do(c.t, req, invalid)
}

func (c apiClient) want(r *apitest.Response, status int) map[string]any {
	c.t.Helper()
	if r.StatusCode != status {
		c.t.Fatalf("%s %s: %d, want %d: %s", r.Request.Method, r.Request.URL, r.StatusCode, status, r.Body)
	}
	var m map[string]any
	if len(r.Body) > 0 {
		if err := json.Unmarshal(r.Body, &m); err != nil {
			c.t.Fatalf("%s %s: body %s: %v", r.Request.Method, r.Request.URL, r.Body, err)
		}
	}
	return m
}

// apiKey creates a key with `hookrelay apikeys create` and returns it.
func (h *harness) apiKey(args ...string) string {
	h.t.Helper()
	out := h.cli(append([]string{"apikeys", "create"}, args...)...)
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "hrk_") {
			return line
		}
	}
	h.t.Fatalf("apikeys create printed no key: %q", out)
	return ""
}

// countingReceiver answers 200 to every request and counts them.
func countingReceiver(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { n.Add(1) }))
	t.Cleanup(srv.Close)
	return srv, &n
}

func TestAPITenantIsolation(t *testing.T) {
	h := newHarness(t, config{})
	admin, acme, globex := h.apiKey("--admin"), h.apiKey("--tenant", "acme"), h.apiKey("--tenant", "globex")
	p := h.start("api-1")
	c := apiClient{t: t, base: "http://" + p.apiAddr, v: apitest.New(t, nil)}
	recv, _ := countingReceiver(t)

	c.want(c.call("GET", "/v1/endpoints", ""), http.StatusUnauthorized)
	c.want(c.as("hrk_0000000000000000_x").call("GET", "/v1/endpoints", ""), http.StatusUnauthorized)

	epA := c.want(c.as(acme).call("POST", "/v1/endpoints", `{"url":"`+recv.URL+`/a","event_types":["invoice.*"]}`, "Idempotency-Key", "a-1"), http.StatusCreated)["endpoint"].(map[string]any)
	again := c.want(c.as(acme).call("POST", "/v1/endpoints", `{"url":"`+recv.URL+`/a","event_types":["invoice.*"]}`, "Idempotency-Key", "a-1"), http.StatusCreated)["endpoint"].(map[string]any)
	epB := c.want(c.as(globex).call("POST", "/v1/endpoints", `{"url":"`+recv.URL+`/b","event_types":["invoice.*"]}`), http.StatusCreated)["endpoint"].(map[string]any)
	idA, idB := epA["id"].(string), epB["id"].(string)
	if again["id"] != idA || epA["tenantid"] != "acme" || epB["tenantid"] != "globex" {
		t.Fatalf("creates: %v, repeat %v, %v", epA, again, epB)
	}

	// Deliveries for both tenants, then their attempts through the API.
	var evs []cloudEvent
	for i := range 3 {
		for _, tenant := range []string{"acme", "globex"} {
			evs = append(evs, cloudEvent{ID: fmt.Sprintf("%s-%d", tenant, i), Source: "/billing", Type: "invoice.paid", Tenant: tenant, Data: map[string]any{"n": i}})
		}
	}
	h.produce(h.events(evs)...)
	var msgB string
	for _, cc := range []struct{ key, id string }{{acme, idA}, {globex, idB}} {
		eventually(t, 60*time.Second, "3 attempts of "+cc.id+" in the API", func() (bool, string) {
			pg := c.want(c.as(cc.key).call("GET", "/v1/endpoints/"+cc.id+"/attempts?outcome=delivered", ""), http.StatusOK)
			data := pg["data"].([]any)
			if len(data) > 0 && cc.id == idB {
				msgB = data[0].(map[string]any)["webhook_id"].(string)
			}
			return len(data) == 3, fmt.Sprintf("%d attempts", len(data))
		})
	}
	for _, a := range c.want(c.as(acme).call("GET", "/v1/endpoints/"+idA+"/attempts", ""), http.StatusOK)["data"].([]any) {
		if id := a.(map[string]any)["event_id"].(string); !strings.HasPrefix(id, "acme-") {
			t.Errorf("acme's log holds event %s", id)
		}
	}
	c.want(c.as(globex).call("GET", "/v1/endpoints/"+idB+"/messages/"+msgB, ""), http.StatusOK)

	// acme can neither list, read, change nor resend globex's endpoint or its deliveries.
	list := c.want(c.as(acme).call("GET", "/v1/endpoints", ""), http.StatusOK)["data"].([]any)
	if len(list) != 1 || list[0].(map[string]any)["id"] != idA {
		t.Fatalf("acme lists %v", list)
	}
	if n := len(c.want(c.as(admin).call("GET", "/v1/endpoints", ""), http.StatusOK)["data"].([]any)); n != 2 {
		t.Fatalf("admin lists %d endpoints, want 2", n)
	}
	pb := "/v1/endpoints/" + idB
	for _, r := range []struct{ method, path, body string }{
		{"GET", pb, ""}, {"PATCH", pb, `{"url":"https://evil.example/"}`}, {"DELETE", pb, ""},
		{"POST", pb + "/disable", ""}, {"POST", pb + "/enable", ""}, {"POST", pb + "/secret/rotate", ""},
		{"GET", pb + "/attempts", ""}, {"GET", pb + "/health", ""}, {"GET", pb + "/messages/" + msgB, ""},
		{"POST", pb + "/messages/" + msgB + "/resend", ""},
	} {
		c.want(c.as(acme).call(r.method, r.path, r.body), http.StatusNotFound)
	}
	gotB := c.want(c.as(globex).call("GET", pb, ""), http.StatusOK)
	if gotB["url"] != recv.URL+"/b" || gotB["status"] != "active" || gotB["version"] != epB["version"] {
		t.Fatalf("globex's endpoint changed: %v", gotB)
	}
	health := c.want(c.as(globex).call("GET", pb+"/health", ""), http.StatusOK)
	if hour := health["last_hour"].(map[string]any); hour["delivered"].(float64) != 3 || health["last_success_at"] == nil {
		t.Errorf("health %v", health)
	}

	// A stale If-Match is 412; a bad body names the field.
	pa := "/v1/endpoints/" + idA
	tag := c.as(acme).call("GET", pa, "").Header.Get("ETag")
	c.want(c.as(acme).call("PATCH", pa, `{"rate_per_sec":50}`, "If-Match", tag), http.StatusOK)
	c.want(c.as(acme).call("PATCH", pa, `{"rate_per_sec":60}`, "If-Match", tag), http.StatusPreconditionFailed)
	c.want(c.as(acme).call("DELETE", pa, "", "If-Match", tag), http.StatusPreconditionFailed)
	bad := c.want(c.as(acme).call("PATCH", pa, `{"url":"http://user:pw@x.example/"}`), http.StatusBadRequest)
	errs, _ := bad["errors"].([]any)
	if len(errs) == 0 || errs[0].(map[string]any)["field"] != "url" {
		t.Fatalf("bad url: problem %v does not name url", bad)
	}
	bad = c.want(c.as(acme).send(true, "POST", "/v1/endpoints", `{"url":"`+recv.URL+`","max_in_flight":0}`), http.StatusBadRequest)
	if errs, _ := bad["errors"].([]any); len(errs) == 0 || errs[0].(map[string]any)["field"] != "max_in_flight" {
		t.Fatalf("bad max_in_flight: problem %v does not name it", bad)
	}
}

// TestAPIResendAndRecover: a message that failed (400, permanent: to the DLQ) is
// resent through the API and arrives again with its webhook-id; a repeat
// with the same Idempotency-Key sends nothing more.
func TestAPIResendAndRecover(t *testing.T) {
	h := newHarness(t, config{})
	key := h.apiKey("--tenant", "acme")
	p := h.start("api-resend")
	c := apiClient{t: t, base: "http://" + p.apiAddr, key: key, v: apitest.New(t, nil)}
	var mu sync.Mutex
	seen := map[string]int{} // webhook-id -> requests
	failFirst := true        // answer 400 to a message's first request (until the recovery part)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		id := r.Header.Get("webhook-id")
		seen[id]++
		if seen[id] == 1 && failFirst {
			w.WriteHeader(http.StatusBadRequest) // permanent: failed, to the DLQ
		}
	}))
	defer recv.Close()
	ep := c.want(c.call("POST", "/v1/endpoints", `{"url":"`+recv.URL+`"}`), http.StatusCreated)["endpoint"].(map[string]any)
	id := ep["id"].(string)
	h.produce(h.events([]cloudEvent{{ID: "r-1", Source: "/s", Type: "invoice.paid", Tenant: "acme", Data: map[string]any{}}})...)
	var msg string
	eventually(t, 60*time.Second, "the failed attempt in the API", func() (bool, string) {
		data := c.want(c.call("GET", "/v1/endpoints/"+id+"/attempts?outcome=failed", ""), http.StatusOK)["data"].([]any)
		if len(data) == 1 {
			msg = data[0].(map[string]any)["webhook_id"].(string)
		}
		return len(data) == 1, fmt.Sprintf("%d failed attempts", len(data))
	})
	var res map[string]any
	eventually(t, 30*time.Second, "the DLQ record to be resendable", func() (bool, string) {
		r := c.call("POST", "/v1/endpoints/"+id+"/messages/"+msg+"/resend", "", "Idempotency-Key", "resend-1")
		if r.StatusCode == http.StatusAccepted {
			res = c.want(r, http.StatusAccepted)
		}
		return r.StatusCode == http.StatusAccepted, string(r.Body)
	})
	c.want(c.call("POST", "/v1/endpoints/"+id+"/messages/"+msg+"/resend", "", "Idempotency-Key", "resend-1"), http.StatusAccepted)
	eventually(t, 60*time.Second, "the resent message delivered", func() (bool, string) {
		m := c.want(c.call("GET", "/v1/endpoints/"+id+"/messages/"+msg, ""), http.StatusOK)
		as := m["attempts"].([]any)
		ok := len(as) == 2 && as[0].(map[string]any)["outcome"] == "delivered" && as[0].(map[string]any)["delivery_id"] == res["resend_id"] &&
			as[0].(map[string]any)["attempt_number"].(float64) == 1
		return ok, fmt.Sprintf("%v", as)
	})

	// Recovery: events published while the endpoint is disabled are
	// skipped (a DLQ record each); after enable, recover since T sends each
	// once with its webhook-id, and the repeated request sends nothing.
	mu.Lock()
	failFirst = false
	mu.Unlock()
	since := time.Now().UTC()
	c.want(c.call("POST", "/v1/endpoints/"+id+"/disable", ""), http.StatusOK)
	h.produce(h.events([]cloudEvent{{ID: "r-2", Source: "/s", Type: "invoice.paid", Tenant: "acme", Data: map[string]any{}},
		{ID: "r-3", Source: "/s", Type: "invoice.paid", Tenant: "acme", Data: map[string]any{}}})...)
	eventually(t, 60*time.Second, "2 skipped attempts", func() (bool, string) {
		data := c.want(c.call("GET", "/v1/endpoints/"+id+"/attempts?outcome=skipped", ""), http.StatusOK)["data"].([]any)
		return len(data) == 2, fmt.Sprintf("%d skipped", len(data))
	})
	c.want(c.call("POST", "/v1/endpoints/"+id+"/enable", ""), http.StatusOK)
	eventually(t, 30*time.Second, "2 skipped records in the DLQ", func() (bool, string) {
		data := c.want(c.call("GET", "/v1/dlq?endpoint_id="+id+"&since="+url.QueryEscape(since.Format(time.RFC3339Nano)), ""), http.StatusOK)["data"].([]any)
		return len(data) == 2, fmt.Sprintf("%v", data)
	})
	body := `{"since":"` + since.Format(time.RFC3339Nano) + `"}`
	rec := c.want(c.call("POST", "/v1/endpoints/"+id+"/recover", body, "Idempotency-Key", "recover-1"), http.StatusAccepted)
	if rec["found"].(float64) != 2 || rec["queued"].(float64) != 2 {
		t.Fatalf("recover: %v, want 2 found and queued", rec)
	}
	c.want(c.call("POST", "/v1/endpoints/"+id+"/recover", body, "Idempotency-Key", "recover-1"), http.StatusAccepted)
	eventually(t, 60*time.Second, "the recovery delivered", func() (bool, string) {
		m := c.want(c.call("GET", "/v1/recoveries/"+rec["id"].(string), ""), http.StatusOK)
		return m["delivered"].(float64) == 2, fmt.Sprintf("%v", m)
	})
	// Nothing more arrives: the repeated requests sent nothing.
	time.Sleep(3 * time.Second) // a quiet period to catch a duplicate; no latency is asserted
	mu.Lock()
	defer mu.Unlock()
	if seen[msg] != 2 || len(seen) != 3 {
		t.Fatalf("receiver saw %v, want %s twice and two recovered messages once each", seen, msg)
	}
	for id, n := range seen {
		if id != msg && n != 1 {
			t.Errorf("recovered message %s arrived %d times", id, n)
		}
	}
}

// TestAPIDocExamples runs the curl examples of docs/API.md against a real
// process, so the documented commands keep working.
func TestAPIDocExamples(t *testing.T) {
	h := newHarness(t, config{})
	key := h.apiKey("--tenant", "acme")
	p := h.start("api-doc")
	doc, err := os.ReadFile(filepath.Join("..", "docs", "API.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "## Examples")
	_, rest, ok2 := strings.Cut(rest, "```sh\n")
	script, _, ok3 := strings.Cut(rest, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/API.md: no ```sh block under ## Examples")
	}
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "API=http://"+p.apiAddr, "KEY="+key)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("docs/API.md examples: %v\n%s", err, out)
	}
	for _, want := range []string{`"secret":"whsec_`, `"customer.created"`, `"status":"disabled"`, `"status":"active"`, `"last_hour"`} {
		if !strings.Contains(string(out), want) && !strings.Contains(readFile(t, filepath.Join(cmd.Dir, "created.json")), want) {
			t.Errorf("docs/API.md examples: output lacks %s:\n%s", want, out)
		}
	}
	c := apiClient{t: t, base: "http://" + p.apiAddr, key: key, v: apitest.New(t, nil)}
	if n := len(c.want(c.call("GET", "/v1/endpoints", ""), http.StatusOK)["data"].([]any)); n != 0 {
		t.Errorf("after the examples' delete, %d endpoints remain", n)
	}
}

func readFile(t *testing.T, path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// TestAPIAttemptsLatency pages GET /v1/endpoints/{id}/attempts over
// HOOKRELAY_API_BENCH_ROWS attempt rows of one endpoint (default 5,000;
// 10,000,000 for the figures in the closing notes): it logs p50 and p99 of
// first pages, filtered pages and deep pages. It asserts only that every
// page is right, never a latency.
func TestAPIAttemptsLatency(t *testing.T) {
	rows, _ := strconv.Atoi(os.Getenv("HOOKRELAY_API_BENCH_ROWS"))
	if rows <= 0 {
		rows = 5000
	}
	h := newHarness(t, config{})
	admin := h.apiKey("--admin")
	h.addEndpoint(endpoint{ID: "bench", URL: "http://127.0.0.1:9/", Secret: newSecret(), Events: []string{"*"}})
	p := h.start("api-bench")
	loadAttempts(t, h, "bench", rows)
	c := apiClient{t: t, base: "http://" + p.apiAddr, key: admin, v: apitest.New(t, nil)}
	plain := &http.Client{}
	measure := func(what string, n int, path func(i int) string) {
		var ds []time.Duration
		for i := range n {
			if i%20 == 0 { // a sample through the validator, untimed
				c.want(c.call("GET", path(i), ""), http.StatusOK)
			}
			req := apitest.NewRequest(t, "GET", c.base+path(i), admin, "")
			start := time.Now()
			resp, err := plain.Do(req)
			if err == nil {
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			ds = append(ds, time.Since(start))
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: %v %v", what, err, resp)
			}
		}
		t.Logf("attempts latency, %d rows, %s: p50 %v p99 %v (n=%d, HTTP round trip on loopback)", rows, what,
			percentile(ds, 50).Round(100*time.Microsecond), percentile(ds, 99).Round(100*time.Microsecond), n)
	}
	measure("first page of 100", 200, func(int) string { return "/v1/endpoints/bench/attempts" })
	measure("outcome=failed", 200, func(int) string { return "/v1/endpoints/bench/attempts?outcome=failed&limit=50" })
	measure("event_id", 200, func(i int) string { return "/v1/endpoints/bench/attempts?event_id=evt-" + strconv.Itoa(i*7919%rows) })
	var cursors []string
	q := "/v1/endpoints/bench/attempts?limit=1000"
	for range 20 {
		pg := c.want(c.call("GET", q, ""), http.StatusOK)
		next, _ := pg["next_cursor"].(string)
		if next == "" {
			break
		}
		cursors = append(cursors, next)
		q = "/v1/endpoints/bench/attempts?limit=1000&cursor=" + url.QueryEscape(next)
	}
	measure("pages after a cursor", 200, func(i int) string {
		return "/v1/endpoints/bench/attempts?cursor=" + url.QueryEscape(cursors[i%len(cursors)])
	})
}

// loadAttempts inserts n attempt rows of endpoint ep straight into the
// test's ClickHouse database (migrated by the running process), spread over
// the last three days, one in ten failed.
func loadAttempts(t *testing.T, h *harness, ep string, n int) {
	t.Helper()
	ctx := context.Background()
	store, err := chstore.New(ctx, chstore.Options{DSN: stack.DatabaseDSN(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	start, now := time.Now(), time.Now().UTC()
	const batch = 50_000
	for i := 0; i < n; i += batch {
		var as []audit.Attempt
		for j := i; j < min(i+batch, n); j++ {
			a := audit.Attempt{AttemptID: fmt.Sprintf("att-%09d", j), DeliveryID: fmt.Sprintf("dlv-%09d", j/2), EventID: fmt.Sprintf("evt-%d", j),
				WebhookID: fmt.Sprintf("msg_%09d", j/2), EventType: "invoice.paid", EndpointID: ep, URLHost: "127.0.0.1:9", AttemptNumber: 1 + j%2,
				AttemptedAt: now.Add(-time.Duration(n-j) * (72 * time.Hour / time.Duration(n))), LatencyMs: int64(j % 300), HTTPStatus: 200, Outcome: audit.Delivered}
			if j%10 == 0 {
				a.Outcome, a.HTTPStatus = audit.Failed, 400
			}
			as = append(as, a)
		}
		if err := store.Insert(ctx, as); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("loaded %d attempt rows in %v", n, time.Since(start).Round(time.Millisecond))
}
