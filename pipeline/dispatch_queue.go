package pipeline

import (
	"container/heap"
	"time"

	"github.com/hookrelay/hookrelay/ratelimit"
)

// endpointQueue holds one endpoint's deliveries on one partition. All
// fields but wake are guarded by the partition's mu.
type endpointQueue struct {
	id      string
	lim     *ratelimit.Endpoint
	ready   []*item  // due now, FIFO
	held    heldHeap // due later (the remainder of a delay below the smallest tier)
	running bool     // a pump goroutine serves the queue
	active  int      // attempts started from this queue and not yet ended
	closed  bool
	wake    chan struct{} // buffered(1): something changed, re-evaluate
}

func newEndpointQueue(id string, lim *ratelimit.Endpoint) *endpointQueue {
	return &endpointQueue{id: id, lim: lim, wake: make(chan struct{}, 1)}
}

func (q *endpointQueue) len() int { return len(q.ready) + len(q.held) }

// push queues it: held until its DueAt if that is after now, else ready.
func (q *endpointQueue) push(it *item, now time.Time) {
	if !it.meta.DueAt.IsZero() && it.meta.DueAt.After(now) {
		heap.Push(&q.held, it)
	} else {
		q.ready = append(q.ready, it)
	}
	q.signal()
}

// promote moves held items that are due at now to the ready queue.
func (q *endpointQueue) promote(now time.Time) {
	for len(q.held) > 0 && !q.held[0].meta.DueAt.After(now) {
		q.ready = append(q.ready, heap.Pop(&q.held).(*item))
	}
}

func (q *endpointQueue) pop() *item {
	it := q.ready[0]
	q.ready[0] = nil
	q.ready = q.ready[1:]
	return it
}

func (q *endpointQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// closeQueue makes the pump exit at its next turn; items still queued are
// not attempted and stay uncommitted.
func (q *endpointQueue) closeQueue() {
	q.closed = true
	q.signal()
}

type heldHeap []*item

func (h heldHeap) Len() int           { return len(h) }
func (h heldHeap) Less(i, j int) bool { return h[i].meta.DueAt.Before(h[j].meta.DueAt) }
func (h heldHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *heldHeap) Push(x any)        { *h = append(*h, x.(*item)) }
func (h *heldHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return it
}
