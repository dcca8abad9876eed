package e2e

// The CLI's management-API commands (endpoints rotate-secret and health,
// recover, dlq list|show|replay) against a real `hookrelay run`: they are
// clients of the API (HOOKRELAY_API_URL, HOOKRELAY_API_KEY), so what they
// do is the API's one implementation, on the real Kafka and ClickHouse.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// useAPI points the harness's later commands at p's API as key.
func (h *harness) useAPI(p *process, key string) {
	h.env = append(h.env, "HOOKRELAY_API_URL=http://"+p.apiAddr, "HOOKRELAY_API_KEY="+key)
}

// typeOf returns the CloudEvent type in a delivered body.
func typeOf(r *request) string {
	var b webhookBody
	_ = json.Unmarshal(r.Body, &b)
	return b.Type
}

var (
	secretLine   = regexp.MustCompile(`(?m)^secret: (whsec_\S+)$`)
	recoveryLine = regexp.MustCompile(`(?m)^(rc_[0-9a-f]+)$`)
)

func TestCLIManagementCommands(t *testing.T) {
	h := newHarness(t, config{})
	var failing atomic.Bool // answer 400 to cli.fail events while set
	failing.Store(true)
	rc := newReceiver(t, "cli", func(r *request) answer {
		if failing.Load() && typeOf(r) == "cli.fail" {
			return answer{Status: http.StatusBadRequest}
		}
		return answer{Status: http.StatusOK}
	})
	h.addEndpoint(endpoint{ID: "cli-ep", URL: rc.URL, Secret: rc.Secret, Events: []string{"cli.*"}})
	admin := h.apiKey("--admin")
	p := h.start("cli-1")
	h.useAPI(p, admin)
	t0 := time.Now().UTC()

	// health before any attempt, then after one delivery.
	if out := h.cli("endpoints", "health", "cli-ep"); !strings.Contains(out, "status         active") || !strings.Contains(out, "last success   never") {
		t.Fatalf("health before any attempt:\n%s", out)
	}
	h.produce(h.events([]cloudEvent{{ID: "ok-1", Source: "urn:cli", Type: "cli.ok", Data: eventData{Event: "ok-1"}}})...)
	eventually(t, 60*time.Second, "ok-1 delivered and in the log", func() (bool, string) {
		out := h.cli("endpoints", "health", "cli-ep")
		return strings.Contains(out, "100.0% success (1 delivered, 0 failed, 1 attempts)"), out
	})

	// rotate-secret prints the new secret once; during the overlap requests
	// verify with the old secret (the receiver's) and the new one.
	out := h.cli("endpoints", "rotate-secret", "cli-ep", "--overlap", "1h")
	m := secretLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("rotate-secret printed no secret:\n%s", out)
	}
	if n := strings.Count(h.cli("endpoints", "get", "cli-ep"), `"whsec_`); n != 2 {
		t.Errorf("after rotate-secret, endpoints get shows %d secrets, want 2 (old and new)", n)
	}
	newWH, err := standardwebhooks.NewWebhook(m[1])
	if err != nil {
		t.Fatal(err)
	}
	h.produce(h.events([]cloudEvent{{ID: "ok-2", Source: "urn:cli", Type: "cli.ok", Data: eventData{Event: "ok-2"}}})...)
	var last request
	eventually(t, 60*time.Second, "ok-2 delivered", func() (bool, string) {
		for _, r := range rc.Requests() {
			if eventOf(r) == "ok-2" {
				last = r
			}
		}
		return last.WebhookID != "", fmt.Sprintf("%d requests", len(rc.Requests()))
	})
	if last.VerifyErr != nil {
		t.Errorf("after rotation, the old secret no longer verifies: %v", last.VerifyErr)
	}
	if err := newWH.Verify(last.Body, last.Header); err != nil {
		t.Errorf("after rotation, the new secret does not verify: %v", err)
	}

	// A permanent failure lands in the DLQ: dlq list and dlq show find it.
	h.produce(h.events([]cloudEvent{{ID: "fail-1", Source: "urn:cli", Type: "cli.fail", Data: eventData{Event: "fail-1"}}})...)
	var msg string
	eventually(t, 60*time.Second, "fail-1 in the DLQ", func() (bool, string) {
		out := h.cli("dlq", "list", "--endpoint", "cli-ep", "--since", "10m")
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) > 4 && f[3] == "cli.fail" && f[4] == "failed" {
				msg = f[2]
			}
		}
		return msg != "", out
	})
	eventually(t, 30*time.Second, "fail-1's attempt in the log", func() (bool, string) {
		out := h.cli("dlq", "show", msg, "--endpoint", "cli-ep")
		return strings.Contains(out, "DLQ records:") && strings.Count(out, "failed") >= 2 && strings.Contains(out, " 400 "), out
	})

	// dlq replay resends it once; the same replay with its key sends nothing more.
	failing.Store(false)
	replay := []string{"dlq", "replay", "--endpoint", "cli-ep", "--since", t0.Format(time.RFC3339Nano), "--idempotency-key", "cli-replay-1"}
	first := h.cli(replay...)
	if !strings.HasPrefix(first, "replayed 1 messages") || !strings.Contains(first, msg) {
		t.Fatalf("dlq replay:\n%s", first)
	}
	if again := h.cli(replay...); again != first {
		t.Errorf("repeated dlq replay printed\n%s\nwant the first answer\n%s", again, first)
	}
	count := func(id string) (n int) {
		for _, r := range rc.Requests() {
			if r.WebhookID == id {
				n++
			}
		}
		return n
	}
	eventually(t, 60*time.Second, "the replayed message delivered", func() (bool, string) {
		return count(msg) == 2, fmt.Sprintf("%d requests of %s", count(msg), msg)
	})

	// recover --wait: two events skipped while disabled arrive once each;
	// the same recover with its key prints the same recovery, sends nothing.
	since := time.Now().UTC()
	h.cli("endpoints", "disable", "cli-ep")
	h.produce(h.events([]cloudEvent{{ID: "sk-1", Source: "urn:cli", Type: "cli.ok", Data: eventData{Event: "sk-1"}},
		{ID: "sk-2", Source: "urn:cli", Type: "cli.ok", Data: eventData{Event: "sk-2"}}})...)
	h.waitAttempts(60*time.Second, "2 skipped rows", func(rows []attemptRow) (bool, string) {
		n := 0
		for _, r := range rows {
			if r.Outcome == "skipped" {
				n++
			}
		}
		return n == 2, fmt.Sprintf("%d skipped", n)
	})
	h.cli("endpoints", "enable", "cli-ep")
	rec := []string{"recover", "--endpoint", "cli-ep", "--since", since.Format(time.RFC3339Nano), "--idempotency-key", "cli-recover-1"}
	out = h.cli(append(rec, "--wait")...)
	id := recoveryLine.FindStringSubmatch(out)
	if id == nil || !strings.Contains(out, "2 found, 2 queued") || !strings.Contains(out, "delivered 2  failed 0  pending 0") {
		t.Fatalf("recover --wait:\n%s", out)
	}
	if again := recoveryLine.FindStringSubmatch(h.cli(rec...)); again == nil || again[1] != id[1] {
		t.Errorf("repeated recover: recovery %v, want %s", again, id[1])
	}
	time.Sleep(3 * time.Second) // a quiet period to catch a duplicate; no latency is asserted
	per := map[string]int{}
	for _, r := range rc.Requests() {
		per[eventOf(r)]++
	}
	if per["sk-1"] != 1 || per["sk-2"] != 1 {
		t.Errorf("recovered events arrived %d and %d times, want once each (all: %v)", per["sk-1"], per["sk-2"], per)
	}

	// Bad input is refused naming the flag or the field; a wrong key is 401.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"recover", "--endpoint", "cli-ep", "--since", "yesterday"}, "--since"},
		{[]string{"dlq", "replay", "--endpoint", "cli-ep"}, "--since"},
		{[]string{"endpoints", "health", "nope"}, "404"},
		{[]string{"endpoints", "health", "cli-ep", "--api-key", "hrk_0000000000000000_x"}, "401"},
		{[]string{"dlq", "list", "--api-url", "ftp://x"}, "--api-url"},
	} {
		out, err := h.command(t.Context(), c.args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) {
			t.Errorf("hookrelay %s: %v, %q; want an error naming %s", strings.Join(c.args, " "), err, out, c.want)
		}
	}
}
