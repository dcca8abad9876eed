package e2e

// Secured clusters (issue 16): the whole pipeline, the CLI and the API on the
// local stack's secured side only (Kafka SASL_SSL with SCRAM-SHA-512 and the
// stack's own CA, ClickHouse over TLS as a password user; stack.Secure), and
// each misconfiguration failing hookrelay's start at once, saying which.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/e2e/stack"
	"github.com/hookrelay/hookrelay/pipeline/api/apitest"
)

// newSecureHarness is newHarness with every hookrelay command, and the
// test's producer, on the secured side.
func newSecureHarness(t *testing.T, c config) (*harness, *stack.SecureSide) {
	t.Helper()
	ownsStack(t, "runs hookrelay on the local stack's secured side")
	sec := stack.Secure(t)
	c.Env = append(sec.Env(stack.Database(t)), c.Env...)
	h := newHarness(t, c)
	h.cl = sec.Client(t, kgo.ProducerLinger(2*time.Millisecond), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	return h, sec
}

// TestSecuredClusterEndToEnd: endpoints added with the CLI, an API key
// created with it, hookrelay with every role, events produced (and one
// published with the CLI), deliveries
// made and retried, attempts logged, read with `hookrelay log` and the API:
// all through SASL_SSL and the password user over TLS. No hookrelay command
// gets a plaintext address.
func TestSecuredClusterEndToEnd(t *testing.T) {
	h, sec := newSecureHarness(t, config{RetrySchedule: "1s,1s"})
	// No hookrelay command gets the plain settings (the last value of a
	// key wins in exec.Cmd.Env).
	eff := map[string]string{}
	for _, kv := range h.command(context.Background(), "run").Env {
		k, v, _ := strings.Cut(kv, "=")
		eff[k] = v
	}
	if eff["HOOKRELAY_BROKERS"] != strings.Join(sec.Brokers, ",") || eff["HOOKRELAY_KAFKA_TLS"] != "true" ||
		eff["HOOKRELAY_KAFKA_SASL_MECHANISM"] != "SCRAM-SHA-512" || !strings.Contains(eff["HOOKRELAY_CLICKHOUSE"], "secure=true") {
		t.Fatalf("hookrelay would not run on the secured side: %v", eff)
	}
	tenant := h.name("acme")
	ok := newReceiver(t, "ok", always(http.StatusOK))
	flaky := newReceiver(t, "flaky", func(r *request) answer {
		if r.Nth == 1 {
			return answer{Status: http.StatusServiceUnavailable}
		}
		return answer{Status: http.StatusOK}
	})
	epOK, epFlaky := h.name("ok"), h.name("flaky")
	h.addEndpoint(endpoint{ID: epOK, URL: ok.URL, Secret: ok.Secret, Events: []string{"invoice.*"}, Tenant: tenant})
	h.addEndpoint(endpoint{ID: epFlaky, URL: flaky.URL, Secret: flaky.Secret, Events: []string{"invoice.paid"}, Tenant: tenant})
	key := h.apiKey("--tenant", tenant)
	p := h.start("sec-1")

	// n-1 events from the test's producer, one with `hookrelay publish`.
	const n = 10
	var evs []cloudEvent
	for i := range n {
		evs = append(evs, cloudEvent{ID: h.name(fmt.Sprintf("ev-%d", i)), Source: "/billing", Type: "invoice.paid", Tenant: tenant, Data: map[string]any{"n": i}})
	}
	h.produce(h.events(evs[:n-1])...)
	last := evs[n-1]
	h.cli("publish", "--id", last.ID, "--source", last.Source, "--type", last.Type, "--tenant", tenant, "--data", `{"n":9}`)

	// Every event once at each endpoint (the flaky one after a retry), signed.
	eventually(t, 90*time.Second, "every event delivered to both endpoints", func() (bool, string) {
		return ok.Distinct() == n && flaky.Distinct() == n && flaky.Count() >= 2*n,
			fmt.Sprintf("ok %d distinct, flaky %d distinct of %d requests", ok.Distinct(), flaky.Distinct(), flaky.Count())
	})
	for _, rc := range []*receiver{ok, flaky} {
		for _, r := range rc.Requests() {
			if r.VerifyErr != nil {
				t.Errorf("%s: request %s fails verification: %v", rc.Name, r.WebhookID, r.VerifyErr)
			}
		}
	}
	// Attempt rows: one delivered per event and endpoint, and the flaky
	// endpoint's failed first attempts (the retry path: tier topic, relay).
	h.waitAttempts(90*time.Second, "attempt rows of every delivery", func(rows []attemptRow) (bool, string) {
		delivered, failed := map[string]int{}, 0
		for _, r := range rows {
			switch {
			case r.Outcome == "delivered":
				delivered[r.EndpointID]++
			case r.Outcome == "retry_scheduled" && r.EndpointID == epFlaky && r.AttemptNumber == 1:
				failed++
			}
		}
		return delivered[epOK] == n && delivered[epFlaky] == n && failed == n,
			fmt.Sprintf("delivered %v, flaky's failed first attempts %d (want %d each)", delivered, failed, n)
	})
	// The same rows read as the password user over TLS.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var rows uint64
	if err := sec.ClickHouse(t, h.db).QueryRow(ctx, "SELECT count() FROM (SELECT attempt_id FROM "+h.db+".attempts FINAL WHERE outcome IN ('delivered', 'retry_scheduled'))").Scan(&rows); err != nil {
		t.Fatalf("attempts over ClickHouse TLS as %s: %v", "hookrelay", err)
	}
	if rows != 3*n {
		t.Errorf("attempts over ClickHouse TLS: %d delivered or retry_scheduled rows, want %d", rows, 3*n)
	}

	// The CLI's delivery log and the API, both on the secured side.
	out := h.cli("log", "--endpoint", epFlaky)
	for _, ev := range evs {
		if strings.Count(out, ev.ID) != 2 {
			t.Errorf("hookrelay log --endpoint %s: %d rows of %s, want 2 (retry_scheduled, delivered):\n%s", epFlaky, strings.Count(out, ev.ID), ev.ID, out)
			break
		}
	}
	c := apiClient{t: t, base: "http://" + p.apiAddr, v: apitest.New(t, nil), key: key}
	eventually(t, 30*time.Second, "the API lists the delivered attempts", func() (bool, string) {
		data := c.want(c.call("GET", "/v1/endpoints/"+epOK+"/attempts?outcome=delivered", ""), http.StatusOK)["data"].([]any)
		return len(data) == n, fmt.Sprintf("%d attempts", len(data))
	})
	if list := c.want(c.call("GET", "/v1/endpoints", ""), http.StatusOK)["data"].([]any); len(list) != 2 {
		t.Errorf("the tenant's key lists %d endpoints, want 2", len(list))
	}
	if out := h.cli("endpoints", "get", epOK); !strings.Contains(out, ok.URL) {
		t.Errorf("hookrelay endpoints get %s: %s", epOK, out)
	}
}

// TestSecuredClusterMisconfigFailsAtStart: a wrong Kafka password, an
// untrusted CA, TLS against the plaintext listener and a wrong ClickHouse
// password each end `hookrelay run` at once (non-zero exit within the hang
// guard) with a message saying which; a broker that is merely down is
// waited for (the process stays up, /readyz names Kafka), as issue 10 wants.
func TestSecuredClusterMisconfigFailsAtStart(t *testing.T) {
	h, sec := newSecureHarness(t, config{})
	otherCA := foreignCA(t)
	for _, tc := range []struct {
		name string
		env  []string
		want string
	}{
		{"wrong Kafka password", []string{"HOOKRELAY_KAFKA_SASL_PASSWORD=not-" + sec.Password},
			"kafka: SASL authentication failed (SCRAM-SHA-512, user " + sec.User + ")"},
		{"unknown Kafka user", []string{"HOOKRELAY_KAFKA_SASL_USER=nobody"},
			"kafka: SASL authentication failed (SCRAM-SHA-512, user nobody)"},
		{"untrusted Kafka CA", []string{"HOOKRELAY_KAFKA_TLS_CA=" + otherCA},
			"kafka: TLS: certificate signed by unknown authority (HOOKRELAY_KAFKA_TLS_CA=" + otherCA + ")"},
		{"TLS to the plaintext listener", []string{"HOOKRELAY_BROKERS=" + strings.Join(stack.Brokers(t), ",")},
			"kafka: the broker closes every new connection at once"},
		{"wrong ClickHouse password", []string{"HOOKRELAY_CLICKHOUSE_PASSWORD=not-" + sec.ClickHousePassword},
			"clickhouse: authentication failed for user " + sec.User},
		{"untrusted ClickHouse CA", []string{"HOOKRELAY_CLICKHOUSE_TLS_CA=" + otherCA},
			"clickhouse: TLS: certificate signed by unknown authority (HOOKRELAY_CLICKHOUSE_TLS_CA=" + otherCA + ")"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			p := h.spawn("bad", tc.env...)
			select {
			case <-p.done:
			case <-time.After(120 * time.Second): // hang guard: a misconfiguration must not be retried for long (EOFs: 30 s of them)
				t.Fatalf("hookrelay still running 60 s after start; log:\n%s", tail(p.logPath, 30))
			}
			if p.waitErr == nil {
				t.Fatalf("hookrelay exited 0; want a failure; log:\n%s", tail(p.logPath, 30))
			}
			b, _ := os.ReadFile(p.logPath)
			if !strings.Contains(string(b), "hookrelay: "+tc.want) {
				t.Fatalf("hookrelay's last words do not say %q; log:\n%s", tc.want, tail(p.logPath, 30))
			}
			t.Logf("exit %v after %v", p.waitErr, time.Since(start).Round(time.Millisecond))
		})
	}
	t.Run("broker down is waited for", func(t *testing.T) {
		p := h.spawn("down", "HOOKRELAY_BROKERS="+freeAddr(t))
		eventually(t, 30*time.Second, "/readyz naming kafka", func() (bool, string) {
			resp, err := (&http.Client{Timeout: time.Second}).Get("http://" + p.httpAddr + "/readyz")
			if err != nil {
				return false, err.Error()
			}
			defer resp.Body.Close()
			buf := make([]byte, 4096)
			k, _ := resp.Body.Read(buf)
			return resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(buf[:k]), "kafka: not ready: topics not set up yet (try 3"),
				fmt.Sprintf("%d %q", resp.StatusCode, buf[:k])
		})
		select {
		case <-p.done:
			t.Fatalf("hookrelay exited (%v) while the broker was down; log:\n%s", p.waitErr, tail(p.logPath, 30))
		default:
		}
	})
}

// foreignCA writes a fresh self-signed CA certificate (not the stack's) to a
// PEM file and returns its path.
func foreignCA(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "not the stack's CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "other-ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
