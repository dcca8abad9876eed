package api

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hookrelay/hookrelay/pipeline"
	"github.com/hookrelay/hookrelay/pipeline/endpoints"
)

// DefaultSecretOverlap is how long the current secrets keep signing after
// a rotation without an overlap in the body (issue 11: "default 24 h").
const DefaultSecretOverlap = 24 * time.Hour

// endpointView is an endpoint as the API shows it (schema Endpoint).
type endpointView struct {
	ID             string        `json:"id"`
	URL            string        `json:"url"`
	TenantID       string        `json:"tenantid,omitempty"`
	EventTypes     []string      `json:"event_types"`
	RatePerSec     float64       `json:"rate_per_sec"`
	MaxInFlight    int           `json:"max_in_flight"`
	Timeout        string        `json:"timeout"`
	ConnectTimeout string        `json:"connect_timeout"`
	Status         string        `json:"status"`
	StatusReason   string        `json:"status_reason,omitempty"`
	Health         string        `json:"health"` // status, or "failing" while active and failing (healthOf)
	Secrets        []secretView  `json:"secrets"`
	ConfigError    []FieldDetail `json:"config_error,omitempty"`
	CreatedAt      time.Time     `json:"created_at"`
	UpdatedAt      time.Time     `json:"updated_at"`
	Version        int64         `json:"version"`
	Stats24h       *stats24hView `json:"stats_24h,omitempty"` // with include=stats only
}

