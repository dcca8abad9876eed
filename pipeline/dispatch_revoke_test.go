package pipeline

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDispatcherRevokeKeepsOutcomeRows: an attempt's outcome row still in
// p.out when its partition is revoked (its transaction aborted) is not
// dropped: it commits later as a loose row, so each of the two requests
// (the first owner's and the redo) has its outcome row. It failed before:
// one row for two requests (the first shown as interrupted).
func TestDispatcherRevokeKeepsOutcomeRows(t *testing.T) {
	c, seeds, topics, policy := reviewCluster(t, "rk.", 1)
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
	att := newFakeAttempter()
	d, stop := startDispatcher(t, DispatcherOptions{
		Brokers: c.ListenAddrs(), KafkaOptions: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())},
		Topics: topics, Group: "rk.dispatch", TransactionalID: "rk.dispatch-test",
		Endpoints: fakeEndpoints{"ep": testEndpoint("ep", 1)}, Attempter: att, Policy: policy,
	})
	waitFor(t, "an aborted commit", func() bool { return aborts.Load() >= 1 })
	runningClient(t, d).Close() // leaving the group revokes the partition
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	abort.Store(false)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = d.Run(ctx) }()
	defer func() { cancel(); wg.Wait() }()
	adm := kadm.NewClient(prod)
	waitFor(t, "the redone delivery committed", func() bool {
		at, _ := committedAt(adm, "rk.dispatch", topics.Deliveries)
		return at == 1
	})
	calls, _ := att.count("ep")
	if n := committedRows(t, seeds, topics.Attempts); n != calls {
		t.Errorf("%d requests made; %d committed outcome rows; want one per request", calls, n)
	}
}
