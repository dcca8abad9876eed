package pipeline

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// abortOffsetCommits makes kfake answer every TxnOffsetCommit with an
// abortable error (as in a rebalance) while abort reports true; it counts
// the aborted ones.
func abortOffsetCommits(c *kfake.Cluster, abort func() bool) *atomic.Int32 {
	var n atomic.Int32
	c.ControlKey(int16(kmsg.TxnOffsetCommit), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !abort() {
			return nil, nil, false
		}
		n.Add(1)
		req := kr.(*kmsg.TxnOffsetCommitRequest)
		resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		resp.Version = req.Version
		for _, rt := range req.Topics {
			st := kmsg.NewTxnOffsetCommitResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.RebalanceInProgress.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	return &n
}

// committedRows counts the committed records of topic (read_committed).
func committedRows(t *testing.T, seeds kgo.Opt, topic string) int {
	t.Helper()
	cl, err := kgo.NewClient(seeds, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	n := 0
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		got := 0
		fs.EachRecord(func(*kgo.Record) { got++ })
		n += got
		if got == 0 {
			return n
		}
	}
}

// TestDispatcherShutdownAfterAbortCommits: a shutdown right after an
// aborted transaction (within the abort back-off) still commits what
// finished: the delivery's offset and its attempt's outcome row. The
// dispatcher's clock stands still, so the back-off never passes on its
// own. It failed before: the final flush honoured the back-off and
// committed nothing (offset -1, no outcome row).
func TestDispatcherShutdownAfterAbortCommits(t *testing.T) {
	c, seeds, topics, policy := reviewCluster(t, "sa.", 1)
	var abort atomic.Bool
	abort.Store(true)
	aborts := abortOffsetCommits(c, func() bool { return abort.Load() })
	prod, err := kgo.NewClient(seeds)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if err := prod.ProduceSync(context.Background(), deliveryRec(topics.Deliveries, "ep", "d0")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	clock := newManualClock(time.Now().UTC())
	_, stop := startDispatcher(t, DispatcherOptions{
		Brokers: c.ListenAddrs(), KafkaOptions: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())},
		Topics: topics, Group: "sa.dispatch", TransactionalID: "sa.dispatch-test",
		Endpoints: fakeEndpoints{"ep": testEndpoint("ep", 1)}, Attempter: newFakeAttempter(), Policy: policy,
		Now: clock.now,
	})
	waitFor(t, "an aborted commit", func() bool { return aborts.Load() >= 1 })
	abort.Store(false)
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	adm := kadm.NewClient(prod)
	if at, _ := committedAt(adm, "sa.dispatch", topics.Deliveries); at != 1 {
		t.Errorf("committed offset after shutdown = %d; want 1 (the finished delivery retired)", at)
	}
	if n := committedRows(t, seeds, topics.Attempts); n != 1 {
		t.Errorf("%d committed outcome rows after shutdown; want 1", n)
	}
}
