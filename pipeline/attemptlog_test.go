package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/pipeline/delivery"
	"github.com/hookrelay/hookrelay/pipeline/endpoints"
)

// orderedAttempts records Sending rows and, through sent, whether a request
// had already been made when each was written; fail makes Started fail.
// When gate is set, the first call waits for it to close (after counting
// its rows in first).
type orderedAttempts struct {
	mu      sync.Mutex
	rows    []*audit.Attempt
	before  []bool // no request of the attempt was made yet when its row was written
	calls   []int  // rows per Started call
	fail    atomic.Bool
	started atomic.Int32
	sent    *atomic.Int32
	gate    chan struct{}
	first   atomic.Int32
}

func (o *orderedAttempts) Started(_ context.Context, rows ...*audit.Attempt) error {
	if o.gate != nil && o.first.CompareAndSwap(0, int32(len(rows))) {
		<-o.gate
	}
	o.started.Add(int32(len(rows)))
	if o.fail.Load() {
		return errors.New("broker unavailable")
	}
	o.mu.Lock()
	o.calls = append(o.calls, len(rows))
	for _, a := range rows {
		o.rows = append(o.rows, a)
		o.before = append(o.before, int(o.sent.Load()) < len(o.rows))
	}
	o.mu.Unlock()
	return nil
}

// readAttempts returns the committed rows of the attempts topic.
func readAttempts(t *testing.T, seeds kgo.Opt, topic string, want int) []audit.Attempt {
	t.Helper()
	cl, err := kgo.NewClient(seeds, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []audit.Attempt
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for len(out) < want && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			var a audit.Attempt
			if err := a.Unmarshal(r.Value); err != nil {
				t.Errorf("attempt row: %v", err)
				return
			}
			out = append(out, a)
		})
	}
	return out
}

// TestDispatcherWritesSendingRowFirst: each request is preceded by its
// Sending row, and the outcome row, with the same attempt ID, time and
// endpoint, commits with the delivery (in the attempts topic).
func TestDispatcherWritesSendingRowFirst(t *testing.T) {
	c, seeds, topics, policy := reviewCluster(t, "sr.", 1)
	prod, err := kgo.NewClient(seeds)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for _, id := range []string{"d0", "d1", "d2"} {
		if err := prod.ProduceSync(context.Background(), deliveryRec(topics.Deliveries, "ep", id)).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var sent atomic.Int32
	log := &orderedAttempts{sent: &sent}
	startDispatcher(t, DispatcherOptions{
		Brokers: c.ListenAddrs(), KafkaOptions: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())},
		Topics: topics, Group: "sr.dispatch", TransactionalID: "sr.dispatch-test",
		Endpoints: fakeEndpoints{"ep": testEndpoint("ep", 1)},
		Attempter: funcAttempter(func(_ context.Context, _ *endpoints.Endpoint, _ *delivery.Meta, now time.Time) AttemptResult {
			sent.Add(1)
			return AttemptResult{StartedAt: now, StatusCode: 200, Outcome: audit.Delivered}
		}),
		Attempts: log, Policy: policy,
	})
	rows := readAttempts(t, seeds, topics.Attempts, 3)
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.rows) != 3 || len(rows) != 3 {
		t.Fatalf("%d sending rows, %d committed outcome rows; want 3 and 3", len(log.rows), len(rows))
	}
	// Outcome rows commit in any order (attempts run concurrently): pair
	// them with their sending rows by attempt ID.
	byID := make(map[string]*audit.Attempt, len(rows))
	for i := range rows {
		byID[rows[i].AttemptID] = &rows[i]
	}
	for i, s := range log.rows {
		if !log.before[i] {
			t.Errorf("sending row %d written after its request", i)
		}
		o := byID[s.AttemptID]
		if o == nil {
			t.Errorf("row %d: sending %+v has no committed outcome row", i, s)
			continue
		}
		if s.Outcome != audit.Sending || o.Outcome != audit.Delivered || o.AttemptID != s.AttemptID ||
			!o.AttemptedAt.Equal(s.AttemptedAt) || o.EndpointID != s.EndpointID || o.DeliveryID != s.DeliveryID {
			t.Errorf("row %d: sending %+v, outcome %+v; want the same attempt", i, s, o)
		}
	}
}

