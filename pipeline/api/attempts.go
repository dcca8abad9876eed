package api

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/pipeline/endpoints"
)

// attemptView is one attempt row as the API shows it (schema Attempt).
type attemptView struct {
	AttemptID     string     `json:"attempt_id"`
	DeliveryID    string     `json:"delivery_id"`
	EventID       string     `json:"event_id"`
	WebhookID     string     `json:"webhook_id"`
	EventType     string     `json:"event_type"`
	EndpointID    string     `json:"endpoint_id"`
	URLHost       string     `json:"url_host,omitempty"`
	AttemptNumber int        `json:"attempt_number"`
	AttemptedAt   time.Time  `json:"attempted_at"`
	LatencyMs     int64      `json:"latency_ms"`
	HTTPStatus    int        `json:"http_status"`
	Outcome       string     `json:"outcome"`
	ErrorClass    string     `json:"error_class,omitempty"`
	ErrorMessage  string     `json:"error_message,omitempty"`
	ResponseBody  string     `json:"response_body,omitempty"`
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
	// The request as sent and the response (issue 12); absent when no
	// request was made or for attempts logged before they were kept.
	RequestHeaders  []audit.HeaderField `json:"request_headers,omitempty"`
	BodyPreview     string              `json:"body_preview,omitempty"`
	ResponseHeaders []audit.HeaderField `json:"response_headers,omitempty"`
}

func attemptOf(a audit.Attempt) attemptView {
	v := attemptView{AttemptID: a.AttemptID, DeliveryID: a.DeliveryID, EventID: a.EventID, WebhookID: a.WebhookID,
		EventType: a.EventType, EndpointID: a.EndpointID, URLHost: a.URLHost, AttemptNumber: a.AttemptNumber,
		AttemptedAt: a.AttemptedAt, LatencyMs: a.LatencyMs, HTTPStatus: a.HTTPStatus, Outcome: string(a.Outcome),
		ErrorClass: a.ErrorClass, ErrorMessage: a.ErrorMessage, ResponseBody: a.ResponseBody,
		RequestHeaders: audit.ParseHeaders(a.RequestHeaders), BodyPreview: a.BodyPreview,
		ResponseHeaders: audit.ParseHeaders(a.ResponseHeaders)}
	if !a.NextAttemptAt.IsZero() {
		t := a.NextAttemptAt
		v.NextAttemptAt = &t
	}
	return v
}

func attemptsOf(as []audit.Attempt) []attemptView {
	out := make([]attemptView, 0, len(as))
	for _, a := range as {
		out = append(out, attemptOf(a))
	}
	return out
}

// encodeCursor makes the opaque next_cursor of a page: base64url of
// "<unix ms>:<attempt id>" of its last attempt.
func encodeCursor(c audit.Cursor) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.AttemptedAt.UnixMilli(), 10) + ":" + c.AttemptID))
}

func decodeCursor(s string) (audit.Cursor, bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return audit.Cursor{}, false
	}
	ms, id, ok := strings.Cut(string(b), ":")
	n, err := strconv.ParseInt(ms, 10, 64)
	if !ok || err != nil || id == "" {
		return audit.Cursor{}, false
	}
	return audit.Cursor{AttemptedAt: time.UnixMilli(n).UTC(), AttemptID: id}, true
}

// logQuery returns the query of e's delivery log: its ID and its current
// tenant. Every read of the log goes through it, for every caller (admin
// included): an endpoint ID that changed tenant (a PATCH of tenantid, or an
// ID deleted and re-created for another tenant) shows only the attempts of
// its current tenant, never the rows written while it was another tenant's
// (nor the deliveries of the old tenant the dispatcher refuses after the
// change, which are logged under the old tenant).
func logQuery(e *endpoints.Endpoint) audit.Query {
	tenant := e.TenantID
	return audit.Query{EndpointID: e.ID, Tenant: &tenant}
}

func (s *Server) listAttempts(w http.ResponseWriter, r *http.Request, p Principal) {
	e, ok := s.lookup(w, r, p)
	if !ok {
		return
	}
	q := logQuery(e)
	q.EventType, q.EventID = r.URL.Query().Get("event_type"), r.URL.Query().Get("event_id")
	q.WebhookID = r.URL.Query().Get("webhook_id")
	var bad []FieldDetail
	v := r.URL.Query()
	for _, t := range []struct {
		name string
		out  *time.Time
	}{{"since", &q.Since}, {"until", &q.Until}} {
		if s := v.Get(t.name); s != "" {
			ts, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				bad = append(bad, FieldDetail{t.name, "must be an RFC 3339 date-time, e.g. 2026-01-02T03:04:05Z"})
			}
			*t.out = ts
		}
	}
	if o := v.Get("outcome"); o != "" {
		for _, name := range strings.Split(o, ",") {
			out := audit.Outcome(strings.TrimSpace(name))
			if !out.Valid() {
				bad = append(bad, FieldDetail{"outcome", fmt.Sprintf("unknown outcome %q", name)})
			}
			q.Outcomes = append(q.Outcomes, out)
		}
	}
	q.Limit = audit.DefaultLimit
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > audit.MaxLimit {
			bad = append(bad, FieldDetail{"limit", fmt.Sprintf("must be 1 to %d", audit.MaxLimit)})
		}
		q.Limit = n
	}
	if c := v.Get("cursor"); c != "" {
		cur, ok := decodeCursor(c)
		if !ok {
			bad = append(bad, FieldDetail{"cursor", "not a next_cursor this API returned"})
		}
		q.Before = cur
	}
	if len(bad) > 0 {
		writeProblem(w, r, probValidation, "invalid query parameters", bad...)
		return
	}
	page, err := s.o.Attempts.Log(r.Context(), q)
	if err != nil {
		if strings.Contains(err.Error(), audit.ErrInvalidQuery.Error()) {
			writeProblem(w, r, probValidation, err.Error())
			return
		}
		s.unavailable(w, r, err)
		return
	}
	var next *string
	if len(page) == q.Limit {
		c := encodeCursor(audit.CursorOf(page[len(page)-1]))
		next = &c
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": attemptsOf(page), "next_cursor": next})
}

