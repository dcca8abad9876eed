package faults

// The scenarios of issue 10. Each builds a rig, runs the load, injects its
// faults while the load runs, and ends with rig.finish, which asserts the
// four properties (see doc.go) and logs a FAULTS-RESULT line.

import (
	"math/rand/v2"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hookrelay/hookrelay/e2e/stack"
)

// flowTimeout bounds each wait for deliveries to resume after a fault; a
// stall longer than this shows as the delivery gap, not as a hang.
const flowTimeout = 90 * time.Second

// begin starts the load and waits until deliveries flow and the settle
// time has passed.
func (r *rig) begin() {
	r.startLoad()
	r.waitFlow(r.s.Rate, flowTimeout)
	r.settle()
}

// TestKillStorm: SIGKILL one instance again and again while deliveries
// flow, restarting it each time with the same HOOKRELAY_INSTANCE_ID
// (issue 10, finding 1: stalls of 38–49 s after a kill -9).
func TestKillStorm(t *testing.T) {
	r := newRig(t, rigOpts{})
	p := r.start("a")
	r.begin()
	for i := range r.s.Kills {
		r.fault("kill -9 #%d of instance a", i+1)
		p.kill()
		t0 := time.Now()
		p = r.start("a")
		ready := time.Since(t0)
		r.waitFlow(r.s.Rate/2, flowTimeout)
		t.Logf("faults: kill #%d: ready %v, deliveries resumed %v after the kill", i+1, ready.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond))
		time.Sleep(time.Duration(500+rand.IntN(1500)) * time.Millisecond) // kills at random points of the flow
	}
	r.settle()
	r.finish(check{Scenario: "kill -9 storm"})
}

// TestPeerDeathAndRollingRestart: three instances; SIGKILL one and keep it
// dead long enough that only a survivor can deliver its partitions within
// the gap bound (finding 2); then restart it, and restart all three one
// after the other with SIGTERM.
func TestPeerDeathAndRollingRestart(t *testing.T) {
	r := newRig(t, rigOpts{})
	ids := []string{"a", "b", "c"}
	ps := map[string]*relay{}
	for _, id := range ids {
		ps[id] = r.start(id)
	}
	r.begin()
	r.fault("kill -9 of instance b (of a, b, c); it stays dead %v", r.s.PeerRunTime)
	ps["b"].kill()
	time.Sleep(r.s.PeerRunTime) // the survivors' time to take over b's partitions, under load
	ps["b"] = r.start("b")
	r.waitFlow(r.s.Rate/2, flowTimeout)
	for _, id := range ids {
		r.fault("rolling restart: SIGTERM instance %s", id)
		if err := ps[id].stop(); err != nil {
			t.Errorf("hookrelay %s exited with %v after SIGTERM: %s", id, err, lastLines(ps[id].logPath, 2))
		}
		ps[id] = r.start(id)
		r.waitFlow(r.s.Rate/2, flowTimeout)
	}
	r.settle()
	r.finish(check{Scenario: "kill -9 one of three + rolling restart"})
}

// TestBrokerFaults: broker SIGTERM (and, full size, SIGKILL) on the
// private single-node cluster; full size also on one node and on all nodes
// of the 3-node cluster (finding 3: hookrelay exits on broker trouble;
// finding 4: attempt rows dropped). hookrelay runs under a supervisor that
// restarts it, so that loss is still measured when it exits; every exit
// fails the scenario.
func TestBrokerFaults(t *testing.T) {
	s := size()
	sigs := []syscall.Signal{syscall.SIGTERM}
	if s.BrokerKill {
		sigs = append(sigs, syscall.SIGKILL)
	}
	if v := os.Getenv(EnvBrokerSignals); v != "" {
		sigs = nil
		for _, name := range strings.Split(v, ",") {
			switch strings.TrimSpace(name) {
			case "term":
				sigs = append(sigs, syscall.SIGTERM)
			case "kill":
				sigs = append(sigs, syscall.SIGKILL)
			default:
				t.Fatalf("faults: %s=%q: want term and/or kill, comma-separated", EnvBrokerSignals, v)
			}
		}
	}
	t.Run("single-node", func(t *testing.T) {
		k := privKafka(t, 1)
		r := newRig(t, rigOpts{Brokers: k.brokers})
		sv := r.supervise("a")
		r.begin()
		var longest time.Duration
		for _, sig := range sigs {
			r.fault("%v to the only broker; down %v", sig, s.BrokerDown)
			t0 := time.Now()
			k.stopNode(t, 1, sig)
			time.Sleep(s.BrokerDown) // the outage itself
			k.startNode(t, 1)
			longest = max(longest, time.Since(t0))
			t.Logf("faults: broker back %v after %v", time.Since(t0).Round(time.Millisecond), sig)
			if err := sv.waitReady(readyTimeout); err != nil {
				t.Errorf("hookrelay not ready after the broker came back: %v", err)
			}
			r.waitFlow(r.s.Rate/2, flowTimeout)
			r.settle()
		}
		r.finish(check{Scenario: "broker stop, single node", ExtraGap: longest, Exits: sv.Exits()})
	})
	if !s.ThreeNodes {
		t.Logf("faults: the 3-node broker scenarios run at full size (%s=full)", EnvSize)
		return
	}
	t.Run("three-node", func(t *testing.T) {
		k := privKafka(t, 3)
		r := newRig(t, rigOpts{Brokers: k.brokers, Env: []string{"HOOKRELAY_REPLICATION_FACTOR=3", "HOOKRELAY_MIN_INSYNC_REPLICAS=2"}})
		sv := r.supervise("a")
		r.begin()
		var longest time.Duration
		for _, sig := range sigs {
			for _, node := range []int{2, 3} {
				r.fault("%v to node %d of 3", sig, node)
				k.stopNode(t, node, sig)
				r.waitFlow(r.s.Rate/2, flowTimeout) // two of three nodes keep serving
				k.startNode(t, node)
				r.settle()
			}
			r.fault("%v to all three nodes; down %v", sig, s.BrokerDown)
			t0 := time.Now()
			for node := 1; node <= 3; node++ {
				k.stopNode(t, node, sig)
			}
			time.Sleep(s.BrokerDown) // the outage itself
			k.startAll(t)
			longest = max(longest, time.Since(t0))
			if err := sv.waitReady(readyTimeout); err != nil {
				t.Errorf("hookrelay not ready after the cluster came back: %v", err)
			}
			r.waitFlow(r.s.Rate/2, flowTimeout)
			r.settle()
		}
		r.finish(check{Scenario: "broker stop, 3-node cluster", ExtraGap: longest, Exits: sv.Exits()})
	})
}

