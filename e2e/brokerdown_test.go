package e2e

// Broker outages (issue 10, finding 3: hookrelay exited with status 1 when
// its broker stopped, and at every start while it was down). These tests run
// hookrelay against a PRIVATE single Kafka node, started and stopped with the
// project's own scripts (deploy/local/kafka-node.sh) on other ports and a
// temporary state folder, so the shared stack on 127.0.0.1:9092 is never
// touched. ClickHouse is the shared one (the audit role).

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/e2e/stack"
)

// envKafkaLibs names the folder of the Kafka jars. Default: kafka/libs of
// HOOKRELAY_STACK_DIR, else .local/kafka/libs of the repository.
const envKafkaLibs = "HOOKRELAY_KAFKA_LIBS"

// soloKafka is one private Kafka node, driven by deploy/local/kafka-node.sh.
type soloKafka struct {
	t       *testing.T
	scripts string
	env     []string
	broker  string // 127.0.0.1:<port>
	log     string
}

// newSoloKafka prepares a private node (not started) and stops it when the
// test ends.
func newSoloKafka(t *testing.T) *soloKafka {
	t.Helper()
	stack.Brokers(t) // under -short without a stack: skip, like every e2e test
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	var libs string
	cands := []string{os.Getenv(envKafkaLibs)}
	if d := os.Getenv("HOOKRELAY_STACK_DIR"); d != "" {
		cands = append(cands, filepath.Join(d, "kafka", "libs"))
	}
	cands = append(cands, filepath.Join(repo, ".local", "kafka", "libs"), "/work/main/.local/kafka/libs")
	for _, c := range cands {
		if c == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(c, ".complete")); err == nil {
			libs = c
			break
		}
	}
	if libs == "" {
		t.Fatalf("e2e: no Kafka jars (a libs folder with .complete) in %v; run `make deps` or set %s", cands, envKafkaLibs)
	}
	state := t.TempDir()
	if err := os.MkdirAll(filepath.Join(state, "kafka"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(libs, filepath.Join(state, "kafka", "libs")); err != nil {
		t.Fatal(err)
	}
	port := freePortPair(t)
	k := &soloKafka{
		t:       t,
		scripts: filepath.Join(repo, "deploy", "local"),
		broker:  "127.0.0.1:" + strconv.Itoa(port),
		log:     filepath.Join(state, "logs", "kafka.log"),
		env: []string{
			"HOOKRELAY_STACK_DIR=" + state,
			"HOOKRELAY_KAFKA_PORT=" + strconv.Itoa(port),
			"HOOKRELAY_KAFKA_CONTROLLER_PORT=" + strconv.Itoa(port+1),
			"HOOKRELAY_CLICKHOUSE_PORT=" + strconv.Itoa(port+2),
			"HOOKRELAY_CLICKHOUSE_HTTP_PORT=" + strconv.Itoa(port+3),
			"HOOKRELAY_KAFKA_HEAP=512m",
			"HOOKRELAY_KAFKA_NODES=1",
			"HOOKRELAY_UP_TIMEOUT=240", // a hang guard: a busy shared machine starts a JVM slowly
		},
	}
	t.Cleanup(func() {
		if out, err := k.script("kill"); err != nil {
			t.Logf("e2e: private Kafka kill: %v\n%s", err, out)
		}
	})
	return k
}

// freePortPair returns a port p such that p and p+1 were free a moment ago.
func freePortPair(t *testing.T) int {
	t.Helper()
	for range 50 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if p > 65000 {
			continue
		}
		if ln2, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+1)); err == nil {
			ln2.Close()
			return p
		}
	}
	t.Fatal("e2e: no free pair of ports")
	return 0
}

func (k *soloKafka) script(verb string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(k.scripts, "kafka-node.sh"), verb, "1")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HOOKRELAY_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, k.env...)
	return cmd.CombinedOutput()
}

// start starts the node and waits until it is healthy.
func (k *soloKafka) start() {
	k.t.Helper()
	began := time.Now()
	if out, err := k.script("start"); err != nil {
		k.t.Fatalf("e2e: kafka-node.sh start 1: %v\n%s", err, out)
	}
	k.t.Logf("e2e: private Kafka %s up in %v", k.broker, time.Since(began).Round(time.Millisecond))
}

