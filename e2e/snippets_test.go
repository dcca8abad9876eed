package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/e2e/stack"
	"github.com/hookrelay/hookrelay/pipeline/events"
	"github.com/hookrelay/hookrelay/pipeline/webhook"
	"github.com/hookrelay/hookrelay/publish"
)

// The snippets of docs/PRODUCING.md and docs/RECEIVING.md live in
// docs/snippets; these tests run every one that can run here against the
// local stack. `make deps` installs their runtimes and packages (Debian
// ruby, php-cli, kcat; PyPI packages into .local/snippets/py; npm packages
// of e2e/receiver). A missing one fails the test, naming what to install.

// repoRoot is the repository root (the e2e tests run in e2e/).
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// snippetPyPath is where `make deps` installs the snippets' PyPI packages.
func snippetPyPath(t testing.TB) string {
	p := filepath.Join(repoRoot(t), ".local", "snippets", "py")
	if _, err := os.Stat(filepath.Join(p, "confluent_kafka")); err != nil {
		t.Fatalf("the snippets' Python packages are missing from %s: run `deploy/local/deps.sh snippets` (part of make deps)", p)
	}
	return p
}

func need(t testing.TB, bin string) string {
	t.Helper()
	p, err := exec.LookPath(bin)
	if err != nil {
		t.Fatalf("%s is not installed: run `deploy/local/deps.sh snippets` (part of make deps)", bin)
	}
	return p
}

// syncBuffer collects a process's output for polling.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// snippetProc is one running snippet or CLI process, stopped when the test
// ends (SIGKILL after the test; a snippet holds no state worth a graceful stop).
type snippetProc struct {
	name string
	cmd  *exec.Cmd
	out  *syncBuffer // stdout
	err  *syncBuffer // stderr
	done chan struct{}
}

func startProc(t *testing.T, name, dir string, env []string, argv ...string) *snippetProc {
	t.Helper()
	p := &snippetProc{name: name, out: &syncBuffer{}, err: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Dir = dir
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.err
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("%s: start %v: %v", name, argv, err)
	}
	go func() { // owner: p; the cleanup waits for done
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("--- %s stdout ---\n%s\n--- %s stderr ---\n%s", name, tailString(p.out.String(), 3000), name, tailString(p.err.String(), 3000))
		}
	})
	return p
}

func tailString(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

func (p *snippetProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// receiverSnippet is one receiver of docs/RECEIVING.md.
type receiverSnippet struct {
	name string
	// argv runs it; "{port}" is replaced by its port. build, when set, is
	// a package under docs/snippets/go to build first; the binary is argv[0].
	argv  []string
	build string
	env   func(t *testing.T) []string
}

func receiverSnippets() []receiverSnippet {
	nodePath := func(t *testing.T) []string {
		return []string{"NODE_PATH=" + filepath.Join(repoRoot(t), "e2e", "receiver", "node_modules")}
	}
	pyPath := func(t *testing.T) []string { return []string{"PYTHONPATH=" + snippetPyPath(t)} }
	return []receiverSnippet{
		{name: "node-standardwebhooks", argv: []string{"node", "docs/snippets/node/standardwebhooks.js"}, env: nodePath},
		{name: "node-crypto", argv: []string{"node", "docs/snippets/node/crypto.js"}},
		{name: "python-standardwebhooks", argv: []string{"python3", "docs/snippets/python/standardwebhooks_receiver.py"}, env: pyPath},
		{name: "python-hmac", argv: []string{"python3", "docs/snippets/python/hmac_receiver.py"}},
		{name: "go-standardwebhooks", build: "./docs/snippets/go/standardwebhooks"},
		{name: "go-hmac", build: "./docs/snippets/go/hmac"},
		{name: "ruby", argv: []string{"ruby", "docs/snippets/ruby/receiver.rb"}},
		{name: "php", argv: []string{"php", "-S", "127.0.0.1:{port}", "docs/snippets/php/receiver.php"}},
		{name: "java", argv: []string{"java", "docs/snippets/java/Receiver.java"}},
	}
}

// runningReceiver is a started receiver snippet.
type runningReceiver struct {
	receiverSnippet
	proc *snippetProc
	port string
	url  string
}

func startReceiverSnippet(t *testing.T, s receiverSnippet, secret string) *runningReceiver {
	t.Helper()
	root := repoRoot(t)
	argv := append([]string(nil), s.argv...)
	if s.build != "" {
		bin := filepath.Join(t.TempDir(), s.name)
		out, err := exec.Command("go", "build", "-C", root, "-o", bin, s.build).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: go build %s: %v\n%s", s.name, s.build, err, out)
		}
		argv = []string{bin}
	} else {
		argv[0] = need(t, argv[0])
	}
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	for i := range argv {
		argv[i] = strings.ReplaceAll(argv[i], "{port}", port)
	}
	env := []string{"PORT=" + port, "WEBHOOK_SECRET=" + secret, "SEEN_DIR=" + t.TempDir()}
	if s.env != nil {
		env = append(env, s.env(t)...)
	}
	r := &runningReceiver{receiverSnippet: s, port: port, url: "http://" + addr + "/hooks"}
	r.proc = startProc(t, s.name, root, env, argv...)
	return r
}

func (r *runningReceiver) waitListening(t *testing.T) {
	t.Helper()
	eventually(t, 60*time.Second, r.name+" listening on "+r.port, func() (bool, string) {
		if r.proc.exited() {
			t.Fatalf("%s exited before listening:\n%s", r.name, tailString(r.proc.err.String(), 2000))
		}
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+r.port, time.Second)
		if err != nil {
			return false, err.Error()
		}
		c.Close()
		return true, ""
	})
}

