package pipeline

import (
	"errors"
	"math/rand/v2"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hookrelay/hookrelay/pipeline/delivery"
	"github.com/hookrelay/hookrelay/retrytiers"
)

func TestNewRelayValidates(t *testing.T) {
	tiers, err := retrytiers.TiersFor("p.", retrytiers.Schedule{time.Second, 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	good := func() RelayOptions {
		return RelayOptions{
			Brokers: []string{"127.0.0.1:1"}, Group: "g", TransactionalID: "x",
			Tiers: tiers, TargetTopic: "p.deliveries", DLQTopic: "p.dlq",
		}
	}
	if _, err := NewRelay(good()); err != nil {
		t.Fatalf("valid options: %v", err)
	}
	tests := []struct {
		mod     func(*RelayOptions)
		wantErr string
	}{
		{func(o *RelayOptions) { o.Brokers = nil }, "RelayOptions.Brokers"},
		{func(o *RelayOptions) { o.Group = "" }, "RelayOptions.Group"},
		{func(o *RelayOptions) { o.TransactionalID = "" }, "RelayOptions.TransactionalID"},
		{func(o *RelayOptions) { o.TargetTopic = "" }, "RelayOptions.TargetTopic"},
		{func(o *RelayOptions) { o.DLQTopic = "" }, "RelayOptions.DLQTopic"},
		{func(o *RelayOptions) { o.Tiers = nil }, "RelayOptions.Tiers"},
		{func(o *RelayOptions) {
			o.Tiers = retrytiers.Tiers{{Topic: "a", Delay: 2 * time.Second}, {Topic: "b", Delay: time.Second}}
		}, "RelayOptions.Tiers"},
		{func(o *RelayOptions) { o.TargetTopic = "p.retry-1s" }, "RelayOptions.Tiers"},
		{func(o *RelayOptions) { o.TransactionTimeout = -1 }, "RelayOptions.TransactionTimeout"},
		{func(o *RelayOptions) { o.FetchMaxWait = -1 }, "RelayOptions.FetchMaxWait"},
		{func(o *RelayOptions) { o.Prefetch = -1 }, "RelayOptions.Prefetch"},
	}
	for _, tt := range tests {
		o := good()
		tt.mod(&o)
		if _, err := NewRelay(o); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("NewRelay: error %v, want one naming %s", err, tt.wantErr)
		}
	}
}

// newKfake starts an in-process fake cluster for the test.
func newKfake(t *testing.T) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// A short schedule whose tiers double (1s, 2s, 4s): a greedy plan never
// uses one tier twice for waits under 8 s, so a second record of a delivery
// in one tier is a fork.
var doublingSchedule = retrytiers.Schedule{time.Second, 2 * time.Second, 4 * time.Second}

// pathReport is what checkPaths measured.
type pathReport struct {
	emitLate    []time.Duration // target record's timestamp (the relay's decision) minus due, clamped at 0
	visibleLate []time.Duration // read_committed visibility minus due, clamped at 0
	hops        int             // relay hops observed (tier and target records past the first)
	lag         []time.Duration // per hop: the new record's timestamp minus the previous one's ready time
	lagTarget   []time.Duration // lag of the hops to the target (timestamp = the relay's decision)
}

// checkPaths verifies the path of every delivery through the tiers: exactly
// one record in the target, at most one per tier, each hop no earlier than
// the previous record's ready time, and the target reached only when less
// than the smallest tier was left. With exactRouting (kfake, where a hop's
// timestamp is the relay's decision time) it also checks that each hop went
// to the tier Next chose.
func checkPaths(t *testing.T, e *relayEnv, o *observer, metas map[string]delivery.Meta, exactRouting bool) pathReport {
	t.Helper()
	var rep pathReport
	byID := make(map[string][]seen)
	for _, topic := range append(e.tiers.Topics(), e.target) {
		for _, s := range o.in(topic) {
			byID[s.id] = append(byID[s.id], s)
		}
	}
	for id, m := range metas {
		path := byID[id]
		sort.SliceStable(path, func(i, j int) bool { return path[i].rec.Timestamp.Before(path[j].rec.Timestamp) })
		perTopic := make(map[string]int)
		targets := 0
		for _, s := range path {
			perTopic[s.rec.Topic]++
			if s.rec.Topic == e.target {
				targets++
			}
		}
		if targets != 1 {
			t.Errorf("%s: %d records in the target, want 1", id, targets)
			continue
		}
		for topic, n := range perTopic {
			if n > 1 {
				t.Errorf("%s: %d records in %s, want at most 1 (a fork)", id, n, topic)
			}
		}
		last := path[len(path)-1]
		if last.rec.Topic != e.target {
			t.Errorf("%s: path does not end in the target: %v", id, topicsOf(path))
			continue
		}
		for i := 1; i < len(path); i++ {
			prev, cur := path[i-1], path[i]
			tier, ok := e.tiers.ByTopic(prev.rec.Topic)
			if !ok {
				t.Errorf("%s: hop from non-tier %s", id, prev.rec.Topic)
				continue
			}
			ready := prev.rec.Timestamp.Add(tier.Delay)
			if cur.rec.Timestamp.Before(ready) {
				t.Errorf("%s: %s at %v is before %s's ready time %v (early by %v)", id,
					cur.rec.Topic, cur.rec.Timestamp, prev.rec.Topic, ready, ready.Sub(cur.rec.Timestamp))
			}
			rep.hops++
			rep.lag = append(rep.lag, cur.rec.Timestamp.Sub(ready))
			if cur.rec.Topic == e.target {
				rep.lagTarget = append(rep.lagTarget, cur.rec.Timestamp.Sub(ready))
			}
			if exactRouting {
				// The timestamp is the decision time truncated to
				// milliseconds: either side of a boundary may be right.
				want := func(remaining time.Duration) string {
					if nt, ok := e.tiers.Next(remaining); ok {
						return nt.Topic
					}
					return e.target
				}
				remaining := m.DueAt.Sub(cur.rec.Timestamp)
				if w1, w2 := want(remaining), want(remaining-time.Millisecond+1); cur.rec.Topic != w1 && cur.rec.Topic != w2 {
					t.Errorf("%s: hop at %v (due %v) went to %s, want %s", id, cur.rec.Timestamp, m.DueAt, cur.rec.Topic, w1)
				}
			}
		}
		// Millisecond timestamps again: allow the truncated millisecond.
		if early := m.DueAt.Sub(last.rec.Timestamp); early > e.tiers.Smallest() {
			t.Errorf("%s: released to the target %v before due, not less than the smallest tier", id, early)
		}
		rep.emitLate = append(rep.emitLate, max(last.rec.Timestamp.Sub(m.DueAt), 0))
		rep.visibleLate = append(rep.visibleLate, max(last.at.Sub(m.DueAt), 0))
	}
	return rep
}

func topicsOf(ss []seen) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.rec.Topic)
	}
	return out
}

