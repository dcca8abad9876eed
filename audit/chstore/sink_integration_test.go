package chstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/audit/audittest"
	"github.com/hookrelay/hookrelay/audit/chstore"
	"github.com/hookrelay/hookrelay/audit/sink"
	"github.com/hookrelay/hookrelay/e2e/stack"
)

// TestSinkIntegration runs the sink against the real broker and ClickHouse:
// plain, duplicate, invalid and transactional records (one transaction
// committed, one aborted, which read_committed must never insert).
func TestSinkIntegration(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	prefix := stack.TopicPrefix(t)
	topic, group := prefix+"attempts", prefix+"audit"
	if _, err := stack.Admin(t).CreateTopic(ctx, 3, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	store := newClickHouse(t)

	mk := func(tag string, n int) []*kgo.Record {
		var recs []*kgo.Record
		for i := range n {
			a := audittest.Attempt(fmt.Sprintf("ep-%d", i%5), i)
			a.AttemptID = fmt.Sprintf("%s-%05d", tag, i)
			v, err := a.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(a.EndpointID), Value: v})
		}
		return recs
	}
	plain, committedTxn, abortedTxn := mk("plain", 3000), mk("txn", 200), mk("aborted", 200)

	txn := stack.Client(t, kgo.TransactionalID(prefix+"txn"), kgo.DefaultProduceTopic(topic))
	inTxn := func(recs []*kgo.Record, commit kgo.TransactionEndTry) {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := txn.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := txn.EndTransaction(ctx, commit); err != nil {
			t.Fatal(err)
		}
	}
	inTxn(abortedTxn, kgo.TryAbort) // first: the later records prove it was read past
	producer := stack.Client(t)
	bad := []*kgo.Record{{Topic: topic, Key: []byte("ep-0"), Value: []byte("{")}, {Topic: topic, Key: []byte("ep-1"), Value: nil}}
	// The first 500 twice (fresh records: a produced *kgo.Record must not be
	// produced again while in flight).
	if err := producer.ProduceSync(ctx, append(append(plain, bad...), mk("plain", 500)...)...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	inTxn(committedTxn, kgo.TryCommit)

	want := int64(len(plain) + len(committedTxn))
	startSink(t, sink.Options{Brokers: stack.Brokers(t), Topic: topic, Group: group, Store: store, BatchRows: 1000})
	stack.Eventually(t, 90*time.Second, fmt.Sprintf("%d attempts in ClickHouse", want), func() bool {
		n, err := store.Count(ctx, audit.Filter{})
		return err == nil && n == want
	})
	// The committed transaction came last on every partition, so the sink
	// has read past the aborted one.
	for _, ep := range []string{"ep-0", "ep-1", "ep-2", "ep-3", "ep-4"} {
		got, err := store.Log(ctx, audit.Query{EndpointID: ep, Limit: audit.MaxLimit})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range got {
			if a.AttemptID[:7] == "aborted" {
				t.Fatalf("attempt %s of an aborted transaction was inserted", a.AttemptID)
			}
		}
	}
	raw, err := store.RawRowCount(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d attempts, %d raw rows before merges (duplicates collapse under FINAL)", want, raw)
}

// startSink runs a sink with opts until the test ends, failing the test if
// Run returns an error or does not return within 30 s of the cancel.
func startSink(t *testing.T, opts sink.Options) {
	t.Helper()
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := sink.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(30 * time.Second):
			t.Error("sink: Run did not return within 30s of cancel")
		}
	})
}

// ambiguousStore stores every batch but reports a failure for the batches
// fail picks (the failure an INSERT can have after ClickHouse wrote it: a
// timeout, a dropped connection), so the sink retries rows already stored.
type ambiguousStore struct {
	*chstore.Store
	mu    sync.Mutex
	calls int
	fail  func(call int) bool
}

