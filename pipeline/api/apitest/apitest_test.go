package apitest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// recordingTB keeps what Errorf reports instead of failing the test.
type recordingTB struct {
	testing.TB
	errs []string
}

func (r *recordingTB) Helper()                      {}
func (r *recordingTB) Errorf(f string, args ...any) { r.errs = append(r.errs, fmt.Sprintf(f, args...)) }
func (r *recordingTB) Fatalf(f string, args ...any) { r.TB.Fatalf(f, args...) }
func (r *recordingTB) Logf(f string, args ...any)   {}

// The validator is not vacuous: a response or request off the document is
// reported.
func TestValidatorCatchesViolations(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/endpoints/a": // missing required fields, an undocumented one
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("ETag", `"1"`)
			w.Write([]byte(`{"id":"a","colour":"red"}`))
		case "/v1/endpoints/b": // an undocumented status
			w.WriteHeader(http.StatusTeapot)
		default: // an error that is not problem+json
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte("nope"))
		}
	}))
	defer srv.Close()
	v := New(t, nil)
	for _, c := range []struct {
		method, path, body, want string
		invalid                  bool
	}{
		{"GET", "/v1/endpoints/a", "", "violates the OpenAPI document", false},
		{"GET", "/v1/endpoints/b", "", "violates the OpenAPI document", false},
		{"GET", "/v1/endpoints/c", "", "not application/problem+json", false},
		{"POST", "/v1/endpoints", `{"nourl":1}`, "request violates", false},
		{"GET", "/v1/endpoints/a", "", "meant to violate", true},
	} {
		rec := &recordingTB{TB: t}
		v.Do(rec, NewRequest(t, c.method, srv.URL+c.path, "hrk_x", c.body), c.invalid)
		if !strings.Contains(strings.Join(rec.errs, "\n"), c.want) {
			t.Errorf("%s %s: reported %q, want %q", c.method, c.path, rec.errs, c.want)
		}
	}
}
