package pipeline

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestDispatcherJoinedPerRun: Joined refers to one run: after a run
// returned, Joined is not closed until the next run joins. It failed
// before: Joined stayed closed from the first run (so /readyz said ready
// during a supervised restart).
func TestDispatcherJoinedPerRun(t *testing.T) {
	c, _, topics, policy := reviewCluster(t, "jr.", 1)
	d, stop := startDispatcher(t, DispatcherOptions{
		Brokers: c.ListenAddrs(), Topics: topics, Group: "jr.dispatch", TransactionalID: "jr.dispatch-test",
		Endpoints: fakeEndpoints{}, Attempter: newFakeAttempter(), Policy: policy,
	})
	select {
	case <-d.Joined():
	case <-time.After(30 * time.Second): // a hang guard
		t.Fatal("never joined")
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	joined := d.Joined()
	select {
	case <-joined:
		t.Fatal("Joined closed after the run returned, before the next run joined")
	default:
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = d.Run(ctx) }()
	defer func() { cancel(); wg.Wait() }()
	select {
	case <-joined:
	case <-time.After(30 * time.Second): // a hang guard
		t.Fatal("the second run never closed Joined")
	}
}
