package pipeline

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestAbortBackoff(t *testing.T) {
	for _, c := range []struct {
		base   time.Duration
		streak int
		want   time.Duration
	}{
		{0, 1, 100 * time.Millisecond},
		{0, 2, 200 * time.Millisecond},
		{0, 4, 800 * time.Millisecond},
		{0, 7, 5 * time.Second}, // 6.4 s capped
		{0, 100, 5 * time.Second},
		{time.Second, 1, time.Second},
		{time.Second, 3, 4 * time.Second},
		{time.Second, 4, 5 * time.Second},
	} {
		if got := abortBackoff(c.base, c.streak); got != c.want {
			t.Errorf("abortBackoff(%v, %d) = %v, want %v", c.base, c.streak, got, c.want)
		}
	}
}

// txnEnv is one kfake cluster with an input topic "in" (one record per
// partition consumed by a transact session) and an output topic "out".
type txnEnv struct {
	t     *testing.T
	c     *kfake.Cluster
	seeds []string
	sess  *kgo.GroupTransactSession
	txn   *transactor
}

func newTxnEnv(t *testing.T, extra ...kgo.Opt) *txnEnv {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "in", "out"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	e := &txnEnv{t: t, c: c, seeds: c.ListenAddrs()}
	prod, err := kgo.NewClient(kgo.SeedBrokers(e.seeds...), kgo.DefaultProduceTopic("in"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for p := int32(0); p < 2; p++ {
		for i := 0; i < 5; i++ {
			if err := prod.ProduceSync(context.Background(), &kgo.Record{Partition: p, Value: []byte("e")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(e.seeds...),
		kgo.ConsumerGroup("g"),
		kgo.ConsumeTopics("in"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.TransactionalID("txn-test"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	}, extra...)
	e.sess, err = kgo.NewGroupTransactSession(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.sess.Close)
	e.txn = &transactor{sess: e.sess, stage: "test", timeout: 10 * time.Second, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	return e
}

// poll fetches until every input record (10) has been polled.
func (e *txnEnv) poll() {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := 0
	for n < 10 {
		fs := e.sess.PollFetches(ctx)
		if ctx.Err() != nil {
			e.t.Fatalf("polled %d of 10 input records", n)
		}
		n += fs.NumRecords()
	}
}

// committed returns the group's committed offsets of "in" (partition → offset).
func (e *txnEnv) committed() map[int32]int64 {
	e.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.seeds...))
	if err != nil {
		e.t.Fatal(err)
	}
	defer cl.Close()
	resp, err := kadm.NewClient(cl).FetchOffsets(context.Background(), "g")
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[int32]int64{}
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Topic == "in" {
			out[o.Partition] = o.At
		}
	})
	return out
}

// visible returns the values a read_committed reader sees in "out".
func (e *txnEnv) visible() []string {
	e.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.seeds...), kgo.ConsumeTopics("out"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		e.t.Fatal(err)
	}
	defer cl.Close()
	var got []string
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

func outRecs(vals ...string) []*kgo.Record {
	rs := make([]*kgo.Record, len(vals))
	for i, v := range vals {
		rs[i] = &kgo.Record{Topic: "out", Value: []byte(v)}
	}
	return rs
}

func TestTransactCommitsRecordsAndOffsets(t *testing.T) {
	e := newTxnEnv(t)
	e.poll()
	res, err := e.txn.transact(context.Background(), outRecs("a", "b"), nil)
	if err != nil || !res.Committed || res.Produced != 2 {
		t.Fatalf("transact = %+v, %v; want committed, 2 produced", res, err)
	}
	if got := e.visible(); strings.Join(got, ",") != "a,b" && strings.Join(got, ",") != "b,a" {
		t.Errorf("visible = %v, want a and b", got)
	}
	if got := e.committed(); got[0] != 5 || got[1] != 5 {
		t.Errorf("committed = %v, want 5 on both partitions", got)
	}
	if e.txn.backoff() != 0 {
		t.Errorf("backoff after a commit = %v, want 0", e.txn.backoff())
	}
}

// A record franz-go refuses fails only its own promise: the transaction
// must abort (no record visible, no offset committed), and the same record
// objects produced again after the abort must go through (fresh copies).
func TestTransactProduceErrorAborts(t *testing.T) {
	e := newTxnEnv(t, kgo.ProducerBatchMaxBytes(1<<10))
	e.poll()
	recs := outRecs("small-1", "small-2")
	huge := &kgo.Record{Topic: "out", Value: make([]byte, 4<<10)}
	res, err := e.txn.transact(context.Background(), append(recs, huge), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Committed || !errors.Is(res.ProduceErr, kerr.MessageTooLarge) && res.ProduceErr == nil {
		t.Fatalf("transact = %+v, want aborted with the produce error", res)
	}
	if got := e.visible(); len(got) != 0 {
		t.Errorf("visible after the abort = %v, want none", got)
	}
	if got := e.committed(); len(got) != 0 {
		t.Errorf("committed after the abort = %v, want none", got)
	}
	if e.txn.backoff() != 100*time.Millisecond {
		t.Errorf("backoff after one abort = %v, want 100ms", e.txn.backoff())
	}
	// The session rewound: poll the input again, then retry the same
	// record objects (minus the one that can never be produced).
	e.poll()
	res, err = e.txn.transact(context.Background(), recs, nil)
	if err != nil || !res.Committed {
		t.Fatalf("retry = %+v, %v; want committed", res, err)
	}
	if got := e.visible(); len(got) != 2 {
		t.Errorf("visible after the retry = %v, want the two small records", got)
	}
	if e.txn.backoff() != 0 {
		t.Errorf("backoff after the commit = %v, want 0", e.txn.backoff())
	}
}

// An abortable offset-commit error (a rebalance) aborts without an error;
// the counter counts it.
func TestTransactAbortableCommitError(t *testing.T) {
	e := newTxnEnv(t)
	var calls atomic.Int32
	e.c.ControlKey(int16(kmsg.TxnOffsetCommit), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		if calls.Add(1) != 1 {
			return nil, nil, false
		}
		req := kr.(*kmsg.TxnOffsetCommitRequest)
		resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewTxnOffsetCommitResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.IllegalGeneration.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	e.poll()
	res, err := e.txn.transact(context.Background(), outRecs("x"), nil)
	if err != nil || res.Committed {
		t.Fatalf("transact = %+v, %v; want aborted, no error", res, err)
	}
	if got := e.visible(); len(got) != 0 {
		t.Errorf("visible after the abort = %v, want none", got)
	}
	e.poll()
	if res, err := e.txn.transact(context.Background(), outRecs("x"), nil); err != nil || !res.Committed {
		t.Fatalf("retry = %+v, %v; want committed", res, err)
	}
}

// rewrite edits the offset commit: here it commits offset 2 on every
// partition instead of what was polled.
func TestTransactRewritesTheCommit(t *testing.T) {
	e := newTxnEnv(t)
	e.poll()
	rewrite := func(req *kmsg.TxnOffsetCommitRequest) error {
		for i := range req.Topics {
			for j := range req.Topics[i].Partitions {
				req.Topics[i].Partitions[j].Offset = 2
			}
		}
		return nil
	}
	if res, err := e.txn.transact(context.Background(), nil, rewrite); err != nil || !res.Committed {
		t.Fatalf("transact = %+v, %v", res, err)
	}
	if got := e.committed(); got[0] != 2 || got[1] != 2 {
		t.Errorf("committed = %v, want 2 on both partitions", got)
	}
}

// The crash hook stops before End and reports errSimulatedCrash: nothing
// becomes visible.
func TestTransactSimulatedCrash(t *testing.T) {
	e := newTxnEnv(t)
	e.txn.beforeEnd = func() bool { return true }
	e.poll()
	_, err := e.txn.transact(context.Background(), outRecs("never"), nil)
	if !errors.Is(err, errSimulatedCrash) {
		t.Fatalf("err = %v, want errSimulatedCrash", err)
	}
}

// A cancelled stage context does not cut the transaction short.
func TestTransactIgnoresCancellation(t *testing.T) {
	e := newTxnEnv(t)
	e.poll()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if res, err := e.txn.transact(ctx, outRecs("late"), nil); err != nil || !res.Committed {
		t.Fatalf("transact with a cancelled ctx = %+v, %v; want committed", res, err)
	}
}
