package pipeline

import (
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/pipeline/delivery"
	"github.com/hookrelay/hookrelay/retrytiers"
)

// RetryPolicy decides what follows an attempt: done, a later attempt through
// the delay tiers, or the DLQ. Its Decide is the one place that routes an
// attempt's outcome. Safe for concurrent use (read-only after New).
type RetryPolicy struct {
	schedule   retrytiers.Schedule
	tiers      retrytiers.Tiers
	deliveries string
	// deliveriesTopic, when set, overrides deliveries (generations)
	deliveriesTopic func() string
	dlq             string
	ttl             time.Duration
}

// DefaultQueueTTL is how old an event may be before it is no longer
// attempted: 48 h (seed policy table: queue_ttl 24–72 h).
const DefaultQueueTTL = 48 * time.Hour

// NewRetryPolicy returns the policy for schedule, with tier topics named
// under the prefix of topics. ttl is the queue TTL (0 means
// DefaultQueueTTL), checked before every attempt against the event's time.
func NewRetryPolicy(schedule retrytiers.Schedule, topics Topics, ttl time.Duration) (*RetryPolicy, error) {
	if len(schedule) == 0 {
		return nil, errors.New("pipeline: retry schedule is empty")
	}
	if ttl < 0 {
		return nil, fmt.Errorf("pipeline: queue TTL must be >= 0, got %v", ttl)
	}
	if ttl == 0 {
		ttl = DefaultQueueTTL
	}
	tiers, err := retrytiers.TiersFor(topics.Prefix, schedule)
	if err != nil {
		return nil, err
	}
	return &RetryPolicy{
		schedule:   schedule,
		tiers:      tiers,
		deliveries: topics.Deliveries,
		dlq:        topics.DLQ,
		ttl:        ttl,
	}, nil
}

// Tiers returns the delay tiers, smallest first.
func (p *RetryPolicy) Tiers() retrytiers.Tiers { return p.tiers }

// MinHold is the smallest tier delay: a wait shorter than it is held in the
// dispatcher's memory instead of going through a tier.
func (p *RetryPolicy) MinHold() time.Duration { return p.tiers.Smallest() }

// CapPause limits an endpoint pause (a 429's Retry-After) to the longest
// tier from now, the same cap as a retry's delay: a receiver cannot park its
// deliveries past the queue TTL or pause itself for years.
func (p *RetryPolicy) CapPause(until, now time.Time) time.Time {
	if limit := now.Add(p.schedule.MaxDelay()); until.After(limit) {
		return limit
	}
	return until
}

// Expired reports whether the event of m is older than the queue TTL at now.
func (p *RetryPolicy) Expired(m delivery.Meta, now time.Time) bool {
	return !m.EventTime.IsZero() && now.Sub(m.EventTime) > p.ttl
}

// Decision is where a delivery goes after an attempt.
type Decision struct {
	// Outcome is the attempt's row in the delivery log.
	Outcome audit.Outcome
	// NextAttemptAt is when the next attempt is due; zero unless
	// Outcome is RetryScheduled.
	NextAttemptAt time.Time
	// Topic is where the delivery record goes next (a tier, the deliveries
	// topic for a wait below the smallest tier, or the DLQ); "" when it is
	// done.
	Topic string
	// Meta is the record's headers for Topic.
	Meta delivery.Meta
}

