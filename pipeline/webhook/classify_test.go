package webhook_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/pipeline/webhook"
)

// clientErr wraps err the way http.Client.Do does.
func clientErr(err error) error {
	return &url.Error{Op: "Post", URL: "https://hooks.example/x", Err: err}
}

// dialErr wraps err the way a failed dial reaches http.Client.Do.
func dialErr(err error) error {
	return clientErr(&net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(93, 184, 215, 14), Port: 443}, Err: err})
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "net/http: TLS handshake timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestClassify(t *testing.T) {
	blocked := &webhook.BlockedError{Addr: netip.MustParseAddr("::ffff:127.0.0.1"), Reason: "loopback"}
	type want struct {
		outcome audit.Outcome
		class   string
		after   time.Duration
		pause   bool
		msg     string // substring of ErrorMessage
	}
	tests := []struct {
		name string
		r    webhook.Result
		want want
	}{
		// 2xx
		{"200", webhook.Result{StatusCode: 200}, want{audit.Delivered, "", 0, false, ""}},
		{"204", webhook.Result{StatusCode: 204}, want{audit.Delivered, "", 0, false, ""}},
		{"299", webhook.Result{StatusCode: 299}, want{audit.Delivered, "", 0, false, ""}},
		{"202 with Retry-After ignored", webhook.Result{StatusCode: 202, RetryAfter: time.Hour, HasRetryAfter: true}, want{audit.Delivered, "", 0, false, ""}},
		// 3xx: never followed, permanent
		{"301", webhook.Result{StatusCode: 301, Location: "https://new.example/"}, want{audit.Failed, "redirect", 0, false, "Location: https://new.example/"}},
		{"302", webhook.Result{StatusCode: 302}, want{audit.Failed, "redirect", 0, false, "HTTP 302 Found: redirects are not followed"}},
		{"304", webhook.Result{StatusCode: 304}, want{audit.Failed, "redirect", 0, false, ""}},
		{"307", webhook.Result{StatusCode: 307}, want{audit.Failed, "redirect", 0, false, ""}},
		{"308", webhook.Result{StatusCode: 308}, want{audit.Failed, "redirect", 0, false, ""}},
		// permanent 4xx
		{"400", webhook.Result{StatusCode: 400}, want{audit.Failed, "http_400", 0, false, "HTTP 400 Bad Request"}},
		{"401", webhook.Result{StatusCode: 401}, want{audit.Failed, "http_401", 0, false, ""}},
		{"403", webhook.Result{StatusCode: 403}, want{audit.Failed, "http_403", 0, false, ""}},
		{"404", webhook.Result{StatusCode: 404}, want{audit.Failed, "http_404", 0, false, ""}},
		{"409", webhook.Result{StatusCode: 409}, want{audit.Failed, "http_409", 0, false, ""}},
		{"413", webhook.Result{StatusCode: 413}, want{audit.Failed, "http_413", 0, false, ""}},
		{"422", webhook.Result{StatusCode: 422}, want{audit.Failed, "http_422", 0, false, ""}},
		{"400 with Retry-After still permanent", webhook.Result{StatusCode: 400, RetryAfter: time.Second, HasRetryAfter: true}, want{audit.Failed, "http_400", 0, false, ""}},
		{"410 gone", webhook.Result{StatusCode: 410}, want{audit.Gone, "http_410", 0, false, "HTTP 410 Gone"}},
		// odd statuses
		{"101", webhook.Result{StatusCode: 101}, want{audit.Failed, "http_101", 0, false, ""}},
		{"600", webhook.Result{StatusCode: 600}, want{audit.Failed, "http_600", 0, false, "HTTP 600"}},
		// retryable statuses
		{"408", webhook.Result{StatusCode: 408}, want{audit.RetryScheduled, "http_408", 0, false, ""}},
		{"429 no Retry-After", webhook.Result{StatusCode: 429}, want{audit.RetryScheduled, "http_429", 60 * time.Second, true, "pausing 1m0s"}},
		{"429 Retry-After 5s", webhook.Result{StatusCode: 429, RetryAfter: 5 * time.Second, HasRetryAfter: true}, want{audit.RetryScheduled, "http_429", 5 * time.Second, true, "Retry-After 5s"}},
		{"429 Retry-After 0", webhook.Result{StatusCode: 429, HasRetryAfter: true}, want{audit.RetryScheduled, "http_429", 0, true, ""}},
		{"500", webhook.Result{StatusCode: 500}, want{audit.RetryScheduled, "http_500", 0, false, "Internal Server Error"}},
		{"502", webhook.Result{StatusCode: 502}, want{audit.RetryScheduled, "http_502", 0, false, ""}},
		{"503", webhook.Result{StatusCode: 503}, want{audit.RetryScheduled, "http_503", 0, false, ""}},
		{"503 Retry-After 2m", webhook.Result{StatusCode: 503, RetryAfter: 2 * time.Minute, HasRetryAfter: true}, want{audit.RetryScheduled, "http_503", 2 * time.Minute, false, "Retry-After 2m0s"}},
		{"504", webhook.Result{StatusCode: 504}, want{audit.RetryScheduled, "http_504", 0, false, ""}},
		{"599", webhook.Result{StatusCode: 599}, want{audit.RetryScheduled, "http_599", 0, false, ""}},
		// SSRF guard, through the client's wrapping
		{"blocked", webhook.Result{Err: dialErr(blocked)}, want{audit.Blocked, "ssrf", 0, false, "refused to connect to ::ffff:127.0.0.1"}},
		{"blocked bare", webhook.Result{Err: blocked}, want{audit.Blocked, "ssrf", 0, false, "loopback"}},
		// refused before sending
		{"invalid request", webhook.Result{Err: fmt.Errorf("%w: URL scheme \"ftp\"", webhook.ErrInvalidRequest)}, want{audit.Failed, "invalid_request", 0, false, "ftp"}},
		{"undialable host", webhook.Result{Err: fmt.Errorf("%w: %w", webhook.ErrInvalidRequest, &webhook.HostError{Host: "127.1", Reason: "non-canonical"})}, want{audit.Failed, "invalid_host", 0, false, "127.1"}},
		{"connect error with a token in the URL", webhook.Result{Err: &url.Error{Op: "Post", URL: "https://hooks.example/x?token=abc", Err: syscall.ECONNREFUSED}}, want{audit.RetryScheduled, "connect", 0, false, "x?REDACTED"}},
		// caller canceled
		{"canceled", webhook.Result{Err: clientErr(context.Canceled)}, want{audit.RetryScheduled, "canceled", 0, false, ""}},
		// DNS
		{"dns not found", webhook.Result{Err: dialErr(&net.DNSError{Err: "no such host", Name: "nope.example", IsNotFound: true})}, want{audit.RetryScheduled, "dns", 0, false, "no such host"}},
		{"dns timeout is dns", webhook.Result{Err: dialErr(&net.DNSError{Err: "i/o timeout", Name: "slow.example", IsTimeout: true})}, want{audit.RetryScheduled, "dns", 0, false, ""}},
		// TLS
		{"tls unknown authority", webhook.Result{Err: clientErr(&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}})}, want{audit.RetryScheduled, "tls", 0, false, ""}},
		{"tls hostname", webhook.Result{Err: clientErr(x509.HostnameError{Certificate: &x509.Certificate{}, Host: "a.example"})}, want{audit.RetryScheduled, "tls", 0, false, ""}},
		{"tls record header", webhook.Result{Err: clientErr(tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"})}, want{audit.RetryScheduled, "tls", 0, false, "TLS handshake"}},
		{"tls alert", webhook.Result{Err: clientErr(&net.OpError{Op: "remote error", Err: tls.AlertError(40)})}, want{audit.RetryScheduled, "tls", 0, false, ""}},
		// timeouts
		{"deadline", webhook.Result{Err: clientErr(context.DeadlineExceeded)}, want{audit.RetryScheduled, "timeout", 0, false, "deadline exceeded"}},
		{"connect deadline", webhook.Result{Err: dialErr(context.DeadlineExceeded)}, want{audit.RetryScheduled, "timeout", 0, false, ""}},
		{"i/o timeout", webhook.Result{Err: clientErr(&net.OpError{Op: "read", Err: os.ErrDeadlineExceeded})}, want{audit.RetryScheduled, "timeout", 0, false, ""}},
		{"tls handshake timeout", webhook.Result{Err: clientErr(timeoutErr{})}, want{audit.RetryScheduled, "timeout", 0, false, "TLS handshake timeout"}},
		// resets
		{"reset", webhook.Result{Err: clientErr(&net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)})}, want{audit.RetryScheduled, "reset", 0, false, ""}},
		{"broken pipe", webhook.Result{Err: clientErr(&net.OpError{Op: "write", Err: os.NewSyscallError("write", syscall.EPIPE)})}, want{audit.RetryScheduled, "reset", 0, false, ""}},
		{"EOF before response", webhook.Result{Err: clientErr(io.EOF)}, want{audit.RetryScheduled, "reset", 0, false, "EOF"}},
		{"unexpected EOF", webhook.Result{Err: clientErr(io.ErrUnexpectedEOF)}, want{audit.RetryScheduled, "reset", 0, false, ""}},
		// connect
		{"refused", webhook.Result{Err: dialErr(os.NewSyscallError("connect", syscall.ECONNREFUSED))}, want{audit.RetryScheduled, "connect", 0, false, "connection refused"}},
		{"host unreachable", webhook.Result{Err: dialErr(os.NewSyscallError("connect", syscall.EHOSTUNREACH))}, want{audit.RetryScheduled, "connect", 0, false, ""}},
		{"network unreachable", webhook.Result{Err: dialErr(os.NewSyscallError("connect", syscall.ENETUNREACH))}, want{audit.RetryScheduled, "connect", 0, false, ""}},
		{"other dial error", webhook.Result{Err: dialErr(errors.New("socket: too many open files"))}, want{audit.RetryScheduled, "connect", 0, false, ""}},
		// anything else
		{"other", webhook.Result{Err: clientErr(errors.New("http2: server sent GOAWAY"))}, want{audit.RetryScheduled, "network", 0, false, "GOAWAY"}},
		{"error beats status", webhook.Result{StatusCode: 200, Err: clientErr(io.EOF)}, want{audit.RetryScheduled, "reset", 0, false, ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := webhook.Classify(tt.r)
			w := tt.want
			if c.Outcome != w.outcome || c.ErrorClass != w.class || c.RetryAfter != w.after || c.PauseEndpoint != w.pause {
				t.Errorf("Classify = {%s %q after=%s pause=%v}, want {%s %q after=%s pause=%v}",
					c.Outcome, c.ErrorClass, c.RetryAfter, c.PauseEndpoint, w.outcome, w.class, w.after, w.pause)
			}
			if c.Retryable != (c.Outcome == audit.RetryScheduled) {
				t.Errorf("Retryable = %v with outcome %s", c.Retryable, c.Outcome)
			}
			if !c.Outcome.Valid() {
				t.Errorf("outcome %q is not an audit.Outcome", c.Outcome)
			}
			if (c.Outcome == audit.Delivered) != (c.ErrorMessage == "" && c.ErrorClass == "") {
				t.Errorf("ErrorMessage %q / class %q for outcome %s", c.ErrorMessage, c.ErrorClass, c.Outcome)
			}
			if !strings.Contains(c.ErrorMessage, w.msg) {
				t.Errorf("ErrorMessage = %q, want it to contain %q", c.ErrorMessage, w.msg)
			}
		})
	}
}

func TestClassifyTruncatesMessage(t *testing.T) {
	long := strings.Repeat("é", 2000) // 2 bytes each
	c := webhook.Classify(webhook.Result{Err: errors.New(long)})
	if len(c.ErrorMessage) > webhook.MaxErrorMessage || len(c.ErrorMessage) < webhook.MaxErrorMessage-1 {
		t.Errorf("len(ErrorMessage) = %d, want about %d", len(c.ErrorMessage), webhook.MaxErrorMessage)
	}
	if !strings.HasSuffix(c.ErrorMessage, "é") {
		t.Error("truncation split a rune")
	}
}
