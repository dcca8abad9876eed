package e2e

// The web console (pipeline/api/console) in a real browser: Debian's
// chromium, driven with chromedp, against a `hookrelay run` on the real
// stack. Screenshots of every page go to e2e/testdata/out/console/
// (git-ignored) for people to look at.

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/hookrelay/hookrelay/pipeline/api/apitest"
)

// consoleShots is where TestConsole saves its screenshots.
const consoleShots = "testdata/out/console"

// consoleZone is the browser's time zone in TestConsole.
const consoleZone = "Europe/Berlin"

// browser starts a headless chromium for the test and returns its context.
// A machine without chromium fails the test (never skips it): `make deps`
// installs it (deploy/local/deps.sh).
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium is not installed (the console's browser test needs it): run `make deps` or `apt-get install chromium`: %v", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // the suite runs as root in CI, where chromium's sandbox refuses to start
		chromedp.DisableGPU,
		chromedp.WindowSize(1366, 900),
		// A zone away from UTC, so the page shows local times and the UTC
		// value on hover differs.
		chromedp.Env("TZ="+consoleZone),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// page runs browser actions under a hang guard, failing the test with what
// was being done.
type page struct {
	t   *testing.T
	ctx context.Context
}

func (p page) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		body, _ := chromedp.Run(p.ctx, chromedp.Text(chromedp.CSS("body")))
		p.shot("failed-" + strings.ReplaceAll(what, " ", "-"))
		p.t.Fatalf("console: %s: %v\npage text:\n%s", what, err, body)
	}
}

// shot saves a full-page PNG screenshot as <name>.png.
func (p page) shot(name string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Errorf("screenshot %s: %v", name, err)
		return
	}
	path := filepath.Join(consoleShots, name+".png")
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		p.t.Errorf("screenshot %s: %v", name, err)
		return
	}
	abs, _ := filepath.Abs(path)
	p.t.Logf("console screenshot: %s", abs)
}

// text returns the text of the first element matching sel.
func (p page) text(sel string) string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		p.t.Fatalf("console: read %s: %v", sel, err)
	}
	return s
}

// choose sets a <select> to value as a person would (a change event).
func choose(sel, value string) chromedp.Action[chromedp.Void] {
	set := chromedp.Evaluate[string](fmt.Sprintf(`(() => { const e = document.querySelector(%q); e.value = %q;
		e.dispatchEvent(new Event('change', {bubbles: true})); return e.value; })()`, sel, value))
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		got, err := set(ctx, t)
		if err == nil && got != value {
			err = fmt.Errorf("%s has no option %q", sel, value)
		}
		return err
	})
}

// waitJS polls a JavaScript condition until it is true.
func waitJS(cond string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(50*time.Second))
}

// signIn signs in on the console's sign-in page with key, by keyboard.
func (p page) signIn(base, key string) {
	p.t.Helper()
	p.run("sign in",
		chromedp.Navigate(base+"/console/"),
		chromedp.WaitVisible(chromedp.CSS("#apikey")),
		chromedp.SendKeys(chromedp.CSS("#apikey"), key+kb.Enter),
		chromedp.WaitVisible(chromedp.CSS("#endpoints tbody")),
	)
}

