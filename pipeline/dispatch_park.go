package pipeline

import (
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/pipeline/delivery"
	"github.com/hookrelay/hookrelay/ratelimit"
)

// Busy parks: a delivery parked because its endpoint is busy, not broken
// (its queue is full: reasons backlog, partition_backlog, memory; or it
// would wait, or has waited, too long in the queue at the endpoint's pace:
// queue_wait), comes back when the
// endpoint can take it. Each busy park of an endpoint reserves the next
// slot after the deliveries already queued and those parked before it, at
// the endpoint's measured pace, so
//
//   - the overflow of a burst returns in the order it was parked, spread at
//     the rate the endpoint drains, not all at once after the smallest tier
//     (which finds the queue full again and parks most of them again: one
//     re-read of the whole overflow per smallest tier) and not after a delay
//     that doubles with every park (which starves the oldest deliveries of a
//     healthy endpoint for up to the longest tier while newer ones pass);
//   - a new delivery is parked at once when it would wait more than half of
//     MaxQueueWait in the queue, instead of being queued and parked for its
//     queue wait later (which sent all but the first seconds of a busy
//     endpoint's queue round the tiers again and again);
//   - a delivery back from a park is admitted whatever its expected wait,
//     up to twice EndpointBacklog (1.25 times PartitionBacklog), so it is
//     not parked again behind the new deliveries that arrived meanwhile;
//     if it then waits MaxQueueWait in the queue, it is parked for that
//     (still a known gap: an endpoint over its capacity for long re-parks
//     its queue this way, see docs/RELIABILITY.md).
//
// A park for a pause (429, Retry-After) or for an unwritten sending row
// (Kafka unavailable) keeps the back-off of [RetryPolicy.Park]: the endpoint
// or the log is broken there, and waiting longer each time is right.
//
// Found by the 3-node broker fault scenario (issue 10): after two cluster
// outages each endpoint's backlog far exceeded what it drains in
// MaxQueueWait (its sending-row writes to a 3-replica topic took 141 ms on
// average on the busy test machine, so a pump that waited for each write
// drained ~24 deliveries/s of an endpoint receiving 40/s). The overflow cycled through the tiers: 468k parks for
// backlog and 491k for queue wait in 15 minutes, the deliveries topic grew
// to 9 records per delivery, and the re-reading starved the machine: 23 % of
// the deliveries were still parked 5 minutes after the last fault.

// busyParkReasons are the park reasons that mean "busy, not broken".
var busyParkReasons = map[string]bool{"backlog": true, "partition_backlog": true, "memory": true, "queue_wait": true}

// Pace estimate bounds: an endpoint's time per delivery is its measured
// service time (its requests, exponentially averaged with weight
// paceWeight) divided by its in-flight cap, no less than its rate's
// interval, and no less than the dispatcher's sending-row write time
// (averaged the same way) divided by the largest start window; before any
// measurement, defaultServiceTime and defaultWriteTime.
const (
	defaultServiceTime = 100 * time.Millisecond
	defaultWriteTime   = 10 * time.Millisecond
	paceWeight         = 0.2
)

// busyPacer holds, per endpoint, the measured service time and the next
// free slot for a busy park, and the measured sending-row write time (one
// for all endpoints: it is the cluster's). Safe for concurrent use; its
// lock is a leaf (nothing is taken while holding it).
type busyPacer struct {
	mu    sync.Mutex
	m     map[string]*endpointPace
	write time.Duration // average sending-row write
}

type endpointPace struct {
	service time.Duration // average time of a request
	next    time.Time     // the earliest slot the next busy park may take
}

// ewma is the running average of avg with one more sample took.
func ewma(avg, took time.Duration) time.Duration {
	if avg == 0 {
		return took
	}
	return time.Duration(paceWeight*float64(took) + (1-paceWeight)*float64(avg))
}

// observeWrite records that a sending-row write took took.
func (b *busyPacer) observeWrite(took time.Duration) {
	if took <= 0 {
		return
	}
	b.mu.Lock()
	b.write = ewma(b.write, took)
	b.mu.Unlock()
}

// writeTime is the average sending-row write; mu held.
func (b *busyPacer) writeTime() time.Duration {
	if b.write == 0 {
		return defaultWriteTime
	}
	return b.write
}

