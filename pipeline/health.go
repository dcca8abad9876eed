package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/pipeline/endpoints"
	"github.com/hookrelay/hookrelay/pipeline/operational"
	"github.com/hookrelay/hookrelay/pipeline/webhook"
)

// DefaultDisableAfter is how long an endpoint may fail without a success
// before the pipeline disables it: 72 h. The seeds give 24 h (throttling
// seed, policy table, disable_after) and 3 days (job-queue seed, step 5);
// 72 h is chosen because it outlasts both the default retry schedule
// (about 26 h) and the queue TTL (48 h), so no delivery's published retries
// are cut short by a disable, and because a weekend outage (Friday evening
// to Monday morning, about 64 h) should not need a re-enable and a recover
// (the job-queue seed's FAQ: retries "commonly up to three days, so
// customers can recover from weekend outages"). Waiting costs little here:
// a dead endpoint's deliveries are parked with back-off and it delays no
// other endpoint.
const DefaultDisableAfter = 72 * time.Hour

// DefaultFailingNotifyAt are the fractions of the disable window at which a
// repeated failing event is sent: at half and at nine tenths (36 h and
// 64.8 h with the default window), besides the one at the first failure.
var DefaultFailingNotifyAt = []float64{0.5, 0.9}

// HealthOptions configures endpoint health: the failing-since clock, the
// auto-disable and the operational events (issue 11, "Endpoint health";
// seed "Reliable Webhook Delivery with a Job Queue", step 5).
type HealthOptions struct {
	// DisableAfter is how long an endpoint must fail continuously (every
	// counted attempt failing, from the first failure on) before the
	// pipeline disables it with reason "failing". Optional. Default
	// DefaultDisableAfter (72h). It must be > 0.
	DisableAfter time.Duration
	// FailingNotifyAt are fractions of DisableAfter, each in (0, 1) and
	// increasing: when the failure has lasted that long, the next failed
	// attempt sends another failing event. Optional. nil means
	// DefaultFailingNotifyAt; an empty non-nil slice sends none but the
	// first.
	FailingNotifyAt []float64
}

func (o *HealthOptions) validate() error {
	if o.DisableAfter < 0 {
		return fmt.Errorf("pipeline: HealthOptions.DisableAfter must be > 0, got %v", o.DisableAfter)
	}
	if o.DisableAfter == 0 {
		o.DisableAfter = DefaultDisableAfter
	}
	if o.FailingNotifyAt == nil {
		o.FailingNotifyAt = DefaultFailingNotifyAt
	}
	for i, f := range o.FailingNotifyAt {
		if math.IsNaN(f) || f <= 0 || f >= 1 {
			return fmt.Errorf("pipeline: HealthOptions.FailingNotifyAt[%d] must be in (0, 1), got %g", i, f)
		}
		if i > 0 && f <= o.FailingNotifyAt[i-1] {
			return fmt.Errorf("pipeline: HealthOptions.FailingNotifyAt must increase, got %g after %g", f, o.FailingNotifyAt[i-1])
		}
	}
	o.FailingNotifyAt = slices.Clone(o.FailingNotifyAt)
	return nil
}

// healthSignal is what one attempt says about its endpoint's health.
type healthSignal int

const (
	signalNone    healthSignal = iota // says nothing: a 429, a cancelled attempt
	signalSuccess                     // 2xx
	signalFailure                     // a retryable or permanent failure
)

// healthSignalOf classifies an attempt for the failing-since clock: a 2xx
// is a success; a retryable failure (timeout, connection error, 408, 5xx)
// or a permanent one (other 3xx/4xx, 410, blocked) is a failure; a 429
// (the endpoint pacing us, seed: "429s … never count") and an attempt
// cancelled by hookrelay itself say nothing. Deliveries that were never
// attempted (parked, throttled by hookrelay's own pacing, abandoned,
// expired) never reach it.
func healthSignalOf(r *AttemptResult) healthSignal {
	switch {
	case r.Outcome == audit.Delivered:
		return signalSuccess
	case r.StatusCode == 429 || !r.PauseUntil.IsZero() || r.ErrorClass == webhook.ClassCanceled:
		return signalNone
	case r.Outcome == audit.RetryScheduled, r.Outcome == audit.Failed, r.Outcome == audit.Gone, r.Outcome == audit.Blocked:
		return signalFailure
	}
	return signalNone
}

