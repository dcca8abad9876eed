package events

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/binding/format"
	"github.com/cloudevents/sdk-go/v2/binding/spec"
	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultMaxBytes is the size limit [Decode] applies when given maxBytes <= 0:
// 256 KiB, counted over the record's key, value, and header keys and values
// (delivery-path issue, "Input").
const DefaultMaxBytes = 256 << 10

// Reasons an event is invalid: the values of [InvalidError.Reason] and of the
// [HeaderReason] header of an invalid record. The set is closed; metrics may
// use them as label values.
const (
	ReasonTooLarge               = "too_large"               // the record exceeds the size limit
	ReasonBadJSON                = "bad_json"                // structured value, or data declared JSON, is not valid JSON (or not a JSON object)
	ReasonMissingAttribute       = "missing_attribute"       // id, source, type or specversion absent or empty
	ReasonInvalidAttribute       = "invalid_attribute"       // an attribute or extension is present but malformed
	ReasonUnsupportedSpecVersion = "unsupported_specversion" // specversion other than 1.0
	ReasonUnsupportedFormat      = "unsupported_format"      // structured mode with an event format other than JSON
	ReasonBadHeader              = "bad_header"              // duplicate, non-UTF-8, misnamed or contradicting ce_ / content-type header
	ReasonInvalidUTF8            = "invalid_utf8"            // JSON (the structured value, or data sent inline as JSON or text) is not valid UTF-8 Unicode
	ReasonDuplicateAttribute     = "duplicate_attribute"     // a member name appears twice in a structured event
	ReasonConflictingData        = "conflicting_data"        // a structured event has both data and data_base64
	ReasonUnknown                = "unknown"                 // an error that is not an *InvalidError (see InvalidRecord)
)

// Reasons lists every reason code, in the order above.
var Reasons = []string{
	ReasonTooLarge, ReasonBadJSON, ReasonMissingAttribute, ReasonInvalidAttribute,
	ReasonUnsupportedSpecVersion, ReasonUnsupportedFormat, ReasonBadHeader,
	ReasonInvalidUTF8, ReasonDuplicateAttribute, ReasonConflictingData, ReasonUnknown,
}

// InvalidError is the error of [Decode] for a record that is not a valid
// CloudEvent. It is permanent: the same record always fails the same way.
type InvalidError struct {
	// Reason is a short machine code, one of [Reasons].
	Reason string
	// Detail says what exactly is wrong, for people (e.g. "type: MUST be a
	// non-empty string"). It never contains the record's data.
	Detail string
}

func (e *InvalidError) Error() string {
	if e.Detail == "" {
		return "invalid cloudevent: " + e.Reason
	}
	return "invalid cloudevent: " + e.Reason + ": " + e.Detail
}

