// Package delivery is the format of a delivery record: the header keys
// every delivery carries and [Meta], their one codec. A delivery record's
// value is the exact webhook body that is signed and sent; it moves unchanged
// between the deliveries topic, the retry tiers and the DLQ, and only its
// headers are rewritten on the way.
package delivery

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Header keys of a delivery record. A delivery record's value is the exact
// webhook body that is signed and sent; everything else about the delivery
// travels in these headers, on the deliveries topic, on every tier topic and
// on the DLQ alike, so a record moves between topics unchanged but for the
// headers a hop rewrites. They are defined here once; [Meta] is their codec.
const (
	HeaderDeliveryID     = "hookrelay-delivery-id"      // one per (event, endpoint); stable across attempts
	HeaderWebhookID      = "hookrelay-webhook-id"       // Standard Webhooks webhook-id; stable, same for every endpoint
	HeaderEndpointID     = "hookrelay-endpoint-id"      // also the record key
	HeaderEventID        = "hookrelay-event-id"         // CloudEvents id
	HeaderEventSource    = "hookrelay-event-source"     // CloudEvents source
	HeaderEventType      = "hookrelay-event-type"       // CloudEvents type
	HeaderTenant         = "hookrelay-tenant"           // CloudEvents tenantid extension; absent for none
	HeaderEventTime      = "hookrelay-event-time"       // unix ms: the event's time, else its record timestamp; the queue TTL counts from it
	HeaderAttempt        = "hookrelay-attempt"          // decimal: number of the next attempt, 1-based
	HeaderDueAt          = "hookrelay-due-at"           // unix ms: the next attempt is not made before this
	HeaderFirstAttemptAt = "hookrelay-first-attempt-at" // unix ms: when attempt 1 was made; absent before it
	HeaderLastError      = "hookrelay-last-error"       // error class of the previous attempt, e.g. "http_503"
	HeaderPauseUntil     = "hookrelay-pause-until"      // unix ms: the endpoint is paused (429) until then
	HeaderParks          = "hookrelay-parks"            // decimal: times parked without an attempt (backlog or pause)
	HeaderHistory        = "hookrelay-history"          // JSON array of AttemptSummary, oldest first
	HeaderReason         = "hookrelay-reason"           // DLQ and invalid records: why the record is there
	HeaderTraceParent    = "traceparent"                // W3C trace context (CloudEvents distributed tracing extension)
	HeaderTraceState     = "tracestate"                 // W3C trace context
)

// HeaderIncarnation is the endpoint's incarnation when the delivery was
// fanned out (endpoints.Endpoint.Incarnation), absent when it had none. The
// dispatcher sends the delivery only while the endpoint still has it (and
// still matches the tenant and event type headers); a resend that puts a
// DLQ record back on the deliveries topic gets the same check.
const HeaderIncarnation = "hookrelay-endpoint-incarnation"

// AttemptSummary is one past attempt as carried in [HeaderHistory], so a DLQ
// record holds its whole story and a later resend needs no other store.
type AttemptSummary struct {
	Number     int       `json:"n"`
	At         time.Time `json:"at"`
	HTTPStatus int       `json:"status,omitempty"`
	Outcome    string    `json:"outcome"`
	ErrorClass string    `json:"error,omitempty"`
}

// Meta is everything a delivery record carries besides its body. The zero
// value of a time field means "absent" and encodes to no header.
type Meta struct {
	DeliveryID     string
	WebhookID      string
	EndpointID     string
	Incarnation    string // the endpoint's incarnation at fan-out (HeaderIncarnation); "" when it had none
	EventID        string
	EventSource    string
	EventType      string
	Tenant         string
	EventTime      time.Time
	Attempt        int // number of the next attempt, 1-based; 0 is read as 1
	DueAt          time.Time
	FirstAttemptAt time.Time
	LastError      string
	PauseUntil     time.Time
	Parks          int
	History        []AttemptSummary
	Reason         string
	TraceParent    string
	TraceState     string
}