// parkMany parks n deliveries, numbered from first, due at random waits in
// [lo, hi) (the first few at exact tier sums), spread over partitions; it
// returns them by delivery ID.
func parkMany(e *relayEnv, first, n int, partitions int32, lo, hi time.Duration, seed uint64) map[string]delivery.Meta {
	rng := rand.New(rand.NewPCG(seed, seed+1))
	metas := make(map[string]delivery.Meta, n)
	exact := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 4 * time.Second, 7 * time.Second}
	for i := range n {
		now := time.Now().Truncate(time.Millisecond)
		wait := lo + time.Duration(rng.Int64N(int64(hi-lo))).Truncate(time.Millisecond)
		if i < len(exact) && exact[i] >= lo && exact[i] < hi {
			wait = exact[i]
		}
		m := testDelivery(first+i, now.Add(wait))
		e.park(m, int32(i)%partitions, now, time.Time{})
		metas[m.DeliveryID] = m
	}
	return metas
}

func TestRelayKfakeDueTimes(t *testing.T) {
	seeds := newKfake(t)
	e := newRelayEnv(t, seeds, "t.", doublingSchedule, 3)
	obs := e.observe(append(e.tiers.Topics(), e.target, e.dlq)...)
	mr := newMetricsReader()
	o := e.options("a")
	o.Meter = mr.mp.Meter("test")
	e.start(o)
	e.warmUp(obs)

	metas := parkMany(e, 0, 60, 3, time.Second, 7500*time.Millisecond, 1)
	waitWithin(t, 30*time.Second, "60 deliveries in the target", func() bool { return len(obs.in(e.target)) >= 61 })
	rep := checkPaths(t, e, obs, metas, true)
	if d := obs.in(e.dlq); len(d) != 0 {
		t.Errorf("%d records in the DLQ, want 0", len(d))
	}
	t.Logf("kfake: %d deliveries, %d hops; hop lag p50 %v p99 %v max %v; emit lateness p50 %v p99 %v max %v; visible p99 %v",
		len(metas), rep.hops, percentile(rep.lag, 50), percentile(rep.lag, 99), percentile(rep.lag, 100),
		percentile(rep.emitLate, 50), percentile(rep.emitLate, 99), percentile(rep.emitLate, 100),
		percentile(rep.visibleLate, 99))
	// Lateness is logged above, not asserted (issue 8, item 12): checkPaths
	// asserts never-early, exactly-once and the routing of every hop.

	// The metrics saw every hop.
	waitWithin(t, 30*time.Second, "metrics of every hop", func() bool {
		n, _ := mr.histogram(t, "hookrelay.retry.relay.lag")
		return int(n) == rep.hops+1 // and the warm-up's
	})
	if n := mr.counter(t, "hookrelay.retry.relay.records", "to", "target"); n != 61 {
		t.Errorf("records{to=target} = %d, want 61", n)
	}
	if n, _ := mr.histogram(t, "hookrelay.retry.relay.lateness"); n != 61 {
		t.Errorf("lateness observations = %d, want 61", n)
	}
	waitWithin(t, 30*time.Second, "empty buffers", func() bool {
		return mr.gauge(t, "hookrelay.retry.relay.buffered") == 0 && mr.gauge(t, "hookrelay.retry.relay.paused_partitions") == 0
	})
}

