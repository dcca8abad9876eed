package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestParseWhen(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tt := range []struct {
		in   string
		want time.Time
	}{
		{"2026-01-01T00:00:00Z", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"2026-01-01T01:00:00.5+01:00", time.Date(2026, 1, 1, 0, 0, 0, 5e8, time.UTC)},
		{"24h", now.Add(-24 * time.Hour)},
		{"90m", now.Add(-90 * time.Minute)},
	} {
		got, err := parseWhen("since", tt.in, now)
		if err != nil || !got.Equal(tt.want) {
			t.Errorf("parseWhen(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"yesterday", "-1h", "2026-01-01", ""} {
		if _, err := parseWhen("since", bad, now); err == nil || !strings.Contains(err.Error(), "--since") {
			t.Errorf("parseWhen(%q): %v, want an error naming --since", bad, err)
		}
	}
}

func TestNewAPIClientRefusesUnusable(t *testing.T) {
	t.Setenv("HOOKRELAY_API_KEY", "")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--api-url", "ftp://x", "--api-key", "k"}, "--api-url"},
		{[]string{"--api-url", "http://u:p@x", "--api-key", "k"}, "--api-url"},
		{[]string{"--api-url", "http://x"}, "--api-key"},
	} {
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		addSettings(fs, apiClientSettings)
		if err := fs.Parse(tt.args); err != nil {
			t.Fatal(err)
		}
		if _, err := newAPIClient(fs); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want an error naming %s", tt.args, err, tt.want)
		}
	}
	// The key comes from the variable when the flag is not given, and is
	// never the flag's shown default.
	t.Setenv("HOOKRELAY_API_KEY", "hrk_fromenv")
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	addSettings(fs, apiClientSettings)
	if d := fs.Lookup("api-key").DefValue; d != "" {
		t.Errorf("--api-key shows default %q", d)
	}
	c, err := newAPIClient(fs)
	if err != nil || c.key != "hrk_fromenv" || c.base != "http://127.0.0.1:8088" {
		t.Errorf("client %+v, %v", c, err)
	}
}

// TestAPIClientCall: the key is sent as a bearer token, the body as JSON,
// a problem+json answer becomes an error with its status, title, detail and
// fields.
func TestAPIClientCall(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Header.Get("Authorization") != "Bearer k1" || r.Header.Get("Idempotency-Key") != "idem" || string(b) != `{"since":"x"}` {
			w.WriteHeader(http.StatusTeapot)
			return
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"type":"about:blank","title":"Bad Request","status":400,"detail":"invalid fields","errors":[{"field":"since","reason":"must be an RFC 3339 date-time"}]}`)
	}))
	defer srv.Close()
	c := &apiClient{base: srv.URL, key: "k1", hc: srv.Client()}
	err := c.call(context.Background(), "POST", "/v1/x", nil, map[string]string{"since": "x"}, nil, "Idempotency-Key", "idem")
	if apiStatus(err) != 400 || !strings.Contains(err.Error(), "invalid fields") || !strings.Contains(err.Error(), "since: must be") {
		t.Fatalf("err = %v (status %d), want the 400 problem with its field", err, apiStatus(err))
	}
}

// TestFollowRecovery prints a line per change and ends when every resend
// is final: nil when all were delivered, an error naming the failures.
func TestFollowRecovery(t *testing.T) {
	for _, tt := range []struct {
		name   string
		steps  []string // successive GET /v1/recoveries answers: delivered/failed of 3 queued
		errSub string
	}{
		{"delivered", []string{"0/0", "1/0", "1/0", "3/0"}, ""},
		{"failed", []string{"0/0", "2/1"}, "1 of 3 resends failed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var n atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				i := min(int(n.Add(1))-1, len(tt.steps)-1)
				var d, f int
				fmt.Sscanf(tt.steps[i], "%d/%d", &d, &f)
				fmt.Fprintf(w, `{"id":"rc_1","found":3,"queued":3,"delivered":%d,"failed":%d}`, d, f)
			}))
			defer srv.Close()
			var out strings.Builder
			err := followRecovery(context.Background(), &apiClient{base: srv.URL, key: "k", hc: srv.Client()}, "rc_1", time.Millisecond, &out)
			if (tt.errSub == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.errSub)) {
				t.Fatalf("err = %v, want %q", err, tt.errSub)
			}
			lines := strings.Count(out.String(), "\n")
			if want := len(tt.steps); tt.name == "delivered" {
				want-- // "1/0" twice prints once
				if lines != want {
					t.Errorf("%d progress lines, want %d:\n%s", lines, want, out.String())
				}
			}
			if int(n.Load()) != len(tt.steps) {
				t.Errorf("%d polls, want %d (it stops at the final answer)", n.Load(), len(tt.steps))
			}
		})
	}
	// A recovery that never finishes ends with its context.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"id":"rc_1","found":1,"queued":1,"delivered":0,"failed":0}`)
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := followRecovery(ctx, &apiClient{base: srv.URL, key: "k", hc: srv.Client()}, "rc_1", 5*time.Millisecond, io.Discard); err == nil || !strings.Contains(err.Error(), "still 1 of 1 pending") {
		t.Errorf("err = %v, want still pending", err)
	}
}

func TestPrintTable(t *testing.T) {
	var b strings.Builder
	if err := printTable(&b, []string{"A", "LONGER"}, [][]string{{"x\ty", "1"}, {"zz", "line\nbreak"}}); err != nil {
		t.Fatal(err)
	}
	want := "A    LONGER\nx y  1\nzz   line break\n"
	if b.String() != want {
		t.Errorf("got\n%q\nwant\n%q", b.String(), want)
	}
}
