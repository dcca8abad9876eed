package e2e

// Black-box mode (issue 13): the suite runs against an existing hookrelay
// deployment named by the environment, without starting or owning anything.
// See e2e/README.md for the variables and what the mode leaves behind.
//
// A test opts in with config{BlackBox: true}; it then may only publish events
// to the deployment's events topic, register endpoints through the CLI (on
// the deployment's endpoints topic), receive on local receivers and read the
// deployment's attempts table. Every other test (it starts, kills or
// configures hookrelay, or creates topics and databases of its own) is
// skipped in this mode, and only in this mode.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/e2e/stack"
)

// Environment variables of black-box mode. HOOKRELAY_BROKERS and
// HOOKRELAY_CLICKHOUSE (package stack) name the deployment's Kafka and its
// ClickHouse database (the DSN's path is the database hookrelay writes its
// attempts table to).
const (
	// envTarget selects where hookrelay comes from: unset, "" or "local"
	// (the default): each test starts its own bin/hookrelay; "existing": an
	// existing deployment, black-box.
	envTarget = "HOOKRELAY_E2E_TARGET"
	// envPrefix is the deployment's HOOKRELAY_TOPIC_PREFIX. Required with
	// HOOKRELAY_E2E_TARGET=existing; set it to "" for a deployment without
	// a prefix.
	envPrefix = "HOOKRELAY_E2E_PREFIX"
	// envReceiverHost is the IP address the test's receivers listen on and
	// put in the endpoint URLs. The deployment must reach it and its
	// HOOKRELAY_ALLOW_NETWORKS must admit it. Optional. Default 127.0.0.1
	// (a deployment on the same machine).
	envReceiverHost = "HOOKRELAY_E2E_RECEIVER_HOST"
	// envOpsAddr is host:port of one instance's ops listener
	// (HOOKRELAY_HTTP_ADDR). Optional: when set, tests wait for its /readyz.
	envOpsAddr = "HOOKRELAY_E2E_HTTP_ADDR"
	// envRetryWait bounds the wait for a retry of the deployment, whose
	// schedule the suite does not know, as a Go duration. Optional. Default
	// 5m (the default schedule's first delay is 30s).
	envRetryWait = "HOOKRELAY_E2E_RETRY_WAIT"
)

// target is where the suite's hookrelay comes from.
type target struct {
	existing     bool
	prefix       string
	receiverHost string
	opsAddr      string
	retryWait    time.Duration
	err          error // invalid black-box configuration
}

var (
	targetOnce sync.Once
	theTarget  target
)

// e2eTarget reads the black-box variables once; an invalid value fails the
// test naming the variable.
func e2eTarget(t testing.TB) target {
	t.Helper()
	targetOnce.Do(func() { theTarget = readTarget() })
	if theTarget.err != nil {
		t.Fatalf("e2e: %v", theTarget.err)
	}
	return theTarget
}

func readTarget() target {
	tg := target{receiverHost: "127.0.0.1", retryWait: 5 * time.Minute}
	switch v := os.Getenv(envTarget); v {
	case "", "local":
		return tg
	case "existing":
		tg.existing = true
	default:
		tg.err = fmt.Errorf("%s=%q: want \"local\" (the default) or \"existing\"", envTarget, v)
		return tg
	}
	var ok bool
	if tg.prefix, ok = os.LookupEnv(envPrefix); !ok {
		tg.err = fmt.Errorf("%s=existing needs %s, the deployment's HOOKRELAY_TOPIC_PREFIX (\"\" for none)", envTarget, envPrefix)
		return tg
	}
	for _, v := range []string{stack.EnvBrokers, stack.EnvClickHouse} {
		if os.Getenv(v) == "" {
			tg.err = fmt.Errorf("%s=existing needs %s, the deployment's", envTarget, v)
			return tg
		}
	}
	if v := os.Getenv(envReceiverHost); v != "" {
		if net.ParseIP(v) == nil {
			tg.err = fmt.Errorf("%s=%q: want an IP address the deployment reaches", envReceiverHost, v)
			return tg
		}
		tg.receiverHost = v
	}
	if v := os.Getenv(envOpsAddr); v != "" {
		if _, _, err := net.SplitHostPort(v); err != nil {
			tg.err = fmt.Errorf("%s=%q: %v", envOpsAddr, v, err)
			return tg
		}
		tg.opsAddr = v
	}
	if v := os.Getenv(envRetryWait); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			tg.err = fmt.Errorf("%s=%q: want a positive duration such as 5m", envRetryWait, v)
			return tg
		}
		tg.retryWait = d
	}
	return tg
}