// endpointHealth is the health state of one endpoint. The zero value is a
// healthy endpoint.
type endpointHealth struct {
	failingSince time.Time // first failure without a success since; zero when healthy
	notified     int       // FailingNotifyAt fractions announced so far
	disabled     bool      // the pipeline disabled it, for config version version
	version      int64
}

// healthFrom rebuilds the state from the endpoint's status record (nil:
// none) and its current config version: a pipeline disable that a later
// operator write superseded (an enable, see Endpoint.EffectiveStatus) is
// forgotten with its clock, so after a re-enable the first failure starts a
// new one; the fractions already announced are those the record's At had
// reached (a failing record is written at each announcement).
func (o *HealthOptions) healthFrom(st *endpoints.Status, version int64) endpointHealth {
	if st == nil {
		return endpointHealth{}
	}
	if st.State == endpoints.Disabled {
		if st.ConfigVersion < version {
			return endpointHealth{}
		}
		h := endpointHealth{disabled: true, version: st.ConfigVersion}
		if st.FailingSince != nil {
			h.failingSince = *st.FailingSince
		}
		return h
	}
	if st.FailingSince == nil {
		return endpointHealth{}
	}
	h := endpointHealth{failingSince: *st.FailingSince}
	h.notified = o.reached(st.At.Sub(h.failingSince))
	return h
}

// reached is the number of FailingNotifyAt fractions that elapsed covers.
func (o *HealthOptions) reached(elapsed time.Duration) int {
	n := 0
	for _, f := range o.FailingNotifyAt {
		if elapsed >= time.Duration(f*float64(o.DisableAfter)) {
			n++
		}
	}
	return n
}

// healthChange is what one transition writes: the endpoint's new status
// record (nil: none) and the operational events.
type healthChange struct {
	status *endpoints.Status
	events []healthEvent
}

type healthEvent struct {
	typ  string
	data operational.Data
}

// attemptFacts is what the state machine knows of one attempt besides its
// signal: the endpoint's config version, whether it answered 410, and its
// error class and a detail for people.
type attemptFacts struct {
	version    int64
	gone       bool
	errorClass string
	detail     string
}

// step is the failing-since clock: the pure transition of h on one
// attempt's signal at now (issue 11, "Endpoint health"):
//
//   - a success while failing: recovered; the clock clears;
//   - the first failure after a success: failing; the clock starts at now;
//   - a failure once the clock has run DisableAfter: disabled, reason
//     failing, for the attempt's config version;
//   - a failure once it has run the next FailingNotifyAt fraction: failing
//     again, with that fraction;
//   - a 410: disabled, reason gone, at once;
//   - anything on a disabled endpoint (attempts that were in flight), and
//     signalNone: nothing.
//
// Only transitions write; an attempt that changes nothing returns a zero
// healthChange.
func (o *HealthOptions) step(h endpointHealth, sig healthSignal, f attemptFacts, now time.Time) (endpointHealth, healthChange) {
	if h.disabled || sig == signalNone {
		return h, healthChange{}
	}
	at := now.UTC().Truncate(time.Millisecond)
	if sig == signalSuccess {
		if h.failingSince.IsZero() {
			return h, healthChange{}
		}
		since := h.failingSince
		return endpointHealth{}, healthChange{
			status: &endpoints.Status{State: endpoints.Active, Reason: "recovered", At: at},
			events: []healthEvent{{operational.TypeEndpointRecovered, operational.Data{FailingSince: &since}}},
		}
	}
	since := h.failingSince
	first := since.IsZero()
	if first {
		since = at
	}
	elapsed := at.Sub(since)
	if f.gone || elapsed >= o.DisableAfter {
		reason, detail := endpoints.ReasonFailing, fmt.Sprintf("failing since %s (%s); last: %s", since.Format(time.RFC3339), elapsed.Round(time.Second), f.detail)
		if f.gone {
			reason, detail = endpoints.ReasonGone, f.detail
		}
		st := &endpoints.Status{State: endpoints.Disabled, Reason: reason, Detail: truncateText(detail, endpoints.MaxStatusDetail),
			At: at, ConfigVersion: f.version, FailingSince: &since}
		return endpointHealth{failingSince: since, disabled: true, version: f.version}, healthChange{
			status: st,
			events: []healthEvent{{operational.TypeEndpointDisabled, operational.Data{FailingSince: &since, Reason: reason, Detail: st.Detail}}},
		}
	}
	n := o.reached(elapsed)
	if !first && n <= h.notified {
		return h, healthChange{}
	}
	disableAt := since.Add(o.DisableAfter)
	d := operational.Data{FailingSince: &since, Reason: f.errorClass, Detail: f.detail, DisableAt: &disableAt}
	if !first {
		d.WindowFraction = o.FailingNotifyAt[n-1]
	}
	return endpointHealth{failingSince: since, notified: n}, healthChange{
		status: &endpoints.Status{State: endpoints.Active, Reason: "failing", Detail: truncateText(f.detail, endpoints.MaxStatusDetail), At: at, FailingSince: &since},
		events: []healthEvent{{operational.TypeEndpointFailing, d}},
	}
}

