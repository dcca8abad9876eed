package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"syscall"
	"time"

	"github.com/hookrelay/hookrelay/audit"
)

// Error classes of an attempt, stored in audit.Attempt.ErrorClass and in the
// retrytiers last-error header. An HTTP answer that is not 2xx or 3xx has the
// class "http_<code>" (see [HTTPClass]).
const (
	ClassTimeout        = "timeout"         // the request or connect timeout (or the caller's deadline) expired; retried
	ClassConnect        = "connect"         // TCP connect failed: refused, unreachable; retried
	ClassDNS            = "dns"             // the host name did not resolve; retried
	ClassTLS            = "tls"             // TLS handshake or certificate failure; retried
	ClassReset          = "reset"           // the connection was reset or closed before a response; retried
	ClassNetwork        = "network"         // any other transport error; retried
	ClassCanceled       = "canceled"        // the caller's context was canceled (shutdown, revocation); see Classify
	ClassSSRF           = "ssrf"            // the SSRF guard refused the address; permanent (blocked)
	ClassRedirect       = "redirect"        // a 3xx answer; redirects are never followed; permanent (failed)
	ClassInvalidRequest = "invalid_request" // Send refused the request (bad URL, no secret); permanent (failed)
	ClassInvalidHost    = "invalid_host"    // the URL host can never be dialled (a *HostError, e.g. "127.1"); permanent (failed)
)

// HTTPClass returns the error class of an HTTP status: "http_<code>", e.g.
// "http_503".
func HTTPClass(code int) string { return "http_" + strconv.Itoa(code) }

// DefaultRetryAfter429 is the endpoint pause after a 429 without a usable
// Retry-After header: DefaultPause, 60 s (the seed's
// "Retry-After or 60").
const DefaultRetryAfter429 = DefaultPause

// MaxErrorMessage bounds Classification.ErrorMessage, in bytes: 1 KiB, cut
// on a rune boundary after redaction.
const MaxErrorMessage = 1024

// Classification is the verdict on one attempt.
type Classification struct {
	// Outcome is one of audit.Delivered, RetryScheduled, Failed, Gone or
	// Blocked; Classify never returns the outcomes that involve no request.
	Outcome audit.Outcome
	// ErrorClass is one of the Class constants or "http_<code>"; "" when
	// delivered.
	ErrorClass string
	// ErrorMessage is a human-readable detail for the log, at most
	// MaxErrorMessage (1 KiB) bytes; "" when delivered. Every URL in it
	// (the request URL inside a *url.Error, a redirect's Location) has its
	// userinfo, query and fragment redacted ([RedactText]), so it can be
	// stored and logged as is.
	ErrorMessage string
	// Retryable is Outcome == audit.RetryScheduled.
	Retryable bool
	// RetryAfter is the receiver's requested wait: the next attempt must not
	// be made before SentAt+Latency+RetryAfter. Zero means none requested;
	// the retry schedule alone decides. Capping it (at the longest tier) is
	// the schedule's job.
	RetryAfter time.Duration
	// PauseEndpoint asks the dispatcher to send nothing to this endpoint for
	// RetryAfter (a 429: "pause the whole endpoint", issue 4).
	PauseEndpoint bool
}