// ownsStack skips the test in black-box mode: it creates topics or
// databases of its own, or tests the stack rather than hookrelay. why says
// what it needs.
func ownsStack(t *testing.T, why string) {
	t.Helper()
	if e2eTarget(t).existing {
		t.Skipf("%s=existing: skipped, this test %s", envTarget, why)
	}
}

// receiverHost is the address new receivers listen on.
func receiverHost(t testing.TB) string { return e2eTarget(t).receiverHost }

// newExistingHarness is newHarness in black-box mode: the deployment's
// prefix and database, a namespace of its own for endpoints and tenants,
// and nothing created.
func newExistingHarness(t *testing.T, c config, tg target) *harness {
	t.Helper()
	if !c.BlackBox {
		t.Skipf("%s=existing: skipped, this test owns the hookrelay process (starts, kills or configures it); it runs against the local stack", envTarget)
	}
	hookrelayBinary(t) // the CLI registers endpoints
	opts, err := clickhouse.ParseDSN(os.Getenv(stack.EnvClickHouse))
	if err != nil {
		t.Fatalf("e2e: %s: %v", stack.EnvClickHouse, err)
	}
	db := opts.Auth.Database
	if db == "" {
		db = "default"
	}
	h := &harness{t: t, prefix: tg.prefix, db: db, existing: true, ns: "e2e-" + randomHex(4) + "-"}
	h.env = []string{
		stack.EnvBrokers + "=" + os.Getenv(stack.EnvBrokers),
		stack.EnvClickHouse + "=" + os.Getenv(stack.EnvClickHouse),
		"HOOKRELAY_TOPIC_PREFIX=" + tg.prefix,
		// The CLI checks endpoint URLs against its own allow-list.
		"HOOKRELAY_ALLOW_NETWORKS=" + tg.receiverHost + "/32",
	}
	// The deployment's Kafka security and topic layout, for the CLI.
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "HOOKRELAY_KAFKA_") || strings.HasPrefix(kv, "HOOKRELAY_REPLICATION_FACTOR=") || strings.HasPrefix(kv, "HOOKRELAY_MIN_INSYNC_REPLICAS=") {
			h.env = append(h.env, kv)
		}
	}
	h.cl = stack.Client(t,
		kgo.ProducerLinger(2*time.Millisecond),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
	)
	t.Logf("e2e: black-box against prefix %q, database %s; this test's namespace %s", h.prefix, h.db, h.ns)
	return h
}

// name returns s in the test's namespace: a fresh "e2e-<8 hex>-" in
// black-box mode, so endpoint IDs, tenants and event IDs never meet the
// deployment's own or another run's. Black-box tests name every endpoint
// and tenant with it.
func (h *harness) name(s string) string { return h.ns + s }

// forgetAtEnd deletes endpoint id when the test ends (black-box mode only;
// the local stack's topics are deleted with the test's prefix).
func (h *harness) forgetAtEnd(id string) {
	if !h.existing {
		return
	}
	h.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
		defer cancel()
		if out, err := h.command(ctx, "endpoints", "delete", id).CombinedOutput(); err != nil {
			h.t.Errorf("e2e: deleting endpoint %s from the deployment: %v\n%s", id, err, out)
		}
	})
}

// checkBlackBoxEndpoint fails the test if a black-box test registers an
// endpoint outside its namespace: it would touch the deployment's own.
func (h *harness) checkBlackBoxEndpoint(ep endpoint) {
	h.t.Helper()
	if h.existing && (!strings.HasPrefix(ep.ID, h.ns) || !strings.HasPrefix(ep.Tenant, h.ns)) {
		h.t.Fatalf("e2e: black-box test registers endpoint %q of tenant %q: both must be named with h.name (namespace %s)", ep.ID, ep.Tenant, h.ns)
	}
}