func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// healthTracker holds the failing-since clock of every endpoint this
// dispatcher has attempted. An endpoint's deliveries live in one partition
// of the deliveries topic (keyed by endpoint ID), so one dispatcher owns an
// endpoint at a time; its state survives restarts and partition moves in
// the endpoint-status topic, from which an entry is rebuilt when the record
// there is newer than the last one this tracker wrote (another owner wrote
// since) or an operator write superseded its disable. Safe for concurrent
// use; lock order: healthTracker.mu, then Dispatcher.doneMu.
type healthTracker struct {
	o  HealthOptions
	mu sync.Mutex
	ep map[string]*trackedHealth
}

type trackedHealth struct {
	h     endpointHealth
	wrote *endpoints.Status // the last status record written (nil: none)
}

func newHealthTracker(o HealthOptions) (*healthTracker, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	return &healthTracker{o: o, ep: make(map[string]*trackedHealth)}, nil
}

// current returns the tracked entry of ep, rebuilt from its status record
// when that is newer than what this tracker wrote. Called with mu held.
func (t *healthTracker) current(ep *endpoints.Endpoint) *trackedHealth {
	e := t.ep[ep.ID]
	cur := ep.PipelineStatus
	switch {
	case e == nil:
	case cur != nil && (e.wrote == nil || cur.At.After(e.wrote.At)):
	case e.h.disabled && ep.Version > e.h.version:
	default:
		return e
	}
	e = &trackedHealth{h: t.o.healthFrom(cur, ep.Version)}
	if cur != nil {
		c := *cur
		e.wrote = &c
	}
	t.ep[ep.ID] = e
	return e
}

// overlay returns ep with the status this tracker wrote last when that is
// a disable the endpoints view has not applied yet, so the deliveries
// still queued are abandoned at once rather than attempted until the view
// catches up. ep itself is shared and never modified.
func (t *healthTracker) overlay(ep *endpoints.Endpoint) *endpoints.Endpoint {
	t.mu.Lock()
	e := t.ep[ep.ID]
	var st *endpoints.Status
	if e != nil && e.wrote != nil && e.wrote.State == endpoints.Disabled &&
		(ep.PipelineStatus == nil || e.wrote.At.After(ep.PipelineStatus.At)) {
		st = e.wrote
	}
	t.mu.Unlock()
	if st == nil {
		return ep
	}
	c := *ep
	c.PipelineStatus = st
	return &c
}

// healthSource is the dispatcher's EndpointSource: the configured one, with
// the tracker's own unapplied disables laid over it.
type healthSource struct {
	EndpointSource
	t *healthTracker
}

