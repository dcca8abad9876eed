package pipeline

import (
	"context"
	"net/url"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/pipeline/delivery"
	"github.com/hookrelay/hookrelay/pipeline/endpoints"
	"github.com/hookrelay/hookrelay/ratelimit"
)

// park finishes it by moving it to a tier (see RetryPolicy.Park), through
// done: finish on the poll loop, complete elsewhere.
func (d *Dispatcher) park(p *partState, it *item, reason string, until, now time.Time, done func(*partState, int64, []*kgo.Record)) {
	out := d.o.Policy.Park(it.meta, it.key, it.value, until, now)
	d.m.parked.Add(context.Background(), 1, attrParkReason(reason))
	done(p, it.off, []*kgo.Record{out})
}

// parkBusy finishes it by moving it to a tier because its endpoint's queue
// q is busy (reason: one of busyParkReasons), due back at the slot
// [busyPacer.reserve] gives it behind the queued deliveries of q (see busy
// parks in dispatch_park.go), through done as for park.
func (d *Dispatcher) parkBusy(p *partState, it *item, q *endpointQueue, queued int, reason string, now time.Time, done func(*partState, int64, []*kgo.Record)) {
	due := d.pacer.reserve(q.id, q.lim.Limit(), queued, now, d.o.Policy.MinHold(), d.o.Policy.schedule.MaxDelay())
	out := d.o.Policy.ParkBusy(it.meta, it.key, it.value, due, now)
	d.m.parked.Add(context.Background(), 1, attrParkReason(reason))
	done(p, it.off, []*kgo.Record{out})
}

// limiter returns the pacing state of ep, created on first use and updated
// when the endpoint's limits change.
func (d *Dispatcher) limiter(ep *endpoints.Endpoint) (*ratelimit.Endpoint, error) {
	want := ratelimit.Limit{RatePerSec: ep.RatePerSec, MaxInFlight: ep.MaxInFlight}
	d.limMu.Lock()
	defer d.limMu.Unlock()
	lim := d.limiters[ep.ID]
	if lim == nil {
		l, err := ratelimit.New(want)
		if err != nil {
			return nil, err
		}
		d.limiters[ep.ID] = l
		return l, nil
	}
	if cur := lim.Limit(); cur != want {
		if err := lim.SetLimit(want, d.now()); err != nil {
			return nil, err
		}
	}
	return lim, nil
}

// finish reports a delivery finished without an attempt in flight. It runs
// on the poll loop, which owns the tracker.
func (d *Dispatcher) finish(p *partState, off int64, out []*kgo.Record) {
	p.tracker.done(off)
	for _, r := range out {
		p.out = append(p.out, outRecord{off, r})
	}
}

// complete is finish for attempt goroutines: the poll loop applies it at
// its next flush.
func (d *Dispatcher) complete(p *partState, off int64, out []*kgo.Record) {
	d.doneMu.Lock()
	d.done = append(d.done, completion{p: p, off: off, out: out})
	d.doneMu.Unlock()
}

// attemptRows returns the records of recs that are attempt rows.
func (d *Dispatcher) attemptRows(recs []*kgo.Record) []*kgo.Record {
	var rows []*kgo.Record
	for _, r := range recs {
		if r.Topic == d.o.Topics.Attempts {
			rows = append(rows, r)
		}
	}
	return rows
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

// attemptRecord is a as a record of the attempts topic, keyed by endpoint
// ID like its Sending row (so both land on one partition, in order): a
// one-element slice, or none if a does not encode (logged).
func (d *Dispatcher) attemptRecord(a *audit.Attempt) []*kgo.Record {
	b, err := d.o.AttemptFormat.Encode(a)
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
	// The delivery's first attempt, for time to success (attempts_by_number);
	// attempt 1 has none in its metadata yet: it is this one.
	a.FirstAttemptAt = it.meta.FirstAttemptAt.UTC().Truncate(time.Millisecond)
	if it.meta.FirstAttemptAt.IsZero() {
		a.FirstAttemptAt = a.AttemptedAt
	}
	if ep != nil {
		if u, err := url.Parse(ep.URL); err == nil {
			a.URLHost = u.Host
		}
	}
	return a
}
