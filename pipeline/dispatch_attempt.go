package pipeline

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/pipeline/endpoints"
)

// maxStartBatch bounds how many attempts of one endpoint share one
// sending-row write, and the start window's part beyond the in-flight cap
// (see pump).
const maxStartBatch = 64

// release gives back the in-flight slot an attempt of q held, and drops q
// from the partition's map once it is idle and empty.
func (d *Dispatcher) release(p *partState, q *endpointQueue) {
	q.lim.Release()
	q.signalSlot()
	d.unstart(p, q, nil)
}

// unstart ends an attempt of q that holds no in-flight slot: a delivery
// still in the start window (it, not nil: it ended before its request) or
// one whose slot was just released, and drops q from the partition's map
// once it is idle and empty.
func (d *Dispatcher) unstart(p *partState, q *endpointQueue, it *item) {
	p.mu.Lock()
	q.active--
	if it != nil {
		q.leaveWindow(it)
	}
	if q.active == 0 && !q.running && q.len() == 0 && p.queues[q.id] == q {
		delete(p.queues, q.id)
	}
	p.mu.Unlock()
	q.signal()
}

// startAttempts starts one attempt of each of its (deliveries of q, in its
// start window): those the endpoint no longer accepts, or that expired, end
// here; the Sending rows of the rest are written together, durably, before
// any of their requests leaves, so a request that may have reached the
// endpoint always has a row, whenever the process dies. Without them, no
// request. Each written attempt then waits for its slot (attempt).
func (d *Dispatcher) startAttempts(p *partState, q *endpointQueue, its []*item) {
	now := d.now()
	ep, ok := d.o.Endpoints.Get(q.id)
	if !ok {
		ep = nil
	}
	send := its[:0:0]
	rows := make([]*audit.Attempt, 0, len(its))
	for _, it := range its {
		if v := checkIdentity(&it.meta, ep); v.outcome != "" {
			d.unstart(p, q, it)
			d.complete(p, it.off, d.refuse(it, ep, v, now))
			continue
		}
		if d.o.Policy.Expired(it.meta, now) {
			d.unstart(p, q, it)
			d.complete(p, it.off, d.conclude(it, ep, audit.Expired, now))
			continue
		}
		row := attemptRow(it, ep, audit.Sending, now)
		row.AttemptID = newAttemptID()
		send, rows = append(send, it), append(rows, row)
	}
	if len(send) == 0 {
		return
	}
	faultPoint("crash-before-started")
	if err := d.started(p, rows); err != nil {
		for _, it := range send {
			d.unstart(p, q, it)
			if p.ctx.Err() != nil {
				continue // revoked: nothing sent; the next owner sends it
			}
			d.o.Logger.Warn("dispatch: attempt not made: its sending row was not written; delivery parked without consuming an attempt",
				"endpoint", ep.ID, "delivery", it.meta.DeliveryID, "err", err)
			d.park(p, it, "attempt_log", time.Time{}, now, d.complete)
		}
		return
	}
	faultPoint("crash-after-started")
	for i, it := range send {
		p.wg.Add(1)
		go d.attempt(p, q, it, ep, rows[i].AttemptID, now)
	}
}

