package events

import (
	"errors"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/pipeline/delivery"
)

// Headers that [InvalidRecord] adds to a record of the invalid topic.
const (
	// HeaderReason is the reason code, one of [Reasons]; the same key as a
	// DLQ record's reason (delivery.HeaderReason).
	HeaderReason = delivery.HeaderReason
	// HeaderReasonDetail is [InvalidError.Detail] (at most MaxDetailBytes).
	HeaderReasonDetail = "hookrelay-reason-detail"
	// HeaderOriginalTopic, HeaderOriginalPartition and HeaderOriginalOffset
	// locate the original record; partition and offset are decimal.
	HeaderOriginalTopic     = "hookrelay-original-topic"
	HeaderOriginalPartition = "hookrelay-original-partition"
	HeaderOriginalOffset    = "hookrelay-original-offset"

	// HeaderEventID, HeaderEventSource, HeaderEventType and HeaderTenant
	// carry the event's id, source, type and tenantid as far as they can
	// be recovered from the invalid record (see [InvalidRecord]); the same
	// keys as on delivery records (pipeline/delivery). Each is absent when not
	// found. They are what the record says, not validated attributes.
	HeaderEventID     = delivery.HeaderEventID
	HeaderEventSource = delivery.HeaderEventSource
	HeaderEventType   = delivery.HeaderEventType
	HeaderTenant      = delivery.HeaderTenant
)

// MaxDetailBytes bounds the [HeaderReasonDetail] header and each of the
// recovered identity headers.
const MaxDetailBytes = 1024

// MaxIdentityScanBytes bounds the scan of a structured value for the
// identity headers: 1 MiB from the start of the value. Members that start
// after it are not found.
const MaxIdentityScanBytes = 1 << 20

// identity names the recoverable attributes and their headers, in the
// order the headers are appended.
var identity = []struct{ attr, header string }{
	{"id", HeaderEventID},
	{"source", HeaderEventSource},
	{"type", HeaderEventType},
	{ExtensionTenant, HeaderTenant},
}

// InvalidRecord returns the record to produce to topic (the
// `<prefix>events.invalid` topic) for r, which failed with err. It keeps r's
// key, value, headers and timestamp; any headers of r with the names above
// are dropped (a record that was already invalid once), and then the reason
// headers are appended: [HeaderReason] (err's Reason, or [ReasonUnknown]
// when err is not an [*InvalidError]), [HeaderReasonDetail], and the
// original topic, partition and offset; then the identity headers
// ([HeaderEventID], [HeaderEventSource], [HeaderEventType], [HeaderTenant])
// for each attribute that can be recovered cheaply, whatever is wrong with
// the record (issue 8 item 9):
//
//   - the ce_id, ce_source, ce_type and ce_tenantid headers (names matched
//     case-insensitively, the first of duplicates); in binary mode (a ce_
//     header and no event-format content-type) the value is never read:
//     its members are data;
//   - otherwise, for what the headers did not give, the top-level members
//     "id", "source", "type" and
//     "tenantid" of the value read as a JSON object, when they are JSON
//     strings: a single pass over at most [MaxIdentityScanBytes] that stops
//     at the first malformed member (so broken or truncated JSON gives what
//     precedes the break) and never looks inside nested values.
//
// Recovered values are made valid UTF-8 (U+FFFD for bad bytes and control
// characters) and cut to [MaxDetailBytes]. Headers of r with the
// names above are dropped first, so stale values never survive. r is not
// modified; the new record shares r's key and value bytes.
func InvalidRecord(r *kgo.Record, topic string, err error) *kgo.Record {
	reason, detail := ReasonUnknown, ""
	var ie *InvalidError
	switch {
	case errors.As(err, &ie):
		reason, detail = ie.Reason, ie.Detail
	case err != nil:
		detail = err.Error()
	}
	detail = truncate(strings.ToValidUTF8(detail, "\uFFFD"), MaxDetailBytes)

	hs := make([]kgo.RecordHeader, 0, len(r.Headers)+9)
	for _, h := range r.Headers {
		switch h.Key {
		case HeaderReason, HeaderReasonDetail, HeaderOriginalTopic, HeaderOriginalPartition, HeaderOriginalOffset,
			HeaderEventID, HeaderEventSource, HeaderEventType, HeaderTenant:
			continue
		}
		hs = append(hs, h)
	}
	hs = append(hs,
		kgo.RecordHeader{Key: HeaderReason, Value: []byte(reason)},
		kgo.RecordHeader{Key: HeaderReasonDetail, Value: []byte(detail)},
		kgo.RecordHeader{Key: HeaderOriginalTopic, Value: []byte(r.Topic)},
		kgo.RecordHeader{Key: HeaderOriginalPartition, Value: strconv.AppendInt(nil, int64(r.Partition), 10)},
		kgo.RecordHeader{Key: HeaderOriginalOffset, Value: strconv.AppendInt(nil, r.Offset, 10)},
	)
	found := recoverIdentity(r)
	for i, id := range identity {
		if v, ok := found[i]; ok {
			hs = append(hs, kgo.RecordHeader{Key: id.header, Value: []byte(v)})
		}
	}
	return &kgo.Record{
		Topic:     topic,
		Key:       r.Key,
		Value:     r.Value,
		Headers:   hs,
		Timestamp: r.Timestamp,
	}
}

// recoverIdentity returns, by index into identity, the attributes found in
// r (see InvalidRecord).
func recoverIdentity(r *kgo.Record) map[int]string {
	found := make(map[int]string, len(identity))
	binary, structured := false, false
	for _, h := range r.Headers {
		key := strings.ToLower(h.Key)
		if key == headerContentType && isEventFormat(string(h.Value)) {
			structured = true
		}
		if !strings.HasPrefix(key, headerPrefix) {
			continue
		}
		binary = true
		for i, id := range identity {
			if _, done := found[i]; !done && key == headerPrefix+id.attr {
				found[i] = cleanIdentity(string(h.Value))
			}
		}
	}
	if binary && !structured {
		return found
	}
	value := r.Value
	if len(value) > MaxIdentityScanBytes {
		value = value[:MaxIdentityScanBytes]
	}
	eachMember(value, func(m member) bool {
		for i, id := range identity {
			if _, done := found[i]; done || m.name != id.attr || m.raw[0] != '"' {
				continue
			}
			if s, err := decodeString(m.raw); err == nil {
				found[i] = cleanIdentity(s)
			}
		}
		return len(found) < len(identity)
	})
	return found
}

// cleanIdentity makes a recovered value fit for a header: valid UTF-8,
// control characters replaced, at most MaxDetailBytes.
func cleanIdentity(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || (r >= 0x7F && r <= 0x9F) {
			return '\uFFFD'
		}
		return r
	}, s)
	return truncate(s, MaxDetailBytes)
}