func (s *Server) getMessage(w http.ResponseWriter, r *http.Request, p Principal) {
	e, ok := s.lookup(w, r, p)
	if !ok {
		return
	}
	msg := r.PathValue("msg_id")
	q := logQuery(e)
	q.WebhookID, q.Limit = msg, audit.MaxLimit
	as, err := s.o.Attempts.Log(r.Context(), q)
	if err != nil {
		s.unavailable(w, r, err)
		return
	}
	if len(as) == 0 {
		writeProblem(w, r, probNotFound, fmt.Sprintf("no attempt of message %q to endpoint %q", msg, e.ID))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"webhook_id": msg, "endpoint_id": e.ID, "attempts": attemptsOf(as)})
}

// counts is one health window (schema Counts).
type counts struct {
	Attempts    int64    `json:"attempts"`
	Delivered   int64    `json:"delivered"`
	Failed      int64    `json:"failed"`
	SuccessRate *float64 `json:"success_rate"`
}

// countsOf is one health window of the aggregated views (audit.Stats:
// whole minutes; failed counts audit.FailedOutcomes).
func countsOf(ts []audit.EndpointTotals) counts {
	var c counts
	for _, t := range ts {
		c.Attempts += t.Attempts
		c.Delivered += t.Delivered
		c.Failed += t.Failed
	}
	c.SuccessRate = rateOf(audit.Figures{Delivered: c.Delivered, Failed: c.Failed})
	return c
}

// health answers GET /v1/endpoints/{id}/health: the effective status and
// the pipeline's failing-since clock from the endpoint and its status
// record, and figures over the last hour and day from the aggregated
// views (whole minutes: a window may start up to a minute early).
func (s *Server) health(w http.ResponseWriter, r *http.Request, p Principal) {
	e, ok := s.lookup(w, r, p)
	if !ok {
		return
	}
	ctx := r.Context()
	now := s.o.Now().UTC()
	_, reason := e.EffectiveStatus()
	status := healthOf(e)
	var failingSince *time.Time
	if ps := e.PipelineStatus; ps != nil && ps.FailingSince != nil {
		failingSince = ps.FailingSince
	}
	last := func(outcomes ...audit.Outcome) (*time.Time, error) {
		q := logQuery(e)
		q.Outcomes, q.Limit = outcomes, 1
		as, err := s.o.Attempts.Log(ctx, q)
		if err != nil || len(as) == 0 {
			return nil, err
		}
		return &as[0].AttemptedAt, nil
	}
	lastSuccess, err := last(audit.Delivered)
	if err != nil {
		s.unavailable(w, r, err)
		return
	}
	lastAttempt, err := last()
	if err != nil {
		s.unavailable(w, r, err)
		return
	}
	ref := []audit.EndpointRef{refOf(e)}
	hour, err := s.o.Attempts.EndpointTotals(ctx, ref, now.Add(-time.Hour), now)
	if err != nil {
		s.unavailable(w, r, err)
		return
	}
	day, err := s.o.Attempts.EndpointTotals(ctx, ref, now.Add(-24*time.Hour), now)
	if err != nil {
		s.unavailable(w, r, err)
		return
	}
	resp := map[string]any{"endpoint_id": e.ID, "status": status, "failing_since": failingSince,
		"last_success_at": lastSuccess, "last_attempt_at": lastAttempt, "last_hour": countsOf(hour), "last_day": countsOf(day)}
	if reason != "" {
		resp["reason"] = reason
	}
	writeJSON(w, http.StatusOK, resp)
}

// healthOf is e's health as its record says it: its effective status
// (active, disabled, invalid), or "failing" when it is active and its
// failing-since clock runs (the dispatcher's pipeline status). It reads no
// log, so the endpoints list shows it for every endpoint in one call.
func healthOf(e *endpoints.Endpoint) string {
	st, _ := e.EffectiveStatus()
	if ps := e.PipelineStatus; st == endpoints.Active && ps != nil && ps.FailingSince != nil {
		return "failing"
	}
	return string(st)
}