type secretView struct {
	Masked    string     `json:"masked"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

func viewOf(e *endpoints.Endpoint) endpointView {
	m := e.Masked()
	st, reason := e.EffectiveStatus()
	v := endpointView{ID: e.ID, URL: m.URL, TenantID: e.TenantID, EventTypes: e.EventTypes, RatePerSec: e.RatePerSec,
		MaxInFlight: e.MaxInFlight, Timeout: e.Timeout.String(), ConnectTimeout: e.ConnectTimeout.String(),
		Status: string(st), StatusReason: reason, Secrets: []secretView{}, CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt,
		Version: e.Version, ConfigError: fieldDetails(e.ConfigError), Health: healthOf(e)}
	if v.EventTypes == nil {
		v.EventTypes = []string{}
	}
	if st == endpoints.Invalid {
		v.StatusReason = "invalid record"
	}
	for _, s := range m.Secrets {
		v.Secrets = append(v.Secrets, secretView{Masked: s.Value, ExpiresAt: s.ExpiresAt})
	}
	return v
}

func etag(e *endpoints.Endpoint) string { return `"` + strconv.FormatInt(e.Version, 10) + `"` }

// visible reports whether p may see e: an admin sees every endpoint, a
// tenant key those of its tenant.
func visible(p Principal, e *endpoints.Endpoint) bool { return p.Admin || e.TenantID == p.Tenant }

// lookup returns the endpoint of the path's {id} if p may see it, else
// answers 404 (the same for another tenant's endpoint as for none).
func (s *Server) lookup(w http.ResponseWriter, r *http.Request, p Principal) (*endpoints.Endpoint, bool) {
	id := r.PathValue("id")
	e, err := s.o.Endpoints.Get(r.Context(), id)
	switch {
	case errors.Is(err, endpoints.ErrNotFound) || err == nil && !visible(p, e):
		writeProblem(w, r, probNotFound, fmt.Sprintf("no endpoint %q", id))
		return nil, false
	case err != nil:
		s.unavailable(w, r, err)
		return nil, false
	}
	return e, true
}

// decode reads a JSON body into v, refusing unknown fields and trailing
// data; empty bodies are allowed when optional. Errors are answered.
func decode(w http.ResponseWriter, r *http.Request, v any, optional bool) bool {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		writeProblem(w, r, probValidation, "request body too large or unreadable: "+err.Error())
		return false
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		if optional {
			return true
		}
		writeProblem(w, r, probValidation, "a JSON body is required")
		return false
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	err = dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("data after the JSON object")
	}
	if err == nil {
		return true
	}
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &te):
		writeProblem(w, r, probValidation, "a field has the wrong type", FieldDetail{Field: strings.TrimPrefix(te.Field, "endpointFields."), Reason: "must be " + te.Type.String() + ", got " + te.Value})
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		f := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		writeProblem(w, r, probValidation, "unknown field", FieldDetail{Field: f, Reason: "unknown field"})
	default:
		writeProblem(w, r, probValidation, "the body is not valid JSON: "+err.Error())
	}
	return false
}

// endpointFields are the settable fields of create and PATCH.
type endpointFields struct {
	URL            *string   `json:"url"`
	EventTypes     *[]string `json:"event_types"`
	TenantID       *string   `json:"tenantid"`
	RatePerSec     *float64  `json:"rate_per_sec"`
	MaxInFlight    *int      `json:"max_in_flight"`
	Timeout        *string   `json:"timeout"`
	ConnectTimeout *string   `json:"connect_timeout"`
}

// apply sets the given fields on e; a tenant key may not set another
// tenant. It returns the field problems it found.
func (f *endpointFields) apply(e *endpoints.Endpoint, p Principal) []FieldDetail {
	var bad []FieldDetail
	if f.URL != nil {
		e.URL = *f.URL
	}
	if f.EventTypes != nil {
		e.EventTypes = *f.EventTypes
		if len(e.EventTypes) == 0 {
			bad = append(bad, FieldDetail{"event_types", `at least one pattern is required ("*" for every type)`})
		}
	}
	if f.TenantID != nil {
		if !p.Admin && *f.TenantID != p.Tenant {
			bad = append(bad, FieldDetail{"tenantid", "a tenant key's endpoints always have its tenant"})
		}
		e.TenantID = *f.TenantID
	}
	if f.RatePerSec != nil {
		e.RatePerSec = *f.RatePerSec
		if e.RatePerSec <= 0 {
			bad = append(bad, FieldDetail{"rate_per_sec", "must be > 0"})
		}
	}
	if f.MaxInFlight != nil {
		e.MaxInFlight = *f.MaxInFlight
		if e.MaxInFlight <= 0 {
			bad = append(bad, FieldDetail{"max_in_flight", "must be >= 1"})
		}
	}
	for _, d := range []struct {
		name string
		in   *string
		out  *time.Duration
	}{{"timeout", f.Timeout, &e.Timeout}, {"connect_timeout", f.ConnectTimeout, &e.ConnectTimeout}} {
		if d.in == nil {
			continue
		}
		v, err := time.ParseDuration(*d.in)
		if err != nil || v <= 0 {
			bad = append(bad, FieldDetail{d.name, fmt.Sprintf("must be a positive duration such as \"10s\", got %q", *d.in)})
			continue
		}
		*d.out = v
	}
	return bad
}

func (s *Server) listEndpoints(w http.ResponseWriter, r *http.Request, p Principal) {
	all, err := s.o.Endpoints.List(r.Context())
	if err != nil {
		s.unavailable(w, r, err)
		return
	}
	var seen []*endpoints.Endpoint
	for _, e := range all {
		if visible(p, e) {
			seen = append(seen, e)
		}
	}
	out := make([]endpointView, 0, len(seen))
	for _, e := range seen {
		out = append(out, viewOf(e))
	}
	switch inc := r.URL.Query().Get("include"); inc {
	case "":
	case "stats":
		totals, err := s.totalsOf(r, seen)
		if err != nil {
			s.unavailable(w, r, err)
			return
		}
		for i := range out {
			out[i].Stats24h = statsOf(totals[out[i].ID])
		}
	default:
		writeProblem(w, r, probValidation, "invalid query parameters", FieldDetail{"include", "must be stats"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": out})
}

func (s *Server) getEndpoint(w http.ResponseWriter, r *http.Request, p Principal) {
	e, ok := s.lookup(w, r, p)
	if !ok {
		return
	}
	w.Header().Set("ETag", etag(e))
	writeJSON(w, http.StatusOK, viewOf(e))
}

// newEndpointID returns "ep_" and 26 random base32 characters (130 bits).
func newEndpointID() string {
	var b [17]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return "ep_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))[:26]
}

func (s *Server) createEndpoint(w http.ResponseWriter, r *http.Request, p Principal) {
	var req struct {
		endpointFields
		ID     *string `json:"id"`
		Secret *string `json:"secret"`
	}
	if !decode(w, r, &req, false) {
		return
	}
	e := &endpoints.Endpoint{ID: newEndpointID(), EventTypes: []string{endpoints.WildcardAll}, TenantID: p.Tenant}
	var bad []FieldDetail
	if req.ID != nil {
		if !p.Admin {
			// A chosen ID could collide with another tenant's and so
			// reveal that it exists: tenant keys get generated IDs.
			bad = append(bad, FieldDetail{"id", "chosen by the server for tenant keys: omit it"})
		}
		e.ID = *req.ID
	}
	if req.URL == nil {
		bad = append(bad, FieldDetail{"url", "required"})
	}
	bad = append(bad, req.apply(e, p)...)
	generated := req.Secret == nil
	if generated {
		e.Secrets = []endpoints.Secret{{Value: endpoints.NewSecret()}}
	} else {
		e.Secrets = []endpoints.Secret{{Value: *req.Secret}}
	}
	if len(bad) > 0 {
		writeProblem(w, r, probValidation, "invalid fields", bad...)
		return
	}
	got, err := s.o.Endpoints.Create(r.Context(), *e)
	if !s.writeError(w, r, err) {
		return
	}
	w.Header().Set("ETag", etag(got))
	w.Header().Set("Location", "/v1/endpoints/"+got.ID)
	resp := map[string]any{"endpoint": viewOf(got)}
	if generated {
		resp["secret"] = e.Secrets[0].Value
	}
	writeJSON(w, http.StatusCreated, resp)
}

// writeError answers a Store write error; it reports whether err was nil.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) bool {
	switch {
	case err == nil:
		return true
	case len(endpoints.FieldErrors(err)) > 0:
		writeProblem(w, r, probValidation, "invalid fields", fieldDetails(err)...)
	case errors.Is(err, endpoints.ErrExists):
		writeProblem(w, r, probConflict, "an endpoint with this ID exists")
	case errors.Is(err, endpoints.ErrConflict):
		writeProblem(w, r, probPrecondition, "the endpoint changed meanwhile: read it again")
	case errors.Is(err, endpoints.ErrNotFound):
		writeProblem(w, r, probNotFound, "no such endpoint")
	default:
		s.unavailable(w, r, err)
	}
	return false
}

// precondition checks If-Match against e's version: it answers 400 for a
// malformed one and 412 for a stale one, and reports whether to go on.
func precondition(w http.ResponseWriter, r *http.Request, e *endpoints.Endpoint) bool {
	im := strings.TrimSpace(r.Header.Get("If-Match"))
	if im == "" || im == "*" {
		return true
	}
	for _, tag := range strings.Split(im, ",") {
		tag = strings.TrimSpace(tag)
		v, err := strconv.ParseInt(strings.Trim(tag, `"`), 10, 64)
		if err != nil || !strings.HasPrefix(tag, `"`) {
			writeProblem(w, r, probValidation, "If-Match must hold the endpoint's ETag", FieldDetail{"If-Match", `an ETag such as "12" (quoted), as GET returns`})
			return false
		}
		if v == e.Version {
			return true
		}
	}
	writeProblem(w, r, probPrecondition, fmt.Sprintf("the endpoint is at ETag %s", etag(e)))
	return false
}