// TestClickHouseDown: ClickHouse unreachable for a while (a fault proxy
// in front of the shared ClickHouse stops listening; the shared server is
// never stopped). Deliveries must go on meanwhile and every attempt must
// still reach the log afterwards.
func TestClickHouseDown(t *testing.T) {
	u, err := url.Parse(stack.DatabaseDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy := newProxy(t, "clickhouse", "127.0.0.1:0", u.Host)
	u.Host = proxy.Listen
	r := newRig(t, rigOpts{ClickHouseDSN: u.String()})
	sv := r.supervise("a")
	r.begin()
	r.fault("ClickHouse down for %v", r.s.CHDown)
	proxy.Stop()
	time.Sleep(r.s.CHDown) // the outage itself; the load runs
	proxy.Start()
	r.fault("ClickHouse back")
	r.settle()
	r.finish(check{Scenario: "ClickHouse down", Exits: sv.Exits()})
}

// TestNetwork: slow and lossy TCP between hookrelay and its receivers, and
// (full size) between hookrelay and the brokers: latency, bandwidth,
// connection resets, black holes.
func TestNetwork(t *testing.T) {
	s := size()
	t.Run("receivers", func(t *testing.T) {
		r := newRig(t, rigOpts{ReceiverProxy: true})
		p := r.start("a")
		r.begin()
		r.fault("receivers: latency 300±200 ms, ep0 at 16 KB/s")
		for id, px := range r.recvProxy {
			addToxic(t, px, "latency", "downstream", 1, `"latency":300,"jitter":200`)
			if id == "ep0" {
				addToxic(t, px, "bandwidth", "downstream", 1, `"rate":16`)
			}
		}
		time.Sleep(s.NetFault) // the fault phase; the load runs
		r.fault("receivers: 20%% of connections reset, 10%% of ep1–ep3's black-holed")
		for id, px := range r.recvProxy {
			clearToxics(px)
			addToxic(t, px, "reset_peer", "upstream", 0.2, `"timeout":50`)
			if id == "ep1" || id == "ep2" || id == "ep3" {
				addToxic(t, px, "timeout", "downstream", 0.1, `"timeout":0`)
			}
		}
		time.Sleep(s.NetFault) // the fault phase; the load runs
		for _, px := range r.recvProxy {
			clearToxics(px)
		}
		r.fault("receivers: network healed")
		r.settle()
		if p.exited() {
			t.Errorf("hookrelay exited: %v: %s", p.waitErr, lastLines(p.logPath, 2))
		}
		r.finish(check{Scenario: "network to receivers", RowsAtLeast: true})
	})
	if !s.BrokerNet {
		t.Logf("faults: the hookrelay<->broker network scenario runs at full size (%s=full)", EnvSize)
		return
	}
	t.Run("brokers", func(t *testing.T) {
		k := privKafka(t, 1)
		t.Cleanup(func() { clearToxics(k.proxy) })
		r := newRig(t, rigOpts{Brokers: k.brokers})
		sv := r.supervise("a")
		r.begin()
		r.fault("brokers: latency 100±50 ms both ways, 512 KB/s")
		addToxic(t, k.proxy, "latency", "downstream", 1, `"latency":100,"jitter":50`)
		addToxic(t, k.proxy, "latency", "upstream", 1, `"latency":100,"jitter":50`)
		addToxic(t, k.proxy, "bandwidth", "downstream", 1, `"rate":512`)
		time.Sleep(s.NetFault) // the fault phase; the load runs
		clearToxics(k.proxy)
		r.fault("brokers: 5%% of connections reset")
		addToxic(t, k.proxy, "reset_peer", "upstream", 0.05, `"timeout":500`)
		time.Sleep(s.NetFault) // the fault phase; the load runs
		clearToxics(k.proxy)
		r.fault("brokers: black hole for 10 s")
		addToxic(t, k.proxy, "timeout", "downstream", 1, `"timeout":0`)
		time.Sleep(10 * time.Second) // the fault phase
		clearToxics(k.proxy)
		r.fault("brokers: network healed")
		r.settle()
		r.finish(check{Scenario: "network to brokers", RowsAtLeast: true, ExtraGap: 10 * time.Second, Exits: sv.Exits()})
	})
}

// TestMalformedInput: 10 % of the load is malformed input of every kind;
// each malformed record must land in events.invalid with a reason, and
// every valid event must still arrive.
func TestMalformedInput(t *testing.T) {
	r := newRig(t, rigOpts{Malformed: true})
	p := r.start("a")
	r.begin()
	r.fault("malformed input runs with the load from its start")
	r.settle()
	r.settle()
	if p.exited() {
		t.Errorf("hookrelay exited: %v: %s", p.waitErr, lastLines(p.logPath, 2))
	}
	r.finish(check{Scenario: "10% malformed input"})
}
