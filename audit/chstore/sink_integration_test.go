package chstore_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/audit/audittest"
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