func invalid(reason, format string, args ...any) *InvalidError {
	return &InvalidError{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// Header names of the Kafka protocol binding (§3.2.1, §3.2.3.1).
const (
	headerContentType = "content-type"
	headerPrefix      = "ce_"
)

// binaryVersions resolves "ce_"-prefixed header names to attributes.
var binaryVersions = spec.WithPrefix(headerPrefix)

// Decode reads r as a CloudEvent (see the package documentation for the
// content modes and what is valid). maxBytes is the size limit; <= 0 means
// [DefaultMaxBytes].
//
// Every failure is an [*InvalidError]; Decode never panics, whatever r holds
// (a panic inside the SDK would be turned into a ReasonBadJSON error).
// The event's data may share memory with r.Value: neither may be modified
// while the other is in use. Decode is safe for concurrent use.
func Decode(r *kgo.Record, maxBytes int) (ev event.Event, err error) {
	defer func() {
		if p := recover(); p != nil {
			ev, err = event.Event{}, invalid(ReasonBadJSON, "event could not be parsed (%v)", p)
		}
	}()
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	if n := recordSize(r); n > maxBytes {
		return event.Event{}, invalid(ReasonTooLarge, "record is %d bytes, limit %d", n, maxBytes)
	}
	m, err := newMessage(r)
	if err != nil {
		return event.Event{}, err
	}
	var e *event.Event
	if m.structured {
		var ierr *InvalidError
		if e, ierr = decodeStructured(m.value, m.contentType); ierr != nil {
			return event.Event{}, ierr
		}
	} else if e, err = binding.ToEvent(context.Background(), m); err != nil {
		return event.Event{}, classify(err)
	}
	if err := check(e, m.structured); err != nil {
		return event.Event{}, err
	}
	return *e, nil
}

// recordSize is the size Decode compares with its limit.
func recordSize(r *kgo.Record) int {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// message adapts a kgo.Record to binding.Message (and
// binding.MessageMetadataReader, as binary messages must), following the
// Kafka protocol binding. It is built by newMessage, which has already
// chosen the mode and checked the headers.
type message struct {
	value       []byte
	headers     []kgo.RecordHeader
	structured  bool
	contentType string               // the content-type header; "" when absent
	version     spec.Version         // binary mode only
	attributes  map[spec.Kind]string // binary mode: attribute kind -> value
	extensions  map[string]string    // binary mode: extension name -> value
}

var (
	_ binding.Message               = (*message)(nil)
	_ binding.MessageMetadataReader = (*message)(nil)
)

func newMessage(r *kgo.Record) (*message, error) {
	m := &message{value: r.Value, headers: r.Headers}
	var haveCT bool
	var specVersion *string
	for _, h := range r.Headers {
		key := strings.ToLower(h.Key)
		switch {
		case key == headerContentType:
			if haveCT {
				return nil, invalid(ReasonBadHeader, "duplicate content-type header")
			}
			if !utf8.Valid(h.Value) {
				return nil, invalid(ReasonBadHeader, "content-type header is not UTF-8")
			}
			haveCT, m.contentType = true, string(h.Value)
		case strings.HasPrefix(key, headerPrefix):
			if key == headerPrefix+"specversion" {
				v := string(h.Value)
				if specVersion != nil {
					return nil, invalid(ReasonBadHeader, "duplicate header %s", key)
				}
				specVersion = &v
			}
		}
	}

	if isEventFormat(m.contentType) {
		if format.Lookup(m.contentType) != format.JSON {
			return nil, invalid(ReasonUnsupportedFormat, "event format %q (only %s)", truncate(m.contentType, 64), event.ApplicationCloudEventsJSON)
		}
		m.structured = true
		return m, nil
	}
	if specVersion == nil {
		if !haveCT && looksLikeJSONObject(r.Value) {
			m.structured = true
			return m, nil
		}
		return nil, invalid(ReasonMissingAttribute, "specversion: neither a ce_specversion header (binary mode) nor content-type %s (structured mode)", event.ApplicationCloudEventsJSON)
	}
	switch *specVersion {
	case event.CloudEventsVersionV1:
	case "":
		return nil, invalid(ReasonMissingAttribute, "specversion: empty ce_specversion header")
	default:
		return nil, invalid(ReasonUnsupportedSpecVersion, "specversion %q (only %s)", truncate(*specVersion, 32), event.CloudEventsVersionV1)
	}
	m.version = binaryVersions.Version(event.CloudEventsVersionV1)
	if err := m.readBinaryHeaders(haveCT); err != nil {
		return nil, err
	}
	return m, nil
}

// readBinaryHeaders checks the ce_ headers and sorts them into attributes
// and extensions. The rules (spec v1.0.2; refusals in brackets):
//
//   - header names and values are UTF-8 (Kafka binding §3.2.3) [bad_header];
//   - no ce_ header twice, names compared case-insensitively (core spec
//     §Context Attributes: at most once) [bad_header];
//   - extension names are a-z0-9 and not "data" (core spec §Naming
//     Conventions) [bad_header];
//   - every value is a String without control characters or noncharacters
//     (core spec §Type System) [invalid_attribute]; source is an RFC 3986
//     URI-reference and dataschema an absolute URI, checked on the header
//     text itself because the SDK's url.Parse re-encodes what it accepts
//     [invalid_attribute];
//   - the content-type header is the datacontenttype (Kafka binding §3.2.1):
//     an RFC 2046 media type [invalid_attribute]; a ce_datacontenttype
//     header with another value contradicts it [bad_header].
//
// The SDK then checks time (RFC 3339) and the required attributes.
func (m *message) readBinaryHeaders(haveCT bool) error {
	m.attributes = make(map[spec.Kind]string, 8)
	seen := make(map[string]struct{}, 8)
	for _, h := range m.headers {
		key := strings.ToLower(h.Key)
		if !strings.HasPrefix(key, headerPrefix) {
			continue
		}
		if !utf8.ValidString(h.Key) {
			return invalid(ReasonBadHeader, "header name %q is not UTF-8 (Kafka binding §3.2.3)", truncate(strings.ToValidUTF8(key, "\uFFFD"), 64))
		}
		if _, dup := seen[key]; dup {
			return invalid(ReasonBadHeader, "duplicate header %s (core spec §Context Attributes: at most once)", truncate(key, 64))
		}
		seen[key] = struct{}{}
		if !utf8.Valid(h.Value) {
			return invalid(ReasonBadHeader, "header %s is not UTF-8 (Kafka binding §3.2.3)", truncate(key, 64))
		}
		name := strings.TrimPrefix(key, headerPrefix)
		value := string(h.Value)
		if err := checkString(value); err != nil {
			return invalid(ReasonInvalidAttribute, "%s: %v", truncate(name, 64), err)
		}
		if attr := m.version.Attribute(key); attr != nil {
			kind := attr.Kind()
			switch kind {
			case spec.DataContentType:
				if haveCT && value != m.contentType {
					return invalid(ReasonBadHeader, "ce_datacontenttype %q contradicts the content-type header %q, which is the datacontenttype (Kafka binding §3.2.1)", truncate(value, 64), truncate(m.contentType, 64))
				}
			case spec.Source:
				if _, err := parseURIReference(value); err != nil && value != "" {
					return invalid(ReasonInvalidAttribute, "source: %v", err)
				}
			case spec.Time:
				value = strings.ToUpper(value) // RFC 3339 §5.6: "t" and "z" may be lower case (see parseTime)
			case spec.DataSchema:
				if _, err := parseAbsoluteURI(value); err != nil {
					return invalid(ReasonInvalidAttribute, "dataschema: %v", err)
				}
			}
			m.attributes[kind] = value
			continue
		}
		if checkAttributeName(name) != nil || name == "data" {
			return invalid(ReasonBadHeader, "header %s: not a CloudEvents attribute or extension name", truncate(key, 64))
		}
		if m.extensions == nil {
			m.extensions = make(map[string]string, 4)
		}
		m.extensions[name] = value
	}
	if haveCT {
		if err := checkMediaType(m.contentType); err != nil {
			return invalid(ReasonInvalidAttribute, "datacontenttype: %v", err)
		}
		m.attributes[spec.DataContentType] = m.contentType
	} else if v, ok := m.attributes[spec.DataContentType]; ok {
		if err := checkMediaType(v); err != nil {
			return invalid(ReasonInvalidAttribute, "datacontenttype: %v", err)
		}
	}
	return nil
}

func (m *message) ReadEncoding() binding.Encoding {
	if m.structured {
		return binding.EncodingStructured
	}
	return binding.EncodingBinary
}

// ReadStructured implements binding.Message. Structured records never
// reach the SDK (Decode reads them with decodeStructured), so it refuses.
func (m *message) ReadStructured(context.Context, binding.StructuredWriter) error {
	return binding.ErrNotStructured
}

// ReadBinary writes the attributes in a fixed order (spec kinds, then
// extensions by name), so errors are deterministic.
func (m *message) ReadBinary(_ context.Context, w binding.BinaryWriter) error {
	if m.structured {
		return binding.ErrNotBinary
	}
	if err := w.SetAttribute(m.version.AttributeFromKind(spec.SpecVersion), event.CloudEventsVersionV1); err != nil {
		return invalid(ReasonInvalidAttribute, "specversion: %v", err)
	}
	for _, attr := range m.version.Attributes() {
		v, ok := m.attributes[attr.Kind()]
		if !ok || attr.Kind() == spec.SpecVersion {
			continue
		}
		if err := w.SetAttribute(attr, v); err != nil {
			return invalid(ReasonInvalidAttribute, "%s: %v", attr.Name(), err)
		}
	}
	names := make([]string, 0, len(m.extensions))
	for name := range m.extensions {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := w.SetExtension(name, m.extensions[name]); err != nil {
			return invalid(ReasonInvalidAttribute, "%s: %v", name, err)
		}
	}
	if len(m.value) > 0 {
		return w.SetData(bytes.NewBuffer(m.value))
	}
	return nil
}

// GetAttribute implements binding.MessageMetadataReader (binary mode).
func (m *message) GetAttribute(k spec.Kind) (spec.Attribute, any) {
	if m.version == nil {
		return nil, nil
	}
	attr := m.version.AttributeFromKind(k)
	if attr == nil {
		return nil, nil
	}
	if k == spec.SpecVersion {
		return attr, event.CloudEventsVersionV1
	}
	if v, ok := m.attributes[k]; ok {
		return attr, v
	}
	return attr, nil
}

// GetExtension implements binding.MessageMetadataReader (binary mode).
func (m *message) GetExtension(name string) any {
	if v, ok := m.extensions[strings.ToLower(name)]; ok {
		return v
	}
	return nil
}

// Finish implements binding.Message; a record needs no settling.
func (m *message) Finish(error) error { return nil }

// isEventFormat reports whether a content-type names a CloudEvents event
// format (§3: prefix application/cloudevents, case-insensitive).
func isEventFormat(ct string) bool {
	return len(ct) >= len(format.Prefix) && strings.EqualFold(ct[:len(format.Prefix)], format.Prefix)
}

func looksLikeJSONObject(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	return len(b) > 0 && b[0] == '{'
}

// classify turns an error of the SDK into an *InvalidError.
func classify(err error) *InvalidError {
	var ie *InvalidError
	if errors.As(err, &ie) {
		return ie
	}
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return invalid(ReasonBadJSON, "offset %d: %v", syn.Offset, syn)
	}
	var ve event.ValidationError
	if errors.As(err, &ve) {
		if sv, ok := ve["specversion"]; ok {
			if strings.Contains(sv.Error(), "no specversion") {
				return invalid(ReasonMissingAttribute, "specversion: missing")
			}
			return invalid(ReasonUnsupportedSpecVersion, "specversion: %v", sv)
		}
		return invalid(ReasonInvalidAttribute, "%s", validationDetail(ve))
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return invalid(ReasonBadJSON, "%v", te)
	}
	return invalid(ReasonInvalidAttribute, "%s", truncate(err.Error(), 256))
}

// check validates a decoded event: the SDK's spec validation, then
// hookrelay's own rules.
func check(e *event.Event, structured bool) *InvalidError {
	if err := e.Validate(); err != nil {
		var ve event.ValidationError
		if !errors.As(err, &ve) {
			return invalid(ReasonInvalidAttribute, "%v", err)
		}
		for _, required := range []struct{ name, v string }{
			{"id", e.ID()}, {"source", e.Source()}, {"type", e.Type()},
		} {
			if _, bad := ve[required.name]; bad && required.v == "" {
				return invalid(ReasonMissingAttribute, "%s: missing", required.name)
			}
		}
		return invalid(ReasonInvalidAttribute, "%s", validationDetail(ve))
	}
	if v := e.SpecVersion(); v != event.CloudEventsVersionV1 {
		return invalid(ReasonUnsupportedSpecVersion, "specversion %q (only %s)", truncate(v, 32), event.CloudEventsVersionV1)
	}
	if v, err := e.Context.GetExtension(ExtensionTenant); err == nil {
		if _, ok := v.(string); !ok {
			return invalid(ReasonInvalidAttribute, "%s: must be a string", ExtensionTenant)
		}
	}
	if !structured && len(e.DataEncoded) > 0 {
		return checkBinaryData(e.DataEncoded, e.DataContentType())
	}
	return nil
}

// checkBinaryData checks the value of a binary-mode record that becomes
// JSON in the webhook body (issue 8 item 3: no request leaves that a stock
// Standard Webhooks verifier, which reads the body as text, cannot
// verify): data of a JSON content type (application/json, text/json,
// any +json) is UTF-8 JSON (RFC 8259 §8.1, Kafka binding §2.1); text data
// (see isTextMediaType) without a charset or in UTF-8/US-ASCII is UTF-8
// (RFC 2046 §4.1). Text in another declared charset and every other
// content type is sent as base64 and needs no check.
func checkBinaryData(data []byte, contentType string) *InvalidError {
	mt := mediaType(contentType)
	switch {
	case isJSONMediaType(mt):
		return checkJSONData("data", data, contentType)
	case isTextMediaType(mt) && textIsUTF8(contentType) && !utf8.Valid(data):
		return invalid(ReasonInvalidUTF8, "data: not valid UTF-8 at byte %d for datacontenttype %q (RFC 2046 §4.1)", firstInvalidUTF8(data), truncate(contentType, 64))
	}
	return nil
}

// textIsUTF8 reports whether text of content type ct is UTF-8: no charset
// parameter, or utf-8 / us-ascii.
func textIsUTF8(ct string) bool {
	cs, ok := charset(ct)
	return !ok || isUTF8Charset(cs)
}

// validationDetail renders an SDK validation error deterministically.
func validationDetail(ve event.ValidationError) string {
	keys := make([]string, 0, len(ve))
	for k := range ve {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + ": " + ve[k].Error()
	}
	return truncate(strings.Join(parts, "; "), 256)
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
