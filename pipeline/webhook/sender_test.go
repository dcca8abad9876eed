package webhook_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/pipeline/webhook"
)

// countingListener counts accepted connections, so tests can prove that the
// SSRF guard let no connection through.
type countingListener struct {
	net.Listener
	accepts atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepts.Add(1)
	}
	return c, err
}

// newServer starts an httptest server on 127.0.0.1 behind a countingListener;
// it is closed when the test ends.
func newServer(t testing.TB, h http.HandlerFunc) (*httptest.Server, *countingListener) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: ln}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = cl
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, cl
}

var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

func newSender(t testing.TB, o webhook.Options) *webhook.Sender {
	t.Helper()
	if o.Version == "" {
		o.Version = "1.2.3-test"
	}
	s, err := webhook.NewSender(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func testRequest(t testing.TB, url string, secrets ...webhook.Secret) *webhook.Request {
	t.Helper()
	body, err := webhook.Body("invoice.paid", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), json.RawMessage(`{"id":"inv_1","amount":4200}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(secrets) == 0 {
		secrets = []webhook.Secret{webhook.NewSecret()}
	}
	return &webhook.Request{URL: url, Body: body, WebhookID: webhook.WebhookID("urn:test", "evt-1"), Secrets: secrets}
}

type received struct {
	header http.Header
	body   []byte
}

func TestSendSignedRequest(t *testing.T) {
	got := make(chan received, 1)
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- received{r.Header.Clone(), b}
		w.WriteHeader(http.StatusNoContent)
	})
	s := newSender(t, webhook.Options{AllowNetworks: loopback})
	old, cur := webhook.NewSecret(), webhook.NewSecret()
	req := testRequest(t, srv.URL+"/hook?x=1", old, cur)
	req.Header = http.Header{
		"Traceparent":  {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		"Tracestate":   {"vendor=1"},
		"User-Agent":   {"evil"},  // reserved: overridden
		"Webhook-Id":   {"msg_x"}, // reserved: overridden
		"Content-Type": {"text/plain"},
	}
	before := time.Now().Unix()
	res := s.Send(context.Background(), req)
	if res.Err != nil || res.StatusCode != 204 {
		t.Fatalf("Send = %d, %v", res.StatusCode, res.Err)
	}
	if c := webhook.Classify(res); c.Outcome != audit.Delivered {
		t.Errorf("Classify = %+v, want delivered", c)
	}
	if res.Latency <= 0 || res.SentAt.IsZero() {
		t.Errorf("Latency %v, SentAt %v", res.Latency, res.SentAt)
	}
	rcv := <-got
	h := rcv.header
	if !bytes.Equal(rcv.body, req.Body) {
		t.Errorf("body sent %q, want %q", rcv.body, req.Body)
	}
	for k, want := range map[string]string{
		"Content-Type": "application/json",
		"User-Agent":   "hookrelay/1.2.3-test",
		"Webhook-Id":   req.WebhookID,
		"Traceparent":  "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"Tracestate":   "vendor=1",
	} {
		if vs := h.Values(k); len(vs) != 1 || vs[0] != want {
			t.Errorf("header %s = %q, want [%q]", k, vs, want)
		}
	}
	if ts, err := strconv.ParseInt(h.Get("Webhook-Timestamp"), 10, 64); err != nil || ts < before || ts > time.Now().Unix() || ts != res.SentAt.Unix() {
		t.Errorf("webhook-timestamp %q, SentAt %v", h.Get("Webhook-Timestamp"), res.SentAt)
	}
	// Third-party verification (standard-webhooks Go library, with its
	// timestamp tolerance): each secret verifies; a tampered body does not.
	for i, sec := range []webhook.Secret{old, cur} {
		wh, err := standardwebhooks.NewWebhook(sec.String())
		if err != nil {
			t.Fatal(err)
		}
		if err := wh.Verify(rcv.body, h); err != nil {
			t.Errorf("secret %d: third-party verify of the received request: %v", i, err)
		}
		tampered := bytes.Replace(rcv.body, []byte("4200"), []byte("4201"), 1)
		if err := wh.Verify(tampered, h); err == nil {
			t.Errorf("secret %d: tampered body verified", i)
		}
	}
	if err := webhook.Verify(h, rcv.body, time.Now(), 0, cur); err != nil {
		t.Errorf("own Verify: %v", err)
	}
}

// TestSignNodeVerifier verifies a signature with the npm standardwebhooks
// package, the JavaScript reference implementation. It finds the package in
// e2e/receiver/node_modules (installed by `make deps`) or on NODE_PATH, and
// skips only where neither node nor the package is installed (a plain
// `go test` on a machine without `make deps`).
func TestSignNodeVerifier(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not installed")
	}
	env := os.Environ()
	if abs, err := filepath.Abs("../../e2e/receiver/node_modules"); err == nil {
		env = append(env, "NODE_PATH="+abs+string(os.PathListSeparator)+os.Getenv("NODE_PATH"))
	}
	resolve := exec.Command(node, "-e", `require.resolve("standardwebhooks")`)
	resolve.Env = env
	if err := resolve.Run(); err != nil {
		t.Skip("npm package standardwebhooks not installed (run make deps, or set NODE_PATH)")
	}
	sec := webhook.NewSecret()
	id := webhook.WebhookID("urn:test", "node")
	body, err := webhook.Body("user.created", time.Now(), json.RawMessage(`{"name":"Zoë <z@example>","n":[1,2.5,null]}`))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	headers := map[string]string{
		"webhook-id":        id,
		"webhook-timestamp": strconv.FormatInt(now.Unix(), 10),
		"webhook-signature": webhook.Sign(id, now, body, webhook.NewSecret(), sec),
	}
	run := func(b []byte) (string, error) {
		in, _ := json.Marshal(map[string]any{"secret": sec.String(), "headers": headers, "body": string(b)})
		cmd := exec.Command(node, "testdata/verify.cjs")
		cmd.Env = env
		cmd.Stdin = bytes.NewReader(in)
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	if out, err := run(body); err != nil || out != "ok" {
		t.Errorf("node verifier rejected a valid signature: %s (%v)", out, err)
	}
	if out, err := run(bytes.Replace(body, []byte("Zoë"), []byte("Zoe"), 1)); err == nil {
		t.Errorf("node verifier accepted a tampered body: %s", out)
	}
}

func TestSendDoesNotFollowRedirects(t *testing.T) {
	target, targetLn := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
	})
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.URL.Query().Get("code"))
		http.Redirect(w, r, target.URL+"/elsewhere", code)
	})
	s := newSender(t, webhook.Options{AllowNetworks: loopback})
	for _, code := range []int{301, 302, 303, 307, 308} {
		res := s.Send(context.Background(), testRequest(t, srv.URL+"/?code="+strconv.Itoa(code)))
		if res.Err != nil || res.StatusCode != code || res.Location != target.URL+"/elsewhere" {
			t.Fatalf("Send = %d %q %v, want %d with Location", res.StatusCode, res.Location, res.Err, code)
		}
		if c := webhook.Classify(res); c.Outcome != audit.Failed || c.ErrorClass != webhook.ClassRedirect {
			t.Errorf("Classify = %+v, want failed/redirect", c)
		}
	}
	if n := targetLn.accepts.Load(); n != 0 {
		t.Errorf("redirect target accepted %d connections, want 0", n)
	}
}

func TestSendBoundsResponseBody(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	srv, ln := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.WriteHeader(http.StatusBadRequest)
		w.Write(big[:n])
	})
	s := newSender(t, webhook.Options{AllowNetworks: loopback, MaxDrainBytes: 32 << 10})
	send := func(n int) webhook.Result {
		t.Helper()
		res := s.Send(context.Background(), testRequest(t, srv.URL+"/?n="+strconv.Itoa(n)))
		if res.Err != nil || res.BodyErr != nil || res.StatusCode != 400 {
			t.Fatalf("Send(n=%d) = %d %v %v", n, res.StatusCode, res.Err, res.BodyErr)
		}
		return res
	}
	// Small bodies are kept whole and the connection is reused.
	if res := send(10); string(res.Body) != "0123456789" {
		t.Errorf("body = %q", res.Body)
	}
	send(0)
	if n := ln.accepts.Load(); n != 1 {
		t.Errorf("%d connections for two small answers, want 1 (keep-alive)", n)
	}
	// A body within 4 KiB + MaxDrainBytes is cut to 4 KiB, drained, and the
	// connection is reused.
	if res := send(20 << 10); !bytes.Equal(res.Body, big[:audit.MaxResponseBody]) {
		t.Errorf("kept %d bytes, want the first %d", len(res.Body), audit.MaxResponseBody)
	}
	if n := ln.accepts.Load(); n != 1 {
		t.Errorf("%d connections after a drained 20 KiB body, want 1", n)
	}
	// A 1 MiB body is cut to 4 KiB and the connection closed, not drained.
	if res := send(len(big)); !bytes.Equal(res.Body, big[:audit.MaxResponseBody]) {
		t.Errorf("kept %d bytes, want the first %d", len(res.Body), audit.MaxResponseBody)
	}
	send(1)
	if n := ln.accepts.Load(); n != 2 {
		t.Errorf("%d connections after a 1 MiB body, want 2 (closed, not drained)", n)
	}
}

// hangServer starts a server whose handler blocks until the test ends or the
// client goes away; arrived receives once per request that reached it. With
// headersFirst the handler sends 200 and a partial body before blocking.
func hangServer(t *testing.T, headersFirst bool) (*httptest.Server, <-chan struct{}) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 16)
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if headersFirst {
			w.WriteHeader(http.StatusOK)
			w.Write([]byte("partial"))
			w.(http.Flusher).Flush()
		}
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() { close(release) }) // registered after newServer's, so it runs before the server's Close
	return srv, arrived
}

func TestSendTimeout(t *testing.T) {
	srv, arrived := hangServer(t, false)
	s := newSender(t, webhook.Options{AllowNetworks: loopback, Timeout: time.Hour})
	req := testRequest(t, srv.URL)
	req.Timeout = 150 * time.Millisecond // per request, overriding the sender's
	res := s.Send(context.Background(), req)
	<-arrived
	if res.Err == nil {
		t.Fatalf("Send = %d, want a timeout error", res.StatusCode)
	}
	c := webhook.Classify(res)
	if c.Outcome != audit.RetryScheduled || c.ErrorClass != webhook.ClassTimeout {
		t.Errorf("Classify = %+v, want retry_scheduled/timeout", c)
	}
	// Not cut short (Latency's clock starts a hair after the deadline's, so
	// allow 10%); and the request's timeout, not the sender's hour, ended it
	// (a minute is a bound no loaded machine reaches).
	if res.Latency < req.Timeout*9/10 || res.Latency > time.Minute {
		t.Errorf("Latency = %v, want at least the request timeout %v (and far below the sender's hour)", res.Latency, req.Timeout)
	}
	t.Logf("timed out after %v (request timeout %v)", res.Latency, req.Timeout)
}

func TestSendTimeoutDuringBodyKeepsStatus(t *testing.T) {
	srv, _ := hangServer(t, true)
	s := newSender(t, webhook.Options{AllowNetworks: loopback, Timeout: 150 * time.Millisecond})
	res := s.Send(context.Background(), testRequest(t, srv.URL))
	if res.Err != nil || res.StatusCode != 200 || string(res.Body) != "partial" || res.BodyErr == nil {
		t.Fatalf("Send = %d %q err=%v bodyErr=%v; want 200, the partial body and a body error", res.StatusCode, res.Body, res.Err, res.BodyErr)
	}
	if c := webhook.Classify(res); c.Outcome != audit.Delivered {
		t.Errorf("Classify = %+v, want delivered (the status stands)", c)
	}
}

func TestSendCallerCancel(t *testing.T) {
	srv, arrived := hangServer(t, false)
	s := newSender(t, webhook.Options{AllowNetworks: loopback})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-arrived; cancel() }()
	res := s.Send(ctx, testRequest(t, srv.URL))
	if c := webhook.Classify(res); c.ErrorClass != webhook.ClassCanceled {
		t.Errorf("Classify = %+v (err %v), want class canceled", c, res.Err)
	}
}

func TestSendConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s := newSender(t, webhook.Options{AllowNetworks: loopback})
	res := s.Send(context.Background(), testRequest(t, "http://"+addr+"/"))
	if c := webhook.Classify(res); c.Outcome != audit.RetryScheduled || c.ErrorClass != webhook.ClassConnect {
		t.Errorf("Classify = %+v (err %v), want retry_scheduled/connect", c, res.Err)
	}
}

func TestSendConnectionReset(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		c.Read(make([]byte, 64)) // the request has started
		c.(*net.TCPConn).SetLinger(0)
		c.Close() // RST
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	s := newSender(t, webhook.Options{AllowNetworks: loopback})
	res := s.Send(context.Background(), testRequest(t, "http://"+ln.Addr().String()+"/"))
	if c := webhook.Classify(res); c.Outcome != audit.RetryScheduled || c.ErrorClass != webhook.ClassReset {
		t.Errorf("Classify = %+v (err %v), want retry_scheduled/reset", c, res.Err)
	}
}

func TestSendTLS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(srv.Close)
	untrusting := newSender(t, webhook.Options{AllowNetworks: loopback})
	res := untrusting.Send(context.Background(), testRequest(t, srv.URL))
	if c := webhook.Classify(res); c.Outcome != audit.RetryScheduled || c.ErrorClass != webhook.ClassTLS {
		t.Errorf("untrusted certificate: Classify = %+v (err %v), want retry_scheduled/tls", c, res.Err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	trusting := newSender(t, webhook.Options{AllowNetworks: loopback, TLSConfig: &tls.Config{RootCAs: roots}})
	if res := trusting.Send(context.Background(), testRequest(t, srv.URL)); res.Err != nil || res.StatusCode != 200 {
		t.Errorf("trusted certificate: Send = %d %v", res.StatusCode, res.Err)
	}
	// Plain HTTP client speaking to the TLS port is not TLS; TLS to a plain port is.
	plain, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {})
	res = untrusting.Send(context.Background(), testRequest(t, strings.Replace(plain.URL, "http:", "https:", 1)))
	if c := webhook.Classify(res); c.ErrorClass != webhook.ClassTLS {
		t.Errorf("https to a plain server: Classify = %+v (err %v), want tls", c, res.Err)
	}
}

// TestSendSSRF: without the allow-list, a name resolving to 127.0.0.1 and
// the IPv4-mapped literal are refused at dial time and the server accepts
// no connection; with it they go through.
func TestSendSSRF(t *testing.T) {
	srv, ln := newServer(t, func(w http.ResponseWriter, r *http.Request) {})
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	urls := []string{
		"http://localhost:" + strconv.Itoa(port) + "/",          // resolves to 127.0.0.1 (/etc/hosts)
		"http://[::ffff:127.0.0.1]:" + strconv.Itoa(port) + "/", // IPv4-mapped IPv6 literal
		"http://[::ffff:7f00:1]:" + strconv.Itoa(port) + "/",    // the same, hex form
		"http://127.0.0.1:" + strconv.Itoa(port) + "/",
		"https://127.0.0.1:" + strconv.Itoa(port) + "/",
		"http://0.0.0.0:" + strconv.Itoa(port) + "/", // reaches local listeners on Linux
	}
	guarded := newSender(t, webhook.Options{})
	for _, u := range urls {
		res := guarded.Send(context.Background(), testRequest(t, u))
		var be *webhook.BlockedError
		if !errors.As(res.Err, &be) {
			t.Errorf("%s: err = %v, want a *BlockedError", u, res.Err)
			continue
		}
		if c := webhook.Classify(res); c.Outcome != audit.Blocked || c.ErrorClass != webhook.ClassSSRF || c.Retryable {
			t.Errorf("%s: Classify = %+v, want blocked/ssrf", u, c)
		}
		if be.Addr.Unmap().String() != "127.0.0.1" && be.Addr.String() != "0.0.0.0" && be.Addr.String() != "::1" {
			t.Errorf("%s: refused address %s", u, be.Addr)
		}
	}
	// The accept loop is FIFO: once an allowed request has been served, any
	// connection a blocked attempt had made would have been counted first.
	allowed := newSender(t, webhook.Options{AllowNetworks: loopback})
	res := allowed.Send(context.Background(), testRequest(t, urls[1]))
	if res.Err != nil || res.StatusCode != 200 {
		t.Fatalf("IPv4-mapped literal with 127.0.0.0/8 allowed: Send = %d %v", res.StatusCode, res.Err)
	}
	if n := ln.accepts.Load(); n != 1 {
		t.Errorf("server accepted %d connections, want exactly 1 (the allowed request); blocked attempts connected", n)
	}
	if res := allowed.Send(context.Background(), testRequest(t, urls[0])); res.Err != nil || res.StatusCode != 200 {
		t.Errorf("localhost with 127.0.0.0/8 allowed: Send = %d %v", res.StatusCode, res.Err)
	}
}

func TestSendInvalidRequest(t *testing.T) {
	s := newSender(t, webhook.Options{})
	good := testRequest(t, "http://hooks.example/")
	tests := []struct {
		name   string
		mutate func(*webhook.Request)
		want   string
	}{
		{"ftp scheme", func(r *webhook.Request) { r.URL = "ftp://hooks.example/" }, `scheme "ftp"`},
		{"file scheme", func(r *webhook.Request) { r.URL = "file:///etc/passwd" }, `scheme "file"`},
		{"no scheme", func(r *webhook.Request) { r.URL = "hooks.example/x" }, "scheme"},
		{"no host", func(r *webhook.Request) { r.URL = "http:///x" }, "no host"},
		{"unparseable", func(r *webhook.Request) { r.URL = "http://[::1/" }, "does not parse"},
		{"no webhook-id", func(r *webhook.Request) { r.WebhookID = "" }, "webhook-id"},
		{"no secret", func(r *webhook.Request) { r.Secrets = nil }, "no signing secret"},
		{"only zero secrets", func(r *webhook.Request) { r.Secrets = []webhook.Secret{{}} }, "no signing secret"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := *good
			tt.mutate(&r)
			res := s.Send(context.Background(), &r)
			if !errors.Is(res.Err, webhook.ErrInvalidRequest) || !strings.Contains(res.Err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrInvalidRequest mentioning %q", res.Err, tt.want)
			}
			if c := webhook.Classify(res); c.Outcome != audit.Failed || c.ErrorClass != webhook.ClassInvalidRequest {
				t.Errorf("Classify = %+v", c)
			}
		})
	}
	if res := s.Send(context.Background(), nil); !errors.Is(res.Err, webhook.ErrInvalidRequest) {
		t.Errorf("nil request: err = %v", res.Err)
	}
}

func TestSendRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if v := r.URL.Query().Get("ra"); v != "" {
			w.Header().Set("Retry-After", v)
		}
		code, _ := strconv.Atoi(r.URL.Query().Get("code"))
		w.WriteHeader(code)
	})
	s := newSender(t, webhook.Options{AllowNetworks: loopback, Clock: func() time.Time { return now }})
	tests := []struct {
		code      int
		ra        string
		wantAfter time.Duration
		wantPause bool
	}{
		{429, "5", 5 * time.Second, true},
		{429, "", webhook.DefaultRetryAfter429, true},
		{429, "soon", webhook.DefaultRetryAfter429, true}, // malformed: as absent
		{503, now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, false},
		{503, "", 0, false},
		{500, "7", 7 * time.Second, false},
	}
	for _, tt := range tests {
		req := testRequest(t, srv.URL+"/?code="+strconv.Itoa(tt.code)+"&ra="+strings.ReplaceAll(tt.ra, " ", "%20"))
		res := s.Send(context.Background(), req)
		c := webhook.Classify(res)
		if res.StatusCode != tt.code || c.Outcome != audit.RetryScheduled || c.RetryAfter != tt.wantAfter || c.PauseEndpoint != tt.wantPause {
			t.Errorf("%d Retry-After %q: status %d, Classify = %+v; want after %v pause %v", tt.code, tt.ra, res.StatusCode, c, tt.wantAfter, tt.wantPause)
		}
		if res.SentAt != now {
			t.Errorf("SentAt = %v, want the sender clock's %v", res.SentAt, now)
		}
	}
}

func TestNewSenderValidates(t *testing.T) {
	tests := []struct {
		name string
		o    webhook.Options
		want string
	}{
		{"negative timeout", webhook.Options{Timeout: -time.Second}, "Options.Timeout"},
		{"negative connect timeout", webhook.Options{ConnectTimeout: -1}, "Options.ConnectTimeout"},
		{"negative idle", webhook.Options{MaxIdleConnsPerHost: -1}, "Options.MaxIdleConnsPerHost"},
		{"negative drain", webhook.Options{MaxDrainBytes: -1}, "Options.MaxDrainBytes"},
		{"version with space", webhook.Options{Version: "1.0 beta"}, "Options.Version"},
		{"version with slash", webhook.Options{Version: "a/b"}, "Options.Version"},
		{"invalid prefix", webhook.Options{AllowNetworks: []netip.Prefix{{}}}, "Options.AllowNetworks[0]"},
	}
	for _, tt := range tests {
		if _, err := webhook.NewSender(tt.o); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want one naming %s", tt.name, err, tt.want)
		}
	}
	if _, err := webhook.NewSender(webhook.Options{}); err != nil {
		t.Errorf("zero Options: %v", err)
	}
}

func TestSenderDefaultUserAgent(t *testing.T) {
	got := make(chan string, 1)
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) { got <- r.UserAgent() })
	s, err := webhook.NewSender(webhook.Options{AllowNetworks: loopback})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Send(context.Background(), testRequest(t, srv.URL))
	if ua := <-got; ua != "hookrelay/dev" {
		t.Errorf("user-agent = %q", ua)
	}
}

// Result carries the request's headers as sent, without the signature, and
// the response's headers, for the delivery log (issue 12).
func TestSendKeepsHeaders(t *testing.T) {
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(webhook.HeaderWebhookSignature) == "" {
			t.Error("the request went out unsigned")
		}
		w.Header().Set("X-Seen", "yes")
	})
	s := newSender(t, webhook.Options{AllowNetworks: loopback})
	req := testRequest(t, srv.URL+"/hook", webhook.NewSecret())
	req.Header = http.Header{"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
	res := s.Send(context.Background(), req)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	h := http.Header(res.RequestHeader)
	if h.Get(webhook.HeaderWebhookSignature) != "" || h.Get(webhook.HeaderWebhookID) != req.WebhookID ||
		h.Get(webhook.HeaderWebhookTimestamp) == "" || h.Get("Traceparent") == "" || h.Get("Content-Type") != "application/json" {
		t.Fatalf("request header kept %v", h)
	}
	if http.Header(res.Header).Get("X-Seen") != "yes" {
		t.Fatalf("response header kept %v", res.Header)
	}
}
