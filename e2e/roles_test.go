package e2e

// Each role depends only on the services it uses (issue 8, item 11): fan-out,
// dispatch and retry need Kafka only; the audit sink needs Kafka and
// ClickHouse, and without ClickHouse it waits (not ready) instead of keeping
// the process from starting.

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/e2e/stack"
)

// TestAuditSinkWaitsForClickHouse: hookrelay (all roles) starts while
// nothing listens at its ClickHouse address. The process is up (/healthz),
// deliveries flow and every attempt is on the attempts topic, while /readyz
// says the audit sink is not ready and why, and the metrics say so too. Once
// the address opens (a forwarder to the test ClickHouse), the sink applies
// the migrations, catches up from the attempts topic, and every attempt,
// those made during the outage and those after, has its row.
func TestAuditSinkWaitsForClickHouse(t *testing.T) {
	const before, after = 20, 10
	gate := newTCPGate(t, clickhouseAddr(t))
	h := newHarness(t, config{Env: []string{"HOOKRELAY_CLICKHOUSE=" + dsnAt(t, gate.addr)}})
	rc := newReceiver(t, "roles-audit", always(http.StatusOK))
	h.addEndpoint(endpoint{ID: "roles-audit", URL: rc.URL, Secret: rc.Secret, Events: []string{"roles.*"}})

	p := h.spawn("roles-audit-1")
	eventually(t, readyTimeout, "/healthz ok and /readyz naming only the audit sink as not ready", func() (bool, string) {
		select {
		case <-p.done:
			t.Fatalf("hookrelay exited while ClickHouse is down (%v); log:\n%s", p.waitErr, tail(p.logPath, 30))
		default:
		}
		hc, _ := p.get("/healthz")
		rc, body := p.get("/readyz")
		return hc == http.StatusOK && rc == http.StatusServiceUnavailable &&
				strings.Contains(body, "pipeline: ready") && strings.Contains(body, "audit: not ready") && strings.Contains(body, "ClickHouse"),
			fmt.Sprintf("/healthz %d, /readyz %d %q", hc, rc, body)
	})

	h.produce(h.events(rolesEvents("down", before))...)
	eventually(t, 90*time.Second, "every delivery during the outage", func() (bool, string) {
		return rc.Distinct() >= before, fmt.Sprintf("%d of %d", rc.Distinct(), before)
	})
	topicIDs := func(want int) map[string]bool {
		ids := map[string]bool{}
		h.readTopic(h.topic("attempts"), 60*time.Second, func(recs []*kgo.Record) (bool, string) {
			for _, r := range recs {
				var a audit.Attempt
				if err := a.Unmarshal(r.Value); err != nil {
					t.Fatalf("attempts record %s/%d@%d: %v %q", r.Topic, r.Partition, r.Offset, err, r.Value)
				}
				ids[a.AttemptID] = true
			}
			return len(ids) >= want, fmt.Sprintf("%d of %d attempt records", len(ids), want)
		})
		return ids
	}
	duringOutage := topicIDs(before)
	if code, body := p.get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "audit: not ready") {
		t.Errorf("/readyz during the outage: %d %q, want 503 naming the audit sink", code, body)
	}
	if v, ok := p.metric("hookrelay_audit_sink_store_ready"); !ok || v != 0 {
		t.Errorf("hookrelay_audit_sink_store_ready during the outage = %v (found %v), want 0", v, ok)
	}
	// It keeps trying (with back-off) for as long as the outage lasts.
	eventually(t, 60*time.Second, "the sink retrying the connection", func() (bool, string) {
		v, ok := p.metric("hookrelay_audit_sink_prepare_errors_total")
		return ok && v >= 4, fmt.Sprintf("hookrelay_audit_sink_prepare_errors_total = %v (found %v)", v, ok)
	})

	gate.open(t)
	eventually(t, 90*time.Second, "/readyz 200 once ClickHouse answers", func() (bool, string) {
		code, body := p.get("/readyz")
		return code == http.StatusOK, fmt.Sprintf("%d %q", code, body)
	})
	if v, _ := p.metric("hookrelay_audit_sink_store_ready"); v != 1 {
		t.Errorf("hookrelay_audit_sink_store_ready after the outage = %v, want 1", v)
	}
	h.produce(h.events(rolesEvents("up", after))...)
	eventually(t, 90*time.Second, "every delivery after the outage", func() (bool, string) {
		return rc.Distinct() >= before+after, fmt.Sprintf("%d of %d", rc.Distinct(), before+after)
	})
	all := topicIDs(before + after)
	rows := h.waitAttempts(90*time.Second, "a row for every attempt", func(rows []attemptRow) (bool, string) {
		return len(rows) >= len(all), fmt.Sprintf("%d rows, %d attempt records", len(rows), len(all))
	})
	inCH := map[string]bool{}
	for _, r := range rows {
		inCH[r.AttemptID] = true
		if r.Outcome != "delivered" {
			t.Errorf("attempt %s of %s: outcome %s, want delivered", r.AttemptID, r.EventID, r.Outcome)
		}
	}
	var missing []string
	for id := range all {
		if !inCH[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 || len(rows) != len(all) || len(all) != rc.Count() {
		t.Errorf("%d attempt rows, %d attempt records, %d requests; missing in ClickHouse: %s",
			len(rows), len(all), rc.Count(), firstN(missing, 10))
	}
	t.Logf("%d attempts made while ClickHouse was down, %d in all; %d connections through the gate",
		len(duringOutage), len(all), gate.accepted.Load())
}

// TestRolesWithoutAuditNeverTouchClickHouse: `--roles fanout,dispatch,retry`
// starts, becomes ready, delivers and retries with ClickHouse's address
// pointing at a listener that counts connections: it gets none.
func TestRolesWithoutAuditNeverTouchClickHouse(t *testing.T) {
	const events = 10
	spy := newConnCounter(t)
	h := newHarness(t, config{RetrySchedule: "1s", Env: []string{"HOOKRELAY_CLICKHOUSE=" + dsnAt(t, spy.addr)}})
	rc := newReceiver(t, "roles-noaudit", func(r *request) answer {
		if r.Nth == 1 {
			return answer{Status: http.StatusServiceUnavailable} // through the retry role
		}
		return answer{Status: http.StatusOK}
	})
	h.addEndpoint(endpoint{ID: "roles-noaudit", URL: rc.URL, Secret: rc.Secret, Events: []string{"roles.*"}})
	p := h.spawn("roles-noaudit-1", "HOOKRELAY_ROLES=fanout,dispatch,retry")
	p.waitReady(readyTimeout)
	h.produce(h.events(rolesEvents("noaudit", events))...)
	eventually(t, 90*time.Second, "every event answered 200 after a retry", func() (bool, string) {
		ok := 0
		for _, r := range rc.Requests() {
			if r.Status == http.StatusOK {
				ok++
			}
		}
		return ok >= events, fmt.Sprintf("%d of %d answered 200, %d requests", ok, events, rc.Count())
	})
	// Every request has a sending record before it and an outcome record
	// after it, both with the request's attempt ID: count the outcomes.
	outcomes := map[string]string{}
	h.readTopic(h.topic("attempts"), 60*time.Second, func(recs []*kgo.Record) (bool, string) {
		for _, r := range recs {
			var a audit.Attempt
			if err := a.Unmarshal(r.Value); err != nil {
				t.Fatalf("attempts record %s/%d@%d: %v %q", r.Topic, r.Partition, r.Offset, err, r.Value)
			}
			if a.Outcome != "sending" {
				outcomes[a.AttemptID] = string(a.Outcome)
			}
		}
		return len(outcomes) >= 2*events, fmt.Sprintf("%d of %d attempt outcomes", len(outcomes), 2*events)
	})
	if n := spy.accepted.Load(); n != 0 {
		t.Errorf("the ClickHouse address got %d connections from roles fanout,dispatch,retry; want 0", n)
	}
	if len(outcomes) != rc.Count() {
		t.Errorf("%d attempt outcomes for %d requests", len(outcomes), rc.Count())
	}
}

func rolesEvents(tag string, n int) []cloudEvent {
	evs := make([]cloudEvent, n)
	for i := range evs {
		id := fmt.Sprintf("roles-%s-%03d", tag, i)
		evs[i] = cloudEvent{ID: id, Source: "urn:e2e:roles", Type: "roles.thing", Time: time.Now(), Data: eventData{Event: id, N: i}}
	}
	return evs
}

// get returns the status and body of an ops endpoint of p (0 and the error
// text when it does not answer).
func (p *process) get(path string) (int, string) {
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Get("http://" + p.httpAddr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, string(b)
}

// clickhouseAddr is host:port of the test ClickHouse's native protocol.
func clickhouseAddr(t *testing.T) string {
	t.Helper()
	u, err := url.Parse(stack.ClickHouseDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// dsnAt is the test database's DSN with its address replaced by addr.
func dsnAt(t *testing.T, addr string) string {
	t.Helper()
	u, err := url.Parse(stack.DatabaseDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	u.Host = addr
	return u.String()
}

// tcpGate is an address where nothing listens (connections are refused, as
// by a server that is down) until open, and then a TCP forwarder to target.
type tcpGate struct {
	addr, target string
	accepted     atomic.Int64

	mu    sync.Mutex
	ln    net.Listener
	conns []net.Conn
	wg    sync.WaitGroup // the accept loop and the copy goroutines
}

func newTCPGate(t *testing.T, target string) *tcpGate {
	g := &tcpGate{addr: freeAddr(t), target: target}
	t.Cleanup(g.close)
	return g
}

// open listens on the gate's address and forwards every connection.
func (g *tcpGate) open(t *testing.T) {
	t.Helper()
	var ln net.Listener
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		// The port was free when chosen; retry briefly in case a
		// connection in TIME_WAIT or another process holds it.
		if ln, err = net.Listen("tcp", g.addr); err == nil || !errors.Is(err, syscall.EADDRINUSE) || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("gate: listen on %s: %v", g.addr, err)
	}
	g.mu.Lock()
	g.ln = ln
	g.mu.Unlock()
	g.wg.Add(1)
	go func() { // owner: g (close waits)
		defer g.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed
			}
			g.accepted.Add(1)
			up, err := net.DialTimeout("tcp", g.target, 5*time.Second)
			if err != nil {
				c.Close()
				continue
			}
			g.mu.Lock()
			g.conns = append(g.conns, c, up)
			g.mu.Unlock()
			g.wg.Add(2)
			go func() { defer g.wg.Done(); _, _ = io.Copy(up, c); up.Close() }()
			go func() { defer g.wg.Done(); _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
}

func (g *tcpGate) close() {
	g.mu.Lock()
	if g.ln != nil {
		g.ln.Close()
	}
	for _, c := range g.conns {
		c.Close()
	}
	g.mu.Unlock()
	g.wg.Wait()
}

// connCounter listens on a free address and counts (and closes) every
// connection it accepts.
type connCounter struct {
	addr     string
	accepted atomic.Int64
}

func newConnCounter(t *testing.T) *connCounter {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &connCounter{addr: ln.Addr().String()}
	done := make(chan struct{})
	go func() { // owner: the test (cleanup waits)
		defer close(done)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			c.accepted.Add(1)
			conn.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return c
}
