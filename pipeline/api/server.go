// Package api is hookrelay's management API: a JSON REST API under /v1 for
// endpoints, their delivery log and health, described by the embedded
// OpenAPI 3.1 document (openapi.json, served at GET /v1/openapi.json) — the
// single source of the API's docs (docs/API.md points to it).
//
// It lives under pipeline because it is a stage of `hookrelay run` (the api
// role) over the pipeline's own state: endpoints through
// pipeline/endpoints.Store (the compacted endpoints topic), API keys and
// idempotency records in compacted topics of their own, attempts through an
// audit.Store. Only cmd/hookrelay reads configuration and wires it.
//
// Tenancy (issue 11): an admin key sees every endpoint; a tenant key sees,
// changes and creates only endpoints whose tenantid is its tenant, and
// another tenant's endpoint answers 404 exactly as a missing one does.
package api

import (
	"context"
	_ "embed"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/pipeline"
	"github.com/hookrelay/hookrelay/pipeline/endpoints"
)

// OpenAPI is the API's OpenAPI 3.1 document (JSON).
//
//go:embed openapi.json
var OpenAPI []byte

// maxBody bounds every request body, in bytes.
const maxBody = 1 << 20

// Authenticator resolves an API key to the principal it acts for ([Keys]).
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (Principal, bool, error)
}

// AttemptLog is the part of an audit.Store the API reads.
type AttemptLog interface {
	Log(ctx context.Context, q audit.Query) ([]audit.Attempt, error)
	Summary(ctx context.Context, f audit.Filter) ([]audit.EndpointSummary, error)
	audit.Stats
}

// Options configure a [Server].
type Options struct {
	// Endpoints reads and writes endpoint configs. Required.
	Endpoints *endpoints.Store
	// Keys authenticates requests. Required.
	Keys Authenticator
	// Attempts is the delivery log (chstore in production). Required.
	Attempts AttemptLog
	// Idempotency remembers POST results by Idempotency-Key. Optional:
	// nil ignores the header.
	Idempotency *Idempotency
	// Resender re-produces DLQ records for POST …/messages/{msg_id}/resend.
	// Optional: nil answers that route 503.
	Resender *Resender
	// Recoveries records POST …/recover for GET /v1/recoveries/{id}.
	// Optional: nil answers both 503.
	Recoveries *Recoveries
	// OperatorEvents publishes the operational events of enable, disable and
	// secret rotation (as the CLI does). Optional: nil publishes none (a
	// process without the pipeline's topics, e.g. a test).
	OperatorEvents *pipeline.OperatorEvents
	// Now is the clock of health windows and secret expiry. Optional.
	// Default time.Now.
	Now func() time.Time
	// Logger receives internal errors. Optional. Default slog.Default().
	Logger *slog.Logger
}

// Server serves the API. Safe for concurrent use.
type Server struct {
	o     Options
	mux   *http.ServeMux
	recov recoveryLimiter // running recoveries (recover.go)
}

// New validates o and returns a Server.
func New(o Options) (*Server, error) {
	switch {
	case o.Endpoints == nil:
		return nil, errors.New("api: Options.Endpoints: required")
	case o.Keys == nil:
		return nil, errors.New("api: Options.Keys: required")
	case o.Attempts == nil:
		return nil, errors.New("api: Options.Attempts: required")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	s := &Server{o: o, mux: http.NewServeMux()}
	s.routes()
	return s, nil
}

// Handler returns the API's handler (every path under /v1, and the
// console under /console/).
func (s *Server) Handler() http.Handler { return s.mux }

type handler func(w http.ResponseWriter, r *http.Request, p Principal)

func (s *Server) routes() {
	s.mux.HandleFunc("GET /v1/openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(OpenAPI)
	})
	s.handle("GET /v1/me", s.me)
	s.handle("GET /v1/endpoints", s.listEndpoints)
	s.handle("POST /v1/endpoints", s.idempotent(s.createEndpoint))
	s.handle("GET /v1/endpoints/{id}", s.getEndpoint)
	s.handle("PATCH /v1/endpoints/{id}", s.patchEndpoint)
	s.handle("DELETE /v1/endpoints/{id}", s.deleteEndpoint)
	s.handle("POST /v1/endpoints/{id}/enable", s.idempotent(s.enableEndpoint))
	s.handle("POST /v1/endpoints/{id}/disable", s.idempotent(s.disableEndpoint))
	s.handle("POST /v1/endpoints/{id}/secret/rotate", s.idempotent(s.rotateSecret))
	s.handle("GET /v1/endpoints/{id}/health", s.health)
	s.handle("GET /v1/endpoints/{id}/stats", s.endpointStats)
	s.handle("GET /v1/endpoints/{id}/attempts", s.listAttempts)
	s.handle("GET /v1/endpoints/{id}/messages/{msg_id}", s.getMessage)
	s.handle("POST /v1/endpoints/{id}/messages/{msg_id}/resend", s.idempotent(s.resendMessage))
	s.handle("POST /v1/endpoints/{id}/recover", s.idempotent(s.recoverEndpoint))
	s.handle("GET /v1/recoveries/{id}", s.getRecovery)
	s.handle("GET /v1/dlq", s.listDLQ)
	s.handle("POST /v1/dlq/replay", s.idempotent(s.replayDLQ))
	s.mux.Handle("GET /console/", consoleHandler()) // the web console (console.go)
	s.mux.Handle("GET /console", http.RedirectHandler("/console/", http.StatusMovedPermanently))
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, r, probNotFound, "no such resource; see /v1/openapi.json")
	})
}

// handle registers h behind authentication.
func (s *Server) handle(pattern string, h handler) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" { // the scheme is case-insensitive (RFC 9110, 11.1)
			writeProblem(w, r, probUnauthorized, "send Authorization: Bearer <api key>")
			return
		}
		p, ok, err := s.o.Keys.Authenticate(r.Context(), strings.TrimSpace(token))
		if err != nil {
			s.unavailable(w, r, err)
			return
		}
		if !ok {
			writeProblem(w, r, probUnauthorized, "unknown or revoked API key")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		h(w, r, p)
	})
}

func (s *Server) idempotent(h handler) handler {
	return func(w http.ResponseWriter, r *http.Request, p Principal) {
		s.o.Idempotency.wrap(p, w, r, func(w http.ResponseWriter, r *http.Request) { h(w, r, p) })
	}
}

func (s *Server) unavailable(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return // the client went away
	}
	if errors.Is(err, errGenerationsNotReady) {
		w.Header().Set("Retry-After", "5")
		writeProblem(w, r, probUnavailable, "the process is starting: the deliveries generations are not read yet; try again later")
		return
	}
	s.o.Logger.Warn("api: backing service", "path", r.URL.Path, "err", err)
	writeProblem(w, r, probUnavailable, "try again later")
}

func (s *Server) internal(w http.ResponseWriter, r *http.Request, err error) {
	s.o.Logger.Error("api: internal error", "path", r.URL.Path, "err", err)
	writeProblem(w, r, probInternal, "")
}

// me answers GET /v1/me: who the request's API key is (its key ID, its
// role, the tenant of a tenant key), so a client such as the console can
// show whose data it sees. Like Stripe's GET /v1/account, it needs no
// permission beyond a valid key.
func (s *Server) me(w http.ResponseWriter, _ *http.Request, p Principal) {
	role := "tenant"
	if p.Admin {
		role = "admin"
	}
	out := map[string]any{"key_id": p.KeyID, "role": role}
	if !p.Admin {
		out["tenantid"] = p.Tenant
	}
	writeJSON(w, http.StatusOK, out)
}
