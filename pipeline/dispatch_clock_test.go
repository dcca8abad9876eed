package pipeline

// The dispatcher's timing rules with its clock (DispatcherOptions.Now)
// under the test's control: instants are fixed, so "never early" is an
// exact boundary, not a race against the wall clock.

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/pipeline/delivery"
	"github.com/hookrelay/hookrelay/pipeline/endpoints"
	"github.com/hookrelay/hookrelay/ratelimit"
	"github.com/hookrelay/hookrelay/retrytiers"
)

// manualClock is a clock that moves only when the test sets it.
type manualClock struct{ ns atomic.Int64 }

func newManualClock(t time.Time) *manualClock {
	c := &manualClock{}
	c.set(t)
	return c
}

func (c *manualClock) now() time.Time  { return time.Unix(0, c.ns.Load()).UTC() }
func (c *manualClock) set(t time.Time) { c.ns.Store(t.UnixNano()) }

// kickQueues makes every pump of d re-evaluate its queue at once (after the
// test moved the clock), as a new delivery would.
func kickQueues(d *Dispatcher) {
	d.mu.Lock()
	parts := make([]*partState, 0, len(d.parts))
	for _, p := range d.parts {
		parts = append(parts, p)
	}
	d.mu.Unlock()
	for _, p := range parts {
		p.mu.Lock()
		for _, q := range p.queues {
			q.signal()
		}
		p.mu.Unlock()
	}
}

// TestQueueWaitParksNeverEarly: a delivery that has waited in its
// endpoint's queue exactly MaxQueueWait stays; one nanosecond later it is
// parked in a tier (reason queue_wait), without consuming an attempt.
func TestQueueWaitParksNeverEarly(t *testing.T) {
	topics := NewTopics("qw.")
	policy, err := NewRetryPolicy(retrytiers.DefaultSchedule(), topics, 0)
	if err != nil {
		t.Fatal(err)
	}
	d := &Dispatcher{o: DispatcherOptions{Topics: topics, Policy: policy, MaxQueueWait: 10 * time.Second}, m: newMetrics(nil)}
	lim, err := ratelimit.New(ratelimit.Limit{RatePerSec: 10, MaxInFlight: 1})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	q := newEndpointQueue("ep", lim, new(atomic.Int64))
	p := &partState{queues: map[string]*endpointQueue{"ep": q}}
	for i, at := range []time.Time{t0, t0.Add(time.Second)} {
		q.push(&item{off: int64(i), meta: delivery.Meta{DeliveryID: "d" + string(rune('0'+i)), WebhookID: "msg", EndpointID: "ep", Attempt: 1}, queuedAt: at}, at)
		p.backlog++
	}
	ep := testEndpoint("ep", 1)

	d.shed(p, q, ep, true, t0.Add(10*time.Second))
	if q.len() != 2 || len(d.done) != 0 {
		t.Fatalf("at exactly MaxQueueWait: %d queued, %d finished; want 2 queued, none parked", q.len(), len(d.done))
	}
	d.shed(p, q, ep, true, t0.Add(10*time.Second+time.Nanosecond))
	if q.len() != 1 || len(d.done) != 1 || p.backlog != 1 {
		t.Fatalf("just past MaxQueueWait: %d queued, %d finished, backlog %d; want the head parked, the next still queued", q.len(), len(d.done), p.backlog)
	}
	c := d.done[0]
	if c.off != 0 || len(c.out) != 1 || !slices.Contains(policy.Tiers().Topics(), c.out[0].Topic) {
		t.Fatalf("parked: offset %d, %d records; want offset 0 as one tier record", c.off, len(c.out))
	}
	m, err := delivery.ParseMeta(c.out[0].Headers)
	if err != nil {
		t.Fatal(err)
	}
	if m.Attempt != 1 {
		t.Errorf("parked delivery's attempt = %d; want 1 (parking consumes no attempt)", m.Attempt)
	}
}

// TestHeldDeliveryNeverEarly: a delivery whose DueAt is ahead of the clock
// is held, and becomes ready exactly at DueAt, not a nanosecond before.
func TestHeldDeliveryNeverEarly(t *testing.T) {
	lim, err := ratelimit.New(ratelimit.Limit{RatePerSec: 10, MaxInFlight: 1})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	due := t0.Add(3 * time.Second)
	q := newEndpointQueue("ep", lim, new(atomic.Int64))
	q.push(&item{meta: delivery.Meta{DeliveryID: "d", EndpointID: "ep", DueAt: due}}, t0)
	if len(q.ready) != 0 || len(q.held) != 1 {
		t.Fatalf("pushed before its due time: %d ready, %d held; want it held", len(q.ready), len(q.held))
	}
	q.promote(due.Add(-time.Nanosecond))
	if len(q.ready) != 0 {
		t.Fatal("held delivery ready a nanosecond before its due time")
	}
	q.promote(due)
	if len(q.ready) != 1 || len(q.held) != 0 {
		t.Fatalf("at its due time: %d ready, %d held; want it ready", len(q.ready), len(q.held))
	}
	q2 := newEndpointQueue("ep", lim, new(atomic.Int64))
	q2.push(&item{meta: delivery.Meta{DeliveryID: "e", EndpointID: "ep", DueAt: due}}, due)
	if len(q2.ready) != 1 {
		t.Fatal("a delivery pushed at its due time is held; want it ready")
	}
}

