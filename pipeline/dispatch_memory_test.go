package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/pipeline/delivery"
	"github.com/hookrelay/hookrelay/retrytiers"
)

// TestDispatcherMemoryBudget runs the dispatcher against kfake with a
// MemoryBudget of eight deliveries' bytes: a hung endpoint ("slow",
// max_in_flight 1) and a fast one share a partition. The bytes held never
// exceed the budget by more than one record; the overflow is parked; and
// once the slow endpoint
// recovers and the parked deliveries come back from their tier (a relay that
// releases them at once), every delivery is attempted exactly once.
func TestDispatcherMemoryBudget(t *testing.T) {
	topics := NewTopics("mb.")
	policy, err := NewRetryPolicy(retrytiers.DefaultSchedule(), topics, 0)
	if err != nil {
		t.Fatal(err)
	}
	tierTopics := policy.Tiers().Topics()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, append([]string{topics.Deliveries, topics.DLQ, topics.Attempts, topics.EndpointStatus}, tierTopics...)...))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()

	const nSlow, nFast = 40, 20
	body := bytes.Repeat([]byte("x"), 1024)
	var recSize int64
	produce := func(ep string, n int) {
		for i := range n {
			m := delivery.Meta{DeliveryID: fmt.Sprintf("%s-%03d", ep, i), WebhookID: "msg_x", EndpointID: ep, Attempt: 1}
			r := &kgo.Record{Topic: topics.Deliveries, Key: []byte(ep), Value: body, Headers: m.Headers()}
			recSize = max(recSize, itemSize(r.Key, r.Value, r.Headers))
			if err := prod.ProduceSync(context.Background(), r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce("slow", nSlow)
	produce("fast", nFast)
	budget := 8 * recSize

	att := newFakeAttempter("slow")
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(att.release) }) }
	d, err := NewDispatcher(DispatcherOptions{
		Brokers: c.ListenAddrs(), KafkaOptions: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())},
		Topics: topics, Group: "mb.dispatch", TransactionalID: "mb.dispatch-test",
		Endpoints: fakeEndpoints{"slow": testEndpoint("slow", 1), "fast": testEndpoint("fast", 4)},
		Attempter: att, Attempts: &memAttempts{}, Policy: policy,
		FlushInterval: 20 * time.Millisecond, MemoryBudget: budget,
	})
	if err != nil {
		t.Fatal(err)
	}

	// The sampler records the most bytes ever held.
	var peakMu sync.Mutex
	var peak int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			h := d.held.Load()
			peakMu.Lock()
			peak = max(peak, h)
			peakMu.Unlock()
			time.Sleep(50 * time.Microsecond)
		}
	}()

	// The relay stand-in: every parked delivery goes back to the
	// deliveries topic at once (its due time cleared).
	relayCl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics(tierTopics...),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer relayCl.Close()
	var parkedMu sync.Mutex
	parked := 0
	relayBack := make(chan struct{}) // closed: start sending parked deliveries back
	rctx, rcancel := context.WithCancel(context.Background())
	wg.Add(1)
	go func() {
		defer wg.Done()
		var backlog []*kgo.Record
		for rctx.Err() == nil {
			pctx, cancel := context.WithTimeout(rctx, 50*time.Millisecond)
			fs := relayCl.PollFetches(pctx)
			cancel()
			fs.EachRecord(func(r *kgo.Record) {
				m, err := delivery.ParseMeta(r.Headers)
				if err != nil {
					t.Errorf("parked record: %v", err)
					return
				}
				m.DueAt, m.PauseUntil = time.Time{}, time.Time{}
				backlog = append(backlog, &kgo.Record{Topic: topics.Deliveries, Key: r.Key, Value: r.Value, Headers: m.Headers()})
				parkedMu.Lock()
				parked++
				parkedMu.Unlock()
			})
			select {
			case <-relayBack:
			default:
				continue
			}
			for _, r := range backlog {
				if err := prod.ProduceSync(rctx, r).FirstErr(); err != nil && rctx.Err() == nil {
					t.Errorf("relay: %v", err)
				}
			}
			backlog = nil
		}
	}()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() {
		release() // a shutdown waits for the attempts in flight
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		rcancel()
		close(stop)
		wg.Wait()
	}()

	// Every delivery is attempted (one slow in flight), held, or parked.
	waitFor(t, "overflow parked", func() bool {
		parkedMu.Lock()
		n := parked
		parkedMu.Unlock()
		slow, _ := att.count("slow")
		fast, _ := att.count("fast")
		return int64(n+slow+fast)+d.held.Load()/recSize >= nSlow+nFast
	})
	peakMu.Lock()
	if peak > budget+recSize {
		t.Errorf("held bytes peaked at %d; want at most the budget %d plus one record (%d)", peak, budget, recSize)
	}
	peakMu.Unlock()
	parkedMu.Lock()
	if parked == 0 {
		t.Errorf("nothing parked with %d deliveries of %d bytes for a hung endpoint and a budget of %d", nSlow, recSize, budget)
	}
	parkedMu.Unlock()

	// The endpoint recovers; the parked deliveries come back.
	release()
	close(relayBack)
	waitFor(t, "every slow delivery attempted", func() bool { n, _ := att.count("slow"); return n >= nSlow })
	// Parked fast deliveries may still be on their way back through the
	// stand-in relay (held is 0 between a park and its return).
	waitFor(t, "every fast delivery attempted", func() bool { n, _ := att.count("fast"); return n >= nFast })
	// Let anything duplicated show up: the deliveries topic fully committed.
	waitFor(t, "nothing held", func() bool { return d.held.Load() == 0 })
	att.mu.Lock()
	defer att.mu.Unlock()
	for _, ep := range []string{"slow", "fast"} {
		seen := map[string]int{}
		for _, id := range att.calls[ep] {
			seen[id]++
		}
		want := map[string]int{"slow": nSlow, "fast": nFast}[ep]
		if len(seen) != want || len(att.calls[ep]) != want {
			t.Errorf("%s: %d attempts of %d distinct deliveries; want each of %d exactly once", ep, len(att.calls[ep]), len(seen), want)
		}
	}
	peakMu.Lock()
	t.Logf("record %d bytes, budget %d, peak held %d, parked %d", recSize, budget, peak, parked)
	peakMu.Unlock()
}
