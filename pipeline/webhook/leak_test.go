package webhook_test

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/pipeline/webhook"
)

// secretMarks are the parts of a URL that must never reach a log line, an
// attempt row or a record (issue 8, item 7).
var secretMarks = []string{"abc", "s3cr3t", "hunter2", "frag1"}

func assertNoSecret(t *testing.T, what, s string) {
	t.Helper()
	for _, m := range secretMarks {
		if strings.Contains(s, m) {
			t.Errorf("%s leaks %q: %s", what, m, s)
		}
	}
}

// TestClassifyRedactsLocation: a 3xx Location's userinfo, query and
// fragment never reach the error message.
func TestClassifyRedactsLocation(t *testing.T) {
	for _, loc := range []string{
		"http://127.0.0.1:17199/internal?token=abc",
		"http://user:s3cr3t@127.0.0.1:17199/internal",
		"https://hooks.example/x#frag1",
		"/relative?token=abc",
		"//other.example/p?token=abc&b=hunter2",
		"http://[::1/?token=abc", // does not parse
		"http://x/?q=\"abc\" hunter2",
	} {
		for _, code := range []int{301, 302, 307, 308} {
			c := webhook.Classify(webhook.Result{StatusCode: code, Location: loc})
			if c.Outcome != audit.Failed || c.ErrorClass != webhook.ClassRedirect {
				t.Errorf("%d %s: Classify = %+v, want failed/redirect", code, loc, c)
			}
			assertNoSecret(t, "error message for Location "+loc, c.ErrorMessage)
		}
	}
}

// TestSendErrorsRedactURL: the client's *url.Error carries the full request
// URL; neither Result.Err nor the classification may repeat its query,
// fragment or userinfo.
func TestSendErrorsRedactURL(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close() // connection refused from now on
	s := newSender(t, webhook.Options{AllowNetworks: loopback})
	for _, u := range []string{
		"http://127.0.0.1:" + port + "/in?token=abc&x=hunter2",
		"http://127.0.0.1:" + port + "/in#frag1",
		"http://u:s3cr3t@127.0.0.1:" + port + "/in",
		"http://no-such-host.invalid/in?token=abc",
		"http://[::1/?token=abc", // does not parse: ErrInvalidRequest
		"ftp://u:s3cr3t@hooks.example/?token=abc",
	} {
		res := s.Send(context.Background(), testRequest(t, u))
		if res.Err == nil {
			t.Fatalf("%s: no error", u)
		}
		assertNoSecret(t, u+": Result.Err", res.Err.Error())
		assertNoSecret(t, u+": ErrorMessage", webhook.Classify(res).ErrorMessage)
	}
	// A blocked address: the guard's message is about the address only.
	g := newSender(t, webhook.Options{})
	res := g.Send(context.Background(), testRequest(t, "http://127.0.0.1:"+port+"/?token=abc"))
	assertNoSecret(t, "blocked: Result.Err", res.Err.Error())
}

// TestSendRedirectLocationBounded: a hostile Location is bounded in the
// message and redacted.
func TestSendRedirectLocationBounded(t *testing.T) {
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "http://127.0.0.1:17199/internal?token=abc&pad="+strings.Repeat("p", 20000))
		w.WriteHeader(http.StatusTemporaryRedirect)
	})
	s := newSender(t, webhook.Options{AllowNetworks: loopback})
	res := s.Send(context.Background(), testRequest(t, srv.URL+"/"))
	if res.StatusCode != http.StatusTemporaryRedirect {
		t.Fatalf("status %d %v", res.StatusCode, res.Err)
	}
	c := webhook.Classify(res)
	assertNoSecret(t, "ErrorMessage", c.ErrorMessage)
	if len(c.ErrorMessage) > webhook.MaxErrorMessage {
		t.Errorf("ErrorMessage is %d bytes, want <= %d", len(c.ErrorMessage), webhook.MaxErrorMessage)
	}
	if len(res.Location) > webhook.MaxHeaderValue {
		t.Errorf("Result.Location is %d bytes, want <= %d", len(res.Location), webhook.MaxHeaderValue)
	}
}