// startWindow is how many attempts of endpoint id may be in its start
// window (sending row being written, or written and waiting for a slot; see
// pump) at lim's limits: its in-flight cap, plus what it sends in one
// write's time at its pace (at least 1, at most maxStartBatch). So a write
// never starves the endpoint's slots, and a written attempt waits about one
// write for its request.
func (b *busyPacer) startWindow(id string, lim ratelimit.Limit) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.m[id]
	if e == nil {
		e = &endpointPace{}
	}
	per := e.requestPace(lim)
	extra := int((b.writeTime() + per - 1) / per)
	return max(lim.MaxInFlight, 1) + min(max(extra, 1), maxStartBatch)
}

// pace returns the entry of id (created on first use); mu held.
func (b *busyPacer) pace(id string) *endpointPace {
	if b.m == nil {
		b.m = make(map[string]*endpointPace)
	}
	e := b.m[id]
	if e == nil {
		e = &endpointPace{}
		b.m[id] = e
	}
	return e
}

// observe records that an attempt of endpoint id took took from its start
// (before its sending row) to its end.
func (b *busyPacer) observe(id string, took time.Duration) {
	if took <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.pace(id)
	e.service = ewma(e.service, took)
}

// requestPace is the time the endpoint needs per request at lim's limits
// (its in-flight cap and rate); mu held.
func (e *endpointPace) requestPace(lim ratelimit.Limit) time.Duration {
	service := e.service
	if service == 0 {
		service = defaultServiceTime
	}
	per := service / time.Duration(max(lim.MaxInFlight, 1))
	if lim.RatePerSec > 0 {
		per = max(per, time.Duration(float64(time.Second)/lim.RatePerSec))
	}
	return max(per, time.Microsecond)
}

// paceOf is the time endpoint e needs per delivery at lim's limits:
// its request pace, or its sending-row writes' when those are slower (one
// write per full start window); mu held.
func (b *busyPacer) paceOf(e *endpointPace, lim ratelimit.Limit) time.Duration {
	return max(e.requestPace(lim), b.writeTime()/time.Duration(max(lim.MaxInFlight, 1)+maxStartBatch))
}

// perDelivery is the time endpoint id needs per delivery at lim's limits.
func (b *busyPacer) perDelivery(id string, lim ratelimit.Limit) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.m[id]
	if e == nil {
		e = &endpointPace{}
	}
	return b.paceOf(e, lim)
}

// reserve returns when a delivery of endpoint id, parked now behind queued
// deliveries, is due back: after the queued ones and every earlier busy
// park of the endpoint, at its pace; at least minWait and at most maxWait
// from now.
func (b *busyPacer) reserve(id string, lim ratelimit.Limit, queued int, now time.Time, minWait, maxWait time.Duration) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.pace(id)
	per := b.paceOf(e, lim)
	due := now.Add(time.Duration(queued) * per)
	if e.next.After(due) {
		due = e.next
	}
	if lo := now.Add(minWait); due.Before(lo) {
		due = lo
	}
	if hi := now.Add(maxWait); due.After(hi) {
		due = hi
	}
	e.next = due.Add(per)
	if len(b.m) > 4096 { // forget endpoints whose slots are all in the past
		for k, o := range b.m {
			if k != id && o.next.Before(now) {
				delete(b.m, k)
			}
		}
	}
	return due
}

// ParkBusy returns the delivery (key, value) moved to a tier without
// consuming an attempt, due back at due (reserved by the dispatcher for a
// busy endpoint; see busy parks in dispatch_park.go), capped at the
// longest tier from now. Unlike [RetryPolicy.Park] the delay does not
// double with m.Parks (counted all the same) and it is no pause: the
// record's PauseUntil is left as it was.
func (p *RetryPolicy) ParkBusy(m delivery.Meta, key, value []byte, due, now time.Time) *kgo.Record {
	if lo := now.Add(p.tiers.Smallest()); due.Before(lo) {
		due = lo
	}
	due = p.CapPause(due, now)
	m.Parks++
	m.DueAt = due
	return deliveryRecord(p.hop(due, now), key, value, &m)
}
