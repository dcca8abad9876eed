package pipeline

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestFenceAbortsPredecessorsOpenTransaction: a transactional producer
// leaves a transaction open (as a process killed mid-transaction does); a
// plain record produced after it is invisible to read_committed readers.
// Fence on a new client with the same transactional ID, which produces
// nothing, aborts the open transaction, so the reader gets the plain record
// at once and never the aborted one.
func TestFenceAbortsPredecessorsOpenTransaction(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	seeds := kgo.SeedBrokers(c.ListenAddrs()...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Long transaction timeout: only fencing can end this transaction
	// within the test.
	dead, err := kgo.NewClient(seeds, kgo.TransactionalID("fence-1"), kgo.TransactionTimeout(time.Minute), kgo.DefaultProduceTopic("f"))
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	if err := dead.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := dead.ProduceSync(ctx, &kgo.Record{Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	plain, err := kgo.NewClient(seeds, kgo.DefaultProduceTopic("f"))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if err := plain.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	reader, err := kgo.NewClient(seeds, kgo.ConsumeTopics("f"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	pollCtx, pollCancel := context.WithTimeout(ctx, 500*time.Millisecond)
	if n := reader.PollFetches(pollCtx).NumRecords(); n != 0 {
		t.Fatalf("read_committed reader got %d records past an open transaction", n)
	}
	pollCancel()

	next, err := kgo.NewClient(seeds, kgo.TransactionalID("fence-1"), kgo.TransactionTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	if err := Fence(ctx, next); err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) == 0 && ctx.Err() == nil {
		reader.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if len(got) != 1 || got[0] != "after" {
		t.Fatalf("after Fence the reader got %q, want only the plain record \"after\"", got)
	}
}
