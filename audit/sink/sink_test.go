package sink_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/audit/audittest"
	"github.com/hookrelay/hookrelay/audit/sink"
)

const (
	sinkTopic = "hookrelay.attempts"
	sinkGroup = "hookrelay.audit"
)

// flakyStore is a Memory store whose Insert fails while failing is set, and
// which records the size of every Insert call.
type flakyStore struct {
	*audit.Memory
	mu      sync.Mutex
	failing bool
	calls   []int // rows per call, failed calls included
}

func (f *flakyStore) Insert(ctx context.Context, as []audit.Attempt) error {
	f.mu.Lock()
	f.calls = append(f.calls, len(as))
	failing := f.failing
	f.mu.Unlock()
	if failing {
		return errors.New("clickhouse is down")
	}
	return f.Memory.Insert(ctx, as)
}

func (f *flakyStore) setFailing(v bool) { f.mu.Lock(); f.failing = v; f.mu.Unlock() }
func (f *flakyStore) callSizes() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int(nil), f.calls...)
}

func newFakeCluster(t *testing.T) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, sinkTopic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// produce writes the attempts (keyed by endpoint) and the raw values to the
// attempts topic.
func produce(t *testing.T, brokers []string, as []audit.Attempt, raw ...[]byte) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(sinkTopic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for _, a := range as {
		v, err := a.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Key: []byte(a.EndpointID), Value: v})
	}
	for i, v := range raw {
		recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprint("bad", i)), Value: v})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func attempts(n int) []audit.Attempt {
	var as []audit.Attempt
	for i := range n {
		as = append(as, audittest.Attempt(fmt.Sprintf("ep-%d", i%5), i))
	}
	return as
}

// startSink runs a sink until the test ends (or stop is called) and returns
// stop, which cancels it and waits for Run to return.
func startSink(t *testing.T, opts sink.Options) (stop func() error) {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s, err := sink.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(30 * time.Second):
				runErr = errors.New("Run did not return within 30s of cancel")
			}
		})
		return runErr
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	})
	return stop
}

// eventually polls cond every 10 ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// committed returns the group's committed offsets summed over partitions.
func committed(t *testing.T, brokers []string) int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	resps, err := kadm.NewClient(cl).FetchOffsets(context.Background(), sinkGroup)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for p := range int32(3) {
		if r, ok := resps.Lookup(sinkTopic, p); ok && r.Err == nil && r.At > 0 {
			sum += r.At
		}
	}
	return sum
}

