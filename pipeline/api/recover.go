package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/pipeline"
	"github.com/hookrelay/hookrelay/pipeline/delivery"
	"github.com/hookrelay/hookrelay/pipeline/endpoints"
)

// Recoveries is the table of recovery records: the compacted
// `<prefix>recoveries` topic, keyed by recovery ID, read by every api
// replica. Safe for concurrent use.
type Recoveries struct{ t *table }

// NewRecoveries returns the recovery table of topic.
func NewRecoveries(topic string, clientOpts []kgo.Opt, log *slog.Logger) *Recoveries {
	if log == nil {
		log = slog.Default()
	}
	return &Recoveries{t: newTable(topic, clientOpts, log)}
}

// Run reads the topic until ctx ends.
func (rs *Recoveries) Run(ctx context.Context) error { return rs.t.Run(ctx) }

// recovery is one recovery's record.
type recovery struct {
	ID            string      `json:"id"`
	EndpointID    string      `json:"endpoint_id"`
	Tenant        string      `json:"tenant,omitempty"` // the endpoint's tenant when it was made
	Since         time.Time   `json:"since"`
	Until         *time.Time  `json:"until,omitempty"`
	IncludeFailed bool        `json:"include_failed"`
	CreatedAt     time.Time   `json:"created_at"`
	Found         int         `json:"found"`
	Resends       []resendRef `json:"resends"`
}

type resendRef struct {
	WebhookID string `json:"webhook_id"`
	ResendID  string `json:"resend_id"`
}

// recoverReasons are the DLQ reasons a recovery resends (issue 11:
// abandoned, skipped, exhausted, expired; failed, a permanent 4xx, only
// when asked).
var recoverReasons = map[string]bool{
	string(audit.Abandoned): true, string(audit.Skipped): true, string(audit.Exhausted): true, string(audit.Expired): true,
}

// MaxRecoverRange is how far back a recovery's since may reach: 7 days,
// the events topic's retention (pipeline/topics.go). An older since is
// refused (400 naming since): the events it names are gone, and reading
// more would only cost the brokers and the delivery log.
const MaxRecoverRange = 7 * 24 * time.Hour

// deliveredGrace is how long after a recovery's until a delivered attempt
// still marks a message of the range as delivered (a message retried just
// past until).
const deliveredGrace = time.Hour

// MaxConcurrentRecoveries is how many recoveries one process runs at once
// (each reads the DLQ, the events topic and the delivery log); at most one
// per endpoint. More get 429 with Retry-After: recoverRetryAfter.
const MaxConcurrentRecoveries = 2

const recoverRetryAfter = 10 * time.Second

var probTooManyRecoveries = Problem{Type: "/problems/too-many-recoveries", Status: http.StatusTooManyRequests, Title: "Too many recoveries are running"}

// recoveryLimiter admits at most one running recovery per endpoint and
// MaxConcurrentRecoveries in all. The zero value is ready; safe for
// concurrent use.
type recoveryLimiter struct {
	mu      sync.Mutex
	running map[string]bool // endpoint ID
}

// acquire admits a recovery of endpoint id and returns its release, or
// why it is not admitted (non-empty busy).
func (l *recoveryLimiter) acquire(id string) (release func(), busy string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.running[id]:
		return nil, fmt.Sprintf("a recovery of endpoint %s is running: try again when it has finished", id)
	case len(l.running) >= MaxConcurrentRecoveries:
		return nil, fmt.Sprintf("%d recoveries are running (at most %d at once): try again later", len(l.running), MaxConcurrentRecoveries)
	}
	if l.running == nil {
		l.running = map[string]bool{}
	}
	l.running[id] = true
	return func() {
		l.mu.Lock()
		delete(l.running, id)
		l.mu.Unlock()
	}, ""
}

// admitRecovery checks a recovery's range (since within MaxRecoverRange,
// until after since) and admits it past s.recov, or answers the request
// (400 naming the field, 429 with Retry-After) and returns false.
func (s *Server) admitRecovery(w http.ResponseWriter, r *http.Request, e *endpoints.Endpoint, since, until time.Time) (func(), bool) {
	if oldest := s.o.Now().Add(-MaxRecoverRange); since.Before(oldest) {
		writeProblem(w, r, probValidation, fmt.Sprintf("since is older than the events topic's retention (%v): nothing before %s can be recovered from it",
			MaxRecoverRange, oldest.UTC().Format(time.RFC3339)), FieldDetail{"since", fmt.Sprintf("must be within the last %v", MaxRecoverRange)})
		return nil, false
	}
	if !until.IsZero() && !until.After(since) {
		writeProblem(w, r, probValidation, "until must be after since", FieldDetail{"until", "must be after since"})
		return nil, false
	}
	release, busy := s.recov.acquire(e.ID)
	if busy != "" {
		w.Header().Set("Retry-After", strconv.Itoa(int(recoverRetryAfter/time.Second)))
		writeProblem(w, r, probTooManyRecoveries, busy)
		return nil, false
	}
	return release, true
}

