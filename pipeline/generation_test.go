package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/hookrelay/hookrelay/pipeline/delivery"
)

// genRecord is the generations-topic record of gen.
func genRecord(t *testing.T, gen Generation) *kgo.Record {
	t.Helper()
	b, err := json.Marshal(gen)
	if err != nil {
		t.Fatal(err)
	}
	return &kgo.Record{Key: []byte(generationKeyPrefix + strconv.Itoa(gen.N)), Value: b}
}

func newTestGenerations(t *testing.T) *Generations {
	t.Helper()
	g, err := NewGenerations(GenerationsOptions{Brokers: []string{"unused:9092"}, Topics: NewTopics("gt.")})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestGenerationsApply(t *testing.T) {
	g := newTestGenerations(t)
	if got := g.DeliveriesTopic(); got != "gt.deliveries" {
		t.Fatalf("before any record: %q, want gt.deliveries", got)
	}
	ch := g.Changed()
	g.apply(genRecord(t, Generation{N: 2, Topic: "gt.deliveries.g2", Partitions: 8}))
	select {
	case <-ch:
	default:
		t.Fatal("Changed not closed by a new generation")
	}
	if got := g.DeliveriesTopic(); got != "gt.deliveries.g2" {
		t.Fatalf("after generation 2: %q", got)
	}
	// Records that are not generations, or unreadable, change nothing.
	g.apply(&kgo.Record{Key: []byte("other/3"), Value: []byte(`{}`)})
	g.apply(&kgo.Record{Key: []byte("deliveries/3"), Value: []byte(`{not json`)})
	g.apply(&kgo.Record{Key: []byte("deliveries/4"), Value: []byte(`{"generation":5,"topic":"x"}`)}) // N mismatch
	if all := g.All(); len(all) != 2 || all[0].N != 1 || all[1].N != 2 {
		t.Fatalf("generations %+v, want 1 and 2", all)
	}
	if GenerationTopic(NewTopics("gt."), 3) != "gt.deliveries.g3" || GenerationGroup("gt.dispatch", 1) != "gt.dispatch" || GenerationGroup("gt.dispatch", 2) != "gt.dispatch.g2" {
		t.Fatal("generation names")
	}
}

// TestGrowAndDrainedKfake: GrowDeliveries creates the next topic and its
// switch record, which a Generations view reads; Drained tells pending
// data from a trailing commit marker.
func TestGrowAndDrainedKfake(t *testing.T) {
	topics := NewTopics("gk.")
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, topics.Deliveries), kfake.SeedTopics(1, topics.Generations))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	seeds := c.ListenAddrs()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	o := GenerationsOptions{Brokers: seeds, Topics: topics}
	gens, err := ReadGenerations(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := GrowDeliveries(ctx, cl, topics, gens, 4, TopicLayout{ReplicationFactor: -1, MinInsyncReplicas: -1}); err == nil {
		t.Fatal("grow to the same partition count: no error")
	}
	gen, err := GrowDeliveries(ctx, cl, topics, gens, 8, TopicLayout{ReplicationFactor: -1, MinInsyncReplicas: -1})
	if err != nil {
		t.Fatal(err)
	}
	if gen.N != 2 || gen.Topic != "gk.deliveries.g2" || gen.Partitions != 8 {
		t.Fatalf("grown to %+v", gen)
	}
	md, err := kadm.NewClient(cl).ListTopics(ctx, gen.Topic)
	if err != nil || len(md[gen.Topic].Partitions) != 8 {
		t.Fatalf("topic %s: %v, %d partitions", gen.Topic, err, len(md[gen.Topic].Partitions))
	}
	gens, err = ReadGenerations(ctx, o)
	if err != nil || len(gens) != 2 || gens[1].Topic != gen.Topic {
		t.Fatalf("read back %+v, %v", gens, err)
	}

	// Drained: a group with no commit on an empty topic is drained.
	group := "gk.dispatch"
	if d, err := Drained(ctx, cl, group, topics.Deliveries); err != nil || !d.Drained {
		t.Fatalf("empty topic: %+v, %v", d, err)
	}
	// One committed transaction of two records on partition 0: pending
	// until the group commits past them; committed at the last record
	// (one short of the end: the commit marker), drained.
	tx, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.TransactionalID("gk-tx"), kgo.DefaultProduceTopic(topics.Deliveries), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := tx.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("a")}, &kgo.Record{Partition: 0, Value: []byte("b")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := tx.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	d, err := Drained(ctx, cl, group, topics.Deliveries)
	if err != nil || d.Drained || d.PendingPartitions == 0 {
		t.Fatalf("two records not consumed: %+v, %v; want pending", d, err)
	}
	adm := kadm.NewClient(cl)
	commit := func(at int64) {
		t.Helper()
		os := kadm.Offsets{}
		os.Add(kadm.Offset{Topic: topics.Deliveries, Partition: 0, At: at, LeaderEpoch: -1})
		if _, err := adm.CommitOffsets(ctx, group, os); err != nil {
			t.Fatal(err)
		}
	}
	commit(1)
	if d, err := Drained(ctx, cl, group, topics.Deliveries); err != nil || d.Drained {
		t.Fatalf("committed at 1 of 2 records: %+v, %v; want not drained", d, err)
	}
	commit(2) // past both records, at the commit marker
	if d, err := Drained(ctx, cl, group, topics.Deliveries); err != nil || !d.Drained {
		t.Fatalf("committed past the data, at the marker: %+v, %v; want drained", d, err)
	}

	// Retire: refused for the newest, done for a drained older one.
	if _, err := RetireGeneration(ctx, cl, topics, gens, 2, group, time.Millisecond, false); err == nil {
		t.Fatal("retiring the newest generation: no error")
	}
	// Drained but written to within the quiet period: refused (a late
	// writer's records would go unconsumed).
	if _, err := RetireGeneration(ctx, cl, topics, gens, 1, group, time.Hour, false); err == nil || !strings.Contains(err.Error(), "written to") {
		t.Fatalf("retiring a generation written to within the quiet period: %v, want refused", err)
	}
	for { // quiet for 1 ms after the last record: poll past it
		_, err := RetireGeneration(ctx, cl, topics, gens, 1, group, time.Millisecond, false)
		if err == nil {
			break
		}
		if !strings.Contains(err.Error(), "written to") || ctx.Err() != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	gens, err = ReadGenerations(ctx, o)
	if err != nil || gens[0].RetiredAt.IsZero() {
		t.Fatalf("generation 1 after retire: %+v, %v", gens, err)
	}

	// A record written to the retired generation after that is reported.
	view, err := NewGenerations(o)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(gens[0])
	view.apply(&kgo.Record{Key: []byte("deliveries/1"), Value: b})
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	w, err := NewStrayWatcher(&StrayWatcher{Admin: adm, Gens: view}, mp.Meter("t"))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Poll(ctx); err != nil { // the baseline
		t.Fatal(err)
	}
	if n := strayCount(t, reader); n != 0 {
		t.Fatalf("stray records before any late write: %d", n)
	}
	late, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topics.Deliveries))
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()
	if err := late.ProduceSync(ctx, &kgo.Record{Key: []byte("ep_1"), Value: []byte("late")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := w.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if n := strayCount(t, reader); n != 1 {
		t.Fatalf("stray records after one late write: %d, want 1", n)
	}
}

// strayCount is hookrelay.generation.stray_records summed.
func strayCount(t *testing.T, r *sdkmetric.ManualReader) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if s, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "hookrelay.generation.stray_records" {
				for _, dp := range s.DataPoints {
					n += dp.Value
				}
			}
		}
	}
	return n
}