// awaitSlot waits until the attempt, whose token the pump took, may make
// its request: it takes one of q's in-flight slots (ratelimit.Endpoint.Begin),
// waiting for a release or the end of a short pause. It returns nil when the
// slot is taken (release it), else why the request must not be made: the
// partition was revoked or the dispatcher is stopping (q is closed: a
// shutdown waits for requests in flight, not for those yet to begin), or the endpoint is paused until
// the returned time for at least the smallest tier (errPaused).
func (d *Dispatcher) awaitSlot(p *partState, q *endpointQueue) (time.Time, error) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		if err := p.ctx.Err(); err != nil {
			return time.Time{}, err
		}
		select {
		case <-q.done:
			return time.Time{}, context.Canceled
		default:
		}
		now := d.now()
		w, err := q.lim.Begin(now)
		if err == nil && w == 0 {
			q.signalSlot() // another slot may be free: pass the wake on
			return time.Time{}, nil
		}
		var tc <-chan time.Time
		if err == nil { // a pause
			if until := q.lim.PausedUntil(); until.Sub(now) >= d.o.Policy.MinHold() {
				return until, errPaused
			}
			if timer == nil {
				timer = time.NewTimer(w)
			} else {
				timer.Reset(w)
			}
			tc = timer.C
		}
		select {
		case <-q.slot:
		case <-tc:
		case <-q.done:
		case <-p.ctx.Done():
		}
		if timer != nil && !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// errPaused is awaitSlot's reason for a pause of at least the smallest tier.
var errPaused = errors.New("endpoint paused")

// attempt makes the request of attempt attemptID of it, whose Sending row
// is written at now, once it has a slot (awaitSlot), and reports the
// result. Owner: the partition's wg; it is in q's start window until its
// request begins, and then holds one of the endpoint's in-flight slots.
func (d *Dispatcher) attempt(p *partState, q *endpointQueue, it *item, ep *endpoints.Endpoint, attemptID string, now time.Time) {
	defer p.wg.Done()
	if until, err := d.awaitSlot(p, q); err != nil {
		d.unstart(p, q, it)
		d.notSent(p, it, ep, attemptID, until, err, now)
		return
	}
	p.mu.Lock()
	q.leaveWindow(it)
	p.mu.Unlock()
	q.signal() // room in the start window
	ctx := context.Background()
	d.m.inFlight.Add(ctx, 1)
	begun := d.now()
	res := d.o.Attempter.Attempt(p.ctx, ep, it.value, &it.meta, now)
	d.m.inFlight.Add(ctx, -1)
	d.pacer.observe(q.id, d.now().Sub(begun)) // the request: the endpoint's pace (dispatch_park.go)
	faultPoint("crash-after-response")
	if res.PauseUntil.After(now) {
		q.lim.Pause(d.o.Policy.CapPause(res.PauseUntil, now))
	}
	d.release(p, q)
	if p.ctx.Err() != nil {
		// Revoked mid-attempt: not committed; the next owner sends it again
		// with the same webhook-id and body. The request may have reached
		// the endpoint, so its outcome row is still written (in the next
		// transaction, tied to no offset).
		d.doneMu.Lock()
		d.loose = append(d.loose, d.attemptRecord(canceledRow(it, ep, attemptID, &res, now))...)
		d.doneMu.Unlock()
		return
	}
	d.complete(p, it.off, d.decided(it, ep, attemptID, &res, now))
}

// notSent ends attempt attemptID of it, whose sending row is written but
// whose request was not made (awaitSlot's why), with its outcome row, so
// the log shows no attempt in doubt: revoked or stopping, the row is tied to no offset
// (the next owner sends the delivery); paused until until, the delivery is
// parked until then without consuming an attempt, and the row commits
// with it.
func (d *Dispatcher) notSent(p *partState, it *item, ep *endpoints.Endpoint, attemptID string, until time.Time, why error, now time.Time) {
	row := attemptRow(it, ep, audit.RetryScheduled, now)
	row.AttemptID = attemptID
	if !errors.Is(why, errPaused) {
		row.ErrorClass = "canceled"
		row.ErrorMessage = "not sent: the partition was revoked or the dispatcher stopped before the request was made; the delivery's next owner sends it"
		d.doneMu.Lock()
		d.loose = append(d.loose, d.attemptRecord(row)...)
		d.doneMu.Unlock()
		return
	}
	row.ErrorClass = "not_sent"
	row.ErrorMessage = "endpoint paused (Retry-After) before the request was made; not sent, parked until the pause ends"
	row.NextAttemptAt = d.o.Policy.CapPause(until, now)
	rows := d.attemptRecord(row)
	d.park(p, it, "paused", until, d.now(), func(p *partState, off int64, out []*kgo.Record) {
		d.complete(p, off, append(rows, out...))
	})
}