// recoverEndpoint answers POST /v1/endpoints/{id}/recover: every message of
// the endpoint in [since, until), from its newest DLQ record or, without
// one, from its event in the events topic (Resender.candidates), that is
// not pending and is recoverable (Server.recoverable) is resent once (as
// resendMessage does), and the recovery is recorded.
func (s *Server) recoverEndpoint(w http.ResponseWriter, r *http.Request, p Principal) {
	e, ok := s.lookup(w, r, p)
	if !ok {
		return
	}
	if s.o.Resender == nil || s.o.Recoveries == nil {
		writeProblem(w, r, probUnavailable, "recovery is not configured in this process")
		return
	}
	var req struct {
		Since         string `json:"since"`
		Until         string `json:"until"`
		IncludeFailed bool   `json:"include_failed"`
	}
	if !decode(w, r, &req, false) {
		return
	}
	since, until, bad := parseTimes(req.Since, req.Until, true, s.o.Now())
	if len(bad) > 0 {
		writeProblem(w, r, probValidation, "invalid fields", bad...)
		return
	}
	release, ok := s.admitRecovery(w, r, e, since, until)
	if !ok {
		return
	}
	defer release()
	ctx := r.Context()
	delivered, err := s.deliveredSince(ctx, e, since.Add(-time.Minute), until)
	if err != nil {
		s.unavailable(w, r, err)
		return
	}
	order, latest, err := s.o.Resender.candidates(ctx, e, since, until, delivered)
	if errors.Is(err, errTooMany) {
		writeProblem(w, r, probValidation, fmt.Sprintf("more than %d messages in the range: narrow since/until", maxReplay), FieldDetail{"until", "the range holds too many messages"})
		return
	}
	if err != nil {
		s.unavailable(w, r, err)
		return
	}
	queued, err := s.o.Resender.queued(ctx, e)
	if err != nil {
		s.unavailable(w, r, err)
		return
	}
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	rec := recovery{ID: "rc_" + hex.EncodeToString(b[:]), EndpointID: e.ID, Tenant: e.TenantID, Since: since, IncludeFailed: req.IncludeFailed,
		CreatedAt: s.o.Now().UTC(), Resends: []resendRef{}}
	if !until.IsZero() {
		rec.Until = &until
	}
	var todo []string
	for _, id := range order {
		if queued[id] {
			continue // still on its way: the dispatcher sends it
		}
		ok, err := s.recoverable(ctx, e, id, headerOf(latest[id], delivery.HeaderReason), req.IncludeFailed)
		if err != nil {
			s.unavailable(w, r, err)
			return
		}
		if ok {
			todo = append(todo, id)
		}
	}
	rec.Found = len(todo)
	for _, id := range todo {
		rid, _, err := s.o.Resender.resend(ctx, e, latest[id])
		if err != nil {
			s.o.Logger.Error("api: recover", "endpoint", e.ID, "webhook_id", id, "err", err)
			break // the record below says how many were queued
		}
		rec.Resends = append(rec.Resends, resendRef{id, rid})
	}
	body, _ := json.Marshal(rec)
	if err := s.o.Recoveries.t.put(context.WithoutCancel(ctx), rec.ID, body); err != nil {
		s.unavailable(w, r, err)
		return
	}
	if len(rec.Resends) < rec.Found {
		writeProblem(w, r, probUnavailable, fmt.Sprintf("recovery %s stopped after %d of %d messages", rec.ID, len(rec.Resends), rec.Found))
		return
	}
	w.Header().Set("Location", "/v1/recoveries/"+rec.ID)
	writeJSON(w, http.StatusAccepted, map[string]any{"id": rec.ID, "endpoint_id": e.ID, "found": rec.Found, "queued": len(rec.Resends)})
}

