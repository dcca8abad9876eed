// Package audit records every delivery attempt hookrelay makes and serves the
// customer-visible delivery log.
//
// This root package is vocabulary: the [Attempt] record and its [Outcome]s,
// the [Store] interface with its queries, an in-memory [Memory] store and the
// log's text rendering. It imports only the standard library. The machinery
// lives below it:
//
//   - audit/chstore: the ClickHouse store (schema, migrations, queries);
//   - audit/sink: the Kafka consumer that batch-inserts the attempts topic
//     into a Store (Kafka is the buffer, so a ClickHouse outage loses nothing);
//   - audit/audittest: the conformance suite every Store passes.
//
// The dispatcher produces an Attempt to the attempts topic for every attempt:
// a [Sending] row, awaited, before each request, and the attempt's outcome
// (same AttemptID) in the transaction that retires the delivery. The sink
// resolves a Sending row whose outcome never comes as [Interrupted].
package audit

import (
	"time"
)

// Outcome is the result of one attempt as shown in the delivery log. The set
// is closed; the values are stored verbatim in ClickHouse.
type Outcome string

// The outcomes of an attempt (seed "Webhook Delivery Throttling and Retries",
// delivery policy table, and the delivery-path issue).
const (
	// Delivered: the endpoint answered 2xx.
	Delivered Outcome = "delivered"
	// RetryScheduled: a timeout, connection, DNS or TLS error, 408, 429 or
	// 5xx; another attempt is scheduled at NextAttemptAt.
	RetryScheduled Outcome = "retry_scheduled"
	// Failed: any other 3xx or 4xx; permanent, never retried.
	Failed Outcome = "failed"
	// Gone: 410; permanent, and the endpoint is disabled with reason gone.
	Gone Outcome = "gone"
	// Blocked: the SSRF guard refused the resolved address; permanent.
	Blocked Outcome = "blocked"
	// Abandoned: the endpoint was disabled or deleted, or is no longer the
	// endpoint the delivery was made for (re-created, another tenant, a
	// subscription that no longer matches); no request was sent. ErrorClass
	// says which (e.g. "endpoint_recreated", "tenant_mismatch").
	Abandoned Outcome = "abandoned"
	// Exhausted: the last attempt of the retry schedule failed; the delivery
	// went to the DLQ.
	Exhausted Outcome = "exhausted"
	// Expired: the event was older than the queue TTL before an attempt; no
	// request was sent and the delivery went to the DLQ.
	Expired Outcome = "expired"
	// Skipped: fan-out matched the event to an endpoint that is not active
	// (ErrorClass e.g. "endpoint_disabled", "endpoint_gone"); no request
	// was sent and the delivery went to the DLQ, so it can be resent.
	Skipped Outcome = "skipped"
	// ConfigError: the endpoint's config cannot be used (an invalid record
	// written by another producer; ErrorMessage names the field and why);
	// no request was sent and the delivery went to the DLQ.
	ConfigError Outcome = "config_error"
	// Sending: a request is being made; replaced by the attempt's outcome,
	// or by Interrupted. The dispatcher writes it, durably, before the
	// request leaves; it lives on the attempts topic only (the audit sink
	// holds it until it is resolved and never stores it).
	Sending Outcome = "sending"
	// Interrupted: the process stopped (or lost the delivery's partition)
	// during the attempt, after its Sending row was written, and its outcome
	// was never recorded: the receiver may have got the request. The audit
	// sink writes it (error_class "interrupted") when a later row of the
	// same delivery arrives or no outcome came within its grace period; the
	// attempt's real outcome replaces it if it arrives after all. The
	// delivery is attempted again by the partition's next owner.
	Interrupted Outcome = "interrupted"
)

// Outcomes lists every Outcome, in the order above.
var Outcomes = []Outcome{Delivered, RetryScheduled, Failed, Gone, Blocked, Abandoned, Exhausted, Expired, Skipped, ConfigError, Sending, Interrupted}

// Valid reports whether o is one of [Outcomes].
func (o Outcome) Valid() bool {
	for _, v := range Outcomes {
		if o == v {
			return true
		}
	}
	return false
}

// Final reports whether no further attempt follows an attempt with this
// outcome. RetryScheduled, Sending and Interrupted are not final.
func (o Outcome) Final() bool { return o != RetryScheduled && o != Sending && o != Interrupted }

// MaxResponseBody is how many bytes of a response body an Attempt keeps: 4 KiB.
const MaxResponseBody = 4 << 10

// Attempt is one row of the delivery log: one real HTTP attempt, or one
// decision not to send (abandoned, expired, skipped, config_error).
//
// Its binary form ([Attempt.Marshal]; JSON before issue 14, still read) is
// the value of a record on the attempts topic, keyed by
// EndpointID. AttemptID is made once per attempt and is the deduplication key
// of the store, so a retried insert never shows twice.
type Attempt struct {
	AttemptID     string    `json:"attempt_id"`      // unique per attempt (random, 32 hex chars)
	DeliveryID    string    `json:"delivery_id"`     // one per (event, endpoint); stable across attempts
	EventID       string    `json:"event_id"`        // the CloudEvent's id
	WebhookID     string    `json:"webhook_id"`      // the Standard Webhooks webhook-id header
	EventType     string    `json:"event_type"`      // the CloudEvent's type
	Tenant        string    `json:"tenant"`          // the event's tenantid extension; "" for none
	EndpointID    string    `json:"endpoint_id"`     // the endpoint's ID
	URLHost       string    `json:"url_host"`        // host[:port] of the endpoint URL
	AttemptNumber int       `json:"attempt_number"`  // 1 for the first attempt
	AttemptedAt   time.Time `json:"attempted_at"`    // when the attempt started, millisecond precision, UTC
	LatencyMs     int64     `json:"latency_ms"`      // request start to response headers (or error), ms
	HTTPStatus    int       `json:"http_status"`     // 0 when no response was received
	Outcome       Outcome   `json:"outcome"`         // see Outcome
	ErrorClass    string    `json:"error_class"`     // e.g. "timeout", "connect", "dns", "tls", "http_503", "ssrf"; "" on success
	ErrorMessage  string    `json:"error_message"`   // human-readable detail, at most 1 KiB, URLs redacted (webhook.Classify); "" on success
	ResponseBody  string    `json:"response_body"`   // first MaxResponseBody (4 KiB) bytes of the response body
	NextAttemptAt time.Time `json:"next_attempt_at"` // zero unless Outcome is RetryScheduled
	// FirstAttemptAt is when the delivery's attempt 1 was made (from the
	// delivery's metadata; equal to AttemptedAt on attempt 1; a resend
	// starts again), millisecond precision, UTC. Zero when unknown (rows
	// written before it existed, fan-out's not-sent rows): time-to-success
	// figures skip those.
	FirstAttemptAt time.Time `json:"first_attempt_at"`
	// RequestHeaders are the request's headers as sent, without the
	// signature ([FormatHeaders]: "Name: value" lines, credentials
	// redacted, at most MaxHeaders (2 KiB)); "" when no request was sent or
	// for rows written before issue 12.
	RequestHeaders string `json:"request_headers,omitempty"`
	// BodyPreview is the first MaxBodyPreview (512) bytes of the request
	// body, valid UTF-8 ([BodyPreview]); "" as RequestHeaders.
	BodyPreview string `json:"body_preview,omitempty"`
	// ResponseHeaders are the response's headers ([FormatHeaders]:
	// Set-Cookie and credentials redacted, at most 2 KiB); "" when no
	// response was received.
	ResponseHeaders string `json:"response_headers,omitempty"`
}
