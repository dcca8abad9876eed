package pipeline

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/pipeline/delivery"
	"github.com/hookrelay/hookrelay/pipeline/endpoints"
	"github.com/hookrelay/hookrelay/pipeline/webhook"
)

// Attempter makes one attempt of a delivery. The dispatcher calls it with
// one of the endpoint's in-flight slots held. Implementations must be safe
// for concurrent use and must return when ctx ends.
type Attempter interface {
	Attempt(ctx context.Context, ep *endpoints.Endpoint, body []byte, m *delivery.Meta, now time.Time) AttemptResult
}

// AttemptResult is one attempt's classified result.
type AttemptResult struct {
	StartedAt    time.Time     // when the request started
	Latency      time.Duration // request start to response headers, or to the error
	StatusCode   int           // 0 when no response was received
	Body         string        // first audit.MaxResponseBody bytes of the response
	Outcome      audit.Outcome // Delivered, RetryScheduled, Failed, Gone or Blocked
	ErrorClass   string        // "" on success; see webhook's error classes
	ErrorMessage string
	// RequestHeaders and ResponseHeaders are the headers sent (no
	// signature) and received, as audit.FormatHeaders text (redacted, at
	// most 2 KiB); "" when there were none.
	RequestHeaders, ResponseHeaders string
	// RetryAfter is the endpoint's Retry-After, 0 when it sent none.
	RetryAfter time.Duration
	// PauseUntil is set when the whole endpoint must pause (a 429): no
	// request goes to it before then.
	PauseUntil time.Time
}

// HTTPAttempter signs and sends attempts with a webhook.Sender.
type HTTPAttempter struct {
	Sender *webhook.Sender
	// Tracer makes one span per attempt, a child of the event's trace.
	// Optional. Default no-op.
	Tracer trace.Tracer

	parsed sync.Map // whsec_ text -> webhook.Secret, so a secret is decoded once
}

// secrets returns ep's unexpired secrets at now, decoded. A secret that does
// not decode (the endpoints view validated it, so this is not expected) is
// left out; with none left the sender refuses the request as invalid.
func (h *HTTPAttempter) secrets(ep *endpoints.Endpoint, now time.Time) []webhook.Secret {
	act := ep.ActiveSecrets(now)
	out := make([]webhook.Secret, 0, len(act))
	for _, s := range act {
		if v, ok := h.parsed.Load(s.Value); ok {
			out = append(out, v.(webhook.Secret))
			continue
		}
		sec, err := webhook.ParseSecret(s.Value)
		if err != nil {
			continue
		}
		h.parsed.Store(s.Value, sec)
		out = append(out, sec)
	}
	return out
}

var propagator = propagation.TraceContext{}

// Attempt sends one attempt, signed with a fresh webhook-timestamp and every
// unexpired secret of ep, and classifies the result.
func (h *HTTPAttempter) Attempt(ctx context.Context, ep *endpoints.Endpoint, body []byte, m *delivery.Meta, now time.Time) AttemptResult {
	tracer := h.Tracer
	if tracer == nil {
		tracer = noop.NewTracerProvider().Tracer("")
	}
	carrier := propagation.MapCarrier{}
	if m.TraceParent != "" {
		carrier["traceparent"] = m.TraceParent
		if m.TraceState != "" {
			carrier["tracestate"] = m.TraceState
		}
		ctx = propagator.Extract(ctx, carrier)
	}
	ctx, span := tracer.Start(ctx, "webhook.attempt", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			attribute.String("hookrelay.endpoint_id", ep.ID),
			attribute.String("hookrelay.delivery_id", m.DeliveryID),
			attribute.String("hookrelay.webhook_id", m.WebhookID),
			attribute.Int("hookrelay.attempt", m.Attempt),
		))
	defer span.End()

	hdr := make(http.Header, 2)
	propagator.Inject(ctx, propagation.HeaderCarrier(hdr))

	res := h.Sender.Send(ctx, &webhook.Request{
		URL:            ep.URL,
		Body:           body,
		WebhookID:      m.WebhookID,
		Secrets:        h.secrets(ep, now),
		Header:         hdr,
		Timeout:        ep.Timeout,
		ConnectTimeout: ep.ConnectTimeout,
	})
	c := webhook.Classify(res)
	r := AttemptResult{
		StartedAt:    res.SentAt,
		Latency:      res.Latency,
		StatusCode:   res.StatusCode,
		Body:         string(res.Body),
		Outcome:      c.Outcome,
		ErrorClass:   c.ErrorClass,
		ErrorMessage: c.ErrorMessage,
		RetryAfter:   c.RetryAfter,
	}
	if res.RequestHeader != nil {
		r.RequestHeaders = audit.FormatHeaders(redactHeaderURLs(res.RequestHeader))
	}
	if res.Header != nil {
		r.ResponseHeaders = audit.FormatHeaders(redactHeaderURLs(res.Header))
	}
	if c.PauseEndpoint {
		r.PauseUntil = res.SentAt.Add(res.Latency + c.RetryAfter)
	}
	span.SetAttributes(attribute.Int("http.response.status_code", res.StatusCode), attribute.String("hookrelay.outcome", string(c.Outcome)))
	if c.Outcome != audit.Delivered {
		span.SetStatus(codes.Error, c.ErrorClass)
	}
	return r
}

// newAttemptID returns 32 random hex characters.
func newAttemptID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// urlHeaders carry a URL (or URL references) in their value: a receiver's
// Location: …?token=abc must not reach the delivery log (issue 8, item 7).
var urlHeaders = map[string]bool{
	"Location": true, "Content-Location": true, "Link": true, "Refresh": true,
	"Referer": true, "Origin": true, "Access-Control-Allow-Origin": true,
}

// redactHeaderURLs returns h with webhook.RedactURL applied to the values of
// the headers that carry URLs, and of any value holding "://" (userinfo,
// query and fragment go); h itself is not changed.
func redactHeaderURLs(h http.Header) http.Header {
	out := make(http.Header, len(h))
	for k, vs := range h {
		cp := make([]string, len(vs))
		for i, v := range vs {
			if urlHeaders[http.CanonicalHeaderKey(k)] || strings.Contains(v, "://") {
				v = webhook.RedactURL(v)
			}
			cp[i] = v
		}
		out[k] = cp
	}
	return out
}