func TestRelayKfakeMalformedToDLQ(t *testing.T) {
	seeds := newKfake(t)
	e := newRelayEnv(t, seeds, "t.", doublingSchedule, 1)
	obs := e.observe(e.target, e.dlq)
	e.start(e.options("a"))

	now := time.Now()
	good1, good2 := testDelivery(1, now.Add(time.Second)), testDelivery(2, now.Add(time.Second))
	e.park(good1, 0, now, time.Time{})
	noWebhookID := testDelivery(3, now.Add(time.Second))
	noWebhookID.WebhookID = ""
	e.produce(&kgo.Record{Topic: e.tiers[0].Topic, Key: []byte("ep"), Value: []byte("v3"), Headers: noWebhookID.Headers()})
	badDue := testDelivery(4, now.Add(time.Second))
	hs := append(badDue.Headers(), kgo.RecordHeader{Key: delivery.HeaderReason, Value: []byte("old reason")})
	for i := range hs {
		if hs[i].Key == delivery.HeaderDueAt {
			hs[i].Value = []byte("tomorrow")
		}
	}
	e.produce(&kgo.Record{Topic: e.tiers[0].Topic, Key: []byte("ep"), Value: []byte("v4"), Headers: hs})
	e.park(good2, 0, now, time.Time{})

	waitWithin(t, 20*time.Second, "2 deliveries and 2 DLQ records", func() bool {
		return len(obs.in(e.target)) == 2 && len(obs.in(e.dlq)) == 2
	})
	if got := countByID(obs.in(e.target)); got["d0001"] != 1 || got["d0002"] != 1 {
		t.Errorf("target holds %v, want d0001 and d0002 once", got)
	}
	wantReason := map[string]string{"v3": "header " + delivery.HeaderWebhookID + " missing", "v4": "header " + delivery.HeaderDueAt}
	for _, s := range obs.in(e.dlq) {
		var reasons []string
		for _, h := range s.rec.Headers {
			if h.Key == delivery.HeaderReason {
				reasons = append(reasons, string(h.Value))
			}
		}
		v := string(s.rec.Value)
		if len(reasons) != 1 || !strings.Contains(reasons[0], wantReason[v]) || !strings.Contains(reasons[0], "malformed headers in "+e.tiers[0].Topic+"/0@") {
			t.Errorf("DLQ record %s: reasons %q, want one naming %q and the source", v, reasons, wantReason[v])
		}
		if string(s.rec.Key) != "ep" {
			t.Errorf("DLQ record %s: key %q, want the original", v, s.rec.Key)
		}
	}
}

