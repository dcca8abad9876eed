package pipeline

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/pipeline/delivery"
	"github.com/hookrelay/hookrelay/pipeline/endpoints"
	"github.com/hookrelay/hookrelay/retrytiers"
)

// fakeEndpoints is a fixed endpoint table.
type fakeEndpoints map[string]*endpoints.Endpoint

func (f fakeEndpoints) Get(id string) (*endpoints.Endpoint, bool) { e, ok := f[id]; return e, ok }

// fakeAttempter answers per endpoint: "hang" blocks until ctx ends or
// release is closed; anything else is delivered at once.
type fakeAttempter struct {
	mu       sync.Mutex
	calls    map[string][]string // endpoint -> delivery IDs, in call order
	inFlight map[string]int
	peak     map[string]int
	release  chan struct{}
	hang     map[string]bool
}

func newFakeAttempter(hang ...string) *fakeAttempter {
	f := &fakeAttempter{calls: map[string][]string{}, inFlight: map[string]int{}, peak: map[string]int{},
		release: make(chan struct{}), hang: map[string]bool{}}
	for _, h := range hang {
		f.hang[h] = true
	}
	return f
}

func (f *fakeAttempter) Attempt(ctx context.Context, ep *endpoints.Endpoint, _ []byte, m *delivery.Meta, now time.Time) AttemptResult {
	f.mu.Lock()
	f.calls[ep.ID] = append(f.calls[ep.ID], m.DeliveryID)
	f.inFlight[ep.ID]++
	f.peak[ep.ID] = max(f.peak[ep.ID], f.inFlight[ep.ID])
	f.mu.Unlock()
	defer func() { f.mu.Lock(); f.inFlight[ep.ID]--; f.mu.Unlock() }()
	if f.hang[ep.ID] {
		select {
		case <-ctx.Done():
			return AttemptResult{StartedAt: now, Outcome: audit.RetryScheduled, ErrorClass: "canceled"}
		case <-f.release:
		}
	}
	return AttemptResult{StartedAt: now, StatusCode: 200, Outcome: audit.Delivered}
}

func (f *fakeAttempter) count(id string) (calls, peak int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls[id]), f.peak[id]
}

type memAttempts struct {
	mu   sync.Mutex
	rows []*audit.Attempt
}

// Started records the Sending rows.
func (m *memAttempts) Started(_ context.Context, rows ...*audit.Attempt) error {
	m.mu.Lock()
	m.rows = append(m.rows, rows...)
	m.mu.Unlock()
	return nil
}

func testEndpoint(id string, maxInFlight int) *endpoints.Endpoint {
	return &endpoints.Endpoint{ID: id, URL: "http://" + id + ".example/hook", RatePerSec: 10000, MaxInFlight: maxInFlight,
		EventTypes: []string{"*"}, Status: endpoints.Active, Timeout: 10 * time.Second, ConnectTimeout: 3 * time.Second}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, not synchronising
	}
}

