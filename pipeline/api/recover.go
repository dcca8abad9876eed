package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/pipeline/delivery"
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

// recoverEndpoint answers POST /v1/endpoints/{id}/recover: every message of
// the endpoint whose newest DLQ record in [since, until) has a recoverable
// reason and which has no delivered attempt since is resent (as
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
	ctx := r.Context()
	spans, err := s.o.Resender.spans(ctx, e.ID, since)
	if err != nil {
		s.unavailable(w, r, err)
		return
	}
	latest := map[string]*kgo.Record{}
	var order []string
	err = s.o.Resender.scan(ctx, spans, func(rec *kgo.Record) bool {
		if !dlqOf(rec, e) || !inRange(rec, since, until) {
			return true
		}
		id := headerOf(rec, delivery.HeaderWebhookID)
		if _, ok := latest[id]; !ok {
			order = append(order, id)
		}
		latest[id] = rec
		return len(order) <= maxReplay
	})
	if err != nil {
		s.unavailable(w, r, err)
		return
	}
	if len(order) > maxReplay {
		writeProblem(w, r, probValidation, fmt.Sprintf("more than %d messages in the range: narrow since/until", maxReplay), FieldDetail{"until", "the range holds too many messages"})
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
		reason := headerOf(latest[id], delivery.HeaderReason)
		if !recoverReasons[reason] && !(req.IncludeFailed && reason == string(audit.Failed)) {
			continue
		}
		// Delivered since (e.g. by an earlier resend or recovery): not again.
		q := logQuery(e)
		q.WebhookID, q.Outcomes, q.Limit = id, []audit.Outcome{audit.Delivered}, 1
		as, err := s.o.Attempts.Log(ctx, q)
		if err != nil {
			s.unavailable(w, r, err)
			return
		}
		if len(as) == 0 {
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