// A relay that dies between producing and ending its transaction leaves no
// visible record; its successor (same transactional ID) relays everything
// exactly once.
func TestRelayKfakeCrashNoFork(t *testing.T) {
	seeds := newKfake(t)
	e := newRelayEnv(t, seeds, "t.", doublingSchedule, 3)
	obs := e.observe(append(e.tiers.Topics(), e.target, e.dlq)...)
	metas := parkMany(e, 0, 45, 3, time.Second, 3500*time.Millisecond, 2)

	var calls atomic.Int32
	a := e.start(e.options("a"), func(r *Relay) {
		r.crashBeforeEnd = func() bool { return calls.Add(1) == 3 }
	})
	select {
	case err := <-a.done:
		if !errors.Is(err, errSimulatedCrash) {
			t.Fatalf("first relay: Run = %v, want the simulated crash", err)
		}
		close(a.done)
	case <-time.After(30 * time.Second):
		t.Fatal("first relay did not crash")
	}
	before := len(obs.in(e.target))
	e.start(e.options("a"))
	waitWithin(t, 30*time.Second, "45 deliveries in the target", func() bool { return len(obs.in(e.target)) >= 45 })
	time.Sleep(500 * time.Millisecond) // let any duplicate show up before judging
	rep := checkPaths(t, e, obs, metas, false)
	t.Logf("crash after 2 commits: %d in the target before restart; %d hops in all; emit lateness max %v",
		before, rep.hops, percentile(rep.emitLate, 100))
}

// Two relays share the group; one leaves midway; nothing is lost or doubled.
func TestRelayKfakeRebalance(t *testing.T) {
	seeds := newKfake(t)
	e := newRelayEnv(t, seeds, "t.", doublingSchedule, 6)
	obs := e.observe(append(e.tiers.Topics(), e.target)...)
	a := e.start(e.options("a"))
	e.start(e.options("b"))
	metas := parkMany(e, 0, 60, 6, time.Second, 5*time.Second, 3)
	waitWithin(t, 20*time.Second, "some deliveries", func() bool { return len(obs.in(e.target)) >= 10 })
	if err := a.stop(); err != nil {
		t.Fatalf("stopping relay a: %v", err)
	}
	waitWithin(t, 40*time.Second, "60 deliveries in the target", func() bool { return len(obs.in(e.target)) >= 60 })
	time.Sleep(500 * time.Millisecond)
	checkPaths(t, e, obs, metas, false)
}