// Decide routes the outcome of attempt m.Attempt that ended at now. u in
// [0,1) draws the jitter (upward only; see retrytiers.Schedule). Rules (seed
// policy table and the retry-tiers issue):
//   - delivered: done;
//   - retryable and attempts left: the schedule's delay for this attempt,
//     or the endpoint's Retry-After when longer (capped at the longest
//     tier), through the tiers;
//   - retryable on the last attempt: exhausted, to the DLQ;
//   - failed, gone, blocked: permanent, to the DLQ (a 410 also disables
//     the endpoint, by way of the dispatcher's health tracker, health.go).
func (p *RetryPolicy) Decide(m delivery.Meta, r *AttemptResult, now time.Time, u float64) Decision {
	next := m
	next.History = append(append([]delivery.AttemptSummary(nil), m.History...), delivery.AttemptSummary{
		Number: m.Attempt, At: r.StartedAt.UTC(), HTTPStatus: r.StatusCode, Outcome: string(r.Outcome), ErrorClass: r.ErrorClass,
	})
	if next.FirstAttemptAt.IsZero() {
		next.FirstAttemptAt = r.StartedAt
	}
	next.LastError = r.ErrorClass
	next.DueAt = time.Time{}
	next.Reason = ""
	switch r.Outcome {
	case audit.Delivered:
		return Decision{Outcome: audit.Delivered}
	case audit.RetryScheduled:
		if m.Attempt >= p.schedule.MaxAttempts() {
			next.Reason = string(audit.Exhausted)
			next.History[len(next.History)-1].Outcome = string(audit.Exhausted)
			return Decision{Outcome: audit.Exhausted, Topic: p.dlq, Meta: next}
		}
		delay, _ := p.schedule.Delay(m.Attempt, retrytiers.DefaultJitter, u)
		if r.RetryAfter > delay {
			delay = min(r.RetryAfter, p.schedule.MaxDelay())
		}
		due := now.Add(delay)
		if pu := p.CapPause(r.PauseUntil, now); pu.After(next.PauseUntil) {
			next.PauseUntil = pu
		}
		next.Attempt = m.Attempt + 1
		next.DueAt = due
		return Decision{Outcome: audit.RetryScheduled, NextAttemptAt: due, Topic: p.hop(due, now), Meta: next}
	default: // failed, gone, blocked: permanent
		next.Reason = string(r.Outcome)
		return Decision{Outcome: r.Outcome, Topic: p.dlq, Meta: next}
	}
}

// hop returns the first topic of the way to due: the largest tier that fits
// the remaining wait, else the deliveries topic (the dispatcher holds the
// rest).
func (p *RetryPolicy) hop(due, now time.Time) string {
	if t, ok := p.tiers.Next(due.Sub(now)); ok {
		return t.Topic
	}
	if p.deliveriesTopic != nil {
		return p.deliveriesTopic()
	}
	return p.deliveries
}

// SetDeliveriesTopic makes the deliveries topic of a wait below the
// smallest tier f's answer at each decision (the newest deliveries
// generation, [Generations.DeliveriesTopic]) instead of Topics.Deliveries.
// Call it before the policy is used; not safe concurrently with Decide.
func (p *RetryPolicy) SetDeliveriesTopic(f func() string) { p.deliveriesTopic = f }

// Park returns the delivery (key, value) moved to a tier without consuming
// an attempt: its endpoint is backlogged or paused until until. The park
// delay is the smallest tier doubled for each time this delivery was parked
// before (m.Parks), capped at the longest tier, and never ends before until
// (itself capped, see CapPause). So a burst to a healthy endpoint comes back
// after the smallest tier, while a delivery of a dead endpoint backs off to
// one re-read per longest tier: N parked deliveries cost at most N re-reads
// per 6 h by default.
func (p *RetryPolicy) Park(m delivery.Meta, key, value []byte, until time.Time, now time.Time) *kgo.Record {
	delay := p.tiers.Smallest()
	for i := 0; i < m.Parks && delay < p.schedule.MaxDelay(); i++ {
		delay *= 2
	}
	delay = min(delay, p.schedule.MaxDelay())
	due := now.Add(delay)
	until = p.CapPause(until, now)
	if until.After(due) {
		due = until
	}
	m.Parks++
	m.DueAt = due
	if until.After(m.PauseUntil) {
		m.PauseUntil = until
	}
	return deliveryRecord(p.hop(due, now), key, value, &m)
}
