package api

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/pipeline/delivery"
	"github.com/hookrelay/hookrelay/pipeline/endpoints"
)

// Limits of the DLQ resources.
const (
	DefaultDLQWindow = 24 * time.Hour // GET /v1/dlq without since: the last day
	maxDLQList       = 1000           // records per GET /v1/dlq
	maxReplay        = 10000          // messages per POST /v1/dlq/replay
)

// dlqEntry is one DLQ record as GET /v1/dlq shows it (schema DLQRecord).
type dlqEntry struct {
	EndpointID string    `json:"endpoint_id"`
	WebhookID  string    `json:"webhook_id"`
	DeliveryID string    `json:"delivery_id"`
	EventID    string    `json:"event_id,omitempty"`
	EventType  string    `json:"event_type,omitempty"`
	Reason     string    `json:"reason"`
	LastError  string    `json:"last_error,omitempty"`
	Attempts   int       `json:"attempts"`
	At         time.Time `json:"at"`
	Partition  int32     `json:"partition"`
	Offset     int64     `json:"offset"`
}

// dlqOf reports whether DLQ record r is one of endpoint e's now: keyed by
// e's ID and made for e's current tenant (its delivery.HeaderTenant, ""
// for none, equal to e.TenantID). An endpoint ID can change tenant over
// time (an admin's change of tenantid, an ID deleted and re-created for
// another tenant), and the DLQ keeps the earlier tenant's records for 30
// days: they are not the endpoint's any more, for any caller. Every scan of
// the DLQ for an endpoint (list, resend, replay, recover) uses it.
func dlqOf(r *kgo.Record, e *endpoints.Endpoint) bool {
	return string(r.Key) == e.ID && headerOf(r, delivery.HeaderTenant) == e.TenantID
}

// dlqVisible reports whether p may see DLQ record r in a list not scoped to
// one endpoint: an admin every record (the whole topic, deleted endpoints'
// and earlier tenants' records included), a tenant key those of an endpoint
// it sees now that are that endpoint's (dlqOf).
func (s *Server) dlqVisible(p Principal, r *kgo.Record) bool {
	if p.Admin {
		return true
	}
	e, ok := s.o.Endpoints.View().Get(string(r.Key))
	return ok && visible(p, e) && dlqOf(r, e)
}

// parseTimes parses since (default: DefaultDLQWindow ago, or required) and
// until (default: none) of a query or body.
func parseTimes(since, until string, sinceRequired bool, now time.Time) (time.Time, time.Time, []FieldDetail) {
	var bad []FieldDetail
	var s, u time.Time
	var err error
	switch {
	case since != "":
		if s, err = time.Parse(time.RFC3339Nano, since); err != nil {
			bad = append(bad, FieldDetail{"since", "must be an RFC 3339 date-time"})
		}
	case sinceRequired:
		bad = append(bad, FieldDetail{"since", "required"})
	default:
		s = now.Add(-DefaultDLQWindow)
	}
	if until != "" {
		if u, err = time.Parse(time.RFC3339Nano, until); err != nil {
			bad = append(bad, FieldDetail{"until", "must be an RFC 3339 date-time"})
		}
	}
	return s, u, bad
}

func inRange(r *kgo.Record, since, until time.Time) bool {
	return !r.Timestamp.Before(since) && (until.IsZero() || r.Timestamp.Before(until))
}