// The default tiers, with the relay's clock moved forward by hand: a
// delivery due in 7h12m20s goes 6h → 1h → 10m → 2m → target, never early, and
// its partition is paused while it waits.
func TestRelayKfakeLongTiersShiftedClock(t *testing.T) {
	seeds := newKfake(t)
	e := newRelayEnv(t, seeds, "t.", retrytiers.DefaultSchedule(), 1)
	obs := e.observe(append(e.tiers.Topics(), e.target)...)
	// The relay's clock stands still but for the test's moves, so the
	// "not yet" step below holds however long a loaded machine takes.
	var clock atomic.Int64 // unix ns
	clock.Store(time.Now().UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	mr := newMetricsReader()
	o := e.options("a")
	o.Now = now
	o.Meter = mr.mp.Meter("test")
	r := e.start(o)

	t0 := now()
	// 7h12m20s: 6h, 1h, 10m and 2m hops leave 20s (the clock moves only
	// by the hops), less than the smallest tier, which the dispatcher would
	// hold.
	m := testDelivery(1, t0.Add(7*time.Hour+12*time.Minute+20*time.Second).Truncate(time.Millisecond))
	if topic := e.park(m, 0, t0, t0); topic != "t.retry-6h" {
		t.Fatalf("parked in %s, want t.retry-6h", topic)
	}
	waitWithin(t, 30*time.Second, "the 6h partition paused with one buffered record", func() bool {
		return mr.gauge(t, "hookrelay.retry.relay.paused_partitions") == 1 && mr.gauge(t, "hookrelay.retry.relay.buffered") == 1
	})

	latest := func() seen {
		var l seen
		for _, topic := range append(e.tiers.Topics(), e.target) {
			for _, s := range obs.in(topic) {
				if l.rec == nil || s.rec.Timestamp.After(l.rec.Timestamp) {
					l = s
				}
			}
		}
		return l
	}
	waitWithin(t, 30*time.Second, "the parked record", func() bool { return latest().rec != nil })
	for _, want := range []string{"t.retry-1h", "t.retry-10m", "t.retry-2m", "t.deliveries"} {
		cur := latest()
		tier, _ := e.tiers.ByTopic(cur.rec.Topic)
		ready := cur.rec.Timestamp.Add(tier.Delay)
		// A second before it is ready, the record stays.
		clock.Store(ready.Add(-time.Second).UnixNano())
		r.kick()
		time.Sleep(300 * time.Millisecond) // room to move wrongly
		if got := latest().rec.Topic; got != cur.rec.Topic {
			t.Fatalf("the delivery left %s for %s before its ready time", cur.rec.Topic, got)
		}
		// Once ready, it moves on promptly.
		clock.Store(ready.UnixNano())
		r.kick()
		waitWithin(t, 30*time.Second, "the delivery in "+want, func() bool { return latest().rec.Topic == want })
	}
	checkPaths(t, e, obs, map[string]delivery.Meta{m.DeliveryID: m}, true)
	if n := mr.counter(t, "hookrelay.retry.relay.records", "to", "tier"); n != 3 {
		t.Errorf("records{to=tier} = %d, want 3", n)
	}
	if b, p := mr.gauge(t, "hookrelay.retry.relay.buffered"), mr.gauge(t, "hookrelay.retry.relay.paused_partitions"); b != 0 || p != 0 {
		t.Errorf("buffered, paused = %d, %d after release; want 0, 0", b, p)
	}
}

// An offset commit that fails inside End aborts the transaction; franz-go
// rewinds to the committed offsets and the relay, having dropped its
// buffers, relays the re-read records exactly once.
func TestRelayKfakeAbortedEndRewinds(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	var commits atomic.Int32
	c.ControlKey(int16(kmsg.TxnOffsetCommit), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		if commits.Add(1) != 2 {
			return nil, nil, false
		}
		req := kr.(*kmsg.TxnOffsetCommitRequest)
		resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewTxnOffsetCommitResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.IllegalGeneration.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	e := newRelayEnv(t, c.ListenAddrs(), "t.", doublingSchedule, 2)
	obs := e.observe(append(e.tiers.Topics(), e.target)...)
	mr := newMetricsReader()
	o := e.options("a")
	o.Meter = mr.mp.Meter("test")
	e.start(o)
	metas := parkMany(e, 0, 40, 2, time.Second, 3*time.Second, 4)
	waitWithin(t, 30*time.Second, "40 deliveries in the target", func() bool { return len(obs.in(e.target)) >= 40 })
	time.Sleep(500 * time.Millisecond)
	checkPaths(t, e, obs, metas, false)
	if n := mr.counter(t, "hookrelay.retry.relay.aborts", "", ""); n != 1 {
		t.Errorf("aborts = %d, want 1", n)
	}
}
