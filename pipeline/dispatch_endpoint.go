package pipeline

import (
	"container/heap"
	"context"
	"math/rand/v2"
	"net/url"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/pipeline/delivery"
	"github.com/hookrelay/hookrelay/pipeline/endpoints"
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

func (q *endpointQueue) push(it *item) {
	if !it.meta.DueAt.IsZero() && it.meta.DueAt.After(time.Now()) {
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

// pump is the one goroutine that starts attempts for q. It never sleeps in
// anyone else's way: it waits on the endpoint's own pause, bucket, in-flight
// cap or held due time, and exits when the queue is empty. Owner: the
// partition's wg.
func (d *Dispatcher) pump(p *partState, q *endpointQueue) {
	defer p.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		// The endpoint may have been disabled, deleted or re-paced since
		// its deliveries were queued.
		ep, ok := d.o.Endpoints.Get(q.id)
		if !ok {
			ep = nil
		}
		usable := ok && ep.Active()
		if usable {
			if _, err := d.limiter(ep); err != nil {
				usable = false
			}
		}
		p.mu.Lock()
		if q.closed {
			q.running = false
			p.mu.Unlock()
			return
		}
		now := time.Now()
		if !usable {
			d.drain(p, q, func(it *item) {
				v := checkIdentity(&it.meta, ep)
				if v.outcome == "" { // active, but its limits are unusable
					v = verdict{outcome: audit.ConfigError, class: classInvalid, message: "endpoint pacing limits cannot be used; not sent"}
				}
				d.complete(p, it.off, d.refuse(it, ep, v, now))
			})
		}
		// A pause of at least the smallest tier (a 429), or deliveries
		// waiting longer than MaxQueueWait: park them rather than hold the
		// partition's committed offset back.
		if until := q.lim.PausedUntil(); until.Sub(now) >= d.o.Policy.MinHold() {
			d.drain(p, q, func(it *item) { d.park(p, it, "paused", until, now, d.complete) })
		}
		for len(q.ready) > 0 && now.Sub(q.ready[0].queuedAt) > d.o.MaxQueueWait {
			it := q.pop()
			p.backlog--
			d.m.backlog.Add(context.Background(), -1)
			d.park(p, it, "queue_wait", time.Time{}, now, d.complete)
		}
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
			w, err := q.lim.Acquire(now)
			if err == nil && w == 0 {
				it := q.pop()
				p.backlog--
				q.active++
				p.mu.Unlock()
				d.m.backlog.Add(context.Background(), -1)
				p.wg.Add(1)
				go d.attempt(p, q, it)
				continue
			}
			if err == nil {
				wait = w
			}
			// Otherwise the in-flight cap is reached: a Release wakes us.
			// Either way, wake when the head's queue wait runs out.
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
		fn(heap.Pop(&q.held).(*item))
	}
	p.backlog -= n
	d.m.backlog.Add(context.Background(), -int64(n))
}

// attempt makes one attempt of it and reports the result. Owner: the
// partition's wg; it holds one of the endpoint's in-flight slots.
func (d *Dispatcher) attempt(p *partState, q *endpointQueue, it *item) {
	defer p.wg.Done()
	release := func() {
		q.lim.Release()
		p.mu.Lock()
		q.active--
		if q.active == 0 && !q.running && q.len() == 0 && p.queues[q.id] == q {
			delete(p.queues, q.id)
		}
		p.mu.Unlock()
		q.signal()
	}
	now := time.Now()
	ep, ok := d.o.Endpoints.Get(it.meta.EndpointID)
	if !ok {
		ep = nil
	}
	if v := checkIdentity(&it.meta, ep); v.outcome != "" {
		release()
		d.complete(p, it.off, d.refuse(it, ep, v, now))
		return
	}
	if d.o.Policy.Expired(it.meta, now) {
		release()
		d.complete(p, it.off, d.conclude(it, ep, audit.Expired, now))
		return
	}
	ctx := context.Background()
	// The attempt's Sending row is durable before the request leaves, so
	// a request that may have reached the endpoint always has a row,
	// whenever the process dies. Without it, no request.
	attemptID := newAttemptID()
	faultPoint("crash-before-started")
	if err := d.started(p, it, ep, attemptID, now); err != nil {
		release()
		if p.ctx.Err() != nil {
			return // revoked: nothing sent; the next owner sends it
		}
		d.o.Logger.Warn("dispatch: attempt not made: its sending row was not written; delivery parked without consuming an attempt",
			"endpoint", ep.ID, "delivery", it.meta.DeliveryID, "err", err)
		d.park(p, it, "attempt_log", time.Time{}, now, d.complete)
		return
	}
	faultPoint("crash-after-started")
	d.m.inFlight.Add(ctx, 1)
	res := d.o.Attempter.Attempt(p.ctx, ep, it.value, &it.meta, now)
	d.m.inFlight.Add(ctx, -1)
	faultPoint("crash-after-response")
	if res.PauseUntil.After(now) {
		q.lim.Pause(d.o.Policy.CapPause(res.PauseUntil, now))
	}
	release()
	if p.ctx.Err() != nil {
		// Revoked mid-attempt: not committed; the next owner sends it again
		// with the same webhook-id and body. The request may have reached
		// the endpoint, so its outcome row is still written (in the next
		// transaction, tied to no offset).
		row := attemptRow(it, ep, audit.RetryScheduled, now)
		row.AttemptID = attemptID
		row.LatencyMs = res.Latency.Milliseconds()
		row.HTTPStatus = res.StatusCode
		row.ErrorClass = "canceled"
		row.ErrorMessage = "partition revoked during the attempt; its next owner retries the delivery"
		d.doneMu.Lock()
		d.loose = append(d.loose, d.attemptRecord(row)...)
		d.doneMu.Unlock()
		return
	}
	dec := d.o.Policy.Decide(it.meta, &res, res.StartedAt.Add(res.Latency), rand.Float64())
	row := attemptRow(it, ep, dec.Outcome, now)
	row.AttemptID = attemptID
	row.LatencyMs = res.Latency.Milliseconds()
	row.HTTPStatus = res.StatusCode
	row.ErrorClass = res.ErrorClass
	row.ErrorMessage = res.ErrorMessage
	row.ResponseBody = res.Body
	row.NextAttemptAt = dec.NextAttemptAt
	d.m.attempts.Add(ctx, 1, attrOutcome(dec.Outcome))
	d.m.attemptLatency.Record(ctx, res.Latency.Seconds())

	// The outcome row commits with the delivery's offset (see flush).
	out := d.attemptRecord(row)
	if dec.Topic != "" {
		out = append(out, deliveryRecord(dec.Topic, it.key, it.value, &dec.Meta))
	}
	if dec.Topic == d.o.Topics.DLQ {
		d.o.Logger.Info("dispatch: delivery to the DLQ", "endpoint", ep.ID, "delivery", it.meta.DeliveryID,
			"event", it.meta.EventID, "outcome", dec.Outcome, "attempt", it.meta.Attempt, "error", res.ErrorClass)
	}
	// The failing-since clock, auto-disable and 410 → disabled (health.go).
	d.observeHealth(ep, &res, time.Now())
	d.complete(p, it.off, out)
}

// conclude ends a delivery without sending it (abandoned: the endpoint is
// disabled or deleted; expired: older than the queue TTL): one attempt row
// and a DLQ record, so a later resend finds it. Both are returned, to be
// committed with the delivery's offset.
func (d *Dispatcher) conclude(it *item, ep *endpoints.Endpoint, o audit.Outcome, now time.Time) []*kgo.Record {
	row := attemptRow(it, ep, o, now)
	row.AttemptID = newAttemptID()
	row.ErrorClass = string(o)
	switch o {
	case audit.Abandoned:
		row.ErrorMessage = "endpoint disabled or deleted; not sent"
	case audit.Expired:
		row.ErrorMessage = "event older than the queue TTL; not sent"
	}
	d.m.attempts.Add(context.Background(), 1, attrOutcome(o))
	m := it.meta
	m.Reason = string(o)
	m.History = append(m.History, delivery.AttemptSummary{Number: m.Attempt, At: now, Outcome: string(o)})
	return append(d.attemptRecord(row), deliveryRecord(d.o.Topics.DLQ, it.key, it.value, &m))
}

// started writes the Sending row of attempt attemptID of it, bounded by
// StartTimeout. The outcome row will carry the same AttemptID, AttemptedAt
// (now) and endpoint, so the store collapses the pair.
func (d *Dispatcher) started(p *partState, it *item, ep *endpoints.Endpoint, attemptID string, now time.Time) error {
	row := attemptRow(it, ep, audit.Sending, now)
	row.AttemptID = attemptID
	ctx, cancel := context.WithTimeout(p.ctx, d.o.StartTimeout)
	defer cancel()
	start := time.Now()
	err := d.o.Attempts.Started(ctx, row)
	d.m.startLatency.Record(context.Background(), time.Since(start).Seconds())
	return err
}

// attemptRecord is a as a record of the attempts topic, keyed by endpoint
// ID like its Sending row (so both land on one partition, in order): a
// one-element slice, or none if a does not encode (logged).
func (d *Dispatcher) attemptRecord(a *audit.Attempt) []*kgo.Record {
	b, err := a.Marshal()
	if err != nil {
		d.o.Logger.Error("dispatch: attempt row not encoded", "attempt_id", a.AttemptID, "err", err)
		return nil
	}
	return []*kgo.Record{{Topic: d.o.Topics.Attempts, Key: []byte(a.EndpointID), Value: b}}
}

// deadLetter copies a record the dispatcher cannot read to the DLQ with the
// reason, so nothing is dropped.
func (d *Dispatcher) deadLetter(r *kgo.Record, reason string) *kgo.Record {
	hs := append([]kgo.RecordHeader{{Key: delivery.HeaderReason, Value: []byte(reason)}}, r.Headers...)
	return &kgo.Record{Topic: d.o.Topics.DLQ, Key: r.Key, Value: r.Value, Headers: hs}
}

// deliveryRecord is a delivery moved to topic with meta as its headers:
// same key, same body bytes.
func deliveryRecord(topic string, key, value []byte, meta *delivery.Meta) *kgo.Record {
	return &kgo.Record{Topic: topic, Key: key, Value: value, Headers: meta.Headers()}
}

func attemptRow(it *item, ep *endpoints.Endpoint, o audit.Outcome, now time.Time) *audit.Attempt {
	a := &audit.Attempt{
		DeliveryID:    it.meta.DeliveryID,
		EventID:       it.meta.EventID,
		WebhookID:     it.meta.WebhookID,
		EventType:     it.meta.EventType,
		Tenant:        it.meta.Tenant,
		EndpointID:    it.meta.EndpointID,
		AttemptNumber: it.meta.Attempt,
		AttemptedAt:   now.UTC().Truncate(time.Millisecond),
		Outcome:       o,
	}
	if ep != nil {
		if u, err := url.Parse(ep.URL); err == nil {
			a.URLHost = u.Host
		}
	}
	return a
}

// outcomeAttrs holds one precomputed attribute option per outcome, so the
// hot path allocates no attribute set per attempt.
var outcomeAttrs = func() map[audit.Outcome]metric.MeasurementOption {
	m := make(map[audit.Outcome]metric.MeasurementOption, len(audit.Outcomes))
	for _, o := range audit.Outcomes {
		m[o] = metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", string(o))))
	}
	return m
}()

func attrOutcome(o audit.Outcome) metric.MeasurementOption { return outcomeAttrs[o] }
func attrReason(r string) attribute.KeyValue               { return attribute.String("reason", r) }
func attrStage(s string) attribute.KeyValue                { return attribute.String("stage", s) }

// registerGauges exposes in-flight requests per endpoint.
func (d *Dispatcher) registerGauges(m metric.Meter) {
	g, err := m.Int64ObservableGauge("hookrelay.endpoint.in_flight",
		metric.WithDescription("HTTP attempts in flight per endpoint."))
	if err != nil {
		return
	}
	_, _ = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		d.limMu.Lock()
		defer d.limMu.Unlock()
		for id, l := range d.limiters {
			o.ObserveInt64(g, int64(l.InFlight()), metric.WithAttributes(attribute.String("endpoint_id", id)))
		}
		return nil
	}, g)
}