func (s *Server) listDLQ(w http.ResponseWriter, r *http.Request, p Principal) {
	if s.o.Resender == nil {
		writeProblem(w, r, probUnavailable, "the DLQ is not configured in this process")
		return
	}
	q := r.URL.Query()
	since, until, bad := parseTimes(q.Get("since"), q.Get("until"), false, s.o.Now())
	limit := 100
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxDLQList {
			bad = append(bad, FieldDetail{"limit", fmt.Sprintf("must be 1 to %d", maxDLQList)})
		}
		limit = n
	}
	if len(bad) > 0 {
		writeProblem(w, r, probValidation, "invalid query parameters", bad...)
		return
	}
	ep := q.Get("endpoint_id")
	var e *endpoints.Endpoint
	if ep != "" {
		var err error
		e, err = s.o.Endpoints.Get(r.Context(), ep)
		if err != nil || !visible(p, e) {
			writeProblem(w, r, probNotFound, fmt.Sprintf("no endpoint %q", ep))
			return
		}
	}
	msg := q.Get("webhook_id")
	var out []dlqEntry
	truncated := false
	err := s.o.Resender.scanDLQ(r.Context(), e, since, until, func(rec *kgo.Record) bool {
		if (e == nil && !s.dlqVisible(p, rec)) || (msg != "" && headerOf(rec, delivery.HeaderWebhookID) != msg) {
			return true
		}
		if len(out) == limit {
			truncated = true
			return false
		}
		m, _ := delivery.ParseMeta(rec.Headers) // a malformed record is listed with what it has
		out = append(out, dlqEntry{EndpointID: string(rec.Key), WebhookID: m.WebhookID, DeliveryID: m.DeliveryID, EventID: m.EventID,
			EventType: m.EventType, Reason: m.Reason, LastError: m.LastError, Attempts: len(m.History), At: rec.Timestamp.UTC(),
			Partition: rec.Partition, Offset: rec.Offset})
		return true
	})
	if err != nil {
		s.unavailable(w, r, err)
		return
	}
	slices.SortFunc(out, func(a, b dlqEntry) int {
		return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
	})
	if out == nil {
		out = []dlqEntry{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": out, "truncated": truncated})
}

func (s *Server) replayDLQ(w http.ResponseWriter, r *http.Request, p Principal) {
	if s.o.Resender == nil {
		writeProblem(w, r, probUnavailable, "the DLQ is not configured in this process")
		return
	}
	var req struct {
		EndpointID string `json:"endpoint_id"`
		Since      string `json:"since"`
		Until      string `json:"until"`
	}
	if !decode(w, r, &req, false) {
		return
	}
	since, until, bad := parseTimes(req.Since, req.Until, true, s.o.Now())
	if req.EndpointID == "" {
		bad = append(bad, FieldDetail{"endpoint_id", "required"})
	}
	if len(bad) > 0 {
		writeProblem(w, r, probValidation, "invalid fields", bad...)
		return
	}
	e, err := s.o.Endpoints.Get(r.Context(), req.EndpointID)
	if err != nil || !visible(p, e) {
		writeProblem(w, r, probNotFound, fmt.Sprintf("no endpoint %q", req.EndpointID))
		return
	}
	s.replay(w, r, e, since, until)
}

// replay re-produces the newest DLQ record of every message of e whose
// record is within [since, until).
func (s *Server) replay(w http.ResponseWriter, r *http.Request, e *endpoints.Endpoint, since, until time.Time) {
	order, latest, err := s.o.Resender.newestDLQ(r.Context(), e, since, until, nil, maxReplay)
	if errors.Is(err, errTooMany) {
		writeProblem(w, r, probValidation, fmt.Sprintf("more than %d messages in the range: narrow since/until", maxReplay),
			FieldDetail{"until", "the range holds too many messages"})
		return
	}
	if err != nil {
		s.unavailable(w, r, err)
		return
	}
	type resent struct {
		WebhookID string `json:"webhook_id"`
		ResendID  string `json:"resend_id"`
	}
	out := []resent{}
	for _, id := range order {
		rid, _, err := s.o.Resender.resend(r.Context(), e, latest[id])
		if err != nil {
			// Those already produced stay produced: the answer says which.
			s.o.Logger.Error("api: replay", "endpoint", e.ID, "webhook_id", id, "err", err)
			writeProblem(w, r, probUnavailable, fmt.Sprintf("replay stopped after %d of %d messages: %v", len(out), len(order), err))
			return
		}
		out = append(out, resent{id, rid})
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"endpoint_id": e.ID, "replayed": len(out), "resends": out})
}
