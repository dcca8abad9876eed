package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// ErrInvalidJSONData is returned by Body when data with a JSON content
// type is not valid JSON, and (wrapped) by Body for invalid data.
var ErrInvalidJSONData = errors.New("webhook: event data is not valid JSON")

// BodyTimestampFormat is the layout of the body's "timestamp": RFC 3339 in
// UTC with as many fractional-second digits as the time has (none for whole
// seconds), e.g. "2022-11-03T20:26:10.344522Z" (spec "Payload structure").
const BodyTimestampFormat = time.RFC3339Nano

// Body returns the webhook request body
//
//	{"type":<eventType>,"timestamp":<timestamp>,"data":<data>}
//
// compact, without HTML escaping, with the timestamp in [BodyTimestampFormat]
// (spec "Payload structure"; timestamp is when the event occurred: the
// CloudEvent's time, else its record's timestamp). data must be valid JSON
// (see events.DataJSON); it is compacted; nil or empty data becomes null.
//
// Body is deterministic: equal arguments give equal bytes. The bytes are the
// delivery record's value and are signed and sent as they are. It fails on an
// empty eventType, a zero timestamp, or invalid data (wrapping
// [ErrInvalidJSONData]).
func Body(eventType string, timestamp time.Time, data json.RawMessage) ([]byte, error) {
	return body(eventType, timestamp, data, true)
}

// BodyOfCompact is [Body] for data that is already valid JSON without
// insignificant whitespace, as events.DataJSON returns it: data is copied
// as it is, neither checked nor compacted again (fan-out's path: the event
// was validated while it was decoded). For such data it returns exactly
// Body's bytes; for any other data the body it returns is not valid JSON.
// It fails on an empty eventType or a zero timestamp.
func BodyOfCompact(eventType string, timestamp time.Time, data json.RawMessage) ([]byte, error) {
	return body(eventType, timestamp, data, false)
}

// body is Body, compacting (and so checking) data only when compact is set.
func body(eventType string, timestamp time.Time, data json.RawMessage, compact bool) ([]byte, error) {
	if eventType == "" {
		return nil, errors.New("webhook: body: empty event type")
	}
	if timestamp.IsZero() {
		return nil, errors.New("webhook: body: zero timestamp")
	}
	var buf bytes.Buffer
	buf.Grow(len(eventType) + len(data) + 64)
	buf.WriteString(`{"type":`)
	if err := appendString(&buf, eventType); err != nil {
		return nil, fmt.Errorf("webhook: body: %w", err)
	}
	buf.WriteString(`,"timestamp":"`)
	buf.Write(timestamp.UTC().AppendFormat(buf.AvailableBuffer(), BodyTimestampFormat))
	buf.WriteString(`","data":`)
	if len(data) == 0 {
		buf.WriteString("null")
	} else if !compact {
		buf.Write(data)
	} else if err := json.Compact(&buf, data); err != nil { // validates as it goes; does not HTML-escape
		return nil, fmt.Errorf("webhook: body: %w: %v", ErrInvalidJSONData, err)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// appendString writes s to buf as a JSON string without HTML escaping
// (invalid UTF-8 becomes U+FFFD, as encoding/json does).
func appendString(buf *bytes.Buffer, s string) error {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return err
	}
	buf.Truncate(buf.Len() - 1) // Encode's trailing newline
	return nil
}
