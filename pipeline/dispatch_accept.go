package pipeline

import (
	"bytes"
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/pipeline/delivery"
)

// accept takes one fetched record into its partition. It runs on the poll
// loop.
func (d *Dispatcher) accept(p *partState, r *kgo.Record) {
	if p.tracker.next < 0 {
		// No committed offset: the partition started from the reset offset.
		p.tracker.next = r.Offset
	}
	if !p.tracker.add(r.Offset) {
		return // re-fetched after an aborted transaction; already held
	}
	if p.skip.has(r.Offset) {
		p.tracker.done(r.Offset)
		d.m.duplicateSkips.Add(context.Background(), 1)
		return
	}
	meta, err := delivery.ParseMeta(r.Headers)
	if err != nil {
		d.finish(p, r.Offset, []*kgo.Record{d.deadLetter(r, "bad_headers: "+err.Error())})
		return
	}
	now := d.now()
	it := &item{off: r.Offset, key: bytes.Clone(r.Key), value: bytes.Clone(r.Value), meta: meta, queuedAt: now, size: itemSize(r.Key, r.Value, r.Headers)}
	ep, ok := d.o.Endpoints.Get(meta.EndpointID)
	if !ok {
		ep = nil
	}
	if v := checkIdentity(&meta, ep); v.outcome != "" {
		d.finish(p, r.Offset, d.refuse(it, ep, v, now))
		return
	}
	if d.o.Policy.Expired(meta, now) {
		d.finish(p, r.Offset, d.conclude(it, ep, audit.Expired, now))
		return
	}
	lim, err := d.limiter(ep)
	if err != nil {
		d.finish(p, r.Offset, d.conclude(it, ep, audit.Abandoned, now))
		return
	}
	if meta.PauseUntil.After(now) {
		lim.Pause(d.o.Policy.CapPause(meta.PauseUntil, now)) // a 429's pause travels with parked records
	}
	p.mu.Lock()
	q := p.queues[meta.EndpointID]
	if q == nil {
		q = newEndpointQueue(meta.EndpointID, lim, &d.held)
		p.queues[meta.EndpointID] = q
	}
	// Park instead of holding: the endpoint is paused past the smallest
	// tier, its local backlog is full, or the partition's is and this
	// endpoint already has deliveries waiting. No attempt is consumed.
	if reason, until := d.parkReason(p, q, it, now); reason != "" {
		queued := q.len()
		if queued == 0 && q.active == 0 && !q.running {
			delete(p.queues, q.id)
		}
		p.mu.Unlock()
		if busyParkReasons[reason] {
			d.parkBusy(p, it, q, queued, reason, now, d.finish)
		} else {
			d.park(p, it, reason, until, now, d.finish)
		}
		return
	}
	if !d.makeRoom(p, q, it, now) {
		queued := q.len()
		if queued == 0 && q.active == 0 && !q.running {
			delete(p.queues, q.id)
		}
		p.mu.Unlock()
		d.parkBusy(p, it, q, queued, "memory", now, d.finish)
		return
	}
	q.push(it, now)
	p.backlog++
	backlog := p.backlog
	if !q.running {
		q.running = true
		p.wg.Add(1)
		go d.pump(p, q)
	}
	p.mu.Unlock()
	d.m.backlog.Add(context.Background(), 1)
	if backlog >= d.o.PartitionBacklog*3/2 && !p.paused {
		p.paused = true
		d.sess.Client().PauseFetchPartitions(map[string][]int32{d.o.Topics.Deliveries: {p.id}})
		d.m.partitionPauses.Add(context.Background(), 1)
	}
}

// parkReason says whether it, a new delivery for q, must be parked instead
// of queued, and until when at least. Besides a pause and the count caps
// (EndpointBacklog, PartitionBacklog), a delivery is parked when it would
// wait in the queue longer than half of MaxQueueWait at the endpoint's
// measured pace (the queue's length times [busyPacer.perDelivery]): it
// would only be parked for its queue wait later, after holding memory and
// the partition's committed offset back. A delivery back from a park
// (Meta.Parks > 0) has waited its turn in a tier: for it there is no
// expected-wait bound and the count caps are higher (twice EndpointBacklog,
// 1.25 times PartitionBacklog, below the partition's fetch pause at 1.5), so
// the deliveries that arrived meanwhile do not park it again (see busy
// parks in dispatch_park.go); if it then waits MaxQueueWait in the queue,
// it is parked for that, behind the queue at the endpoint's current pace. Called with the partition lock held.
func (d *Dispatcher) parkReason(p *partState, q *endpointQueue, it *item, now time.Time) (string, time.Time) {
	if until := q.lim.PausedUntil(); until.Sub(now) >= d.o.Policy.MinHold() {
		return "paused", until
	}
	endpointCap, partitionCap, wait := d.o.EndpointBacklog, d.o.PartitionBacklog, d.o.MaxQueueWait/2
	if it.meta.Parks > 0 {
		endpointCap, partitionCap, wait = 2*endpointCap, partitionCap*5/4, 0
	}
	if q.len() >= endpointCap {
		return "backlog", time.Time{}
	}
	if wait > 0 && q.len() > 0 && time.Duration(q.len())*d.pacer.perDelivery(q.id, q.lim.Limit()) >= wait {
		return "queue_wait", time.Time{}
	}
	if p.backlog >= partitionCap && q.len() > 0 {
		return "partition_backlog", time.Time{}
	}
	return "", time.Time{}
}

// makeRoom keeps the held bytes within DispatcherOptions.MemoryBudget for
// it, about to join q: while they would exceed it, the newest delivery of
// the queue of p holding the most bytes (q counting it) is parked, and
// false is returned when that is it itself. A queue's head is never parked
// for memory, so it joins an empty q anyway. Called with the partition
// lock held, on the poll loop.
func (d *Dispatcher) makeRoom(p *partState, q *endpointQueue, it *item, now time.Time) bool {
	if d.o.MemoryBudget == 0 {
		return true
	}
	for d.held.Load()+it.size > d.o.MemoryBudget {
		var victim *endpointQueue
		for _, o := range p.queues {
			if o.len() > 1 && (victim == nil || o.bytes > victim.bytes) {
				victim = o
			}
		}
		if q.len() > 0 && (victim == nil || q.bytes+it.size >= victim.bytes) {
			return false
		}
		if victim == nil {
			return true // only heads are held here: it is q's head
		}
		old := victim.popNewest()
		p.backlog--
		d.m.backlog.Add(context.Background(), -1)
		d.parkBusy(p, old, victim, victim.len(), "memory", now, d.finish)
	}
	return true
}
