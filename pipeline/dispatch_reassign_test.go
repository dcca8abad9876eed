package pipeline

import (
	"context"
	"testing"
)

// TestDispatcherReassignRevokesOld: an assignment of a partition the
// dispatcher still holds (a loss that never reached a callback) first
// revokes the old state, so its goroutines stop. It failed before: the old
// partState stayed live (context not cancelled), owned by no one.
func TestDispatcherReassignRevokesOld(t *testing.T) {
	c, _, topics, policy := reviewCluster(t, "ra.", 1)
	d, _ := startDispatcher(t, DispatcherOptions{
		Brokers: c.ListenAddrs(), Topics: topics, Group: "ra.dispatch", TransactionalID: "ra.dispatch-test",
		Endpoints: fakeEndpoints{}, Attempter: newFakeAttempter(), Policy: policy,
	})
	var old *partState
	waitFor(t, "partition 0 owned", func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		old = d.parts[0]
		return old != nil
	})
	d.assigned(context.Background(), runningClient(t, d), map[string][]int32{topics.Deliveries: {0}})
	if old.ctx.Err() == nil {
		t.Error("reassigned partition: the old state's context is live; want it revoked first")
	}
	d.mu.Lock()
	cur := d.parts[0]
	d.mu.Unlock()
	if cur == nil || cur == old {
		t.Error("reassigned partition: want a fresh state")
	}
}