// stop sends SIGTERM (controlled shutdown) and waits for the exit.
func (k *soloKafka) stop() {
	k.t.Helper()
	if out, err := k.script("stop"); err != nil {
		k.t.Fatalf("e2e: kafka-node.sh stop 1: %v\n%s", err, out)
	}
	k.t.Logf("e2e: private Kafka %s stopped (SIGTERM)", k.broker)
}

// soloHarness is a harness whose hookrelay processes, CLI and producer use
// k instead of the shared broker.
func soloHarness(t *testing.T, k *soloKafka) *harness {
	t.Helper()
	h := newHarness(t, config{Partitions: 2})
	for i, kv := range h.env {
		if strings.HasPrefix(kv, "HOOKRELAY_BROKERS=") {
			h.env[i] = "HOOKRELAY_BROKERS=" + k.broker
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.broker), kgo.ProducerLinger(2*time.Millisecond),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	h.cl = cl
	return h
}

// alive fails the test if p has exited.
func (p *process) alive(what string) {
	p.h.t.Helper()
	select {
	case <-p.done:
		p.h.t.Fatalf("hookrelay %s exited %s (%v); log:\n%s", p.name, what, p.waitErr, tail(p.logPath, 40))
	default:
	}
}

// checkDeliveries fails the test unless every event of ids reached rc, and
// every duplicate has the same webhook-id and body as the first request.
func checkDeliveries(t *testing.T, rc *receiver, ids []string) int {
	t.Helper()
	first := map[string]request{}
	dups := 0
	for _, r := range rc.Requests() {
		ev := eventOf(r)
		if ev == "" {
			t.Errorf("bad body %q", r.Body)
			continue
		}
		if r.VerifyErr != nil {
			t.Errorf("%s: signature does not verify: %v", ev, r.VerifyErr)
		}
		f, ok := first[ev]
		if !ok {
			first[ev] = r
			continue
		}
		dups++
		if r.WebhookID != f.WebhookID || !bytes.Equal(r.Body, f.Body) {
			t.Errorf("duplicate of %s differs: webhook-id %s vs %s, body equal %v", ev, r.WebhookID, f.WebhookID, bytes.Equal(r.Body, f.Body))
		}
	}
	for _, ev := range ids {
		if _, ok := first[ev]; !ok {
			t.Errorf("delivery of %s missing", ev)
		}
	}
	return dups
}

// TestStartWhileBrokerDown: hookrelay started while its only broker is down
// neither exits nor reports ready; /healthz answers, /readyz says why
// ("kafka: not ready: …"). Once the broker is up it creates its topics,
// becomes ready and delivers. Before the fix it exited at once with status 1
// ("topics: create topic …: unable to dial").
func TestStartWhileBrokerDown(t *testing.T) {
	k := newSoloKafka(t)
	h := soloHarness(t, k)
	p := h.spawn("down-1")
	// While the broker is down: alive, healthy, not ready, and saying why.
	eventually(t, 30*time.Second, "/readyz naming kafka while the broker is down", func() (bool, string) {
		p.alive("while its broker was down")
		code, body := p.get("/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "kafka: not ready"), fmt.Sprintf("%d %q", code, body)
	})
	// Several back-off rounds later it still runs.
	deadline := time.Now().Add(8 * time.Second)
	for time.Now().Before(deadline) {
		p.alive("while its broker was down")
		if code, body := p.get("/healthz"); code != http.StatusOK {
			t.Fatalf("/healthz while the broker is down: %d %q, want 200", code, body)
		}
		time.Sleep(200 * time.Millisecond) // polling interval
	}
	_, body := p.get("/readyz")
	t.Logf("e2e: /readyz while the broker is down:\n%s", body)

	k.start()
	up := time.Now()
	p.waitReady(readyTimeout)
	t.Logf("e2e: hookrelay ready %v after its broker came up", time.Since(up).Round(time.Millisecond))
	rc := newReceiver(t, "down-rc", always(http.StatusOK))
	h.addEndpoint(endpoint{ID: "down-rc", URL: rc.URL, Secret: rc.Secret, Events: []string{"recovery.*"}})
	var evs []cloudEvent
	var ids []string
	for i := range 20 {
		id := fmt.Sprintf("down-%03d", i)
		ids = append(ids, id)
		evs = append(evs, cloudEvent{ID: id, Source: "urn:e2e:brokerdown", Type: "recovery.tick", Time: time.Now(), Data: eventData{Event: id, N: i}})
	}
	h.produce(h.events(evs)...)
	eventually(t, 60*time.Second, "every delivery after the broker came up", func() (bool, string) {
		return rc.Distinct() >= len(ids), fmt.Sprintf("%d/%d", rc.Distinct(), len(ids))
	})
	checkDeliveries(t, rc, ids)
	p.alive("after its broker came up")
}

// TestBrokerRestartWhileDeliveriesFlow: the only broker gets SIGTERM while
// deliveries flow and comes back some seconds later. hookrelay never exits,
// is ready again after the restart, and every event acknowledged by the
// broker is delivered; duplicates carry the same webhook-id and body. Before
// the fix it exited with status 1 within seconds ("dispatcher end
// transaction: unable to dial").
func TestBrokerRestartWhileDeliveriesFlow(t *testing.T) {
	k := newSoloKafka(t)
	k.start()
	h := soloHarness(t, k)
	rc := newReceiver(t, "bounce-rc", always(http.StatusOK))
	h.addEndpoint(endpoint{ID: "bounce-rc", URL: rc.URL, Secret: rc.Secret, Events: []string{"recovery.*"}})
	p := h.start("bounce-1")
	load := startLoad(t, h, "bounce", 10, 100*time.Millisecond)
	eventually(t, 60*time.Second, "deliveries flowing before the broker stops", func() (bool, string) {
		return rc.Count() >= 100, fmt.Sprintf("%d requests", rc.Count())
	})

	k.stop()
	// The outage: long enough for every stage's next transaction, fetch
	// and commit to fail (franz-go gives up dialing after its retries).
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		p.alive("while its broker was down")
		time.Sleep(200 * time.Millisecond) // polling interval
	}
	if code, body := p.get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz while the broker is down: %d %q, want 200", code, body)
	}
	k.start()
	up := time.Now()

	base := rc.Count()
	eventually(t, 120*time.Second, "deliveries flowing after the broker restart", func() (bool, string) {
		p.alive("after its broker restarted")
		return rc.Count() > base, "none yet"
	})
	t.Logf("e2e: deliveries resumed %v after the broker was up again", time.Since(up).Round(time.Millisecond))
	eventually(t, 120*time.Second, "deliveries flowing after the broker restart", func() (bool, string) {
		p.alive("after its broker restarted")
		return rc.Count() >= base+100, fmt.Sprintf("%d new requests", rc.Count()-base)
	})
	p.waitReady(readyTimeout)
	load.stopLoad()
	load.mu.Lock()
	ids := append([]string(nil), load.ids...)
	perrs := len(load.errs)
	load.mu.Unlock()
	if perrs > 0 {
		// Events whose produce failed during the outage were never
		// acknowledged; they are not expected.
		t.Logf("e2e: %d produce batches failed during the outage (not acknowledged, not expected)", perrs)
	}
	eventually(t, 120*time.Second, "every acknowledged event delivered", func() (bool, string) {
		p.alive("after its broker restarted")
		return rc.Distinct() >= len(ids), fmt.Sprintf("%d/%d", rc.Distinct(), len(ids))
	})
	dups := checkDeliveries(t, rc, ids)
	p.alive("at the end")
	restarts := map[string]float64{}
	for _, st := range []string{"fanout", "dispatch", "retry-relay", "audit"} {
		restarts[st], _ = p.metric("hookrelay_stage_restarts_total", `stage="`+st+`"`)
	}
	t.Logf("TestBrokerRestartWhileDeliveriesFlow: %d events delivered across a broker restart, %d duplicates, stage restarts %v", len(ids), dups, restarts)
}