// TestDispatcherIsolatesEndpointsAndCommitsAroundUnfinished runs the
// dispatcher against kfake: a hung endpoint and a fast one on one partition.
// The fast one's deliveries all complete while the hung one holds exactly
// max_in_flight requests; the committed offset stays at the hung endpoint's
// first delivery, with the fast ones listed in the commit metadata; and a
// second dispatcher taking over sends only the hung endpoint's deliveries
// again.
func TestDispatcherIsolatesEndpointsAndCommitsAroundUnfinished(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t.deliveries", "t.dlq", "t.attempts", "t.endpoint-status", "t.retry-30s", "t.retry-2m", "t.retry-10m", "t.retry-30m", "t.retry-1h", "t.retry-2h", "t.retry-4h", "t.retry-6h"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	seeds := kgo.SeedBrokers(c.ListenAddrs()...)
	topics := NewTopics("t.")
	policy, err := NewRetryPolicy(retrytiers.DefaultSchedule(), topics, 0)
	if err != nil {
		t.Fatal(err)
	}
	eps := fakeEndpoints{"hung": testEndpoint("hung", 3), "fast": testEndpoint("fast", 4)}

	// 5 hung deliveries first, then 50 fast ones, all on partition 0.
	prod, err := kgo.NewClient(seeds)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	produce := func(ep string, n int) {
		for i := 0; i < n; i++ {
			m := delivery.Meta{DeliveryID: ep + "-" + string(rune('A'+i/26)) + string(rune('a'+i%26)), WebhookID: "msg_x", EndpointID: ep, Attempt: 1}
			if err := prod.ProduceSync(context.Background(), &kgo.Record{Topic: topics.Deliveries, Key: []byte(ep), Value: []byte(`{}`), Headers: m.Headers()}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce("hung", 5)
	produce("fast", 50)

	start := func(att Attempter) (*Dispatcher, context.CancelFunc, chan error) {
		d, err := NewDispatcher(DispatcherOptions{
			Brokers: c.ListenAddrs(), KafkaOptions: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())},
			Topics:          topics,
			Group:           "t.dispatch",
			TransactionalID: "t.dispatch-test",
			Endpoints:       eps,
			Attempter:       att,
			Attempts:        &memAttempts{},
			Policy:          policy,
			FlushInterval:   20 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		return d, cancel, done
	}

	att := newFakeAttempter("hung")
	d1, cancel, done := start(att)
	waitFor(t, "all fast deliveries", func() bool { n, _ := att.count("fast"); return n == 50 })
	waitFor(t, "hung endpoint at its cap", func() bool { n, _ := att.count("hung"); return n == 3 })
	if _, peak := att.count("hung"); peak != 3 {
		t.Fatalf("hung endpoint peak in flight = %d; want max_in_flight 3", peak)
	}

	adm := kadm.NewClient(prod)
	waitFor(t, "commit with metadata", func() bool {
		os, err := adm.FetchOffsets(context.Background(), "t.dispatch")
		if err != nil {
			return false
		}
		o, ok := os.Lookup(topics.Deliveries, 0)
		if !ok || o.At != 0 {
			return false // the hung endpoint's first delivery is offset 0
		}
		r, err := decodeDoneAbove(o.At, o.Metadata)
		return err == nil && len(r) == 1 && r[0].from == 5 && r[0].to == 55
	})

	// Crash the first dispatcher: its client goes away without another
	// commit (the revoke on leaving cancels the hung attempts).
	runningClient(t, d1).Close()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	cancel()

	// A fresh dispatcher sends the hung endpoint's deliveries again, and
	// never the fast ones the first finished above its committed offset.
	att2 := newFakeAttempter()
	_, cancel2, done2 := start(att2)
	defer func() { cancel2(); <-done2 }()
	waitFor(t, "second dispatcher commits to the end", func() bool {
		os, err := adm.FetchOffsets(context.Background(), "t.dispatch")
		if err != nil {
			return false
		}
		o, ok := os.Lookup(topics.Deliveries, 0)
		return ok && o.At == 55
	})
	if n, _ := att2.count("hung"); n != 5 {
		t.Fatalf("second dispatcher sent %d hung-endpoint deliveries; want all 5 again", n)
	}
	if n, _ := att2.count("fast"); n != 0 {
		t.Fatalf("second dispatcher re-sent %d fast deliveries finished by the first", n)
	}
}

// gatedAttempter holds every attempt until the test lets it go.
type gatedAttempter struct {
	fakeAttempter
	gate    chan struct{}
	entered atomic.Int32
}

func (g *gatedAttempter) Attempt(ctx context.Context, ep *endpoints.Endpoint, b []byte, m *delivery.Meta, now time.Time) AttemptResult {
	g.entered.Add(1)
	select {
	case <-g.gate:
	case <-ctx.Done():
	}
	return g.fakeAttempter.Attempt(ctx, ep, b, m, now)
}

// TestDispatcherWakesAfterQueueDrained is the regression test for a stall:
// an endpoint's queue drains while its max_in_flight attempts are still
// running, new deliveries arrive, and the attempts then end. The new
// deliveries must be sent (the ending attempts must wake the queue that holds
// them).
func TestDispatcherWakesAfterQueueDrained(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "w.deliveries", "w.dlq", "w.attempts", "w.endpoint-status", "w.retry-30s", "w.retry-2m", "w.retry-10m", "w.retry-30m", "w.retry-1h", "w.retry-2h", "w.retry-4h", "w.retry-6h"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	seeds := kgo.SeedBrokers(c.ListenAddrs()...)
	topics := NewTopics("w.")
	policy, _ := NewRetryPolicy(retrytiers.DefaultSchedule(), topics, 0)
	att := &gatedAttempter{fakeAttempter: *newFakeAttempter(), gate: make(chan struct{})}
	d, err := NewDispatcher(DispatcherOptions{
		Brokers: c.ListenAddrs(), KafkaOptions: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())},
		Topics: topics, Group: "w.dispatch", TransactionalID: "w.dispatch-test",
		Endpoints: fakeEndpoints{"ep": testEndpoint("ep", 2)}, Attempter: att, Attempts: &memAttempts{},
		Policy: policy, FlushInterval: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() { cancel(); <-done }()

	prod, _ := kgo.NewClient(seeds)
	defer prod.Close()
	produce := func(from, n int) {
		for i := from; i < from+n; i++ {
			m := delivery.Meta{DeliveryID: fmt.Sprint("d", i), WebhookID: "msg_w", EndpointID: "ep", Attempt: 1}
			if err := prod.ProduceSync(context.Background(), &kgo.Record{Topic: topics.Deliveries, Key: []byte("ep"), Value: []byte(`{}`), Headers: m.Headers()}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(0, 2)
	// Both attempts are in flight and their pump has drained the queue
	// and exited.
	waitFor(t, "two attempts in flight and no pump", func() bool {
		if att.entered.Load() != 2 {
			return false
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		for _, p := range d.parts {
			p.mu.Lock()
			q := p.queues["ep"]
			pumping := q != nil && q.running
			p.mu.Unlock()
			if pumping {
				return false
			}
		}
		return true
	})
	produce(2, 3)
	waitFor(t, "new deliveries queued", func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		for _, p := range d.parts {
			p.mu.Lock()
			n := p.backlog // queued, or written and waiting for a slot
			if q := p.queues["ep"]; q != nil {
				n += q.starting
			}
			p.mu.Unlock()
			if n == 3 {
				return true
			}
		}
		return false
	})
	close(att.gate)
	waitFor(t, "all five delivered", func() bool { n, _ := att.count("ep"); return n == 5 })
}

// runningClient returns the client of d's current run, waiting for Run to
// have created it.
func runningClient(t *testing.T, d *Dispatcher) *kgo.Client {
	t.Helper()
	waitFor(t, "the dispatcher's run to create its client", func() bool { return d.live.Load() != nil })
	return d.live.Load()
}

// TestDispatcherStageShape: NewDispatcher only validates (no client, so a
// dispatcher built but never run holds nothing), names a missing field,
// and Run may be called again after it returned: the second run creates a
// new session, owns the partition again and delivers what arrived since.
func TestDispatcherStageShape(t *testing.T) {
	c, seeds, topics, policy := reviewCluster(t, "ss.", 1)
	o := DispatcherOptions{
		Brokers: c.ListenAddrs(), KafkaOptions: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())},
		Topics: topics, Group: "ss.dispatch", TransactionalID: "ss.dispatch-test",
		Endpoints: fakeEndpoints{"ep": testEndpoint("ep", 4)}, Attempts: &memAttempts{}, Policy: policy,
		FlushInterval: 20 * time.Millisecond,
	}
	bad := o
	bad.Brokers = nil
	if _, err := NewDispatcher(bad); err == nil || !strings.Contains(err.Error(), "DispatcherOptions.Brokers") {
		t.Fatalf("NewDispatcher without brokers: %v; want an error naming DispatcherOptions.Brokers", err)
	}
	att := newFakeAttempter()
	o.Attempter = att
	bad = o
	bad.KafkaOptions = []kgo.Opt{kgo.DisableIdempotentWrite()} // conflicts with its transactional ID
	if _, err := NewDispatcher(bad); err == nil || !strings.Contains(err.Error(), "DispatcherOptions.KafkaOptions") {
		t.Fatalf("NewDispatcher with an invalid client option: %v; want an error naming DispatcherOptions.KafkaOptions", err)
	}
	d, err := NewDispatcher(o)
	if err != nil {
		t.Fatal(err)
	}
	if d.live.Load() != nil || d.sess != nil {
		t.Fatal("NewDispatcher created a client; want none before Run")
	}
	prod, err := kgo.NewClient(seeds)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	adm := kadm.NewClient(prod)
	for run, want := range []int64{2, 4} {
		for i := 0; i < 2; i++ {
			if err := prod.ProduceSync(context.Background(), deliveryRec(topics.Deliveries, "ep", fmt.Sprint("r", run, "d", i))).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		waitFor(t, fmt.Sprintf("run %d commits to offset %d", run+1, want), func() bool {
			at, _ := committedAt(adm, "ss.dispatch", topics.Deliveries)
			return at == want
		})
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("run %d: %v", run+1, err)
		}
		if d.live.Load() != nil {
			t.Fatalf("run %d returned without closing its client", run+1)
		}
	}
	if n, _ := att.count("ep"); n != 4 {
		t.Errorf("two runs sent %d deliveries; want 4 (each once)", n)
	}
}