// TestRunGenerationsGate: generation 1 takes deliveries at once;
// generation 2's run starts at once but is held until generation 1 is
// drained and the grace has passed, or until MaxWait; a retired
// generation's run ends.
func TestRunGenerationsGate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		drained bool
	}{{"drained", true}, {"never drained: MaxWait", false}} {
		t.Run(tc.name, func(t *testing.T) {
			g := newTestGenerations(t)
			var now atomic.Int64 // nanoseconds since start
			start := time.Unix(1_700_000_000, 0)
			clock := func() time.Time { return start.Add(time.Duration(now.Load())) }
			var drained atomic.Bool
			var mu sync.Mutex
			holds := map[int]<-chan struct{}{}
			ended := map[int]chan struct{}{}
			run := func(ctx context.Context, gen Generation, hold <-chan struct{}) error {
				mu.Lock()
				holds[gen.N] = hold
				ended[gen.N] = make(chan struct{})
				e := ended[gen.N]
				mu.Unlock()
				<-ctx.Done()
				close(e)
				return nil
			}
			opened := make(chan time.Duration, 4)
			gate := GenerationGate{
				Drained:  func(context.Context, Generation) (bool, error) { return drained.Load(), nil },
				Grace:    time.Second,
				MaxWait:  10 * time.Second,
				Interval: time.Millisecond,
				Now:      clock,
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				_ = RunGenerations(ctx, g, gate, run, func(gen Generation, held time.Duration) {
					if gen.N > 1 {
						opened <- held
					}
				})
			}()
			defer func() { cancel(); <-done }()
			hold := func(n int) <-chan struct{} {
				t.Helper()
				deadline := time.Now().Add(5 * time.Second)
				for time.Now().Before(deadline) {
					mu.Lock()
					h := holds[n]
					mu.Unlock()
					if h != nil {
						return h
					}
					time.Sleep(time.Millisecond) // polling a goroutine's start
				}
				t.Fatalf("generation %d never started", n)
				return nil
			}
			select {
			case <-hold(1):
			case <-time.After(5 * time.Second):
				t.Fatal("generation 1 held")
			}
			g.apply(genRecord(t, Generation{N: 2, Topic: "gt.deliveries.g2", Partitions: 8}))
			h2 := hold(2) // started (joins its group) before any drain
			drained.Store(tc.drained)
			// Within the grace, nothing opens even if drained.
			time.Sleep(20 * time.Millisecond) // let the loop run a few checks at this instant
			if isClosed(h2) {
				t.Fatal("generation 2 opened within the grace")
			}
			if tc.drained {
				now.Store(int64(time.Second))
			} else {
				now.Store(int64(5 * time.Second))
				time.Sleep(20 * time.Millisecond)
				if isClosed(h2) {
					t.Fatal("generation 2 opened before drained and before MaxWait")
				}
				now.Store(int64(10 * time.Second))
			}
			select {
			case held := <-opened:
				if want := time.Duration(now.Load()); held != want {
					t.Errorf("held %v, want %v", held, want)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("generation 2 never opened")
			}
			// Retiring generation 1 ends its run; generation 2's goes on.
			g.apply(genRecord(t, Generation{N: 1, Topic: "gt.deliveries", RetiredAt: clock()}))
			mu.Lock()
			e1, e2 := ended[1], ended[2]
			mu.Unlock()
			select {
			case <-e1:
			case <-time.After(5 * time.Second):
				t.Fatal("retired generation 1 still running")
			}
			if isClosed(e2) {
				t.Fatal("generation 2 ended with generation 1")
			}
		})
	}
}

