package events

import (
	"encoding/base64"
	"encoding/json"
	"mime"
	"strings"
	"unicode/utf8"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/extensions"
)

// Extension attribute names hookrelay reads.
const (
	// ExtensionTenant is the tenant extension: an event with tenant T goes
	// only to endpoints of tenant T (delivery-path issue, "Input").
	ExtensionTenant = "tenantid"
	// ExtensionTraceParent and ExtensionTraceState are the CloudEvents
	// distributed tracing extension (W3C Trace Context).
	ExtensionTraceParent = extensions.TraceParentExtension
	ExtensionTraceState  = extensions.TraceStateExtension
)

// Tenant returns the event's tenantid extension, or "" when it has none. An
// empty tenantid is the same as none. [Decode] refuses a tenantid that is not
// a string; for other events a non-string value reads as "".
func Tenant(ev event.Event) string {
	if ev.Context == nil {
		return ""
	}
	v, err := ev.Context.GetExtension(ExtensionTenant)
	if err != nil {
		return ""
	}
	s, _ := v.(string)
	return s
}

// Trace returns the event's W3C trace context from the CloudEvents
// distributed tracing extension: traceparent and tracestate. A traceparent
// that is not well-formed per W3C Trace Context §3.2 (version-traceid-
// parentid-flags, lower-case hex, trace and parent IDs not all zero, version
// not ff) is ignored, as the recommendation says, and both results are then
// "". tracestate is returned only with a valid traceparent.
func Trace(ev event.Event) (traceparent, tracestate string) {
	if ev.Context == nil {
		return "", ""
	}
	d, ok := extensions.GetDistributedTracingExtension(ev)
	if !ok || !ValidTraceParent(d.TraceParent) {
		return "", ""
	}
	return d.TraceParent, d.TraceState
}

// ValidTraceParent reports whether s is a well-formed W3C traceparent
// (Trace Context §3.2): "00-<32 hex>-<16 hex>-<2 hex>" for version 00, and
// for a later version the same 55 characters optionally followed by "-" and
// more.
func ValidTraceParent(s string) bool {
	if len(s) < 55 || (len(s) > 55 && s[55] != '-') {
		return false
	}
	if s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return false
	}
	version, traceID, parentID, flags := s[0:2], s[3:35], s[36:52], s[53:55]
	if !lowerHex(version) || version == "ff" || (version == "00" && len(s) != 55) {
		return false
	}
	return lowerHex(traceID) && lowerHex(parentID) && lowerHex(flags) &&
		strings.Trim(traceID, "0") != "" && strings.Trim(parentID, "0") != ""
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// DataJSON returns the event's data as the JSON value of the webhook body's
// "data" member, by the rules in the package documentation (inline JSON, a
// JSON string for text, a base64 JSON string for binary, null for none).
//
// The result is canonical (see canonicalJSON): compact, with every string
// written the same way (only '"', '\\' and control characters escaped), so
// every serialisation of the same event gives the same bytes (issue 8 item
// 1); member order and number literals are the producer's and are kept. It
// may share memory with the event only when it is base64 or null.
//
// It fails with an [*InvalidError] only for data that [Decode] refuses:
// JSON data that is not UTF-8 JSON (ReasonInvalidUTF8, ReasonBadJSON), and
// text data in UTF-8 that is not valid UTF-8 (ReasonInvalidUTF8).
func DataJSON(ev event.Event) (json.RawMessage, error) {
	return dataJSON(ev, true)
}

// DecodedDataJSON is [DataJSON] for an event [Decode] returned (without an
// error): Decode has already checked that data of a JSON content type is
// UTF-8 JSON, so that pass is not repeated (fan-out's path). The result is
// DataJSON's; an error is only possible for an event Decode did not
// return.
func DecodedDataJSON(ev event.Event) (json.RawMessage, error) {
	return dataJSON(ev, false)
}

// dataJSON is DataJSON, checking JSON data again only when check is set.
func dataJSON(ev event.Event, check bool) (json.RawMessage, error) {
	data := ev.DataEncoded
	if len(data) == 0 {
		return json.RawMessage("null"), nil
	}
	ct := ev.DataContentType()
	mt := mediaType(ct)
	switch {
	case isJSONMediaType(mt):
		if !check {
			return canonicalJSON(data), nil
		}
		if err := checkJSONData("data", data, ct); err != nil {
			return nil, err
		}
		return canonicalJSON(data), nil
	case ev.DataBase64:
		return base64String(data), nil
	case mt == "":
		switch {
		case !utf8.Valid(data):
			return base64String(data), nil
		case json.Valid(data):
			return canonicalJSON(data), nil
		default:
			return jsonString(string(data)), nil
		}
	case isTextMediaType(mt) && textIsUTF8(ct):
		if !utf8.Valid(data) {
			return nil, invalid(ReasonInvalidUTF8, "data: not valid UTF-8 at byte %d for datacontenttype %q", firstInvalidUTF8(data), truncate(ct, 64))
		}
		return jsonString(string(data)), nil
	default:
		return base64String(data), nil
	}
}

// mediaType returns the lower-cased media type of a content type, without
// parameters; "" for none.
func mediaType(ct string) string {
	if ct == "" {
		return ""
	}
	if mt, _, err := mime.ParseMediaType(ct); err == nil {
		return mt
	}
	mt, _, _ := strings.Cut(ct, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}

// isJSONMediaType: application/json, text/json, or a +json structured
// syntax suffix (RFC 6839 §3.1).
func isJSONMediaType(mt string) bool {
	return mt == "application/json" || mt == "text/json" || strings.HasSuffix(mt, "+json")
}

func isTextMediaType(mt string) bool {
	switch mt {
	case "application/xml", "application/yaml", "application/x-yaml", "application/x-www-form-urlencoded":
		return true
	}
	return strings.HasPrefix(mt, "text/") || strings.HasSuffix(mt, "+xml")
}

func base64String(b []byte) json.RawMessage {
	out := make([]byte, 0, base64.StdEncoding.EncodedLen(len(b))+2)
	out = append(out, '"')
	out = base64.StdEncoding.AppendEncode(out, b)
	return append(out, '"')
}

// jsonString encodes s (valid UTF-8) as a canonical JSON string (see
// appendCanonicalString): the same bytes whatever escapes s arrived with.
func jsonString(s string) json.RawMessage {
	return appendCanonicalString(make([]byte, 0, len(s)+2), s)
}