func (a *ambiguousStore) Insert(ctx context.Context, as []audit.Attempt) error {
	if err := a.Store.Insert(ctx, as); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls++
	if a.fail(a.calls) {
		return errors.New("injected: connection reset after the INSERT was sent")
	}
	return nil
}

// TestSinkExactlyOnceViews: the views count rows (countState), so they are
// exact only if every row is inserted once. The sink retries batches after
// ambiguous failures, and a second sink of the group takes over partitions
// whose last batch was stored but never committed (a crash between insert
// and commit); the views' counts must still equal the distinct attempts.
func TestSinkExactlyOnceViews(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	prefix := stack.TopicPrefix(t)
	topic, group := prefix+"attempts", prefix+"audit"
	if _, err := stack.Admin(t).CreateTopic(ctx, 3, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	base := newClickHouse(t)
	var recs []*kgo.Record
	const n = 3000
	for i := range n {
		a := audittest.Attempt(fmt.Sprintf("ep-%d", i%5), i)
		a.AttemptID = fmt.Sprintf("once-%05d", i)
		v, err := a.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(a.EndpointID), Value: v})
	}
	if err := stack.Client(t).ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	// First sink: its 2nd insert fails once after storing (retried); from
	// its 4th on, every insert stores and fails, so those batches are never
	// committed: then it stops, as if it crashed after inserting.
	first := &ambiguousStore{Store: base, fail: func(c int) bool { return c == 2 || c >= 4 }}
	stop := startSinkStop(t, sink.Options{Brokers: stack.Brokers(t), Topic: topic, Group: group, Store: first,
		BatchRows: 300, RetryBackoff: 10 * time.Millisecond, MaxRetryBackoff: 20 * time.Millisecond, ShutdownTimeout: time.Second})
	stack.Eventually(t, 90*time.Second, "the first sink's uncommitted inserts", func() bool {
		first.mu.Lock()
		defer first.mu.Unlock()
		return first.calls >= 6
	})
	stop()

	second := &ambiguousStore{Store: base, fail: func(int) bool { return false }}
	startSink(t, sink.Options{Brokers: stack.Brokers(t), Topic: topic, Group: group, Store: second, BatchRows: 300})
	stack.Eventually(t, 90*time.Second, fmt.Sprintf("%d attempts in ClickHouse", n), func() bool {
		c, err := base.Count(ctx, audit.Filter{})
		return err == nil && c == n
	})
	// The rows of an INSERT are visible in attempts a moment before the
	// views' rows of it: wait for the views, then check nothing is double.
	viewCount := func(sql string) uint64 {
		var got uint64
		if err := base.QueryRow(ctx, fmt.Sprintf(sql, base.Database()), &got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	views := map[string]string{
		"attempts_minute":    "SELECT countMerge(attempts) FROM %s.attempts_minute",
		"attempts_hour":      "SELECT countMerge(attempts) FROM %s.attempts_hour",
		"attempts_by_number": "SELECT countMerge(deliveries) FROM %s.attempts_by_number",
	}
	stack.Eventually(t, 30*time.Second, "the views count every attempt", func() bool {
		for _, sql := range views {
			if viewCount(sql) < n {
				return false
			}
		}
		return true
	})
	time.Sleep(time.Second) // a straggling duplicate insert would land now; no condition to poll for its absence
	for view, sql := range views {
		if got := viewCount(sql); got != n {
			t.Errorf("%s counts %d attempts, want %d", view, got, n)
		}
	}
	raw, err := base.RawRowCount(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if raw != n {
		t.Errorf("attempts holds %d raw rows, want %d (a row was inserted twice)", raw, n)
	}
}

// startSinkStop runs a sink with opts and returns a function that stops it
// and waits for Run to return.
func startSinkStop(t *testing.T, opts sink.Options) (stop func()) {
	t.Helper()
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := sink.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Error(err)
				}
			case <-time.After(30 * time.Second):
				t.Error("sink: Run did not return within 30s of cancel")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}