// TestDispatcherHold: a dispatcher with an open Hold joins its group but
// attempts nothing; once Hold is closed it delivers what was waiting.
func TestDispatcherHold(t *testing.T) {
	c, _, topics, policy := reviewCluster(t, "dh.", 2)
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for i := range 5 {
		m := delivery.Meta{DeliveryID: "held-" + strconv.Itoa(i), WebhookID: "msg_h" + strconv.Itoa(i), EndpointID: "ep", Attempt: 1}
		if err := prod.ProduceSync(context.Background(), &kgo.Record{Topic: topics.Deliveries, Key: []byte("ep"), Value: []byte(`{}`), Headers: m.Headers()}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	hold := make(chan struct{})
	att := newFakeAttempter()
	d, stop := startDispatcher(t, DispatcherOptions{
		Brokers: c.ListenAddrs(), KafkaOptions: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())},
		Topics: topics, Group: "dh.dispatch", TransactionalID: "dh.dispatch-test",
		Endpoints: fakeEndpoints{"ep": testEndpoint("ep", 4)}, Attempter: att, Policy: policy, Hold: hold,
	})
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	select {
	case <-d.Joined():
	case <-time.After(30 * time.Second): // a hang guard
		t.Fatal("never joined")
	}
	// Held: many flush intervals (20 ms) pass without an attempt.
	time.Sleep(500 * time.Millisecond) // the window in which nothing may happen
	if n, _ := att.count("ep"); n != 0 {
		t.Fatalf("%d attempts while held, want 0", n)
	}
	close(hold)
	deadline := time.Now().Add(30 * time.Second) // a hang guard
	for {
		n, _ := att.count("ep")
		if n == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 5 attempts after the hold ended", n)
		}
		time.Sleep(10 * time.Millisecond) // polling the fake
	}
}