// TestDispatcherStartsReadyAttemptsTogether: the deliveries of an endpoint
// that are ready while free in-flight slots allow are started together, one
// Sending write for all of them, each row still before its request.
func TestDispatcherStartsReadyAttemptsTogether(t *testing.T) {
	const n = 8
	c, seeds, topics, policy := reviewCluster(t, "sb.", 1)
	prod, err := kgo.NewClient(seeds)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for i := range n {
		if err := prod.ProduceSync(context.Background(), deliveryRec(topics.Deliveries, "ep", fmt.Sprintf("d%d", i))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var sent atomic.Int32
	log := &orderedAttempts{sent: &sent, gate: make(chan struct{})}
	d, _ := startDispatcher(t, DispatcherOptions{
		Brokers: c.ListenAddrs(), KafkaOptions: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())},
		Topics: topics, Group: "sb.dispatch", TransactionalID: "sb.dispatch-test",
		Endpoints: fakeEndpoints{"ep": testEndpoint("ep", n)},
		Attempter: funcAttempter(func(_ context.Context, _ *endpoints.Endpoint, _ *delivery.Meta, now time.Time) AttemptResult {
			sent.Add(1)
			return AttemptResult{StartedAt: now, StatusCode: 200, Outcome: audit.Delivered}
		}),
		Attempts: log, Policy: policy,
	})
	// The first write waits until every other delivery is queued behind it.
	waitFor(t, "every delivery queued or starting", func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		for _, p := range d.parts {
			p.mu.Lock()
			queued := p.backlog
			p.mu.Unlock()
			if first := int(log.first.Load()); first > 0 && queued+first == n {
				return true
			}
		}
		return false
	})
	close(log.gate)
	rows := readAttempts(t, seeds, topics.Attempts, n)
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.rows) != n || len(rows) != n {
		t.Fatalf("%d sending rows, %d committed outcome rows; want %d and %d", len(log.rows), len(rows), n, n)
	}
	if len(log.calls) > 2 {
		t.Errorf("sending rows written in %d calls %v; want at most 2 (the first, then the rest together)", len(log.calls), log.calls)
	}
	for i := range log.rows {
		if !log.before[i] {
			t.Errorf("sending row %d written after its request", i)
		}
	}
}

// TestDispatcherSendsNothingUnlogged: while the Sending row cannot be
// written, no request is made; the delivery is parked in a tier without
// consuming an attempt.
func TestDispatcherSendsNothingUnlogged(t *testing.T) {
	c, seeds, topics, policy := reviewCluster(t, "su.", 1)
	prod, err := kgo.NewClient(seeds)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if err := prod.ProduceSync(context.Background(), deliveryRec(topics.Deliveries, "ep", "d0")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var sent atomic.Int32
	log := &orderedAttempts{sent: &sent}
	log.fail.Store(true)
	startDispatcher(t, DispatcherOptions{
		Brokers: c.ListenAddrs(), KafkaOptions: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())},
		Topics: topics, Group: "su.dispatch", TransactionalID: "su.dispatch-test",
		Endpoints: fakeEndpoints{"ep": testEndpoint("ep", 1)},
		Attempter: funcAttempter(func(_ context.Context, _ *endpoints.Endpoint, _ *delivery.Meta, now time.Time) AttemptResult {
			sent.Add(1)
			return AttemptResult{StartedAt: now, StatusCode: 200, Outcome: audit.Delivered}
		}),
		Attempts: log, Policy: policy,
	})
	tier := policy.Tiers().Topics()[0]
	cl, err := kgo.NewClient(seeds, kgo.ConsumeTopics(tier), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var parked []*kgo.Record
	for len(parked) == 0 && ctx.Err() == nil {
		parked = append(parked, cl.PollFetches(ctx).Records()...)
	}
	if len(parked) != 1 {
		t.Fatalf("%d records parked in %s, want 1", len(parked), tier)
	}
	m, err := delivery.ParseMeta(parked[0].Headers)
	if err != nil {
		t.Fatal(err)
	}
	if m.Attempt != 1 {
		t.Errorf("parked delivery is at attempt %d, want 1 (no attempt consumed)", m.Attempt)
	}
	if n := sent.Load(); n != 0 || log.started.Load() == 0 {
		t.Errorf("%d requests made with %d failed sending rows; want none", n, log.started.Load())
	}
}

// TestDispatcherRevokedAttemptRowCommits: an attempt cut short by a
// revocation while the dispatcher keeps running still gets its outcome row
// (class canceled), committed in the dispatcher's next transaction though
// its delivery's offset is no longer this dispatcher's to commit.
func TestDispatcherRevokedAttemptRowCommits(t *testing.T) {
	c, seeds, topics, policy := reviewCluster(t, "ro.", 2)
	prod, err := kgo.NewClient(seeds, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for p, ep := range []string{"a", "b"} {
		r := deliveryRec(topics.Deliveries, ep, "d-"+ep)
		r.Partition = int32(p)
		if err := prod.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var sent atomic.Int32
	release := make(chan struct{})
	opts := func(txn string) DispatcherOptions {
		return DispatcherOptions{
			Brokers: c.ListenAddrs(), KafkaOptions: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())},
			Topics: topics, Group: "ro.dispatch", TransactionalID: txn,
			Endpoints: fakeEndpoints{"a": testEndpoint("a", 1), "b": testEndpoint("b", 1)},
			Attempter: funcAttempter(func(ctx context.Context, _ *endpoints.Endpoint, _ *delivery.Meta, now time.Time) AttemptResult {
				sent.Add(1)
				select {
				case <-ctx.Done():
				case <-release:
				}
				return AttemptResult{StartedAt: now, Latency: time.Since(now), Outcome: audit.RetryScheduled, ErrorClass: "timeout"}
			}),
			Policy: policy,
		}
	}
	startDispatcher(t, opts("ro.dispatch-1"))
	waitFor(t, "two requests in flight", func() bool { return sent.Load() == 2 })
	startDispatcher(t, opts("ro.dispatch-2")) // takes one partition over
	t.Cleanup(func() { close(release) })      // runs before the dispatchers stop
	rows := readAttempts(t, seeds, topics.Attempts, 1)
	if len(rows) == 0 || rows[0].ErrorClass != "canceled" || rows[0].Outcome != audit.RetryScheduled {
		t.Fatalf("attempt rows %+v, want the revoked attempt's canceled row", rows)
	}
}