// keepPipelineDisable makes a config write keep a disable the pipeline
// decided (e.g. 410 Gone): an update is not an enable (as the CLI's
// `endpoints update`).
func keepPipelineDisable(e *endpoints.Endpoint) {
	if st, reason := e.EffectiveStatus(); st == endpoints.Disabled && e.Status != endpoints.Disabled {
		e.Status, e.DisabledReason = endpoints.Disabled, reason
	}
	e.PipelineStatus = nil
}

func (s *Server) patchEndpoint(w http.ResponseWriter, r *http.Request, p Principal) {
	cur, ok := s.lookup(w, r, p)
	if !ok || !precondition(w, r, cur) {
		return
	}
	var req endpointFields
	if !decode(w, r, &req, false) {
		return
	}
	e := cur.Clone()
	keepPipelineDisable(e)
	if bad := req.apply(e, p); len(bad) > 0 {
		writeProblem(w, r, probValidation, "invalid fields", bad...)
		return
	}
	got, err := s.o.Endpoints.Put(r.Context(), *e) // e.Version = cur.Version: a concurrent write is a 412
	if !s.writeError(w, r, err) {
		return
	}
	w.Header().Set("ETag", etag(got))
	writeJSON(w, http.StatusOK, viewOf(got))
}

func (s *Server) deleteEndpoint(w http.ResponseWriter, r *http.Request, p Principal) {
	cur, ok := s.lookup(w, r, p)
	if !ok || !precondition(w, r, cur) {
		return
	}
	if !s.writeError(w, r, s.o.Endpoints.Delete(r.Context(), cur.ID)) {
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) enableEndpoint(w http.ResponseWriter, r *http.Request, p Principal) {
	cur, ok := s.lookup(w, r, p)
	if !ok {
		return
	}
	got, err := s.o.Endpoints.Enable(r.Context(), cur.ID)
	if !s.writeError(w, r, err) {
		return
	}
	s.operatorEvent(cur, func(o *pipeline.OperatorEvents) error { return o.Enabled(r.Context(), cur, got) })
	w.Header().Set("ETag", etag(got))
	writeJSON(w, http.StatusOK, viewOf(got))
}

func (s *Server) disableEndpoint(w http.ResponseWriter, r *http.Request, p Principal) {
	cur, ok := s.lookup(w, r, p)
	if !ok {
		return
	}
	var req struct {
		Reason string `json:"reason"`
	}
	if !decode(w, r, &req, true) {
		return
	}
	got, err := s.o.Endpoints.Disable(r.Context(), cur.ID, req.Reason)
	if !s.writeError(w, r, err) {
		return
	}
	s.operatorEvent(cur, func(o *pipeline.OperatorEvents) error { return o.Disabled(r.Context(), cur, got) })
	w.Header().Set("ETag", etag(got))
	writeJSON(w, http.StatusOK, viewOf(got))
}

func (s *Server) rotateSecret(w http.ResponseWriter, r *http.Request, p Principal) {
	cur, ok := s.lookup(w, r, p)
	if !ok {
		return
	}
	var req struct {
		Overlap *string `json:"overlap"`
	}
	if !decode(w, r, &req, true) {
		return
	}
	overlap := DefaultSecretOverlap
	if req.Overlap != nil {
		d, err := time.ParseDuration(*req.Overlap)
		if err != nil || d < 0 {
			writeProblem(w, r, probValidation, "invalid fields", FieldDetail{"overlap", fmt.Sprintf("must be a duration >= 0 such as \"24h\", got %q", *req.Overlap)})
			return
		}
		overlap = d
	}
	now := s.o.Now().UTC()
	until := now.Add(overlap)
	e := cur.Clone()
	keepPipelineDisable(e)
	kept := e.Secrets[:0]
	for _, sec := range e.Secrets {
		if !sec.Active(now) {
			continue // already retired: drop it
		}
		if sec.ExpiresAt == nil || sec.ExpiresAt.After(until) {
			sec.ExpiresAt = &until
		}
		kept = append(kept, sec)
	}
	secret := endpoints.NewSecret()
	e.Secrets = append(kept, endpoints.Secret{Value: secret})
	got, err := s.o.Endpoints.Put(r.Context(), *e)
	if !s.writeError(w, r, err) {
		return
	}
	s.operatorEvent(cur, func(o *pipeline.OperatorEvents) error { return o.SecretRotated(r.Context(), got, until) })
	w.Header().Set("ETag", etag(got))
	writeJSON(w, http.StatusOK, map[string]any{"endpoint": viewOf(got), "secret": secret, "previous_expire_at": until})
}

// operatorEvent publishes the operational event of a change already
// written (pipeline.OperatorEvents decides whether one is due). A failure
// is logged, not answered: the change stands, and the response (a rotated
// secret is shown only once) must reach the caller.
func (s *Server) operatorEvent(e *endpoints.Endpoint, publish func(*pipeline.OperatorEvents) error) {
	if s.o.OperatorEvents == nil {
		return
	}
	if err := publish(s.o.OperatorEvents); err != nil {
		s.o.Logger.Error("api: operational event not published", "endpoint", e.ID, "err", err)
	}
}
