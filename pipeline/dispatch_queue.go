package pipeline

import (
	"container/heap"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/ratelimit"
)

// endpointQueue holds one endpoint's deliveries on one partition. All
// fields but the channels are guarded by the partition's mu.
type endpointQueue struct {
	id      string
	lim     *ratelimit.Endpoint
	ready   []*item  // due now, FIFO
	held    heldHeap // due later (the remainder of a delay below the smallest tier)
	running bool     // a pump goroutine serves the queue
	active  int      // attempts started from this queue and not yet ended
	// starting counts the attempts of active that have not begun their
	// request: their sending rows are being written, or are written and
	// the attempt waits for an in-flight slot (the start
	// window, see pump).
	starting int
	closed   bool
	bytes    int64         // itemSize of every queued item
	total    *atomic.Int64 // the dispatcher's held bytes, which bytes is part of
	wake     chan struct{} // buffered(1): something changed, re-evaluate
	slot     chan struct{} // buffered(1): an in-flight slot was released (awaitSlot)
	done     chan struct{} // closed by closeQueue: attempts yet to begin end (awaitSlot)
}

func newEndpointQueue(id string, lim *ratelimit.Endpoint, total *atomic.Int64) *endpointQueue {
	return &endpointQueue{id: id, lim: lim, total: total, wake: make(chan struct{}, 1), slot: make(chan struct{}, 1), done: make(chan struct{})}
}

// itemSize is what a queued delivery counts against the memory budget, in
// bytes: its key, value and headers (as fetched).
func itemSize(key, value []byte, headers []kgo.RecordHeader) int64 {
	n := len(key) + len(value)
	for _, h := range headers {
		n += len(h.Key) + len(h.Value)
	}
	return int64(n)
}

// account adds n (negative: removes) to the queue's bytes and the total.
func (q *endpointQueue) account(n int64) {
	q.bytes += n
	q.total.Add(n)
}

// forget removes every queued byte from the total (the queue is dropped).
func (q *endpointQueue) forget() { q.account(-q.bytes) }

func (q *endpointQueue) len() int { return len(q.ready) + len(q.held) }

// push queues it: held until its DueAt if that is after now, else ready.
func (q *endpointQueue) push(it *item, now time.Time) {
	q.account(it.size)
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
	q.account(-it.size)
	return it
}

// popHeld removes the held item due first.
func (q *endpointQueue) popHeld() *item {
	it := heap.Pop(&q.held).(*item)
	q.account(-it.size)
	return it
}

// popNewest removes the queued item that is not the queue's head (ready[0],
// or the first held when none is ready) and was queued last among those of
// its kind: the ready tail, else a held leaf (a heap's last element can go
// without a fix-up). It returns nil when the queue holds only its head.
func (q *endpointQueue) popNewest() *item {
	var it *item
	switch {
	case len(q.held) > 1 || len(q.held) == 1 && len(q.ready) > 0:
		it = q.held[len(q.held)-1]
		q.held[len(q.held)-1] = nil
		q.held = q.held[:len(q.held)-1]
	case len(q.ready) > 1:
		it = q.ready[len(q.ready)-1]
		q.ready[len(q.ready)-1] = nil
		q.ready = q.ready[:len(q.ready)-1]
	default:
		return nil
	}
	q.account(-it.size)
	return it
}

func (q *endpointQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// signalSlot wakes one attempt waiting in awaitSlot.
func (q *endpointQueue) signalSlot() {
	select {
	case q.slot <- struct{}{}:
	default:
	}
}

// closeQueue makes the pump exit at its next turn; items still queued are
// not attempted and stay uncommitted.
func (q *endpointQueue) closeQueue() {
	if !q.closed {
		close(q.done)
	}
	q.closed = true
	q.signal()
}

// enterWindow counts it, just popped, in q's start window: it still counts
// against the memory budget until its request begins (leaveWindow).
func (q *endpointQueue) enterWindow(it *item) {
	q.starting++
	q.total.Add(it.size)
}

// leaveWindow ends it's time in q's start window (enterWindow).
func (q *endpointQueue) leaveWindow(it *item) {
	q.starting--
	q.total.Add(-it.size)
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
