package pipeline

import (
	"context"
	"time"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/pipeline/endpoints"
)

// pump is the one goroutine that starts attempts for q. It never sleeps in
// anyone else's way: it waits on the endpoint's own start window or held
// due time, and exits when the queue is empty.
//
// An attempt has two stages: its sending row is written (durably, before
// any request), then it waits for one of the endpoint's in-flight slots and
// a token of its bucket (awaitSlot) and makes the request. The pump starts
// the first stage, in batches (one write for up to maxStartBatch), on
// goroutines of their own, each with a token of the bucket (so the writes
// are paced at the endpoint's rate), for as many deliveries as its start
// window allows: its in-flight cap plus the deliveries it sends in one
// sending-row write's time (busyPacer.startWindow). So the in-flight cap
// bounds the requests open at the endpoint, as it promises, and the write
// is no longer part of the time a slot is held: an endpoint's throughput is
// its in-flight cap per request time, not per request plus write (issue 10:
// at 141–404 ms per write on a busy 3-replica cluster, 8 slots held across
// the write drained ~20–24 deliveries/s of an endpoint receiving 40, in
// batches of one). The window keeps the time between a sending row and its
// request near one write. Owner: the partition's wg.
func (d *Dispatcher) pump(p *partState, q *endpointQueue) {
	defer p.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		ep, usable := d.sendable(q.id)
		p.mu.Lock()
		if q.closed {
			q.running = false
			p.mu.Unlock()
			return
		}
		now := d.now()
		d.shed(p, q, ep, usable, now)
		q.promote(now)
		var wait time.Duration = -1 // -1: until woken
		if len(q.ready) == 0 {
			if len(q.held) == 0 {
				q.running = false
				// Attempts still in flight signal this queue when they
				// end; it stays in the map until they have, so a new
				// pump for the endpoint waits on the same wake channel.
				if q.active == 0 {
					delete(p.queues, q.id)
				}
				p.mu.Unlock()
				return
			}
			wait = q.held[0].meta.DueAt.Sub(now)
		} else {
			room := d.pacer.startWindow(q.id, q.lim.Limit()) - q.starting
			var w time.Duration
			if room > 0 {
				w = q.lim.Take(now)
			}
			if room > 0 && w == 0 {
				batch := d.takeReady(p, q, room, now)
				p.mu.Unlock()
				d.m.backlog.Add(context.Background(), -int64(len(batch)))
				// The batch's sending rows are written while the pump
				// goes on. Owner: the partition's wg.
				p.wg.Add(1)
				go func() {
					defer p.wg.Done()
					d.startAttempts(p, q, batch)
				}()
				continue
			}
			// The window is full (an attempt that begins its request
			// wakes us), or the bucket is empty or the endpoint paused
			// (w). Either way, wake when the head's queue wait runs out.
			if room > 0 {
				wait = w
			}
			if left := q.ready[0].queuedAt.Add(d.o.MaxQueueWait).Sub(now) + time.Millisecond; wait < 0 || left < wait {
				wait = left
			}
		}
		p.mu.Unlock()
		if wait >= 0 {
			timer.Reset(wait)
		}
		select {
		case <-q.wake:
		case <-timer.C:
		case <-p.ctx.Done():
		}
		if wait >= 0 && !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// takeReady pops q's head, whose token the caller just took, into the
// start window, and as many more ready deliveries as the bucket gives
// tokens for now, up to room and maxStartBatch. Called with the partition
// lock held.
func (d *Dispatcher) takeReady(p *partState, q *endpointQueue, room int, now time.Time) []*item {
	batch := make([]*item, 0, min(len(q.ready), room, maxStartBatch))
	for {
		it := q.pop()
		batch = append(batch, it)
		p.backlog--
		q.active++
		q.enterWindow(it)
		if len(q.ready) == 0 || len(batch) == cap(batch) {
			return batch
		}
		if q.lim.Take(now) != 0 {
			return batch // a refusal takes nothing
		}
	}
}

// sendable returns the endpoint config of id, and whether deliveries may
// be sent to it: it exists, is active and has usable pacing limits. The
// endpoint may have been disabled, deleted or re-paced since its deliveries
// were queued.
func (d *Dispatcher) sendable(id string) (*endpoints.Endpoint, bool) {
	ep, ok := d.o.Endpoints.Get(id)
	if !ok {
		return nil, false
	}
	if !ep.Active() {
		return ep, false
	}
	if _, err := d.limiter(ep); err != nil {
		return ep, false
	}
	return ep, true
}

// shed ends or parks the deliveries of q that must not wait in it: all of
// them when the endpoint is not usable (refused) or paused for at least the
// smallest tier (a 429: parked), and those that have waited longer than
// MaxQueueWait (parked), rather than hold the partition's committed offset
// back. Called with the partition lock held.
func (d *Dispatcher) shed(p *partState, q *endpointQueue, ep *endpoints.Endpoint, usable bool, now time.Time) {
	if !usable {
		d.drain(p, q, func(it *item) {
			v := checkIdentity(&it.meta, ep)
			if v.outcome == "" { // active, but its limits are unusable
				v = verdict{outcome: audit.ConfigError, class: classInvalid, message: "endpoint pacing limits cannot be used; not sent"}
			}
			d.complete(p, it.off, d.refuse(it, ep, v, now))
		})
	}
	if until := q.lim.PausedUntil(); until.Sub(now) >= d.o.Policy.MinHold() {
		d.drain(p, q, func(it *item) { d.park(p, it, "paused", until, now, d.complete) })
	}
	for len(q.ready) > 0 && now.Sub(q.ready[0].queuedAt) > d.o.MaxQueueWait {
		it := q.pop()
		p.backlog--
		d.m.backlog.Add(context.Background(), -1)
		d.parkBusy(p, it, q, q.len(), "queue_wait", now, d.complete)
	}
}

// drain removes every queued delivery of q and hands each to fn. Called
// with the partition lock held.
func (d *Dispatcher) drain(p *partState, q *endpointQueue, fn func(*item)) {
	n := q.len()
	if n == 0 {
		return
	}
	for len(q.ready) > 0 {
		fn(q.pop())
	}
	for len(q.held) > 0 {
		fn(q.popHeld())
	}
	p.backlog -= n
	d.m.backlog.Add(context.Background(), -int64(n))
}