// recoverable reports whether message id of endpoint e is to be resent:
// it has no delivered attempt in the log (e.g. by an earlier resend or
// recovery), its newest attempt is not one whose delivery goes on
// (retry_scheduled, interrupted: pending), and its reason is one recovery
// resends (recoverReasons; failed only with includeFailed). The reason is
// dlqReason, that of its newest DLQ record; without one (a message found
// only in the events topic) the outcome of its newest attempt, and a
// message with no trace at all is recovered.
func (s *Server) recoverable(ctx context.Context, e *endpoints.Endpoint, id, dlqReason string, includeFailed bool) (bool, error) {
	q := logQuery(e)
	q.WebhookID, q.Limit = id, 1
	newest, err := s.o.Attempts.Log(ctx, q)
	if err != nil {
		return false, err
	}
	q.Outcomes = []audit.Outcome{audit.Delivered}
	delivered, err := s.o.Attempts.Log(ctx, q)
	if err != nil || len(delivered) > 0 {
		return false, err
	}
	reason := dlqReason
	if len(newest) > 0 {
		switch o := newest[0].Outcome; {
		case o == audit.RetryScheduled || o == audit.Interrupted:
			return false, nil
		case reason == "":
			reason = string(o)
		}
	} else if reason == "" {
		return true, nil // no trace but its event: never attempted, never recorded
	}
	return recoverReasons[reason] || (includeFailed && reason == string(audit.Failed)), nil
}

// finalFailures are the outcomes that end a delivery without success.
var finalFailures = map[audit.Outcome]bool{audit.Failed: true, audit.Gone: true, audit.Blocked: true, audit.Abandoned: true,
	audit.Exhausted: true, audit.Expired: true, audit.Skipped: true, audit.ConfigError: true}

// getRecovery answers GET /v1/recoveries/{id}: the record, with delivered
// and failed counted from the newest attempt of each resent delivery.
func (s *Server) getRecovery(w http.ResponseWriter, r *http.Request, p Principal) {
	if s.o.Recoveries == nil {
		writeProblem(w, r, probUnavailable, "recovery is not configured in this process")
		return
	}
	id := r.PathValue("id")
	row, ok, err := s.o.Recoveries.t.get(r.Context(), id)
	if err != nil {
		s.unavailable(w, r, err)
		return
	}
	var rec recovery
	if !ok || json.Unmarshal(row.value, &rec) != nil || (!p.Admin && rec.Tenant != p.Tenant) {
		writeProblem(w, r, probNotFound, fmt.Sprintf("no recovery %q", id))
		return
	}
	if e, err := s.o.Endpoints.Get(r.Context(), rec.EndpointID); err == nil && !visible(p, e) {
		writeProblem(w, r, probNotFound, fmt.Sprintf("no recovery %q", id))
		return
	}
	delivered, failed := 0, 0
	for _, rs := range rec.Resends {
		// The resends carry the tenant the recovery was made for (its
		// endpoint's then), so their attempts are that tenant's rows.
		as, err := s.o.Attempts.Log(r.Context(), audit.Query{EndpointID: rec.EndpointID, Tenant: &rec.Tenant, DeliveryID: rs.ResendID, Limit: 1})
		if err != nil {
			s.unavailable(w, r, err)
			return
		}
		switch {
		case len(as) == 0:
		case as[0].Outcome == audit.Delivered:
			delivered++
		case finalFailures[as[0].Outcome]:
			failed++
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": rec.ID, "endpoint_id": rec.EndpointID, "since": rec.Since, "until": rec.Until,
		"include_failed": rec.IncludeFailed, "created_at": rec.CreatedAt, "found": rec.Found, "queued": len(rec.Resends),
		"delivered": delivered, "failed": failed, "resends": rec.Resends})
}

