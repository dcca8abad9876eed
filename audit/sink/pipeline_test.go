package sink_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/audit/audittest"
	"github.com/hookrelay/hookrelay/audit/sink"
)

// gateStore is a Memory store that implements audit.Unstored (every row
// unstored, each call counted), holds its first Insert until release is
// closed, and counts the Inserts running at once.
type gateStore struct {
	*audit.Memory
	release chan struct{}
	entered chan struct{} // closed when the first Insert starts

	mu                sync.Mutex
	inserts, lookups  int
	running, maxInFly int
	order             []string // "insert"/"lookup", in call order
}

func newGateStore() *gateStore {
	return &gateStore{Memory: audit.NewMemory(), release: make(chan struct{}), entered: make(chan struct{})}
}

func (g *gateStore) Unstored(_ context.Context, as []audit.Attempt) ([]audit.Attempt, error) {
	g.mu.Lock()
	g.lookups++
	g.order = append(g.order, "lookup")
	g.mu.Unlock()
	return as, nil
}

func (g *gateStore) Insert(ctx context.Context, as []audit.Attempt) error {
	g.mu.Lock()
	g.inserts++
	first := g.inserts == 1
	g.running++
	g.maxInFly = max(g.maxInFly, g.running)
	g.order = append(g.order, "insert")
	g.mu.Unlock()
	defer func() { g.mu.Lock(); g.running--; g.mu.Unlock() }()
	if first {
		close(g.entered)
		select {
		case <-g.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return g.Memory.Insert(ctx, as)
}

func (g *gateStore) counts() (inserts, lookups, maxInFly int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inserts, g.lookups, g.maxInFly
}

// While one batch is being inserted, the sink reads and looks up the next
// (the flights overlap the store's work with Kafka's), but it inserts one
// batch at a time and commits nothing past the batch still inserting.
// Before the flights, the sink read nothing during an insert: the second
// look-up never came while the first insert was held.
func TestNextBatchIsLookedUpWhileOneInsertsAndCommitsWaitInOrder(t *testing.T) {
	brokers := newFakeCluster(t)
	as := attempts(100)
	produce(t, brokers, as) // all before the sink starts: below checkBelow, so every batch is looked up
	store := newGateStore()
	startSink(t, sink.Options{Brokers: brokers, Topic: sinkTopic, Group: sinkGroup, Store: store,
		BatchRows: 10, FlushInterval: 10 * time.Millisecond})

	select {
	case <-store.entered:
	case <-time.After(20 * time.Second):
		t.Fatal("no insert within 20s")
	}
	eventually(t, 20*time.Second, "the next batch's look-up while the first insert is held", func() bool {
		_, lookups, _ := store.counts()
		return lookups >= 2
	})
	// The sink holds the filling batch and two flights: it reads no
	// further, inserts nothing else and commits nothing.
	time.Sleep(100 * time.Millisecond) // lets a wrong insert or commit happen; the assertions are on counts
	if inserts, lookups, _ := store.counts(); inserts != 1 || lookups > 2 {
		t.Errorf("with the first insert held: %d inserts, %d look-ups; want 1 insert and at most 2 look-ups (2 flights)", inserts, lookups)
	}
	if c := committed(t, brokers); c != 0 {
		t.Errorf("committed %d offsets while the first batch was not inserted, want 0", c)
	}
	close(store.release)
	eventually(t, 20*time.Second, "all offsets committed", func() bool { return committed(t, brokers) == int64(len(as)) })
	if n := storeCount(t, store); n != int64(len(as)) {
		t.Errorf("store holds %d attempts, want %d", n, len(as))
	}
	if _, _, maxInFly := store.counts(); maxInFly != 1 {
		t.Errorf("up to %d inserts ran at once, want 1", maxInFly)
	}
}

// A second member joins while the first always has batches on their way
// (a steady stream, slow inserts): the first lets the rebalance in once its
// flights are done rather than holding it, the new member gets partitions,
// and together they store every attempt.
func TestRebalanceGetsInWhileBatchesAreAlwaysInFlight(t *testing.T) {
	brokers := newFakeCluster(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(sinkTopic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var produced atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { // a steady stream until cancel
		for i := 0; ctx.Err() == nil; i++ {
			var recs []*kgo.Record
			for j := range 20 {
				a := audittest.Attempt(fmt.Sprintf("ep-%d", (i*20+j)%50), i*20+j) // 50 keys: every partition
				v, err := a.Marshal()
				if err != nil {
					t.Error(err)
					return
				}
				recs = append(recs, &kgo.Record{Key: []byte(a.EndpointID), Value: v})
			}
			if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				t.Error(err)
				return
			}
			produced.Add(int64(len(recs)))
			time.Sleep(5 * time.Millisecond)
		}
	})
	stopProducer := func() { cancel(); wg.Wait() }
	defer stopProducer()

	slow := &slowStore{Memory: audit.NewMemory(), delay: 30 * time.Millisecond}
	opts := sink.Options{Brokers: brokers, Topic: sinkTopic, Group: sinkGroup, Store: slow, BatchRows: 15, FlushInterval: 10 * time.Millisecond}
	startSink(t, opts)
	eventually(t, 20*time.Second, "the first member inserting", func() bool { return storeCount(t, slow) > 50 })

	second := &slowStore{Memory: audit.NewMemory(), delay: 30 * time.Millisecond}
	opts.Store = second
	startSink(t, opts)
	eventually(t, 60*time.Second, "the second member to get partitions and insert", func() bool { return storeCount(t, second) > 0 })

	stopProducer()
	total := produced.Load()
	eventually(t, 30*time.Second, "all offsets committed", func() bool { return committed(t, brokers) == total })
	ids := map[string]bool{}
	for _, s := range []*slowStore{slow, second} {
		s.mu.Lock()
		for id := range s.ids {
			ids[id] = true
		}
		s.mu.Unlock()
	}
	if int64(len(ids)) != total {
		t.Errorf("the members stored %d distinct attempts, want all %d produced", len(ids), total)
	}
}

// slowStore is a Memory store whose Insert takes delay; it notes the
// AttemptIDs inserted.
type slowStore struct {
	*audit.Memory
	delay time.Duration
	mu    sync.Mutex
	ids   map[string]bool
}

func (s *slowStore) Insert(ctx context.Context, as []audit.Attempt) error {
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return ctx.Err()
	}
	s.mu.Lock()
	if s.ids == nil {
		s.ids = map[string]bool{}
	}
	for _, a := range as {
		s.ids[a.AttemptID] = true
	}
	s.mu.Unlock()
	return s.Memory.Insert(ctx, as)
}
