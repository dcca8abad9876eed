package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// apiClientSettings are the settings of the commands that are clients of
// the management API (endpoints rotate-secret and health, recover, dlq):
// they run the API's own operations, with its authentication, tenant
// scoping and idempotency, rather than a second copy of them. README.md's
// table of them is checked by docs_test.go.
var apiClientSettings = []setting{
	{"api-url", "HOOKRELAY_API_URL", "http://127.0.0.1:8088", "base URL of the management API (the api role of hookrelay run, --api-addr)"},
	{"api-key", "HOOKRELAY_API_KEY", "", "management-API key (hookrelay apikeys create); an admin key, or a tenant's for its own endpoints. Prefer the variable: a flag's value shows in ps"},
}

// apiTimeout bounds one API request: above the API server's 60 s write
// timeout, so the server's answer (or its cut) always arrives first.
const apiTimeout = 90 * time.Second

// apiClient calls the management API as one key. Safe for concurrent use.
type apiClient struct {
	base string // scheme://host[:port], no trailing slash
	key  string
	hc   *http.Client
}

// newAPIClient returns the client the flags of fs (apiClientSettings)
// describe. Errors name the flag and its variable.
func newAPIClient(fs *pflag.FlagSet) (*apiClient, error) {
	raw, _ := fs.GetString("api-url")
	key, _ := fs.GetString("api-key")
	if !fs.Changed("api-key") {
		key = os.Getenv("HOOKRELAY_API_KEY") // not the flag's default: --help would show it
	}
	u, err := url.Parse(strings.TrimRight(strings.TrimSpace(raw), "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("invalid --api-url (HOOKRELAY_API_URL): want http(s)://host:port of the management API, got %q", raw)
	}
	if strings.TrimSpace(key) == "" {
		return nil, errors.New("missing --api-key (HOOKRELAY_API_KEY): create one with `hookrelay apikeys create --admin` (or --tenant T)")
	}
	return &apiClient{base: u.String(), key: strings.TrimSpace(key), hc: &http.Client{Timeout: apiTimeout}}, nil
}

// problemError is an error the API answered (RFC 9457 problem+json).
type problemError struct {
	Status int    `json:"status"`
	Title  string `json:"title"`
	Detail string `json:"detail"`
	Errors []struct {
		Field  string `json:"field"`
		Reason string `json:"reason"`
	} `json:"errors"`
}

func (e *problemError) Error() string {
	msg := fmt.Sprintf("%d %s", e.Status, e.Title)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	for _, f := range e.Errors {
		msg += fmt.Sprintf("\n  %s: %s", f.Field, f.Reason)
	}
	return msg
}

// apiStatus returns the HTTP status of an API error (0 for other errors).
func apiStatus(err error) int {
	var pe *problemError
	if errors.As(err, &pe) {
		return pe.Status
	}
	return 0
}

// call makes one request: body (nil for none) is sent as JSON, hdr are
// header pairs (e.g. "Idempotency-Key", k), and a 2xx answer is decoded
// into out (nil: ignored). Any other answer is a *problemError.
func (c *apiClient) call(ctx context.Context, method, path string, query url.Values, body, out any, hdr ...string) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	target := c.base + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] != "" {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	res, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("management API at %s (--api-url, HOOKRELAY_API_URL): %w", c.base, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		pe := &problemError{}
		if json.Unmarshal(b, pe) != nil || pe.Title == "" {
			pe = &problemError{Title: http.StatusText(res.StatusCode), Detail: strings.TrimSpace(string(b))}
		}
		pe.Status = res.StatusCode
		return pe
	}
	if out == nil || len(b) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %s: unexpected answer %.200q: %w", method, path, b, err)
	}
	return nil
}

// parseWhen reads a time flag: an RFC 3339 date-time, or a duration meaning
// that long before now ("2h": two hours ago). Errors name the flag.
func parseWhen(flag, v string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("invalid --%s: want an RFC 3339 date-time (2026-01-02T03:04:05Z) or a duration ago (90m, 24h), got %q", flag, v)
}

// whenText formats an optional instant of an API answer for people.
func whenText(t *time.Time, none string) string {
	if t == nil || t.IsZero() {
		return none
	}
	return t.UTC().Format(time.RFC3339)
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
