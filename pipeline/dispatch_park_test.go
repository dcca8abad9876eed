package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/audit"

	"github.com/hookrelay/hookrelay/pipeline/delivery"
	"github.com/hookrelay/hookrelay/ratelimit"
	"github.com/hookrelay/hookrelay/retrytiers"
)

// busyDispatcher is a dispatcher with the default schedule (smallest tier
// 30 s, longest 6 h) and endpoint queue q of limit lim holding queued
// deliveries, for the busy-park rules (dispatch_park.go).
func busyDispatcher(t *testing.T, endpointBacklog int, lim ratelimit.Limit, queued int, now time.Time) (*Dispatcher, *endpointQueue) {
	t.Helper()
	policy, err := NewRetryPolicy(retrytiers.DefaultSchedule(), NewTopics("p."), 0)
	if err != nil {
		t.Fatal(err)
	}
	d := &Dispatcher{o: DispatcherOptions{EndpointBacklog: endpointBacklog, PartitionBacklog: 100000, Policy: policy}, m: newMetrics(nil)}
	l, err := ratelimit.New(lim)
	if err != nil {
		t.Fatal(err)
	}
	q := newEndpointQueue("ep", l, new(atomic.Int64))
	for i := range queued {
		q.push(&item{off: int64(i), meta: delivery.Meta{DeliveryID: fmt.Sprint(i), EndpointID: "ep"}}, now)
	}
	return d, q
}