// TestDispatcherHoldsUntilItsClockSaysDue runs the dispatcher against kfake
// with a clock that stands still: a delivery due in an hour of that clock
// is held (not sent, however long the test waits in real time) until the
// test moves the clock to its due time; then it is sent at once (on the
// wall clock, the test would time out).
func TestDispatcherHoldsUntilItsClockSaysDue(t *testing.T) {
	c, seeds, topics, policy := reviewCluster(t, "hc.", 1)
	t0 := time.Now().UTC().Truncate(time.Millisecond)
	clock := newManualClock(t0)
	prod, err := kgo.NewClient(seeds)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	due := t0.Add(time.Hour)
	m := delivery.Meta{DeliveryID: "h0", WebhookID: "msg_h0", EndpointID: "ep", Attempt: 1, DueAt: due}
	if err := prod.ProduceSync(context.Background(), &kgo.Record{Topic: topics.Deliveries, Key: []byte("ep"), Value: []byte(`{}`), Headers: m.Headers()}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var sentAt atomic.Int64
	d, _ := startDispatcher(t, DispatcherOptions{
		Brokers: c.ListenAddrs(), KafkaOptions: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())},
		Topics: topics, Group: "hc.dispatch", TransactionalID: "hc.dispatch-test",
		Endpoints: fakeEndpoints{"ep": testEndpoint("ep", 1)},
		Attempter: funcAttempter(func(_ context.Context, _ *endpoints.Endpoint, _ *delivery.Meta, now time.Time) AttemptResult {
			sentAt.Store(now.UnixNano())
			return AttemptResult{StartedAt: now, StatusCode: 200, Outcome: audit.Delivered}
		}),
		Policy: policy,
		Now:    clock.now,
	})
	held := func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		for _, p := range d.parts {
			p.mu.Lock()
			q := p.queues["ep"]
			n := 0
			if q != nil {
				n = len(q.held)
			}
			p.mu.Unlock()
			if n == 1 {
				return true
			}
		}
		return false
	}
	waitFor(t, "the delivery held in its queue", held)
	if sentAt.Load() != 0 {
		t.Fatal("delivery sent before its clock reached its due time")
	}
	clock.set(due)
	kickQueues(d)
	waitFor(t, "the delivery sent once due", func() bool { return sentAt.Load() != 0 })
	if got := time.Unix(0, sentAt.Load()); got.Before(due) {
		t.Errorf("attempt made at %v; want at or after its due time %v", got, due)
	}
}

// TestDispatcherAbortBackoffOnItsClock: after an aborted transaction the
// next one waits the back-off (2×FlushInterval) on the dispatcher's clock:
// every offset commit after the abort happens at a clock reading at least
// the back-off past the abort's. The clock moves only by the test's small
// steps (a quarter of the back-off each), so a retry that ignored the
// back-off would show an earlier reading.
func TestDispatcherAbortBackoffOnItsClock(t *testing.T) {
	c, seeds, topics, policy := reviewCluster(t, "ab.", 1)
	const flush = 20 * time.Millisecond
	backoff := 2 * flush
	clock := newManualClock(time.Now().UTC())
	var mu sync.Mutex
	var abortedAt time.Time
	var commitsAfter []time.Time
	c.ControlKey(int16(kmsg.TxnOffsetCommit), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		if !abortedAt.IsZero() {
			commitsAfter = append(commitsAfter, clock.now())
			return nil, nil, false // the real broker answers
		}
		abortedAt = clock.now()
		req := kr.(*kmsg.TxnOffsetCommitRequest)
		resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		resp.Version = req.Version
		for _, rt := range req.Topics {
			st := kmsg.NewTxnOffsetCommitResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.RebalanceInProgress.Code // abortable, as in a rebalance
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	prod, err := kgo.NewClient(seeds)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if err := prod.ProduceSync(context.Background(), deliveryRec(topics.Deliveries, "ep", "d0")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	startDispatcher(t, DispatcherOptions{
		Brokers: c.ListenAddrs(), KafkaOptions: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())},
		Topics: topics, Group: "ab.dispatch", TransactionalID: "ab.dispatch-test",
		Endpoints: fakeEndpoints{"ep": testEndpoint("ep", 1)}, Attempter: newFakeAttempter(), Policy: policy,
		FlushInterval: flush, Now: clock.now,
	})
	adm := kadm.NewClient(prod)
	waitFor(t, "a commit after the aborted one", func() bool {
		clock.set(clock.now().Add(backoff / 4))
		at, _ := committedAt(adm, "ab.dispatch", topics.Deliveries)
		return at == 1
	})
	mu.Lock()
	defer mu.Unlock()
	if len(commitsAfter) == 0 {
		t.Fatal("committed without an offset commit after the abort")
	}
	if first := commitsAfter[0]; first.Sub(abortedAt) < backoff {
		t.Errorf("next offset commit %v after the abort on the dispatcher's clock; want at least the back-off %v", first.Sub(abortedAt), backoff)
	}
}