func (s healthSource) Get(id string) (*endpoints.Endpoint, bool) {
	ep, ok := s.EndpointSource.Get(id)
	if !ok || ep == nil {
		return ep, ok
	}
	return s.t.overlay(ep), true
}

// observeHealth feeds one attempt's result to the failing-since clock and,
// on a transition, queues the endpoint's new status record and its
// operational events for the dispatcher's next transaction (together, so
// they commit or abort as one). They are tied to no delivery offset: they
// record attempts that happened, whatever becomes of the delivery, and
// staying in one queue keeps one endpoint's records in the order they were
// decided. Called by attempt goroutines.
func (d *Dispatcher) observeHealth(ep *endpoints.Endpoint, r *AttemptResult, now time.Time) {
	sig := healthSignalOf(r)
	if sig == signalNone {
		return
	}
	f := attemptFacts{version: ep.Version, gone: r.Outcome == audit.Gone, errorClass: r.ErrorClass}
	if sig == signalFailure {
		host := "the endpoint"
		if u, err := url.Parse(ep.URL); err == nil {
			host = u.Host // never the query or userinfo (webhook.RedactURL's rule)
		}
		switch {
		case r.StatusCode > 0:
			f.detail = fmt.Sprintf("%d from %s", r.StatusCode, host)
		case r.ErrorClass != "":
			f.detail = fmt.Sprintf("%s from %s", r.ErrorClass, host)
		}
	}
	t := d.health
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.current(ep)
	h, ch := t.o.step(e.h, sig, f, now)
	e.h = h
	if ch.status == nil {
		return
	}
	recs, err := d.healthRecords(ep, ch)
	if err != nil {
		d.o.Logger.Error("dispatch: endpoint health not recorded", "endpoint", ep.ID, "err", err)
		return
	}
	e.wrote = ch.status
	level := d.o.Logger.Info
	if ch.status.State == endpoints.Disabled {
		level = d.o.Logger.Warn
	}
	level("dispatch: endpoint health", "endpoint", ep.ID, "state", ch.status.State, "reason", ch.status.Reason,
		"failing_since", ch.status.FailingSince, "detail", ch.status.Detail)
	d.doneMu.Lock()
	d.loose = append(d.loose, recs...)
	d.doneMu.Unlock()
}

// healthRecords encodes a transition: the status record, then its events.
func (d *Dispatcher) healthRecords(ep *endpoints.Endpoint, ch healthChange) ([]*kgo.Record, error) {
	if err := ch.status.Validate(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(ch.status)
	if err != nil {
		return nil, err
	}
	recs := []*kgo.Record{{Topic: d.o.Topics.EndpointStatus, Key: []byte(ep.ID), Value: b}}
	for _, he := range ch.events {
		he.data.EndpointID = ep.ID
		ev, err := operational.New(he.typ, ep.TenantID, ch.status.At, he.data)
		if err != nil {
			return nil, err
		}
		r, err := OperationalRecord(d.o.Topics, ev)
		if err != nil {
			return nil, err
		}
		recs = append(recs, r)
	}
	return recs, nil
}

// OperationalRecord is ev as a record of topics.Operational: keyed by the
// endpoint ID, structured-mode CloudEvents JSON with its content-type
// header, ready to produce (OperatorEvents, shared by the REST API and the
// CLI, uses it for the events they cause: enabled, disabled by an
// operator, secret rotated). Fan-out
// delivers it to the subscribed endpoints of the event's tenant, never to
// the endpoint it is about.
func OperationalRecord(topics Topics, ev operational.Event) (*kgo.Record, error) {
	if topics.Operational == "" {
		return nil, errors.New("pipeline: Topics.Operational is not set")
	}
	v, err := ev.Value()
	if err != nil {
		return nil, err
	}
	return &kgo.Record{Topic: topics.Operational, Key: ev.Key(), Value: v,
		Headers: []kgo.RecordHeader{{Key: "content-type", Value: []byte(operational.ContentType)}}}, nil
}