func storeCount(t *testing.T, s audit.Store) int64 {
	n, err := s.Count(context.Background(), audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestSinkInsertsAndCommits(t *testing.T) {
	brokers := newFakeCluster(t)
	as := attempts(200)
	invalid := [][]byte{
		[]byte("not json"),
		[]byte(`{"attempt_id":"","outcome":"delivered"}`),
		[]byte(`{"attempt_id":"x","endpoint_id":"ep","outcome":"delivered"}`), // zero attempted_at
		nil, // a tombstone
	}
	produce(t, brokers, as, invalid...)
	produce(t, brokers, as[:50]) // duplicates, e.g. a dispatcher that produced twice

	reader := sdkmetric.NewManualReader()
	store := &flakyStore{Memory: audit.NewMemory()}
	sink, err := sink.New(sink.Options{
		Brokers: brokers, Topic: sinkTopic, Group: sinkGroup, Store: store,
		Meter:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test"),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sink.Run(ctx) }()
	total := int64(len(as) + len(invalid) + 50)
	eventually(t, 20*time.Second, "all offsets committed", func() bool { return committed(t, brokers) == total })
	if n := storeCount(t, store); n != int64(len(as)) {
		t.Errorf("store holds %d attempts, want %d", n, len(as))
	}
	eventually(t, 30*time.Second, "lag 0", func() bool { return sink.Lag() == 0 })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v, want nil after cancel", err)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok {
				for _, dp := range sum.DataPoints {
					r, _ := dp.Attributes.Value("result")
					got[m.Name+"/"+r.AsString()] += dp.Value
				}
			}
		}
	}
	// A duplicate in the same batch as its original is inserted once.
	if ins := got["hookrelay.audit.sink.records/inserted"]; ins < int64(len(as)) || ins > int64(len(as)+50) || got["hookrelay.audit.sink.records/invalid"] != int64(len(invalid)) {
		t.Errorf("records metric = %v, want %d..%d inserted (duplicates of another batch included) and %d invalid", got, len(as), len(as)+50, len(invalid))
	}
	if got["hookrelay.audit.sink.inserts/error"] != 0 || got["hookrelay.audit.sink.inserts/ok"] == 0 {
		t.Errorf("inserts metric = %v, want only ok", got)
	}
}

func TestSinkRetriesWithoutCommitting(t *testing.T) {
	brokers := newFakeCluster(t)
	as := attempts(100)
	produce(t, brokers, as)
	store := &flakyStore{Memory: audit.NewMemory(), failing: true}
	startSink(t, sink.Options{Brokers: brokers, Topic: sinkTopic, Group: sinkGroup, Store: store,
		RetryBackoff: time.Millisecond, MaxRetryBackoff: 5 * time.Millisecond})

	eventually(t, 20*time.Second, "5 failed inserts", func() bool { return len(store.callSizes()) >= 5 })
	if c := committed(t, brokers); c != 0 {
		t.Fatalf("committed %d offsets while every insert failed, want 0", c)
	}
	store.setFailing(false)
	eventually(t, 20*time.Second, "all offsets committed", func() bool { return committed(t, brokers) == int64(len(as)) })
	if n := storeCount(t, store); n != int64(len(as)) {
		t.Errorf("store holds %d attempts, want %d", n, len(as))
	}
	// The retries re-sent the batch whole: every failed call had the rows
	// of the one that finally succeeded, or fewer (a first smaller batch).
	sizes := store.callSizes()
	for i := 1; i < len(sizes) && i < 5; i++ {
		if sizes[i] != sizes[0] {
			t.Errorf("insert call sizes %v: retries changed the batch", sizes[:5])
			break
		}
	}
}

func TestSinkStopWithoutInsertLosesNothing(t *testing.T) {
	brokers := newFakeCluster(t)
	as := attempts(100)
	produce(t, brokers, as)

	down := &flakyStore{Memory: audit.NewMemory(), failing: true}
	stop := startSink(t, sink.Options{Brokers: brokers, Topic: sinkTopic, Group: sinkGroup, Store: down,
		RetryBackoff: time.Millisecond, MaxRetryBackoff: 5 * time.Millisecond, ShutdownTimeout: 50 * time.Millisecond})
	eventually(t, 20*time.Second, "a failed insert", func() bool { return len(down.callSizes()) >= 2 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if c := committed(t, brokers); c != 0 {
		t.Fatalf("committed %d offsets though no insert succeeded, want 0", c)
	}

	up := &flakyStore{Memory: audit.NewMemory()}
	startSink(t, sink.Options{Brokers: brokers, Topic: sinkTopic, Group: sinkGroup, Store: up})
	eventually(t, 20*time.Second, "the next sink inserts everything", func() bool { return storeCount(t, up) == int64(len(as)) })
	eventually(t, 20*time.Second, "all offsets committed", func() bool { return committed(t, brokers) == int64(len(as)) })
}

func TestSinkBatching(t *testing.T) {
	t.Run("BatchRows", func(t *testing.T) {
		brokers := newFakeCluster(t)
		produce(t, brokers, attempts(95))
		store := &flakyStore{Memory: audit.NewMemory()}
		// An hour-long interval: only the row count can trigger a flush.
		startSink(t, sink.Options{Brokers: brokers, Topic: sinkTopic, Group: sinkGroup, Store: store,
			BatchRows: 30, FlushInterval: time.Hour})
		eventually(t, 20*time.Second, "three batches", func() bool { return storeCount(t, store) == 90 })
		for _, n := range store.callSizes() {
			if n != 30 {
				t.Errorf("insert sizes %v, want batches of 30", store.callSizes())
				break
			}
		}
		// The last 5 wait for the hour-long interval.
		eventually(t, 20*time.Second, "90 committed", func() bool { return committed(t, brokers) == 90 })
	})
	t.Run("BatchBytes", func(t *testing.T) {
		brokers := newFakeCluster(t)
		produce(t, brokers, attempts(7))
		store := &flakyStore{Memory: audit.NewMemory()}
		// Neither the row count nor the interval can trigger a flush: the
		// first poll's bytes do (a batch ends past BatchBytes by at most
		// the poll that crossed it).
		startSink(t, sink.Options{Brokers: brokers, Topic: sinkTopic, Group: sinkGroup, Store: store,
			BatchRows: 1000, BatchBytes: 1, FlushInterval: time.Hour})
		eventually(t, 20*time.Second, "all 7 inserted", func() bool { return storeCount(t, store) == 7 })
		eventually(t, 20*time.Second, "all committed", func() bool { return committed(t, brokers) == 7 })
	})
	t.Run("FlushInterval", func(t *testing.T) {
		brokers := newFakeCluster(t)
		produce(t, brokers, attempts(7))
		store := &flakyStore{Memory: audit.NewMemory()}
		startSink(t, sink.Options{Brokers: brokers, Topic: sinkTopic, Group: sinkGroup, Store: store,
			BatchRows: 1000, FlushInterval: 20 * time.Millisecond})
		eventually(t, 20*time.Second, "all 7 inserted", func() bool { return storeCount(t, store) == 7 })
		eventually(t, 20*time.Second, "all committed", func() bool { return committed(t, brokers) == 7 })
	})
}

func TestNewSinkOptions(t *testing.T) {
	ok := sink.Options{Brokers: []string{"127.0.0.1:1"}, Topic: "t", Group: "g", Store: audit.NewMemory()}
	for field, mutate := range map[string]func(*sink.Options){
		"Brokers":         func(o *sink.Options) { o.Brokers = nil },
		"Topic":           func(o *sink.Options) { o.Topic = "" },
		"Group":           func(o *sink.Options) { o.Group = "" },
		"Store":           func(o *sink.Options) { o.Store = nil },
		"BatchRows":       func(o *sink.Options) { o.BatchRows = -1 },
		"BatchBytes":      func(o *sink.Options) { o.BatchBytes = -1 },
		"FlushInterval":   func(o *sink.Options) { o.FlushInterval = -time.Second },
		"MaxRetryBackoff": func(o *sink.Options) { o.RetryBackoff, o.MaxRetryBackoff = time.Minute, time.Second },
		"KafkaOptions":    func(o *sink.Options) { o.KafkaOptions = []kgo.Opt{kgo.MaxProduceRequestsInflightPerBroker(2)} }, // needs idempotency off
	} {
		o := ok
		mutate(&o)
		if _, err := sink.New(o); err == nil || !strings.Contains(err.Error(), "Options."+field) {
			t.Errorf("%s: New error = %v, want one naming Options.%s", field, err, field)
		}
	}
	s, err := sink.New(ok)
	if err != nil {
		t.Fatalf("New(valid) = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Run(ctx); err != nil {
		t.Errorf("Run(canceled) = %v, want nil", err)
	}
	// Run owns its client: a Sink runs again after its Run returned, but
	// never twice at once.
	if err := s.Run(ctx); err != nil {
		t.Errorf("second Run(canceled) = %v, want nil", err)
	}
}

// A Sink runs again after its Run returned (a supervisor restarts it), but
// refuses a Run while another is running.
func TestSinkRunAgain(t *testing.T) {
	started := make(chan struct{}, 1)
	s, err := sink.New(sink.Options{Brokers: []string{"127.0.0.1:1"}, Topic: "t", Group: "g", Store: audit.NewMemory(),
		Prepare: func(ctx context.Context) error {
			select {
			case started <- struct{}{}:
			default:
			}
			<-ctx.Done()
			return ctx.Err()
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for run := range 2 {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		<-started
		if err := s.Run(ctx); err == nil || !strings.Contains(err.Error(), "running") {
			t.Errorf("run %d: concurrent Run = %v, want an error saying another Run is running", run, err)
		}
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run %d: Run = %v, want nil after cancel", run, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("run %d: Run did not return within 30s of cancel", run)
		}
	}
}

// A store that is down when the sink starts (Options.Prepare failing) makes
// the sink wait, not fail: it reads, inserts and commits nothing, and Ready
// says why; once Prepare succeeds it catches up from the group's offsets. A
// later failing insert makes it not ready again, until an insert succeeds.
func TestSinkPrepareRetriedUntilStoreIsUp(t *testing.T) {
	brokers := newFakeCluster(t)
	as := attempts(50)
	produce(t, brokers, as)
	store := &flakyStore{Memory: audit.NewMemory()}
	var up atomic.Bool
	var calls atomic.Int32
	s, err := sink.New(sink.Options{Brokers: brokers, Topic: sinkTopic, Group: sinkGroup, Store: store,
		Prepare: func(context.Context) error {
			calls.Add(1)
			if !up.Load() {
				return errors.New("clickhouse is down")
			}
			return nil
		},
		RetryBackoff: time.Millisecond, MaxRetryBackoff: 5 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Ready(); err == nil {
		t.Error("Ready before Run = nil, want an error")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v, want nil after cancel", err)
		}
	}()

	eventually(t, 20*time.Second, "3 failed Prepare calls", func() bool { return calls.Load() >= 3 })
	if err := s.Ready(); err == nil || !strings.Contains(err.Error(), "clickhouse is down") {
		t.Errorf("Ready while Prepare fails = %v, want its error", err)
	}
	if n := len(store.callSizes()); n != 0 {
		t.Errorf("%d inserts before the store was prepared, want 0", n)
	}
	if c := committed(t, brokers); c != 0 {
		t.Errorf("committed %d offsets before the store was prepared, want 0", c)
	}

	up.Store(true)
	eventually(t, 20*time.Second, "all offsets committed", func() bool { return committed(t, brokers) == int64(len(as)) })
	if n := storeCount(t, store); n != int64(len(as)) {
		t.Errorf("store holds %d attempts, want %d", n, len(as))
	}
	if err := s.Ready(); err != nil {
		t.Errorf("Ready after catching up = %v, want nil", err)
	}

	store.setFailing(true)
	more := attempts(60)[50:]
	produce(t, brokers, more)
	eventually(t, 20*time.Second, "not ready while inserts fail", func() bool {
		err := s.Ready()
		return err != nil && strings.Contains(err.Error(), "inserts failing")
	})
	store.setFailing(false)
	eventually(t, 20*time.Second, "ready and caught up again", func() bool {
		return s.Ready() == nil && committed(t, brokers) == int64(len(as)+len(more))
	})
}

// checkingStore is a flakyStore that implements audit.Unstored and counts
// its calls.
type checkingStore struct {
	*flakyStore
	checks atomic.Int64
}

func (c *checkingStore) Unstored(ctx context.Context, as []audit.Attempt) ([]audit.Attempt, error) {
	c.checks.Add(1)
	var out []audit.Attempt
	for _, a := range as {
		if !c.holds(ctx, a) {
			out = append(out, a)
		}
	}
	return out, nil
}

func (c *checkingStore) holds(ctx context.Context, a audit.Attempt) bool {
	got, err := c.Memory.Log(ctx, audit.Query{EndpointID: a.EndpointID, Limit: audit.MaxLimit})
	if err != nil {
		return false
	}
	for _, g := range got {
		if g.AttemptID == a.AttemptID && g.Outcome == a.Outcome {
			return true
		}
	}
	return false
}

// TestSinkChecksOnlyAmbiguousBatches: records produced after the sink got
// its partitions are inserted without a look-up (normal batches pay
// nothing); a retry after a failed insert looks up first.
func TestSinkChecksOnlyAmbiguousBatches(t *testing.T) {
	brokers := newFakeCluster(t)
	store := &checkingStore{flakyStore: &flakyStore{Memory: audit.NewMemory()}}
	startSink(t, sink.Options{Brokers: brokers, Topic: sinkTopic, Group: sinkGroup, Store: store,
		RetryBackoff: time.Millisecond, MaxRetryBackoff: 5 * time.Millisecond})
	as := attempts(300)
	produce(t, brokers, as[:100])
	eventually(t, 20*time.Second, "the first records committed", func() bool { return committed(t, brokers) == 100 })
	before := store.checks.Load() // the first fetch may have raced the produce
	produce(t, brokers, as[100:200])
	eventually(t, 20*time.Second, "the next records committed", func() bool { return committed(t, brokers) == 200 })
	if n := store.checks.Load(); n != before {
		t.Errorf("%d look-ups for records produced after the sink started, want 0", n-before)
	}
	store.setFailing(true)
	calls := len(store.callSizes())
	produce(t, brokers, as[200:])
	eventually(t, 20*time.Second, "failed inserts", func() bool { return len(store.callSizes()) >= calls+3 })
	store.setFailing(false)
	eventually(t, 20*time.Second, "all committed", func() bool { return committed(t, brokers) == int64(len(as)) })
	if store.checks.Load() == before {
		t.Error("the retried batch was inserted without a look-up")
	}
	if n := storeCount(t, store); n != int64(len(as)) {
		t.Errorf("store holds %d attempts, want %d", n, len(as))
	}
}