// parkedMeta parks it as busy (reason backlog) behind q and returns the
// parked record's meta.
func parkedMeta(t *testing.T, d *Dispatcher, q *endpointQueue, it *item, now time.Time) delivery.Meta {
	t.Helper()
	var rec *kgo.Record
	d.parkBusy(&partState{}, it, q, q.len(), "backlog", now, func(_ *partState, _ int64, out []*kgo.Record) { rec = out[0] })
	m, err := delivery.ParseMeta(rec.Headers)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestBusyParksReturnInOrderAtTheEndpointsPace: the overflow of a busy
// endpoint (queue full) is due back in the order it was parked, spaced at
// the endpoint's measured pace (service time / in-flight cap), after the
// deliveries already queued, however often each was parked before. Before
// busy parks, a delivery parked for the eighth time was due after 30 s ×
// 2^7 = 64 min although the endpoint drains its queue in about a second,
// and 300 of them all came back at the same instant, although the
// endpoint drains its queue in 100 s (issue 10, 3-node
// scenario: the overflow cycled through the tiers and starved).
func TestBusyParksReturnInOrderAtTheEndpointsPace(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	d, q := busyDispatcher(t, 100, ratelimit.Limit{RatePerSec: 1000, MaxInFlight: 4}, 100, now)
	d.pacer.observe("ep", 4*time.Second) // 1 s per delivery at 4 in flight
	const per = time.Second
	var last time.Time
	for i := range 300 {
		it := &item{off: int64(100 + i), key: []byte("ep"), value: []byte(`{}`),
			meta: delivery.Meta{DeliveryID: fmt.Sprint(100 + i), WebhookID: "msg", EndpointID: "ep", Attempt: 2, Parks: 7}}
		m := parkedMeta(t, d, q, it, now)
		if m.Parks != 8 || m.Attempt != 2 {
			t.Fatalf("park %d: parks %d attempt %d; want 8 and 2 (counted, no attempt consumed)", i, m.Parks, m.Attempt)
		}
		if !m.PauseUntil.IsZero() {
			t.Fatalf("park %d: a busy park paused the endpoint until %v", i, m.PauseUntil)
		}
		// Behind the 100 queued (100 s at 1 s each), one slot apiece.
		want := now.Add(100*per + time.Duration(i)*per)
		if !m.DueAt.Equal(want) {
			t.Fatalf("park %d (parked 7 times before): due +%v; want +%v (after the queue, in park order, at the endpoint's pace)",
				i, m.DueAt.Sub(now), want.Sub(now))
		}
		if !m.DueAt.After(last) {
			t.Fatalf("park %d: due %v not after the previous park's %v", i, m.DueAt, last)
		}
		last = m.DueAt
	}
}

// TestBusyParkBounds: a busy park is never due before the smallest tier
// (it would come back at once, into a full queue) nor after the longest;
// the first one without any measurement uses the rate's interval when the
// rate is the tighter bound.
func TestBusyParkBounds(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	d, q := busyDispatcher(t, 10, ratelimit.Limit{RatePerSec: 1000, MaxInFlight: 50}, 10, now)
	m := parkedMeta(t, d, q, &item{key: []byte("ep"), meta: delivery.Meta{DeliveryID: "a", WebhookID: "w", EndpointID: "ep", Attempt: 1}}, now)
	if got := m.DueAt.Sub(now); got != 30*time.Second {
		t.Fatalf("a busy park behind a queue that drains in milliseconds is due +%v; want the smallest tier, 30s", got)
	}
	d, q = busyDispatcher(t, 100, ratelimit.Limit{RatePerSec: 0.001, MaxInFlight: 1}, 100, now) // 1000 s per delivery
	m = parkedMeta(t, d, q, &item{key: []byte("ep"), meta: delivery.Meta{DeliveryID: "b", WebhookID: "w", EndpointID: "ep", Attempt: 1}}, now)
	if got := m.DueAt.Sub(now); got != 6*time.Hour {
		t.Fatalf("a busy park behind 100 deliveries at 1000 s each is due +%v; want the longest tier, 6h", got)
	}
}

// TestReturningParkedDeliveryIsNotParkedAgainForTheCap: a new delivery to
// a full queue is parked (backlog), but one back from a park is admitted up
// to twice EndpointBacklog, so the deliveries that arrived while it waited
// do not send it round the tiers again. A pause still parks it.
func TestReturningParkedDeliveryIsNotParkedAgainForTheCap(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	d, q := busyDispatcher(t, 10, ratelimit.Limit{RatePerSec: 1000, MaxInFlight: 4}, 10, now)
	p := &partState{backlog: 10}
	fresh := &item{meta: delivery.Meta{DeliveryID: "new", EndpointID: "ep", Attempt: 1}}
	back := &item{meta: delivery.Meta{DeliveryID: "back", EndpointID: "ep", Attempt: 1, Parks: 3}}
	if r, _ := d.parkReason(p, q, fresh, now); r != "backlog" {
		t.Fatalf("a new delivery to a full queue: park reason %q; want backlog", r)
	}
	if r, _ := d.parkReason(p, q, back, now); r != "" {
		t.Fatalf("a delivery back from a park, at the cap: park reason %q; want admitted", r)
	}
	for i := range 10 {
		q.push(&item{off: int64(100 + i), meta: delivery.Meta{DeliveryID: fmt.Sprint(100 + i), EndpointID: "ep"}}, now)
	}
	if r, _ := d.parkReason(p, q, back, now); r != "backlog" {
		t.Fatalf("a delivery back from a park, at twice the cap: park reason %q; want backlog", r)
	}
	q.lim.Pause(now.Add(time.Hour))
	if r, _ := d.parkReason(p, q, back, now); r != "paused" {
		t.Fatalf("a delivery back from a park, endpoint paused: park reason %q; want paused", r)
	}
}

// TestArrivalParkedWhenItWouldWaitTooLong: at the endpoint's measured pace
// (1 s per delivery here), a new delivery that would wait half of
// MaxQueueWait (10 s) or more behind the queue is parked at once (reason
// queue_wait), not queued to be parked for its wait later; one back from a
// park is admitted whatever the expected wait. Before this rule, the
// 3-node fault scenario parked 491,250 deliveries for their queue wait, most
// of them again and again.
func TestArrivalParkedWhenItWouldWaitTooLong(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	d, q := busyDispatcher(t, 1000, ratelimit.Limit{RatePerSec: 1000, MaxInFlight: 4}, 4, now)
	d.o.MaxQueueWait = 10 * time.Second
	d.pacer.observe("ep", 4*time.Second) // 1 s per delivery at 4 in flight
	p := &partState{backlog: 4}
	fresh := &item{meta: delivery.Meta{DeliveryID: "new", EndpointID: "ep", Attempt: 1}}
	back := &item{meta: delivery.Meta{DeliveryID: "back", EndpointID: "ep", Attempt: 1, Parks: 1}}
	if r, _ := d.parkReason(p, q, fresh, now); r != "" {
		t.Fatalf("a new delivery behind 4 s of work (MaxQueueWait 10 s): park reason %q; want admitted", r)
	}
	q.push(&item{off: 4, meta: delivery.Meta{DeliveryID: "4", EndpointID: "ep"}}, now)
	if r, _ := d.parkReason(p, q, fresh, now); r != "queue_wait" {
		t.Fatalf("a new delivery behind 5 s of work (MaxQueueWait 10 s): park reason %q; want queue_wait", r)
	}
	if r, _ := d.parkReason(p, q, back, now); r != "" {
		t.Fatalf("a delivery back from a park behind 5 s of work: park reason %q; want admitted", r)
	}
	for i := range 50 {
		q.push(&item{off: int64(5 + i), meta: delivery.Meta{DeliveryID: fmt.Sprint(5 + i), EndpointID: "ep"}}, now)
	}
	if r, _ := d.parkReason(p, q, back, now); r != "" {
		t.Fatalf("a delivery back from a park behind 55 s of work: park reason %q; want admitted (it waited its turn)", r)
	}
}

// slowAttempts is an attempt log whose sending-row writes take delay, and
// which records the rows of each write.
type slowAttempts struct {
	memAttempts
	delay  time.Duration
	mu     sync.Mutex
	writes []int // rows per write
}

func (s *slowAttempts) Started(ctx context.Context, rows ...*audit.Attempt) error {
	time.Sleep(s.delay) // the write's latency: what the test is about
	s.mu.Lock()
	s.writes = append(s.writes, len(rows))
	s.mu.Unlock()
	return s.memAttempts.Started(ctx, rows...)
}

// TestSlowSendingRowWritesDoNotHoldInFlightSlots: the in-flight cap bounds
// the requests open at an endpoint, not its sending-row writes. With writes
// slower than requests, a write carries more deliveries than the cap (the
// start window, dispatch_endpoint.go), while the requests open at once never
// exceed it. Before, each attempt took its in-flight slot before its
// sending row was written, so no write ever carried more than the cap and
// the endpoint's throughput was its cap per write (issue 10: at 141–404 ms
// per write on the busy 3-node cluster, ~20 deliveries/s of an endpoint
// receiving 40).
func TestSlowSendingRowWritesDoNotHoldInFlightSlots(t *testing.T) {
	topics := NewTopics("sw.")
	policy, err := NewRetryPolicy(retrytiers.DefaultSchedule(), topics, 0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, append([]string{topics.Deliveries, topics.DLQ, topics.Attempts, topics.EndpointStatus}, policy.Tiers().Topics()...)...))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	const n, inFlight = 200, 2
	for i := range n {
		m := delivery.Meta{DeliveryID: fmt.Sprintf("d%03d", i), WebhookID: "msg_sw", EndpointID: "ep", Attempt: 1}
		if err := prod.ProduceSync(context.Background(), &kgo.Record{Topic: topics.Deliveries, Key: []byte("ep"), Value: []byte(`{}`), Headers: m.Headers()}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	att := newFakeAttempter()
	log := &slowAttempts{delay: 50 * time.Millisecond}
	d, err := NewDispatcher(DispatcherOptions{
		Brokers: c.ListenAddrs(), KafkaOptions: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())},
		Topics: topics, Group: "sw.dispatch", TransactionalID: "sw.dispatch-test",
		Endpoints: fakeEndpoints{"ep": testEndpoint("ep", inFlight)}, Attempter: att, Attempts: log,
		Policy: policy, FlushInterval: 20 * time.Millisecond, MaxQueueWait: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	waitFor(t, "every delivery attempted", func() bool { got, _ := att.count("ep"); return got >= n })
	calls, peak := att.count("ep")
	if calls != n {
		t.Errorf("%d attempts of %d deliveries; want each once", calls, n)
	}
	if peak > inFlight {
		t.Errorf("%d requests open at once; the in-flight cap is %d", peak, inFlight)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	most := 0
	for _, w := range log.writes {
		most = max(most, w)
	}
	if most <= inFlight {
		t.Errorf("the largest sending-row write carried %d rows (writes %v); want more than the in-flight cap %d: slow writes must not hold slots", most, log.writes, inFlight)
	}
	t.Logf("%d writes for %d deliveries, largest %d rows, peak in flight %d", len(log.writes), n, most, peak)
}

// windowAttempt runs, synchronously, the second stage of an attempt whose
// sending row is written (it is in q's start window) on partition p, with
// no attempter: a request would panic.
func windowAttempt(d *Dispatcher, p *partState, q *endpointQueue, it *item, now time.Time) {
	p.mu.Lock()
	p.queues[q.id] = q
	q.active++
	q.enterWindow(it)
	p.mu.Unlock()
	p.wg.Add(1)
	d.attempt(p, q, it, testEndpoint("ep", 1), "att-1", now)
}

// TestWrittenAttemptNotSentWhenPausedOrStopped: an attempt whose sending
// row is written but whose request has not begun is not sent when its
// endpoint is paused (429) for at least the smallest tier meanwhile: its
// outcome row says not_sent and the delivery is parked for the pause,
// without consuming an attempt, committed together; at a shutdown (queue
// closed) it is not sent either, and its row (canceled) is tied to no
// offset. Either way it leaves the start window and the memory budget.
func TestWrittenAttemptNotSentWhenPausedOrStopped(t *testing.T) {
	now := time.Now()
	for _, tc := range []string{"paused", "stopped"} {
		t.Run(tc, func(t *testing.T) {
			d, q := busyDispatcher(t, 100, ratelimit.Limit{RatePerSec: 1000, MaxInFlight: 1}, 0, now)
			d.o.Topics, d.o.Now = NewTopics("p."), time.Now
			it := &item{off: 7, key: []byte("ep"), value: []byte(`{}`), size: 10,
				meta: delivery.Meta{DeliveryID: "d7", WebhookID: "msg", EndpointID: "ep", Attempt: 2}}
			p := &partState{ctx: context.Background(), queues: map[string]*endpointQueue{}}
			if tc == "paused" {
				q.lim.Pause(now.Add(10 * time.Minute))
			} else {
				q.closeQueue()
			}
			windowAttempt(d, p, q, it, now)
			if q.starting != 0 || q.active != 0 || q.total.Load() != 0 {
				t.Fatalf("after the attempt: starting %d, active %d, held bytes %d; want 0, 0, 0", q.starting, q.active, q.total.Load())
			}
			var rows, tiers []*kgo.Record
			var offs []int64
			for _, c := range d.done {
				offs = append(offs, c.off)
				for _, r := range c.out {
					if r.Topic == d.o.Topics.Attempts {
						rows = append(rows, r)
					} else {
						tiers = append(tiers, r)
					}
				}
			}
			if tc == "stopped" {
				if len(d.done) != 0 || len(d.loose) != 1 || !bytes.Contains(d.loose[0].Value, []byte(`"canceled"`)) {
					t.Fatalf("stopped: %d completions, loose %d; want none and one canceled row tied to no offset", len(d.done), len(d.loose))
				}
				return
			}
			if len(offs) != 1 || offs[0] != 7 || len(rows) != 1 || len(tiers) != 1 {
				t.Fatalf("paused: completions at %v with %d rows and %d tier records; want one at offset 7 with one of each", offs, len(rows), len(tiers))
			}
			if !bytes.Contains(rows[0].Value, []byte(`"not_sent"`)) || !bytes.Contains(rows[0].Value, []byte(`"att-1"`)) {
				t.Fatalf("outcome row %s; want error class not_sent for attempt att-1", rows[0].Value)
			}
			m, err := delivery.ParseMeta(tiers[0].Headers)
			if err != nil {
				t.Fatal(err)
			}
			if m.Attempt != 2 || m.Parks != 1 || m.DueAt.Before(now.Add(10*time.Minute).Truncate(time.Millisecond)) {
				t.Fatalf("parked: attempt %d, parks %d, due +%v; want attempt 2 (none consumed), 1 park, due at the pause's end (headers carry milliseconds)", m.Attempt, m.Parks, m.DueAt.Sub(now))
			}
		})
	}
}