// clickhouse returns a connection for reading the attempts table: the
// test's own database, or the deployment's in black-box mode.
func (h *harness) clickhouse() driver.Conn {
	h.t.Helper()
	if !h.existing {
		return stack.ClickHouse(h.t)
	}
	opts, err := clickhouse.ParseDSN(os.Getenv(stack.EnvClickHouse))
	if err != nil {
		h.t.Fatalf("e2e: %s: %v", stack.EnvClickHouse, err)
	}
	conn, err := clickhouse.Open(opts)
	if err != nil {
		h.t.Fatalf("e2e: opening ClickHouse: %v", err)
	}
	h.t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// attemptsScope is the WHERE clause that keeps the attempts query to the
// test's own rows: all of them locally, its namespace's in black-box mode.
func (h *harness) attemptsScope() string {
	if !h.existing {
		return ""
	}
	// ns is [a-z0-9-] only; the probe endpoint of waitEndpointsSeen is the
	// harness's, not the test's.
	return "WHERE endpoint_id LIKE '" + h.ns + "%' AND endpoint_id != '" + h.probeID() + "'"
}

// probeID is the ID of the probe endpoint of waitEndpointsSeen.
func (h *harness) probeID() string { return h.name("probe") }

// deployment stands for the running deployment where a test would start an
// instance: nothing is started. It waits until every endpoint registered so
// far is known to every fan-out instance (see waitEndpointsSeen), and for
// HOOKRELAY_E2E_HTTP_ADDR's /readyz when that is set. stop is a no-op; kill
// fails (tests that kill are not black-box tests).
func (h *harness) deployment(id string) *process {
	h.t.Helper()
	tg := e2eTarget(h.t)
	p := &process{h: h, name: "deployment(" + id + ")", httpAddr: tg.opsAddr, done: make(chan struct{})}
	close(p.done) // nothing of ours runs
	if tg.opsAddr != "" {
		client := &http.Client{Timeout: time.Second}
		eventually(h.t, readyTimeout, tg.opsAddr+"/readyz answering 200", func() (bool, string) {
			resp, err := client.Get("http://" + tg.opsAddr + "/readyz")
			if err != nil {
				return false, err.Error()
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK, resp.Status
		})
	}
	h.waitEndpointsSeen()
	return p
}

// waitEndpointsSeen registers a probe endpoint of a tenant of its own, after
// every endpoint the test registered, and publishes probe events to every
// partition of the events topic until each has reached the probe receiver.
// The endpoints topic has one partition, read in order: an instance that
// fans out to the probe endpoint knows every endpoint registered before it,
// so the test's events, published after this, reach the test's endpoints.
func (h *harness) waitEndpointsSeen() {
	h.t.Helper()
	probe := newReceiver(h.t, "probe", always(http.StatusOK))
	tenant, typ := h.name("probe"), "hookrelay.e2e.probe"
	ep := endpoint{ID: h.probeID(), URL: probe.URL, Secret: probe.Secret, Events: []string{typ}, Tenant: tenant}
	h.addEndpoint(ep)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	md, err := kadm.NewClient(h.cl).ListTopics(ctx, h.topic("events"))
	if err == nil {
		err = md.Error()
	}
	if err != nil || !md.Has(h.topic("events")) {
		h.t.Fatalf("e2e: the deployment's events topic %s: %v (is %s the deployment's prefix?)", h.topic("events"), err, envPrefix)
	}
	parts := md[h.topic("events")].Partitions.Numbers()
	cl := stack.Client(h.t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	seen := map[int32]bool{}
	round := 0
	eventually(h.t, readyTimeout, "the deployment fanning out to the test's endpoints on every events partition", func() (bool, string) {
		for _, r := range probe.Requests() {
			var b webhookBody
			var d eventData
			if json.Unmarshal(r.Body, &b) == nil && json.Unmarshal(b.Data, &d) == nil {
				seen[int32(d.N)] = true
			}
		}
		if len(seen) == len(parts) {
			return true, ""
		}
		if round%20 == 0 { // every 2 s: a fresh probe to each partition not yet seen
			var recs []*kgo.Record
			for _, p := range parts {
				if !seen[p] {
					id := h.name(fmt.Sprintf("probe-%d-%d", p, round))
					r := cloudEvent{ID: id, Source: "urn:hookrelay:e2e:probe", Type: typ, Tenant: tenant, Time: time.Now(), Data: eventData{Event: id, N: int(p)}}.structured(h.topic("events"), []byte(id))
					r.Partition = p
					recs = append(recs, r)
				}
			}
			pctx, pcancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := cl.ProduceSync(pctx, recs...).FirstErr()
			pcancel()
			if err != nil {
				return false, fmt.Sprintf("producing probes: %v", err)
			}
		}
		round++
		return false, fmt.Sprintf("probes arrived from %d of %d partitions", len(seen), len(parts))
	})
}
