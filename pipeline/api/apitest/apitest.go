// Package apitest checks API traffic against the API's OpenAPI document
// (pipeline/api.OpenAPI) with kin-openapi's request and response
// validators (openapi3filter), for the unit tests of pipeline/api and the
// end-to-end tests: every request a test makes and every response it gets
// goes through [Validator.Do].
package apitest

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/hookrelay/hookrelay/pipeline/api"
)

// LoadDocument parses and validates the API's OpenAPI document. kin-openapi
// (v0.153+) validates an OpenAPI 3.1 document as 3.1: JSON Schema 2020-12
// keywords and type arrays.
func LoadDocument(ctx context.Context) (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(api.OpenAPI)
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(ctx); err != nil {
		return nil, err
	}
	return doc, nil
}

// Validator validates requests and responses against the document.
type Validator struct {
	router routers.Router
	client *http.Client
}

// New loads the document (failing t if it is invalid) and returns a
// Validator that sends requests with client (nil: a client with no
// redirects followed).
func New(t testing.TB, client *http.Client) *Validator {
	t.Helper()
	doc, err := LoadDocument(context.Background())
	if err != nil {
		t.Fatalf("OpenAPI document: %v", err)
	}
	doc.Servers = nil // match any host: tests listen on random ports
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatalf("OpenAPI router: %v", err)
	}
	if client == nil {
		client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	return &Validator{router: router, client: client}
}

// Response is a response with its body read.
type Response struct {
	*http.Response
	Body []byte
}

// Do validates req against the document (a violation fails t unless
// invalidRequest says the test sends one on purpose, in which case the
// request must violate it), sends it, and validates the response: its
// status must be documented for the operation and its headers and body
// must match. It returns the response with its body read.
func (v *Validator) Do(t testing.TB, req *http.Request, invalidRequest bool) *Response {
	t.Helper()
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	route, params, err := v.router.FindRoute(req)
	if err != nil {
		t.Fatalf("%s %s: not in the OpenAPI document: %v", req.Method, req.URL.Path, err)
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true}}
	err = openapi3filter.ValidateRequest(req.Context(), in)
	switch {
	case err != nil && !invalidRequest:
		t.Errorf("%s %s: request violates the OpenAPI document: %v", req.Method, req.URL, err)
	case err == nil && invalidRequest:
		t.Errorf("%s %s: request was meant to violate the OpenAPI document but does not", req.Method, req.URL)
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	resp, err := v.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", req.Method, req.URL, err)
	}
	in.Request.Body = io.NopCloser(bytes.NewReader(body))
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Body: io.NopCloser(bytes.NewReader(rb)), Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}}
	if err := openapi3filter.ValidateResponse(req.Context(), out); err != nil {
		t.Errorf("%s %s: response %d violates the OpenAPI document: %v\n%s", req.Method, req.URL, resp.StatusCode, err, rb)
	}
	if resp.StatusCode >= 400 && !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
		t.Errorf("%s %s: error %d is %q, not application/problem+json", req.Method, req.URL, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return &Response{Response: resp, Body: rb}
}

// NewRequest builds a request with an optional bearer key and JSON body
// ("" for none), failing t on error.
func NewRequest(t testing.TB, method, url, key, body string) *http.Request {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return req
}