// Classify maps one attempt's Result to its outcome. It is pure and total.
// The rules (seed "Webhook Delivery Throttling and Retries" policy table:
// retry_on timeouts, connection errors, 408, 429, 5xx; honour_retry_after;
// spec "Delivery success and failure"):
//
//	2xx                          delivered
//	3xx                          failed, class "redirect" (never followed)
//	408, 5xx                     retry_scheduled, "http_<code>", RetryAfter from the header if present
//	429                          retry_scheduled, "http_429", PauseEndpoint, RetryAfter from the
//	                             header, else DefaultRetryAfter429 (60 s)
//	410                          gone, "http_410" (disable the endpoint)
//	any other status             failed, "http_<code>"
//	*BlockedError                blocked, "ssrf"
//	*HostError                   failed, "invalid_host" (the host can never be dialled)
//	ErrInvalidRequest            failed, "invalid_request"
//	context.Canceled             retry_scheduled, "canceled"
//	DNS, TLS, timeout, reset,    retry_scheduled, "dns", "tls", "timeout", "reset",
//	connect, other transport     "connect", "network" (checked in that order)
//
// A canceled attempt is not the endpoint's fault: the dispatcher that
// canceled it (shutdown, partition revocation) should leave the delivery
// uncommitted rather than schedule it, since the request may have reached
// the receiver; Classify still returns a well-formed verdict for it.
// Retry-After is honoured on every retryable status, so 503 is covered too.
func Classify(r Result) Classification {
	if r.Err != nil {
		return classifyErr(r.Err)
	}
	code := r.StatusCode
	msg := "HTTP " + strconv.Itoa(code)
	if text := http.StatusText(code); text != "" {
		msg += " " + text
	}
	switch {
	case code >= 200 && code < 300:
		return Classification{Outcome: audit.Delivered}
	case code >= 300 && code < 400:
		msg += ": redirects are not followed; update the endpoint URL"
		if r.Location != "" {
			msg += " (Location: " + RedactURL(boundText(r.Location, MaxHeaderValue)) + ")"
		}
		return permanent(audit.Failed, ClassRedirect, msg)
	case code == http.StatusGone:
		return permanent(audit.Gone, HTTPClass(code), msg+": the endpoint asked to stop receiving webhooks")
	case code == http.StatusTooManyRequests:
		c := Classification{Outcome: audit.RetryScheduled, ErrorClass: HTTPClass(code), Retryable: true, PauseEndpoint: true}
		c.RetryAfter = DefaultRetryAfter429
		if r.HasRetryAfter {
			c.RetryAfter = r.RetryAfter
			msg += fmt.Sprintf("; Retry-After %s", r.RetryAfter)
		} else {
			msg += fmt.Sprintf("; no Retry-After, pausing %s", DefaultRetryAfter429)
		}
		c.ErrorMessage = truncate(msg)
		return c
	case code == http.StatusRequestTimeout || (code >= 500 && code < 600):
		c := Classification{Outcome: audit.RetryScheduled, ErrorClass: HTTPClass(code), Retryable: true}
		if r.HasRetryAfter {
			c.RetryAfter = r.RetryAfter
			msg += fmt.Sprintf("; Retry-After %s", r.RetryAfter)
		}
		c.ErrorMessage = truncate(msg)
		return c
	default:
		return permanent(audit.Failed, HTTPClass(code), msg)
	}
}

func permanent(o audit.Outcome, class, msg string) Classification {
	return Classification{Outcome: o, ErrorClass: class, ErrorMessage: truncate(msg)}
}

func retry(class string, err error) Classification {
	return Classification{Outcome: audit.RetryScheduled, ErrorClass: class, ErrorMessage: truncate(err.Error()), Retryable: true}
}

// classifyErr classifies an attempt that got no response status, by the
// error's type (errors.As / errors.Is), not its text.
func classifyErr(err error) Classification {
	var blocked *BlockedError
	if errors.As(err, &blocked) {
		return permanent(audit.Blocked, ClassSSRF, blocked.Error())
	}
	var hostErr *HostError
	if errors.As(err, &hostErr) {
		return permanent(audit.Failed, ClassInvalidHost, err.Error())
	}
	if errors.Is(err, ErrInvalidRequest) {
		return permanent(audit.Failed, ClassInvalidRequest, err.Error())
	}
	if errors.Is(err, context.Canceled) {
		return retry(ClassCanceled, err)
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return retry(ClassDNS, err)
	}
	if isTLSError(err) {
		return retry(ClassTLS, err)
	}
	var netErr net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout()) {
		return retry(ClassTimeout, err)
	}
	if errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return retry(ClassReset, err)
	}
	var opErr *net.OpError
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH) ||
		errors.Is(err, syscall.EHOSTDOWN) || errors.Is(err, syscall.ENETDOWN) ||
		(errors.As(err, &opErr) && opErr.Op == "dial") {
		return retry(ClassConnect, err)
	}
	return retry(ClassNetwork, err)
}

// isTLSError reports whether err comes from a TLS handshake or certificate
// check.
func isTLSError(err error) bool {
	var (
		recordErr   tls.RecordHeaderError
		alertErr    tls.AlertError
		verifyErr   *tls.CertificateVerificationError
		echErr      *tls.ECHRejectionError
		unknownErr  x509.UnknownAuthorityError
		hostnameErr x509.HostnameError
		invalidErr  x509.CertificateInvalidError
		constrErr   x509.ConstraintViolationError
		systemErr   x509.SystemRootsError
	)
	// net/http turns a RecordHeaderError that looks like an HTTP answer into
	// this plain error (transport.go); its text is the only handle on it.
	var urlErr *url.Error
	if errors.As(err, &urlErr) && urlErr.Err != nil && urlErr.Err.Error() == "http: server gave HTTP response to HTTPS client" {
		return true
	}
	return errors.As(err, &recordErr) || errors.As(err, &alertErr) || errors.As(err, &verifyErr) ||
		errors.As(err, &echErr) || errors.As(err, &unknownErr) || errors.As(err, &hostnameErr) ||
		errors.As(err, &invalidErr) || errors.As(err, &constrErr) || errors.As(err, &systemErr)
}

// truncate redacts every URL in s (RedactText) and cuts it to at most
// MaxErrorMessage bytes on a rune boundary: the one exit of every
// ErrorMessage.
func truncate(s string) string { return boundText(RedactText(s), MaxErrorMessage) }