// Headers encodes m as record headers, in a fixed order. Empty strings, zero
// times and zero counts are omitted.
func (m *Meta) Headers() []kgo.RecordHeader {
	hs := make([]kgo.RecordHeader, 0, 16)
	str := func(k, v string) {
		if v != "" {
			hs = append(hs, kgo.RecordHeader{Key: k, Value: []byte(v)})
		}
	}
	ms := func(k string, t time.Time) {
		if !t.IsZero() {
			hs = append(hs, kgo.RecordHeader{Key: k, Value: strconv.AppendInt(nil, t.UnixMilli(), 10)})
		}
	}
	num := func(k string, n int) {
		if n != 0 {
			hs = append(hs, kgo.RecordHeader{Key: k, Value: strconv.AppendInt(nil, int64(n), 10)})
		}
	}
	str(HeaderDeliveryID, m.DeliveryID)
	str(HeaderWebhookID, m.WebhookID)
	str(HeaderEndpointID, m.EndpointID)
	str(HeaderIncarnation, m.Incarnation)
	str(HeaderEventID, m.EventID)
	str(HeaderEventSource, m.EventSource)
	str(HeaderEventType, m.EventType)
	str(HeaderTenant, m.Tenant)
	ms(HeaderEventTime, m.EventTime)
	num(HeaderAttempt, m.Attempt)
	ms(HeaderDueAt, m.DueAt)
	ms(HeaderFirstAttemptAt, m.FirstAttemptAt)
	str(HeaderLastError, m.LastError)
	ms(HeaderPauseUntil, m.PauseUntil)
	num(HeaderParks, m.Parks)
	if len(m.History) > 0 {
		b, _ := json.Marshal(m.History) // cannot fail: plain fields only
		hs = append(hs, kgo.RecordHeader{Key: HeaderHistory, Value: b})
	}
	str(HeaderReason, m.Reason)
	str(HeaderTraceParent, m.TraceParent)
	str(HeaderTraceState, m.TraceState)
	return hs
}

// ParseMeta decodes a delivery record's headers. Unknown headers are ignored.
// It fails, naming the header, when a known header is malformed or when
// DeliveryID, WebhookID or EndpointID is missing: such a record is sent to the
// DLQ by its reader, never dropped.
func ParseMeta(hs []kgo.RecordHeader) (Meta, error) {
	var m Meta
	for _, h := range hs {
		v := string(h.Value)
		var err error
		switch h.Key {
		case HeaderDeliveryID:
			m.DeliveryID = v
		case HeaderWebhookID:
			m.WebhookID = v
		case HeaderEndpointID:
			m.EndpointID = v
		case HeaderIncarnation:
			m.Incarnation = v
		case HeaderEventID:
			m.EventID = v
		case HeaderEventSource:
			m.EventSource = v
		case HeaderEventType:
			m.EventType = v
		case HeaderTenant:
			m.Tenant = v
		case HeaderEventTime:
			m.EventTime, err = parseMs(v)
		case HeaderAttempt:
			m.Attempt, err = strconv.Atoi(v)
		case HeaderDueAt:
			m.DueAt, err = parseMs(v)
		case HeaderFirstAttemptAt:
			m.FirstAttemptAt, err = parseMs(v)
		case HeaderLastError:
			m.LastError = v
		case HeaderPauseUntil:
			m.PauseUntil, err = parseMs(v)
		case HeaderParks:
			m.Parks, err = strconv.Atoi(v)
		case HeaderHistory:
			err = json.Unmarshal(h.Value, &m.History)
		case HeaderReason:
			m.Reason = v
		case HeaderTraceParent:
			m.TraceParent = v
		case HeaderTraceState:
			m.TraceState = v
		}
		if err != nil {
			return m, fmt.Errorf("retrytiers: header %s: %w", h.Key, err)
		}
	}
	if m.Attempt == 0 {
		m.Attempt = 1
	}
	switch {
	case m.DeliveryID == "":
		return m, fmt.Errorf("retrytiers: header %s missing", HeaderDeliveryID)
	case m.WebhookID == "":
		return m, fmt.Errorf("retrytiers: header %s missing", HeaderWebhookID)
	case m.EndpointID == "":
		return m, fmt.Errorf("retrytiers: header %s missing", HeaderEndpointID)
	}
	return m, nil
}

func parseMs(v string) (time.Time, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, err
	}
	return time.UnixMilli(n).UTC(), nil
}