// TestConsole: sign in, see the endpoints, open a failing endpoint's log,
// filter it, open a message, press resend and see the receiver get it; a
// tenant key never sees another tenant's endpoints.
func TestConsole(t *testing.T) {
	h := newHarness(t, config{}) // first: it skips in black-box mode (HOOKRELAY_E2E_TARGET=existing)
	ctx := browser(t)
	if err := os.MkdirAll(consoleShots, 0o755); err != nil {
		t.Fatal(err)
	}
	admin, acme, globex := h.apiKey("--admin"), h.apiKey("--tenant", "acme"), h.apiKey("--tenant", "globex")
	proc := h.start("console")
	base := "http://" + proc.apiAddr
	c := apiClient{t: t, base: base, v: apitest.New(t, nil)}

	// The receiver: /ok answers 200; /flaky answers 400 (permanent: to the
	// DLQ) to a message's first request and 200 after.
	var mu sync.Mutex
	seen := map[string]int{}        // "/flaky webhook-id" -> requests
	stamps := map[string][]string{} // "/flaky webhook-id" -> the webhook-timestamp of each request
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		k := r.URL.Path + " " + r.Header.Get("webhook-id")
		seen[k]++
		stamps[k] = append(stamps[k], r.Header.Get("webhook-timestamp"))
		w.Header().Set("X-Receiver", "console-e2e")
		w.Header().Set("Set-Cookie", "sid=receiver-cookie-secret")
		if r.URL.Path == "/flaky" && seen[k] == 1 {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":"unknown customer"}`))
		}
	}))
	defer recv.Close()
	requests := func(path, msg string) int {
		mu.Lock()
		defer mu.Unlock()
		return seen[path+" "+msg]
	}

	secrets := map[string]string{} // endpoint ID -> its generated secret
	create := func(key, path string) string {
		r := c.want(c.as(key).call("POST", "/v1/endpoints", `{"url":"`+recv.URL+path+`","event_types":["*"]}`), http.StatusCreated)
		id := r["endpoint"].(map[string]any)["id"].(string)
		secrets[id] = r["secret"].(string)
		return id
	}
	okID, flakyID, globexID := create(acme, "/ok"), create(acme, "/flaky"), create(globex, "/ok")

	var evs []cloudEvent
	for i := range 3 {
		evs = append(evs, cloudEvent{ID: fmt.Sprintf("inv-%d", i), Source: "/billing", Type: "invoice.paid", Tenant: "acme", Data: map[string]any{"n": i}})
	}
	for i := range 2 {
		evs = append(evs, cloudEvent{ID: fmt.Sprintf("cus-%d", i), Source: "/crm", Type: "customer.created", Tenant: "acme", Data: map[string]any{"n": i}})
	}
	evs = append(evs, cloudEvent{ID: "g-1", Source: "/billing", Type: "invoice.paid", Tenant: "globex", Data: map[string]any{}})
	h.produce(h.events(evs)...)
	for _, w := range []struct {
		key, id, outcome string
		n                int
	}{{acme, okID, "delivered", 5}, {acme, flakyID, "failed", 5}, {globex, globexID, "delivered", 1}} {
		eventually(t, 60*time.Second, fmt.Sprintf("%d %s attempts of %s", w.n, w.outcome, w.id), func() (bool, string) {
			data := c.want(c.as(w.key).call("GET", "/v1/endpoints/"+w.id+"/attempts?outcome="+w.outcome, ""), http.StatusOK)["data"].([]any)
			return len(data) == w.n, fmt.Sprintf("%d attempts", len(data))
		})
	}

	p := page{t: t, ctx: ctx}

	// 1. Sign in (by keyboard) and see acme's endpoints, not globex's.
	p.signIn(base, acme)
	p.run("endpoints listed", waitJS(`document.querySelectorAll('#endpoints tbody tr').length === 2`))
	p.shot("1-endpoints")
	list := p.text("#endpoints")
	if !strings.Contains(list, okID) || !strings.Contains(list, flakyID) || strings.Contains(list, globexID) {
		t.Fatalf("acme's endpoints page: want %s and %s, not globex's %s:\n%s", okID, flakyID, globexID, list)
	}
	// The 24 h figures (GET /v1/endpoints?include=stats): 5 attempts each,
	// all delivered to /ok, none to /flaky.
	for id, rate := range map[string]string{okID: "100%", flakyID: "0%"} {
		row := p.text(fmt.Sprintf(`#endpoints tr[data-endpoint=%q]`, id))
		if f := strings.Fields(row); !strings.Contains(row, rate) || !slices.Contains(f, "5") {
			t.Errorf("endpoints page, row of %s: want 5 attempts and success rate %s: %q", id, rate, row)
		}
	}

	// Health in the list (one call: the endpoint record's health), and the
	// header names the key's tenant (GET /v1/me).
	for _, id := range []string{okID, flakyID} {
		want := c.want(c.as(acme).call("GET", "/v1/endpoints/"+id, ""), http.StatusOK)["health"].(string)
		if got := p.text(fmt.Sprintf(`#endpoints tr[data-endpoint=%q] td.health`, id)); !strings.HasPrefix(got, want) {
			t.Errorf("endpoints page, health of %s: %q, want %q (the API's)", id, got, want)
		}
	}
	if got := p.text(fmt.Sprintf(`#endpoints tr[data-endpoint=%q] td.health`, okID)); got != "active" {
		t.Errorf("endpoints page, health of %s: %q, want active", okID, got)
	}
	p.run("who", waitJS(`!!document.querySelector('#who')`))
	if who := p.text("#who"); !strings.Contains(who, "tenant acme") {
		t.Errorf("header: %q, want the key's tenant acme", who)
	}

	// Times are the viewer's (the browser's zone), the UTC value on hover.
	if zone := p.text(".top"); !strings.Contains(zone, consoleZone) {
		t.Errorf("header does not name the viewer's zone %s: %q", consoleZone, zone)
	}

	// 2. Open the failing endpoint.
	p.run("open the failing endpoint",
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`#endpoints a[href="#/endpoints/%s"]`, flakyID))),
		chromedp.WaitVisible(chromedp.CSS("#health")),
		waitJS(`!!document.querySelector('#chart-latency canvas, #stats-nodata')`),
	)
	p.shot("2-endpoint")
	if nodata, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`!!document.querySelector('#stats-nodata')`)); nodata {
		t.Errorf("endpoint page: no charts: %s", p.text("#stats-nodata"))
	}
	if cfg := p.text("#config"); !strings.Contains(cfg, recv.URL+"/flaky") || strings.Contains(cfg, secrets[flakyID]) || !strings.Contains(cfg, "…") {
		t.Errorf("endpoint config: want its URL and its secret masked, never whole:\n%s", cfg)
	}

	// 3. Its delivery log, filtered to failed customer.created attempts.
	p.run("open the log",
		chromedp.Click(chromedp.CSS("#link-log")),
		waitJS(`document.querySelectorAll('#log tbody tr').length === 5`),
	)
	p.shot("3-log")
	p.run("filter the log",
		choose("#f-outcome", "failed"),
		chromedp.SendKeys(chromedp.CSS("#f-type"), "customer.created"),
		chromedp.Click(chromedp.CSS("#f-apply")),
		waitJS(`location.hash.includes('event_type=customer.created') && document.querySelectorAll('#log tbody tr').length === 2`),
	)
	p.shot("4-log-filtered")
	title, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => { const e = document.querySelector('#log tbody time');
		return e.title + ' | ' + e.textContent + ' | ' + e.dateTime; })()`))
	if err != nil {
		t.Fatal(err)
	}
	if parts := strings.Split(title, " | "); len(parts) != 3 || parts[0] != "UTC "+parts[2] || !strings.HasSuffix(parts[2], "Z") {
		t.Errorf("a log time: title | text | datetime = %q, want the UTC value in the title", title)
	} else if utc, err := time.Parse(time.RFC3339Nano, parts[2]); err == nil {
		loc, _ := time.LoadLocation(consoleZone)
		if want := utc.In(loc).Format("15:04:05"); !strings.Contains(parts[1], want) {
			t.Errorf("a log time shows %q, want the %s wall time %s", parts[1], consoleZone, want)
		}
	}
	if log := p.text("#log tbody"); strings.Contains(log, "invoice.paid") || strings.Count(log, "failed") != 2 {
		t.Fatalf("filtered log: want 2 failed customer.created attempts:\n%s", log)
	}

	// 4. Open a message and resend it: the receiver gets it again.
	msg := strings.TrimSpace(p.text("#log tbody tr:first-child td:last-child a"))
	p.run("open a message",
		chromedp.Click(chromedp.CSS("#log tbody tr:first-child td:last-child a")),
		chromedp.WaitVisible(chromedp.CSS("#attempts li")),
	)
	p.shot("5-message")
	if n := requests("/flaky", msg); n != 1 {
		t.Fatalf("receiver got %s %d times before the resend, want 1", msg, n)
	}
	if a := p.text("#attempts"); !strings.Contains(a, "unknown customer") || !strings.Contains(a, "400") {
		t.Errorf("message page lacks the response status or body:\n%s", a)
	}
	// The request as sent (the receiver's webhook-timestamp, no signature),
	// the body preview, the response headers (the cookie redacted).
	mu.Lock()
	stamp := stamps["/flaky "+msg][0]
	mu.Unlock()
	req, body, resp := p.text("#attempts .req-headers"), p.text("#attempts .body-preview"), p.text("#attempts .resp-headers")
	for _, want := range []string{"Webhook-Id: " + msg, "Webhook-Timestamp: " + stamp, "Content-Type: application/json", "User-Agent: hookrelay"} {
		if !strings.Contains(req, want) {
			t.Errorf("message page, request headers lack %q:\n%s", want, req)
		}
	}
	if strings.Contains(strings.ToLower(req), "signature") || strings.Contains(req, "v1,") {
		t.Errorf("message page shows the signature:\n%s", req)
	}
	if !strings.Contains(body, `"customer.created"`) && !strings.Contains(body, `"n"`) {
		t.Errorf("message page, body preview: %q", body)
	}
	if !strings.Contains(resp, "X-Receiver: console-e2e") || !strings.Contains(resp, "Set-Cookie: [redacted]") || strings.Contains(resp, "receiver-cookie-secret") {
		t.Errorf("message page, response headers (want X-Receiver, Set-Cookie redacted):\n%s", resp)
	}
	// The DLQ record may land a moment after the attempt row: wait for it
	// through the API, then press resend once.
	eventually(t, 30*time.Second, "the message's DLQ record", func() (bool, string) {
		data := c.want(c.as(acme).call("GET", "/v1/dlq?endpoint_id="+flakyID, ""), http.StatusOK)["data"].([]any)
		for _, d := range data {
			if d.(map[string]any)["webhook_id"] == msg {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d DLQ records", len(data))
	})
	p.run("press resend",
		chromedp.Focus(chromedp.CSS("#btn-resend")),
		chromedp.KeyEvent(kb.Enter), // by keyboard
		chromedp.WaitVisible(chromedp.CSS("#resend-result p")),
	)
	eventually(t, 60*time.Second, "the receiver to get the resent message", func() (bool, string) {
		n := requests("/flaky", msg)
		return n == 2, fmt.Sprintf("%d requests of %s", n, msg)
	})
	p.run("the resend's attempt shown", waitJS(`[...document.querySelectorAll('#attempts li')].some(li => li.dataset.outcome === 'delivered' && li.dataset.delivery.startsWith('rs_'))`))
	p.shot("6-message-resent")

	// A webhook-id in the log's search field filters the log by it
	// (webhook_id=): the message's first attempt and the resend's.
	p.run("search a webhook-id",
		chromedp.Navigate(base+"/console/#/endpoints/"+flakyID+"/log"),
		chromedp.WaitVisible(chromedp.CSS("#f-id")),
		chromedp.SendKeys(chromedp.CSS("#f-id"), msg+kb.Enter),
		waitJS(`location.hash.includes('webhook_id=`+msg+`') && document.querySelectorAll('#log tbody tr').length === 2`),
	)
	p.shot("12-log-webhook-id")
	if log := p.text("#log tbody"); strings.Count(log, msg) != 2 || !strings.Contains(log, "delivered") || !strings.Contains(log, "failed") {
		t.Errorf("log filtered by webhook-id %s: want its failed attempt and the resend's delivered one:\n%s", msg, log)
	}

	// The DLQ page: /flaky's 5 records; Replay (by keyboard) sends them
	// again and the receiver gets each.
	var dlqMsgs []string
	for _, d := range c.want(c.as(acme).call("GET", "/v1/dlq?endpoint_id="+flakyID, ""), http.StatusOK)["data"].([]any) {
		dlqMsgs = append(dlqMsgs, d.(map[string]any)["webhook_id"].(string))
	}
	if len(dlqMsgs) != 5 {
		t.Fatalf("DLQ of %s: %d records, want 5", flakyID, len(dlqMsgs))
	}
	p.run("the DLQ page",
		chromedp.Click(chromedp.CSS(`.top nav a[href="#/dlq"]`)),
		chromedp.WaitVisible(chromedp.CSS("#dlq-filters")),
		waitJS(`[...document.querySelectorAll('#d-endpoint option')].some(o => o.value === '`+flakyID+`')`),
		choose("#d-endpoint", flakyID),
		chromedp.Click(chromedp.CSS("#d-apply")),
		waitJS(`location.hash.includes('endpoint_id=`+flakyID+`') && document.querySelectorAll('#dlq tbody tr').length === 5`),
	)
	p.shot("13-dlq")
	if dlq := p.text("#dlq tbody"); strings.Count(dlq, "failed") != 5 || strings.Contains(dlq, okID) {
		t.Errorf("DLQ page of %s: want its 5 failed records:\n%s", flakyID, dlq)
	}
	before := map[string]int{}
	for _, m := range dlqMsgs {
		before[m] = requests("/flaky", m)
	}
	p.run("replay the DLQ",
		chromedp.Focus(chromedp.CSS("#btn-replay")),
		chromedp.KeyEvent(kb.Enter),
		waitJS(`document.querySelector('#replay-result').textContent.includes('Replayed')`),
	)
	p.shot("14-dlq-replayed")
	if r := p.text("#replay-result"); !strings.Contains(r, "Replayed 5") {
		t.Errorf("replay result: %q, want 5 replayed", r)
	}
	eventually(t, 60*time.Second, "the receiver to get every replayed message", func() (bool, string) {
		var missing []string
		for _, m := range dlqMsgs {
			if requests("/flaky", m) <= before[m] {
				missing = append(missing, m)
			}
		}
		return len(missing) == 0, fmt.Sprintf("not yet received again: %v", missing)
	})

	// Cursor paging: 5 attempts of /ok, 2 a page, newest first, each once.
	p.run("first page of 2", chromedp.Navigate(base+"/console/#/endpoints/"+okID+"/log?limit=2"),
		waitJS(`document.querySelectorAll('#log tbody tr').length === 2`))
	var paged []string
	for pg := 1; ; pg++ {
		ids, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#log tbody tr')].map(r => r.dataset.attempt + ' ' + r.querySelector('time').dateTime)`))
		if err != nil {
			t.Fatal(err)
		}
		paged = append(paged, ids...)
		more, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`!!document.querySelector('#btn-older')`))
		if !more || pg > 5 {
			break
		}
		p.run(fmt.Sprintf("page %d", pg+1), chromedp.Click(chromedp.CSS("#btn-older")),
			waitJS(fmt.Sprintf(`((c) => c && c.textContent.startsWith('Page %d:') && !c.textContent.includes('loading'))(document.querySelector('#log caption'))`, pg+1)))
	}
	p.shot("9-log-paged")
	distinct := map[string]bool{}
	for i, id := range paged {
		distinct[strings.Fields(id)[0]] = true
		if i > 0 && strings.Fields(paged[i-1])[1] < strings.Fields(id)[1] {
			t.Errorf("paged log not newest first: %s before %s", paged[i-1], id)
		}
	}
	if len(paged) != 5 || len(distinct) != 5 {
		t.Errorf("paging 2 a page showed %d rows, %d distinct, want 5 and 5: %v", len(paged), len(distinct), paged)
	}

	// The endpoint's actions: disable, enable, rotate the secret (shown
	// once), recover since an hour ago.
	status := func() string {
		return c.want(c.as(acme).call("GET", "/v1/endpoints/"+okID, ""), http.StatusOK)["status"].(string)
	}
	p.run("disable", chromedp.Navigate(base+"/console/#/endpoints/"+okID), chromedp.WaitVisible(chromedp.CSS("#btn-disable")),
		chromedp.SendKeys(chromedp.CSS("#disable-reason"), "maintenance"+kb.Enter),
		waitJS(`document.querySelector('#h-endpoint .badge').textContent.startsWith('disabled')`))
	if st := status(); st != "disabled" {
		t.Errorf("after Disable the endpoint is %s", st)
	}
	p.run("enable", chromedp.Click(chromedp.CSS("#btn-enable")),
		waitJS(`document.querySelector('#h-endpoint .badge').textContent === 'active'`))
	if st := status(); st != "active" {
		t.Errorf("after Enable the endpoint is %s", st)
	}
	// Each button is clicked once it is enabled: a click on a button still
	// disabled by the previous action (busy) is lost (CI, 2026-12-02).
	p.run("rotate", waitJS(`!document.querySelector('#btn-rotate').disabled`), chromedp.Click(chromedp.CSS("#btn-rotate")),
		waitJS(`document.querySelector('#btn-rotate-confirm') !== null && !document.querySelector('#btn-rotate-confirm').disabled`),
		chromedp.Click(chromedp.CSS("#btn-rotate-confirm")),
		chromedp.WaitVisible(chromedp.CSS("#new-secret")))
	p.shot("10-endpoint-rotated")
	secret, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#new-secret').value`))
	if err != nil || !strings.HasPrefix(secret, "whsec_") || secret == secrets[okID] {
		t.Errorf("rotate showed %q (%v), want a new whsec_ secret", secret, err)
	}
	if ss := c.want(c.as(acme).call("GET", "/v1/endpoints/"+okID, ""), http.StatusOK)["secrets"].([]any); len(ss) != 2 {
		t.Errorf("after rotate the endpoint has %d secrets, want 2 (old for 24 h, new)", len(ss))
	}
	p.run("recover", chromedp.Click(chromedp.CSS("#btn-recover")), waitJS(`document.querySelector('#action-result').textContent.includes('Recovery rc_')`))
	if r := p.text("#action-result"); !strings.Contains(r, "0 messages found") {
		t.Errorf("recover of an endpoint with nothing in the DLQ: %q", r)
	}
	p.run("reload the endpoint", chromedp.Navigate(base+"/console/#/"), chromedp.WaitVisible(chromedp.CSS("#endpoints tbody")),
		chromedp.Navigate(base+"/console/#/endpoints/"+okID), chromedp.WaitVisible(chromedp.CSS("#config")))
	if page, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("main"))); strings.Contains(page, secret) {
		t.Error("the rotated secret shows again after leaving the page")
	}

	// Create an endpoint with the form, by keyboard: the API has it, under
	// acme, and its secret shows once.
	p.run("the create form", chromedp.Navigate(base+"/console/#/"), chromedp.WaitVisible(chromedp.CSS("#endpoints tbody")),
		chromedp.Click(chromedp.CSS("#link-new")), chromedp.WaitVisible(chromedp.CSS("#n-url")))
	if ok, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`[...document.querySelectorAll('#new-endpoint input')].every(i => document.querySelector('label[for="' + i.id + '"]'))`)); !ok {
		t.Error("create form: an input without a label")
	}
	p.run("fill the create form",
		chromedp.SendKeys(chromedp.CSS("#n-url"), recv.URL+"/new"),
		chromedp.SendKeys(chromedp.CSS("#n-event_types"), "invoice.paid, customer.created"),
		chromedp.SendKeys(chromedp.CSS("#n-rate_per_sec"), "5"),
	)
	p.shot("15-new-endpoint")
	p.run("create", chromedp.SendKeys(chromedp.CSS("#n-timeout"), "5s"+kb.Enter), chromedp.WaitVisible(chromedp.CSS("#created")))
	p.shot("16-endpoint-created")
	newID := strings.TrimSpace(p.text("#link-created"))
	shownSecret, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#created-secret').value`))
	made := c.want(c.as(acme).call("GET", "/v1/endpoints/"+newID, ""), http.StatusOK)
	if made["url"] != recv.URL+"/new" || made["tenantid"] != "acme" || made["rate_per_sec"] != 5.0 || made["timeout"] != "5s" ||
		fmt.Sprint(made["event_types"]) != "[invoice.paid customer.created]" || !strings.HasPrefix(shownSecret, "whsec_") {
		t.Errorf("created endpoint %s: %v (secret shown %q)", newID, made, shownSecret)
	}

	// 5. globex sees only its endpoint, and acme's is not found for it.
	p.run("sign out", chromedp.Click(chromedp.CSS("#signout")), chromedp.WaitVisible(chromedp.CSS("#apikey")))
	p.signIn(base, globex)
	p.run("globex's endpoints", waitJS(`document.querySelectorAll('#endpoints tbody tr').length === 1`))
	p.shot("7-endpoints-globex")
	if list := p.text("#endpoints"); !strings.Contains(list, globexID) || strings.Contains(list, okID) || strings.Contains(list, flakyID) {
		t.Fatalf("globex's endpoints page shows another tenant's endpoint:\n%s", list)
	}
	p.run("acme's endpoint as globex",
		chromedp.Navigate(base+"/console/#/endpoints/"+flakyID),
		chromedp.WaitVisible(chromedp.CSS(".error")),
	)
	if e := p.text(".error"); !strings.Contains(e, "404") {
		t.Errorf("acme's endpoint as globex: %q, want a 404", e)
	}

	// 6. The admin key sees both tenants.
	p.run("sign out", chromedp.Navigate(base+"/console/#/"), chromedp.Click(chromedp.CSS("#signout")), chromedp.WaitVisible(chromedp.CSS("#apikey")))
	p.signIn(base, admin)
	p.run("every endpoint", waitJS(`document.querySelectorAll('#endpoints tbody tr').length === 4`))
	p.shot("8-endpoints-admin")
	if who := p.text("#who"); !strings.Contains(who, "admin") {
		t.Errorf("header as admin: %q", who)
	}

	// 7. The figures' calls fail (503, as when ClickHouse is down): the
	// pages still work and say "no data". fetch is replaced in the page,
	// which hash navigation keeps.
	p.run("stats down", chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool](`(() => { const real = window.fetch;
			window.fetch = (u, o) => /\/stats|include=stats/.test(String(u))
				? Promise.resolve(new Response('{"title":"Service Unavailable","status":503,"detail":"try again later"}',
					{status: 503, headers: {'Content-Type': 'application/problem+json'}}))
				: real(u, o);
			return true; })()`)(ctx, t)
		return err
	}),
		chromedp.Navigate(base+"/console/#/endpoints/"+flakyID),
		chromedp.WaitVisible(chromedp.CSS("#stats-nodata")),
		chromedp.Navigate(base+"/console/#/"),
		waitJS(`document.querySelectorAll('#endpoints tbody tr').length === 4 && document.body.textContent.includes('Figures of the last 24 h are unavailable')`),
	)
	p.shot("11-endpoints-stats-down")
	if row := p.text(fmt.Sprintf(`#endpoints tr[data-endpoint=%q]`, okID)); !strings.Contains(row, "no data") || !strings.Contains(row, "active") {
		t.Errorf("endpoints page with the stats down: row %q, want its status and \"no data\"", row)
	}
}
