package api

import (
	"encoding/json"
	"net/http"

	"github.com/hookrelay/hookrelay/pipeline/endpoints"
)

// Problem is an RFC 9457 problem details object (application/problem+json).
// Type is a relative URI naming the kind of problem ("/problems/validation");
// Errors, an extension member, lists each invalid field.
type Problem struct {
	Type     string        `json:"type"`
	Title    string        `json:"title"`
	Status   int           `json:"status"`
	Detail   string        `json:"detail,omitempty"`
	Instance string        `json:"instance,omitempty"`
	Errors   []FieldDetail `json:"errors,omitempty"`
}

// FieldDetail is one invalid field of a request.
type FieldDetail struct {
	Field  string `json:"field"`
	Reason string `json:"reason"`
}

// The kinds of problem (Problem.Type), with their status and title.
var (
	probValidation   = Problem{Type: "/problems/validation", Status: http.StatusBadRequest, Title: "The request is invalid"}
	probUnauthorized = Problem{Type: "/problems/unauthorized", Status: http.StatusUnauthorized, Title: "Missing or unknown API key"}
	probNotFound     = Problem{Type: "/problems/not-found", Status: http.StatusNotFound, Title: "Not found"}
	probConflict     = Problem{Type: "/problems/conflict", Status: http.StatusConflict, Title: "The endpoint ID is taken"}
	probPrecondition = Problem{Type: "/problems/precondition-failed", Status: http.StatusPreconditionFailed, Title: "The endpoint is not at the If-Match version"}
	probIdempotency  = Problem{Type: "/problems/idempotency-key-reused", Status: http.StatusUnprocessableEntity, Title: "The Idempotency-Key was used with another request"}
	probNoDLQRecord  = Problem{Type: "/problems/no-dlq-record", Status: http.StatusConflict, Title: "The message cannot be resent"}
	probInternal     = Problem{Type: "/problems/internal", Status: http.StatusInternalServerError, Title: "Internal error"}
	probUnavailable  = Problem{Type: "/problems/unavailable", Status: http.StatusServiceUnavailable, Title: "A backing service is not available"}
)

func writeProblem(w http.ResponseWriter, r *http.Request, p Problem, detail string, fields ...FieldDetail) {
	p.Detail, p.Instance, p.Errors = detail, r.URL.Path, fields
	w.Header().Set("Content-Type", "application/problem+json")
	if p.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="hookrelay"`)
	}
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}

// fieldDetails lists the *endpoints.FieldError of err, or nil.
func fieldDetails(err error) []FieldDetail {
	var out []FieldDetail
	for _, fe := range endpoints.FieldErrors(err) {
		out = append(out, FieldDetail{Field: fe.Field, Reason: fe.Reason})
	}
	return out
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