// canceledRow is the outcome row of an attempt cut short by the revocation
// of its partition.
func canceledRow(it *item, ep *endpoints.Endpoint, attemptID string, res *AttemptResult, now time.Time) *audit.Attempt {
	row := attemptRow(it, ep, audit.RetryScheduled, now)
	row.AttemptID = attemptID
	row.LatencyMs = res.Latency.Milliseconds()
	row.HTTPStatus = res.StatusCode
	row.ErrorClass = "canceled"
	row.ErrorMessage = "partition revoked during the attempt; its next owner retries the delivery"
	httpDetail(row, it, res)
	return row
}

// httpDetail copies what the console's message page shows of the request
// and the response into an outcome row: the headers as sent and received
// (redacted, bounded by the attempter) and the body's first 512 bytes, when
// a request was made.
func httpDetail(row *audit.Attempt, it *item, res *AttemptResult) {
	row.RequestHeaders, row.ResponseHeaders = res.RequestHeaders, res.ResponseHeaders
	if res.RequestHeaders != "" {
		row.BodyPreview = audit.BodyPreview(it.value)
	}
}

// decided routes the result of an attempt (RetryPolicy.Decide) and returns
// the records that follow it, to commit with the delivery's offset (see
// flush): the outcome row and the delivery's next record (retry tier, DLQ)
// if any. The endpoint's health (failing-since clock, auto-disable, 410 →
// disabled) is observed here too, but its status and operational records
// are tied to no offset: they go out as loose records (health.go).
func (d *Dispatcher) decided(it *item, ep *endpoints.Endpoint, attemptID string, res *AttemptResult, now time.Time) []*kgo.Record {
	ctx := context.Background()
	dec := d.o.Policy.Decide(it.meta, res, res.StartedAt.Add(res.Latency), rand.Float64())
	row := attemptRow(it, ep, dec.Outcome, now)
	row.AttemptID = attemptID
	row.LatencyMs = res.Latency.Milliseconds()
	row.HTTPStatus = res.StatusCode
	row.ErrorClass = res.ErrorClass
	row.ErrorMessage = res.ErrorMessage
	row.ResponseBody = res.Body
	row.NextAttemptAt = dec.NextAttemptAt
	httpDetail(row, it, res)
	d.m.attempts.Add(ctx, 1, attrOutcome(dec.Outcome))
	d.m.attemptLatency.Record(ctx, res.Latency.Seconds())

	out := d.attemptRecord(row)
	if dec.Topic != "" {
		out = append(out, deliveryRecord(dec.Topic, it.key, it.value, &dec.Meta))
	}
	if dec.Topic == d.o.Topics.DLQ {
		d.o.Logger.Info("dispatch: delivery to the DLQ", "endpoint", ep.ID, "delivery", it.meta.DeliveryID,
			"event", it.meta.EventID, "outcome", dec.Outcome, "attempt", it.meta.Attempt, "error", res.ErrorClass)
	}
	// The failing-since clock, auto-disable and 410 → disabled (health.go).
	d.observeHealth(ep, res, d.o.Now())
	return out
}

// started writes the Sending rows of attempts about to be made, in one
// write bounded by StartTimeout. Each outcome row will carry the same
// AttemptID, AttemptedAt and endpoint as its Sending row, so the store
// collapses the pair.
func (d *Dispatcher) started(p *partState, rows []*audit.Attempt) error {
	ctx, cancel := context.WithTimeout(p.ctx, d.o.StartTimeout)
	defer cancel()
	start := d.now()
	err := d.o.Attempts.Started(ctx, rows...)
	took := d.now().Sub(start)
	d.m.startLatency.Record(context.Background(), took.Seconds())
	if err == nil {
		d.pacer.observeWrite(took)
	}
	return err
}