// trickyData is event data that breaks a verifier reading anything but the
// raw bytes: non-ASCII text, characters a JSON encoder may HTML-escape,
// integers beyond 2^53, and escapes that the body normalises.
const trickyData = `{"text":"Grüße aus Zürich, 東京, emoji 😀, RTL עברית","html":"<script>alert(\"x\")</script> & \u003cb\u003e","big":123456789012345678901234567890,"id":9007199254740993,"neg":-0.000001e-7}`

// TestReceiverSnippets runs every receiver snippet of docs/RECEIVING.md as
// a real endpoint of hookrelay: each must accept every genuine delivery
// (outcome delivered, and it printed the webhook-id), and, replaying a
// captured genuine request with modifications, reject a tampered body, a
// signature made with another secret and a timestamp older than five
// minutes, while accepting the same request re-signed with the right secret.
func TestReceiverSnippets(t *testing.T) {
	h := newHarness(t, config{})
	capture := newReceiver(t, "capture", always(http.StatusOK))
	secret := capture.Secret // every snippet shares it, so a captured request is genuine for each

	var rs []*runningReceiver
	for _, s := range receiverSnippets() {
		rs = append(rs, startReceiverSnippet(t, s, secret))
	}
	for _, r := range rs {
		r.waitListening(t)
	}
	h.addEndpoint(endpoint{ID: "capture", URL: capture.URL, Secret: secret, Events: []string{"snippet.*"}})
	for _, r := range rs {
		h.addEndpoint(endpoint{ID: r.name, URL: r.url, Secret: secret, Events: []string{"snippet.*"}})
	}
	h.start("snippets")

	p := newPublisher(t, h, publish.Structured)
	pb := newPublisher(t, h, publish.Binary)
	var webhookIDs []string
	for i, pub := range []*publish.Publisher{p, pb, p} {
		ev, err := publish.NewEvent("/snippets", "snippet.tricky", []byte(trickyData))
		if err != nil {
			t.Fatal(err)
		}
		if i == 2 {
			ev.SetType("snippet.plain")
			if err := ev.SetData(event.ApplicationJSON, []byte(`{"n":1}`)); err != nil {
				t.Fatal(err)
			}
		}
		if err := pub.Publish(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
		webhookIDs = append(webhookIDs, webhook.WebhookID(ev.Source(), ev.ID()))
	}

	want := len(webhookIDs) * (len(rs) + 1)
	h.waitAttempts(90*time.Second, "every snippet delivered every event", func(rows []attemptRow) (bool, string) {
		delivered := map[string]int{}
		var other []string
		for _, r := range rows {
			if r.Outcome == "delivered" {
				delivered[r.EndpointID]++
			} else {
				other = append(other, r.EndpointID+":"+r.Outcome+":"+strconv.Itoa(r.HTTPStatus))
			}
		}
		n := 0
		for _, c := range delivered {
			n += c
		}
		return n == want, fmt.Sprintf("delivered %v (want %d in all); not delivered %v", delivered, want, other)
	})
	for _, r := range rs {
		eventually(t, 10*time.Second, r.name+" printed every webhook-id", func() (bool, string) {
			out := r.proc.out.String()
			for _, id := range webhookIDs {
				if !strings.Contains(out, "verified "+id) {
					return false, "missing " + id + " in " + out
				}
			}
			return true, ""
		})
	}

	// Replays of a captured genuine request with the tricky body.
	var genuine *request
	for _, req := range capture.Requests() {
		if req.WebhookID == webhookIDs[0] {
			genuine = &req
			break
		}
	}
	if genuine == nil || genuine.VerifyErr != nil {
		t.Fatalf("no verified capture of %s: %+v", webhookIDs[0], genuine)
	}
	if !bytes.Contains(genuine.Body, []byte("東京")) || !bytes.Contains(genuine.Body, []byte("123456789012345678901234567890")) || !bytes.Contains(genuine.Body, []byte("<script>")) {
		t.Fatalf("the body lost its tricky parts: %s", genuine.Body)
	}
	right, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	wrong, err := standardwebhooks.NewWebhook(newSecret())
	if err != nil {
		t.Fatal(err)
	}
	tampered := bytes.Replace(genuine.Body, []byte("123456789012345678901234567890"), []byte("123456789012345678901234567891"), 1)
	now := time.Now()
	cases := []struct {
		name   string
		body   []byte
		signer *standardwebhooks.Webhook
		at     time.Time // zero: the captured headers as they are
		accept bool
	}{
		{"genuine as captured", genuine.Body, nil, time.Time{}, true},
		{"re-signed now", genuine.Body, right, now, true},
		{"re-signed 4 minutes ago", genuine.Body, right, now.Add(-4 * time.Minute), true},
		{"tampered body", tampered, nil, time.Time{}, false},
		{"wrong secret", genuine.Body, wrong, now, false},
		{"timestamp 6 minutes old", genuine.Body, right, now.Add(-6 * time.Minute), false},
		{"no signature", genuine.Body, nil, now, false},
	}
	client := &http.Client{Timeout: 20 * time.Second}
	for _, r := range rs {
		for _, c := range cases {
			hdr := http.Header{}
			hdr.Set("content-type", "application/json")
			hdr.Set("webhook-id", genuine.WebhookID)
			hdr.Set("webhook-timestamp", genuine.Timestamp)
			hdr.Set("webhook-signature", genuine.Signature)
			if !c.at.IsZero() {
				hdr.Set("webhook-timestamp", strconv.FormatInt(c.at.Unix(), 10))
				hdr.Del("webhook-signature")
				if c.signer != nil {
					sig, err := c.signer.Sign(genuine.WebhookID, c.at, c.body)
					if err != nil {
						t.Fatal(err)
					}
					hdr.Set("webhook-signature", sig)
				}
			}
			req, err := http.NewRequest(http.MethodPost, r.url, bytes.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header = hdr
			resp, err := client.Do(req)
			if err != nil {
				t.Errorf("%s, %s: %v", r.name, c.name, err)
				continue
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			ok := resp.StatusCode >= 200 && resp.StatusCode < 300
			if ok != c.accept {
				t.Errorf("%s, %s: status %d, want accepted=%v", r.name, c.name, resp.StatusCode, c.accept)
			} else if !c.accept && resp.StatusCode >= 500 {
				t.Errorf("%s, %s: status %d, want a 4xx refusal (a 5xx makes hookrelay retry)", r.name, c.name, resp.StatusCode)
			}
		}
	}
	// A duplicate is accepted but handled once: each snippet printed each
	// webhook-id exactly once although the genuine request came three times.
	for _, r := range rs {
		if n := strings.Count(r.proc.out.String(), "verified "+genuine.WebhookID); n != 1 {
			t.Errorf("%s handled %s %d times, want once (deduplicated on webhook-id)", r.name, genuine.WebhookID, n)
		}
	}
}

func newPublisher(t *testing.T, h *harness, mode publish.Mode) *publish.Publisher {
	t.Helper()
	p, err := publish.New(h.cl, publish.Options{Topic: h.topic("events"), Mode: mode})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var publishedLine = regexp.MustCompile(`published (evt_[A-Za-z0-9_-]+)`) // Maven may wrap lines in colour codes

// TestProducerSnippets runs the producer snippets of docs/PRODUCING.md
// (Python confluent-kafka, kcat, Java kafka-clients + CloudEvents SDK)
// against the stack; every event they print as published is delivered and
// verified.
func TestProducerSnippets(t *testing.T) {
	h := newHarness(t, config{})
	rc := newReceiver(t, "billing", always(http.StatusOK))
	h.addEndpoint(endpoint{ID: "billing", URL: rc.URL, Secret: rc.Secret, Events: []string{"invoice.*"}})
	h.start("producers")
	root := repoRoot(t)
	env := []string{"BROKERS=" + strings.Join(stack.Brokers(t), ","), "TOPIC=" + h.topic("events")}

	run := func(name string, argv ...string) []string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // hang guard; Maven's first run downloads
		defer cancel()
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), env...)
		if name == "python" {
			cmd.Env = append(cmd.Env, "PYTHONPATH="+snippetPyPath(t))
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
		var ids []string
		for _, m := range publishedLine.FindAllStringSubmatch(string(out), -1) {
			ids = append(ids, m[1])
		}
		if len(ids) == 0 {
			t.Fatalf("%s printed no 'published <id>' line:\n%s", name, out)
		}
		t.Logf("%s published %v", name, ids)
		return ids
	}
	var ids []string
	ids = append(ids, run("python", need(t, "python3"), "docs/snippets/python/produce.py")...)
	need(t, "kcat")
	ids = append(ids, run("kcat", "bash", "docs/snippets/kcat/produce.sh")...)
	ids = append(ids, run("java", need(t, "mvn"), "-B", "-q", "-ntp", "-Dstyle.color=never", "-f", "docs/snippets/java/producer/pom.xml",
		"compile", "exec:java", "-DBROKERS="+strings.Join(stack.Brokers(t), ","), "-DTOPIC="+h.topic("events"))...)

	eventually(t, 60*time.Second, "every snippet's event delivered and verified", func() (bool, string) {
		got := map[string]bool{}
		for _, r := range rc.Requests() {
			if r.VerifyErr == nil {
				got[r.WebhookID] = true
			}
		}
		var missing []string
		for _, id := range ids {
			if !got[webhook.WebhookID("/billing", id)] {
				missing = append(missing, id)
			}
		}
		return len(missing) == 0, fmt.Sprintf("not delivered: %v", missing)
	})
	if inv := h.countByKey(h.topic("events.invalid")); len(inv) != 0 {
		t.Errorf("events.invalid has records: %v", inv)
	}
}

// TestPublishTransactional: package publish inside a real Kafka
// transaction: the committed event is delivered; the aborted one, produced
// before it to the same partition, never is.
func TestPublishTransactional(t *testing.T) {
	h := newHarness(t, config{})
	rc := newReceiver(t, "tx", always(http.StatusOK))
	h.addEndpoint(endpoint{ID: "tx", URL: rc.URL, Secret: rc.Secret, Events: []string{"order.*"}})
	h.start("tx")

	tx := stack.Client(t, kgo.TransactionalID(h.prefix+"upstream-tx"))
	p, err := publish.New(tx, publish.Options{Topic: h.topic("events")})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	mk := func(typ string) event.Event {
		ev, err := publish.NewEvent("/orders", typ, map[string]string{"order": "o_1"})
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	aborted, committed := mk("order.cancelled"), mk("order.placed")
	for _, step := range []struct {
		ev  event.Event
		end kgo.TransactionEndTry
	}{{aborted, kgo.TryAbort}, {committed, kgo.TryCommit}} {
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := p.PublishTx(ctx, tx, step.ev, publish.Key("o_1")); err != nil {
			t.Fatal(err)
		}
		if err := tx.EndTransaction(ctx, step.end); err != nil {
			t.Fatal(err)
		}
	}
	committedID, abortedID := webhook.WebhookID("/orders", committed.ID()), webhook.WebhookID("/orders", aborted.ID())
	eventually(t, 60*time.Second, "the committed event delivered", func() (bool, string) {
		for _, r := range rc.Requests() {
			if r.WebhookID == committedID {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d requests", rc.Count())
	})
	// Same key, same partition, produced first: fan-out has read past it.
	for _, r := range rc.Requests() {
		if r.WebhookID == abortedID {
			t.Errorf("the aborted event %s was delivered", aborted.ID())
		}
	}
	for _, a := range h.attempts() {
		if a.EventID == aborted.ID() {
			t.Errorf("the aborted event has an attempt: %+v", a)
		}
	}
}

// TestLogFollow: `hookrelay log --follow --endpoint X` prints X's attempts
// as they are written (a retried delivery's both attempts), not those of
// another endpoint, and not those written before it started.
func TestLogFollow(t *testing.T) {
	h := newHarness(t, config{RetrySchedule: "1s"})
	flaky := newReceiver(t, "flaky", hostileOnce())
	other := newReceiver(t, "other", always(http.StatusOK))
	h.addEndpoint(endpoint{ID: "flaky", URL: flaky.URL, Secret: flaky.Secret, Events: []string{"follow.*"}})
	h.addEndpoint(endpoint{ID: "other", URL: other.URL, Secret: other.Secret, Events: []string{"follow.*"}})
	h.start("follow")
	p := newPublisher(t, h, publish.Structured)
	pub := func(typ string) string {
		ev, err := publish.NewEvent("/follow", typ, map[string]int{"n": 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Publish(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
		return ev.ID()
	}
	before := pub("follow.before")
	h.waitAttempts(60*time.Second, "the earlier event's attempts stored", func(rows []attemptRow) (bool, string) {
		n := 0
		for _, r := range rows {
			if r.EventID == before && r.Outcome == "delivered" {
				n++
			}
		}
		return n == 2, fmt.Sprintf("%d delivered", n)
	})

	cmd := h.command(context.Background(), "log", "--follow", "--endpoint", "flaky") // stopped by SIGINT below
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }() // owner: this test; awaited below
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case err := <-done:
			if err != nil && !t.Failed() {
				t.Errorf("log --follow exited with %v after SIGINT; want 0\n%s", err, stderr.String())
			}
		case <-time.After(stopTimeout):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("log --follow did not stop on SIGINT")
		}
	})
	eventually(t, 30*time.Second, "log --follow reading", func() (bool, string) {
		return strings.Contains(stderr.String(), "following "), stderr.String()
	})

	now := pub("follow.now")
	var lines []string
	eventually(t, 60*time.Second, "both attempts of the new event printed", func() (bool, string) {
		lines = lines[:0]
		sc := bufio.NewScanner(strings.NewReader(stdout.String()))
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		var retry, delivered bool
		for _, l := range lines {
			if strings.Contains(l, now) {
				f := strings.Fields(l)
				retry = retry || (len(f) > 5 && f[3] == "1" && f[4] == "500" && f[5] == "retry_scheduled")
				delivered = delivered || (len(f) > 5 && f[3] == "2" && f[4] == "200" && f[5] == "delivered")
			}
		}
		return retry && delivered, stdout.String()
	})
	if !strings.HasPrefix(lines[0], "TIME") || !strings.Contains(lines[0], "OUTCOME") {
		t.Errorf("first line %q, want the log table's header", lines[0])
	}
	out := stdout.String()
	if strings.Contains(out, before) {
		t.Errorf("log --follow printed an attempt written before it started (%s):\n%s", before, out)
	}
	// Other's attempt for the new event is in the topic before flaky's
	// second one (flaky's retry waits a second); it must not be printed.
	if n := strings.Count(out, now); n != 2 {
		t.Errorf("event %s printed %d times, want 2 (flaky's two attempts, none of other's):\n%s", now, n, out)
	}
}

// hostileOnce answers 500 to each webhook-id's first request, 200 after.
func hostileOnce() behaviour {
	return func(r *request) answer {
		if r.Nth == 1 {
			return answer{Status: http.StatusInternalServerError}
		}
		return answer{Status: http.StatusOK}
	}
}

// TestDebeziumOutboxRecipeForm checks the form of the Debezium recipe of
// docs/PRODUCING.md without running it (TestDebeziumOutboxDelivered runs
// it): the connector configuration parses and maps each outbox row to a
// structured-mode CloudEvent on the events topic, the value the payload
// column's bytes unchanged.
func TestDebeziumOutboxRecipeForm(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "snippets", "debezium", "outbox-connector.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Name   string            `json:"name"`
		Config map[string]string `json:"config"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatalf("outbox-connector.json: %v", err)
	}
	want := map[string]string{
		"transforms":             "outbox",
		"transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
		"transforms.outbox.table.field.event.payload":         "payload",
		"transforms.outbox.table.field.event.key":             "aggregate_id",
		"transforms.outbox.table.expand.json.payload":         "false",
		"transforms.outbox.table.fields.additional.placement": "content_type:header:content-type",
		"transforms.outbox.route.topic.replacement":           "hookrelay.events",
		"transforms.outbox.route.tombstone.on.empty.payload":  "false",
		"value.converter":                      "org.apache.kafka.connect.converters.ByteArrayConverter",
		"tombstones.on.delete":                 "false",
		"producer.override.enable.idempotence": "true",
		"producer.override.acks":               "all",
	}
	for k, v := range want {
		if got := c.Config[k]; got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	sql, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "snippets", "debezium", "outbox.sql"))
	if err != nil {
		t.Fatal(err)
	}
	for _, col := range []string{"aggregate_type", "aggregate_id", "content_type", "payload", "application/cloudevents+json"} {
		if !strings.Contains(string(sql), col) {
			t.Errorf("outbox.sql lacks %s, which the connector maps", col)
		}
	}
	// The example row's payload is an event fan-out accepts.
	r := &kgo.Record{Key: []byte("in_1"), Value: []byte(`{"specversion":"1.0","id":"evt_7f3c","source":"/billing","type":"invoice.paid","time":"2026-01-02T03:04:05Z","datacontenttype":"application/json","data":{"invoice":"in_1"}}`),
		Headers: []kgo.RecordHeader{{Key: "content-type", Value: []byte("application/cloudevents+json")}, {Key: "id", Value: []byte("5f0c…")}}}
	if err := events.Check(r, 0); err != nil {
		t.Errorf("the outbox row as Debezium produces it: %v", err)
	}
}

// TestDebeziumOutboxDelivered runs the outbox recipe for real
// (docs/snippets/debezium/run-local.sh: PostgreSQL, Kafka Connect and
// Debezium from Maven Central, the recipe's connector configuration): the
// committed outbox row is delivered and verified; the rolled-back one never.
func TestDebeziumOutboxDelivered(t *testing.T) {
	need(t, "java")
	need(t, "mvn")
	need(t, "psql")
	h := newHarness(t, config{})
	rc := newReceiver(t, "outbox", always(http.StatusOK))
	h.addEndpoint(endpoint{ID: "outbox", URL: rc.URL, Secret: rc.Secret, Events: []string{"invoice.*"}})
	h.start("outbox")
	pg, connect := freeAddr(t), freeAddr(t)
	_, pgPort, _ := net.SplitHostPort(pg)
	_, connectPort, _ := net.SplitHostPort(connect)
	p := startProc(t, "debezium", repoRoot(t), []string{
		"BROKERS=" + strings.Join(stack.Brokers(t), ","), "TOPIC=" + h.topic("events"), "WORK=" + t.TempDir(),
		"PG_PORT=" + pgPort, "CONNECT_PORT=" + connectPort,
	}, "bash", "docs/snippets/debezium/run-local.sh")
	t.Cleanup(func() { // runs before startProc's SIGKILL: let the script stop Connect and PostgreSQL
		_ = p.cmd.Process.Signal(os.Interrupt)
		select {
		case <-p.done:
		case <-time.After(stopTimeout):
		}
	})
	var id string
	eventually(t, 5*time.Minute, "the outbox row inserted (Maven's first run downloads ~70 jars)", func() (bool, string) {
		if p.exited() {
			t.Fatalf("run-local.sh exited:\n%s", tailString(p.err.String(), 3000))
		}
		m := publishedLine.FindStringSubmatch(p.out.String())
		if m == nil {
			return false, tailString(p.err.String(), 300)
		}
		id = m[1]
		return true, ""
	})
	want, rolledBack := webhook.WebhookID("/billing", id), webhook.WebhookID("/billing", id+"_rolled_back")
	eventually(t, 60*time.Second, "the committed outbox row delivered and verified", func() (bool, string) {
		for _, r := range rc.Requests() {
			if r.WebhookID == want && r.VerifyErr == nil {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d requests", rc.Count())
	})
	for _, r := range rc.Requests() {
		if r.WebhookID == rolledBack {
			t.Errorf("the rolled-back outbox row was delivered")
		}
		if r.WebhookID == want && !bytes.Contains(r.Body, []byte("123456789012345678901234567890")) {
			t.Errorf("body lost the payload's bytes: %s", r.Body)
		}
	}
	if inv := h.countByKey(h.topic("events.invalid")); len(inv) != 0 {
		t.Errorf("events.invalid has records: %v", inv)
	}
}

// TestPublishCLI: `hookrelay publish` (package publish underneath) delivers
// in both modes and refuses, before producing, an event fan-out would send
// to events.invalid.
func TestPublishCLI(t *testing.T) {
	h := newHarness(t, config{})
	rc := newReceiver(t, "cli", always(http.StatusOK))
	h.addEndpoint(endpoint{ID: "cli", URL: rc.URL, Secret: rc.Secret, Events: []string{"cli.*"}, Tenant: "acme"})
	h.start("cli")
	var want []string
	for _, mode := range []string{"structured", "binary"} {
		id := "evt_cli_" + mode
		h.cli("publish", "--type", "cli.sent", "--source", "/cli", "--id", id, "--tenant", "acme", "--mode", mode, "--key", "k1",
			"--data", `{"text":"Grüße <b>","big":123456789012345678901234567890}`)
		want = append(want, webhook.WebhookID("/cli", id))
	}
	eventually(t, 60*time.Second, "both CLI events delivered and verified", func() (bool, string) {
		got := map[string]bool{}
		for _, r := range rc.Requests() {
			got[r.WebhookID] = got[r.WebhookID] || r.VerifyErr == nil
		}
		return got[want[0]] && got[want[1]], fmt.Sprintf("%v", got)
	})
	big := filepath.Join(t.TempDir(), "big.json")
	if err := os.WriteFile(big, []byte(`"`+strings.Repeat("x", 300<<10)+`"`), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	out, err := h.command(ctx, "publish", "--type", "cli.sent", "--data", "@"+big).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "too_large") {
		t.Errorf("publish of a 300 KiB event: %v, %s; want a refusal naming too_large", err, out)
	}
	if inv := h.countByKey(h.topic("events.invalid")); len(inv) != 0 {
		t.Errorf("events.invalid has records: %v", inv)
	}
}