// TestDeliveriesTopicNoAlloc: the per-record call allocates nothing.
func TestDeliveriesTopicNoAlloc(t *testing.T) {
	g := newTestGenerations(t)
	g.apply(genRecord(t, Generation{N: 3, Topic: "gt.deliveries.g3", Partitions: 8}))
	g.apply(genRecord(t, Generation{N: 2, Topic: "gt.deliveries.g2", Partitions: 6})) // an older record read later
	if got := g.DeliveriesTopic(); got != "gt.deliveries.g3" {
		t.Fatalf("DeliveriesTopic %q, want the newest gt.deliveries.g3", got)
	}
	if n := testing.AllocsPerRun(100, func() { _ = g.DeliveriesTopic() }); n != 0 {
		t.Fatalf("DeliveriesTopic allocates %v times per call, want 0", n)
	}
}

// TestRunGenerationsFatal: a fatal error of a live generation's run
// cancels every other run and is returned; a retired generation's run
// ending with an error is not.
func TestRunGenerationsFatal(t *testing.T) {
	g := newTestGenerations(t)
	g.apply(genRecord(t, Generation{N: 2, Topic: "gt.deliveries.g2", Partitions: 8}))
	g.apply(genRecord(t, Generation{N: 3, Topic: "gt.deliveries.g3", Partitions: 16}))
	boom := Fatal(errors.New("boom"))
	fail := make(chan struct{})
	var others atomic.Int32
	run := func(ctx context.Context, gen Generation, _ <-chan struct{}) error {
		switch gen.N {
		case 1: // retired below: its error is its own
			<-ctx.Done()
			return errors.New("stopped")
		case 2:
			select {
			case <-fail:
				return boom
			case <-ctx.Done():
				return nil
			}
		}
		<-ctx.Done()
		others.Add(1)
		return nil
	}
	done := make(chan error, 1)
	go func() {
		done <- RunGenerations(context.Background(), g, GenerationGate{
			Drained: func(context.Context, Generation) (bool, error) { return false, nil }, Interval: time.Millisecond,
		}, run, nil)
	}()
	g.apply(genRecord(t, Generation{N: 1, Topic: "gt.deliveries", RetiredAt: time.Now()}))
	select {
	case err := <-done:
		t.Fatalf("RunGenerations returned %v on a retirement", err)
	case <-time.After(100 * time.Millisecond): // hang guard for the negative case
	}
	close(fail)
	select {
	case err := <-done:
		if !errors.Is(err, boom) || !IsFatal(err) {
			t.Fatalf("RunGenerations returned %v, want the fatal boom", err)
		}
		if others.Load() != 1 {
			t.Fatalf("generation 3's run was not cancelled and waited for (%d)", others.Load())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("RunGenerations did not return on a fatal error")
	}
}

// TestGenerationsUnknownTopicFatal: a generations topic that does not
// exist is a fatal error naming it, not an endless retry.
func TestGenerationsUnknownTopicFatal(t *testing.T) {
	defer func(d time.Duration) { unknownTopicFatal = d }(unknownTopicFatal)
	unknownTopicFatal = 500 * time.Millisecond
	topics := NewTopics("gu.")
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, topics.Deliveries))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	g, err := NewGenerations(GenerationsOptions{Brokers: c.ListenAddrs(), Topics: topics})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // hang guard
	defer cancel()
	err = g.Run(ctx)
	if !IsFatal(err) || !strings.Contains(err.Error(), topics.Generations) {
		t.Fatalf("Run = %v, want a fatal error naming %s", err, topics.Generations)
	}
	if g.Err() == nil {
		t.Fatal("Err is nil though the view never read its topic")
	}
}