// deliveredSince returns the messages of endpoint e with a delivered
// attempt in [since, until+deliveredGrace) (until zero: up to now), read
// from the delivery log a page (MaxLimit rows) at a time, so that a
// recovery over a busy range neither counts them against maxReplay nor
// asks the log about each. The grace covers a message of the range
// delivered shortly after it; the range itself is at most MaxRecoverRange.
func (s *Server) deliveredSince(ctx context.Context, e *endpoints.Endpoint, since, until time.Time) (map[string]bool, error) {
	out := map[string]bool{}
	q := logQuery(e)
	q.Outcomes, q.Since, q.Limit = []audit.Outcome{audit.Delivered}, since, audit.MaxLimit
	if !until.IsZero() {
		q.Until = until.Add(deliveredGrace)
	}
	for {
		page, err := s.o.Attempts.Log(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, a := range page {
			out[a.WebhookID] = true
		}
		if len(page) < q.Limit {
			return out, nil
		}
		q.Before = audit.CursorOf(page[len(page)-1])
	}
}

// candidates returns the messages a recovery of endpoint e over [since,
// until) considers, but those in delivered, in the order first seen, each with the record to resend
// it from: its newest DLQ record (newestDLQ), or, for a message without
// one, the delivery fan-out makes of its event (pipeline.Rematch over the
// events topic from since: the endpoint's current filter and tenant, never
// another tenant's event, the same webhook-id and body). Events older than
// the endpoint (its CreatedAt) were never its, and events fan-out has not
// read yet (at or after its committed offset) are on their way: neither is
// a candidate. More than maxReplay messages is errTooMany.
func (s *Resender) candidates(ctx context.Context, e *endpoints.Endpoint, since, until time.Time, delivered map[string]bool) ([]string, map[string]*kgo.Record, error) {
	order, latest, err := s.newestDLQ(ctx, e, since, until, delivered, maxReplay)
	if err != nil || s.o.Events == "" {
		return order, latest, err
	}
	from := since
	if e.CreatedAt.After(from) {
		from = e.CreatedAt
	}
	spans, err := s.spans(ctx, s.o.Events, "", from, until)
	if err != nil {
		return nil, nil, err
	}
	if err := s.after(ctx, s.o.FanoutGroup, s.o.Events, spans, true); err != nil {
		return nil, nil, err
	}
	err = s.scan(ctx, s.o.Events, spans, func(r *kgo.Record) bool {
		if !inRange(r, from, until) {
			return true
		}
		m, body, ok := pipeline.Rematch(r, e, s.o.MaxEventBytes)
		if !ok || latest[m.WebhookID] != nil || delivered[m.WebhookID] {
			return true
		}
		order = append(order, m.WebhookID)
		latest[m.WebhookID] = &kgo.Record{Key: []byte(e.ID), Value: body, Headers: m.Headers(), Timestamp: r.Timestamp}
		return len(order) <= maxReplay
	})
	if err == nil && len(order) > maxReplay {
		err = errTooMany
	}
	return order, latest, err
}

// queued returns the messages of endpoint e still waiting in a
// deliveries topic: keyed by e's ID at or after the dispatcher's committed
// offset of e's partition, in every live generation (nil without
// ResenderOptions.DispatchGroup). Recovery resends none of them: the
// dispatcher will.
func (s *Resender) queued(ctx context.Context, e *endpoints.Endpoint) (map[string]bool, error) {
	if s.o.DispatchGroup == "" {
		return nil, nil
	}
	if err := s.awaitGenerations(ctx); err != nil {
		return nil, err
	}
	queues := []Queue{{Topic: s.o.Deliveries, Group: s.o.DispatchGroup}}
	if s.queues != nil {
		queues = s.queues()
	}
	out := map[string]bool{}
	for _, q := range queues {
		spans, err := s.spans(ctx, q.Topic, e.ID, time.Time{}, time.Time{})
		if err != nil {
			return nil, err
		}
		if err := s.after(ctx, q.Group, q.Topic, spans, false); err != nil {
			return nil, err
		}
		err = s.scan(ctx, q.Topic, spans, func(r *kgo.Record) bool {
			if string(r.Key) == e.ID {
				out[headerOf(r, delivery.HeaderWebhookID)] = true
			}
			return true
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// after narrows spans of topic to the part group has (before, true) or has
// not (false) committed past: [start, committed) or [committed, end). A
// partition without a commit has committed nothing. group "" leaves spans
// as they are.
func (s *Resender) after(ctx context.Context, group, topic string, spans map[int32]span, before bool) error {
	if group == "" {
		return nil
	}
	offs, err := kadm.NewClient(s.cl).FetchOffsets(ctx, group)
	if err == nil {
		err = offs.Error()
	}
	if err != nil {
		return fmt.Errorf("api: offsets of group %s: %w", group, err)
	}
	for p, sp := range spans {
		committed := int64(0)
		if o, ok := offs.Lookup(topic, p); ok && o.At >= 0 {
			committed = o.At
		}
		if before {
			sp.end = min(sp.end, committed)
		} else {
			sp.start = max(sp.start, committed)
		}
		if sp.start >= sp.end {
			delete(spans, p)
		} else {
			spans[p] = sp
		}
	}
	return nil
}
