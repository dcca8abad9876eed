package audit

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// codecV1 is the first byte of an attempts-topic value in the binary
// encoding [Attempt.Marshal] writes. Earlier versions wrote JSON, whose first
// byte is '{' (or JSON whitespace), never 0x01, so [Attempt.Unmarshal] tells
// the two apart by it and reads both.
const codecV1 = 0x01

// The binary form, version 1 (little work to write and read; the JSON form
// cost 83 % of the audit sink's CPU, issue 14):
//
//	0x01
//	AttemptID, DeliveryID, EventID, WebhookID, EventType, Tenant,
//	EndpointID, URLHost                    string: uvarint length, UTF-8 bytes
//	AttemptNumber                          varint
//	AttemptedAt                            time
//	LatencyMs, HTTPStatus                  varint
//	Outcome, ErrorClass, ErrorMessage,
//	ResponseBody                           string
//	NextAttemptAt                          time
//	optional, appended (issue 12; absent in records written before it):
//	FirstAttemptAt                         time
//	RequestHeaders, BodyPreview,
//	ResponseHeaders                        string
//
// A time is one byte 0 (the zero time) or 1 followed by the varint of its
// Unix nanoseconds (read back in UTC). Bytes after the last field are
// ignored, so a later version may append fields that this one skips.

// maxFieldLen bounds one string field of the binary form when reading: far
// above any field's own bound (a response body is at most 4 KiB), it keeps a
// corrupt length from allocating much.
const maxFieldLen = 1 << 20

// Marshal encodes a as the value of an attempts-topic record: the binary
// form, version 1, described above. It never fails today; the error is for
// future encodings.
func (a *Attempt) Marshal() ([]byte, error) {
	n := 1 + 9*binary.MaxVarintLen64 + len(a.AttemptID) + len(a.DeliveryID) + len(a.EventID) + len(a.WebhookID) +
		len(a.EventType) + len(a.Tenant) + len(a.EndpointID) + len(a.URLHost) + len(a.Outcome) +
		len(a.ErrorClass) + len(a.ErrorMessage) + len(a.ResponseBody) + 3*(1+binary.MaxVarintLen64) +
		len(a.RequestHeaders) + len(a.BodyPreview) + len(a.ResponseHeaders)
	b := make([]byte, 0, n)
	b = append(b, codecV1)
	for _, s := range [...]string{a.AttemptID, a.DeliveryID, a.EventID, a.WebhookID, a.EventType, a.Tenant, a.EndpointID, a.URLHost} {
		b = appendString(b, s)
	}
	b = binary.AppendVarint(b, int64(a.AttemptNumber))
	b = appendTime(b, a.AttemptedAt)
	b = binary.AppendVarint(b, a.LatencyMs)
	b = binary.AppendVarint(b, int64(a.HTTPStatus))
	for _, s := range [...]string{string(a.Outcome), a.ErrorClass, a.ErrorMessage, a.ResponseBody} {
		b = appendString(b, s)
	}
	b = appendTime(b, a.NextAttemptAt)
	b = appendTime(b, a.FirstAttemptAt)
	for _, s := range [...]string{a.RequestHeaders, a.BodyPreview, a.ResponseHeaders} {
		b = appendString(b, s)
	}
	return b, nil
}

// Unmarshal decodes an attempts-topic record value into a: the binary form
// (first byte 0x01) or the JSON form of earlier versions. It fails on a
// value of neither form, a truncated or corrupt binary value, an unknown
// binary version, an empty AttemptID, or an unknown Outcome.
func (a *Attempt) Unmarshal(b []byte) error {
	if len(b) > 0 && b[0] == codecV1 {
		if err := a.decodeV1(b[1:]); err != nil {
			return fmt.Errorf("audit: decode attempt: %w", err)
		}
	} else if len(b) > 0 && b[0] < 0x09 { // below any JSON start (whitespace, '{')
		return fmt.Errorf("audit: decode attempt: unknown encoding version %d", b[0])
	} else if err := json.Unmarshal(b, a); err != nil {
		return fmt.Errorf("audit: decode attempt: %w", err)
	}
	if a.AttemptID == "" {
		return fmt.Errorf("audit: decode attempt: empty attempt_id")
	}
	if !a.Outcome.Valid() {
		return fmt.Errorf("audit: decode attempt %s: unknown outcome %q", a.AttemptID, a.Outcome)
	}
	return nil
}

var errTruncated = errors.New("truncated binary attempt")

// reader walks the binary form; the first error sticks.
type reader struct {
	b   []byte
	err error
}

func (r *reader) str() string {
	if r.err != nil {
		return ""
	}
	n, k := binary.Uvarint(r.b)
	if k <= 0 || n > maxFieldLen || n > uint64(len(r.b)-k) {
		r.err = errTruncated
		return ""
	}
	s := string(r.b[k : k+int(n)])
	r.b = r.b[k+int(n):]
	return s
}

func (r *reader) int() int64 {
	if r.err != nil {
		return 0
	}
	v, k := binary.Varint(r.b)
	if k <= 0 {
		r.err = errTruncated
		return 0
	}
	r.b = r.b[k:]
	return v
}

func (r *reader) time() time.Time {
	if r.err != nil {
		return time.Time{}
	}
	if len(r.b) == 0 {
		r.err = errTruncated
		return time.Time{}
	}
	set := r.b[0]
	r.b = r.b[1:]
	switch set {
	case 0:
		return time.Time{}
	case 1:
		return time.Unix(0, r.int()).UTC()
	default:
		r.err = fmt.Errorf("binary attempt: bad time flag %d", set)
		return time.Time{}
	}
}

func (a *Attempt) decodeV1(b []byte) error {
	r := reader{b: b}
	*a = Attempt{
		AttemptID: r.str(), DeliveryID: r.str(), EventID: r.str(), WebhookID: r.str(),
		EventType: r.str(), Tenant: r.str(), EndpointID: r.str(), URLHost: r.str(),
	}
	a.AttemptNumber = int(r.int())
	a.AttemptedAt = r.time()
	a.LatencyMs = r.int()
	a.HTTPStatus = int(r.int())
	a.Outcome = Outcome(r.str())
	a.ErrorClass, a.ErrorMessage, a.ResponseBody = r.str(), r.str(), r.str()
	a.NextAttemptAt = r.time()
	if r.err == nil && len(r.b) > 0 { // the optional fields (issue 12)
		a.FirstAttemptAt = r.time()
		a.RequestHeaders, a.BodyPreview, a.ResponseHeaders = r.str(), r.str(), r.str()
	}
	return r.err
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, 0)
	}
	return binary.AppendVarint(append(b, 1), t.UnixNano())
}
