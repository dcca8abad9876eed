package events

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"
)

// Member names of the JSON event format (json-format.md §2, §3.1).
const (
	memberData       = "data"
	memberDataBase64 = "data_base64"
)

// contextAttributes are the core context attributes of CloudEvents 1.0
// (core spec §REQUIRED Attributes, §OPTIONAL Attributes); every other
// top-level member except data and data_base64 is an extension.
var contextAttributes = map[string]bool{
	"specversion": true, "id": true, "source": true, "type": true,
	"datacontenttype": true, "dataschema": true, "subject": true, "time": true,
}

// decodeStructured reads value as one event in the JSON event format
// (json-format.md v1.0.2). It reads the JSON itself instead of through the
// SDK's structured reader, which depends on the formatting (sdk-go v2.16.2
// slices the raw bytes of a data_base64 member it has cached, so
// `"data_base64": "AAEC"` with a space fails as "illegal base64 data at
// input byte 0"), keeps the last of duplicate members, drops data when
// data_base64 is also present, and replaces invalid UTF-8 and unpaired
// surrogates with U+FFFD. The event is built from the SDK's types and
// validated by the SDK (see check). The rules, in the order they are
// checked (so a reordered event fails with the same reason):
//
//   - the value is UTF-8 (RFC 8259 §8.1; a charset parameter other than
//     UTF-8 on the content-type is refused) and one JSON object
//     (json-format §3) — invalid_utf8, bad_json;
//   - no member name twice (core spec §Context Attributes: "MUST only
//     appear at most once") — duplicate_attribute;
//   - specversion, id, source, type present (null is unset, json-format
//     §2.2) — missing_attribute; specversion "1.0" —
//     unsupported_specversion;
//   - attributes of the JSON types of json-format §2.2: String,
//     URI-reference (source), URI (dataschema: absolute, RFC 3986 §4.3),
//     Timestamp (time: RFC 3339), RFC 2046 media type (datacontenttype);
//     Strings without the characters core spec §Type System disallows —
//     invalid_attribute;
//   - extension names of lower-case a-z and 0-9 (core spec §Naming
//     Conventions; longer than 20 is only a SHOULD and is accepted) and
//     values that are a String, a Boolean or an Integer (a JSON number of
//     only an integer component in the 32-bit range); null is unset —
//     invalid_attribute;
//   - data and data_base64 are mutually exclusive (json-format §3.1.1) —
//     conflicting_data; data_base64 is a JSON string of padded standard
//     base64 (RFC 4648 §4, §3.2, §3.3: no other characters, no line
//     breaks) — invalid_attribute; data of a non-JSON datacontenttype is a
//     JSON string (json-format §3.1.2) — invalid_attribute, and text
//     without unpaired surrogates — invalid_utf8; data_base64 declared JSON
//     is UTF-8 JSON — invalid_utf8, bad_json.
func decodeStructured(value []byte, contentType string) (*event.Event, *InvalidError) {
	if ierr := checkStructuredJSON(value, contentType); ierr != nil {
		return nil, ierr
	}
	members, ierr := readMembers(value)
	if ierr != nil {
		return nil, ierr
	}
	ec, ierr := requiredAttributes(members)
	if ierr != nil {
		return nil, ierr
	}
	if ierr := optionalAttributes(ec, members); ierr != nil {
		return nil, ierr
	}
	if ierr := extensionAttributes(ec, members); ierr != nil {
		return nil, ierr
	}
	e := &event.Event{Context: ec}
	if ierr := structuredData(e, members); ierr != nil {
		return nil, ierr
	}
	return e, nil
}

// checkStructuredJSON checks that value is UTF-8 (refusing a charset
// parameter other than UTF-8 on contentType; RFC 8259 §8.1) and one JSON
// object (json-format §3) — invalid_utf8, bad_json.
func checkStructuredJSON(value []byte, contentType string) *InvalidError {
	if cs, ok := charset(contentType); ok && !isUTF8Charset(cs) {
		return invalid(ReasonInvalidUTF8, "content-type charset %q: the JSON event format is UTF-8 (RFC 8259 §8.1)", truncate(cs, 32))
	}
	if !utf8.Valid(value) {
		return invalid(ReasonInvalidUTF8, "structured event is not valid UTF-8 at byte %d (RFC 8259 §8.1)", firstInvalidUTF8(value))
	}
	if !json.Valid(value) {
		// Valid scans once and copies nothing; Unmarshal runs only for the
		// error of an invalid value (its offset and cause).
		err := json.Unmarshal(value, new(json.RawMessage))
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return invalid(ReasonBadJSON, "offset %d: %v", syn.Offset, syn)
		}
		return invalid(ReasonBadJSON, "%v", err)
	}
	if !looksLikeJSONObject(value) {
		return invalid(ReasonBadJSON, "structured event is not a JSON object (json-format §3)")
	}
	return nil
}

// objectMembers maps each member name of a structured event to its raw
// JSON value.
type objectMembers map[string][]byte

// readMembers splits value, already checked to be one UTF-8 JSON object,
// into its members; a name that appears twice is duplicate_attribute (core
// spec §Context Attributes: at most once).
func readMembers(value []byte) (objectMembers, *InvalidError) {
	members := make(objectMembers, 12)
	var dupErr *InvalidError
	complete := eachMember(value, func(m member) bool {
		if _, dup := members[m.name]; dup {
			dupErr = invalid(ReasonDuplicateAttribute, "member %q appears twice (core spec §Context Attributes: at most once)", truncate(m.name, 64))
			return false
		}
		members[m.name] = m.raw
		return true
	})
	if dupErr != nil {
		return nil, dupErr
	}
	if !complete { // valid JSON, so only an unpaired surrogate in a name stops it
		return nil, invalid(ReasonInvalidAttribute, "a member name is not a valid String (unpaired surrogate escape)")
	}
	return members, nil
}

// attr reads the String attribute name: ok is false when it is absent or
// null (unset, json-format §2.2); a value that is not a JSON string or has
// characters core spec §Type System disallows is invalid_attribute.
func (members objectMembers) attr(name string) (s string, ok bool, ierr *InvalidError) {
	raw, ok := members[name]
	if !ok || isNull(raw) {
		return "", false, nil
	}
	if raw[0] != '"' {
		return "", false, invalid(ReasonInvalidAttribute, "%s: MUST be a JSON string (json-format §2.2)", name)
	}
	s, err := decodeString(raw)
	if err == nil {
		err = checkString(s)
	}
	if err != nil {
		return "", false, invalid(ReasonInvalidAttribute, "%s: %v", name, err)
	}
	return s, true, nil
}

// requiredAttributes reads specversion ("1.0"), id, source
// (URI-reference) and type, in that order — missing_attribute,
// unsupported_specversion, invalid_attribute.
func requiredAttributes(members objectMembers) (*event.EventContextV1, *InvalidError) {
	sv, ok, ierr := members.attr("specversion")
	switch {
	case ierr != nil:
		return nil, ierr
	case !ok:
		return nil, invalid(ReasonMissingAttribute, "specversion: missing")
	case sv != event.CloudEventsVersionV1:
		return nil, invalid(ReasonUnsupportedSpecVersion, "specversion %q (only %s)", truncate(sv, 32), event.CloudEventsVersionV1)
	}
	ec := &event.EventContextV1{}
	for _, name := range []string{"id", "source", "type"} {
		v, ok, ierr := members.attr(name)
		if ierr != nil {
			return nil, ierr
		}
		if !ok || v == "" {
			return nil, invalid(ReasonMissingAttribute, "%s: missing", name)
		}
		switch name {
		case "id":
			ec.ID = v
		case "type":
			ec.Type = v
		case "source":
			u, err := parseURIReference(v)
			if err != nil {
				return nil, invalid(ReasonInvalidAttribute, "source: %v", err)
			}
			ec.Source = types.URIRef{URL: *u}
		}
	}
	return ec, nil
}

// optionalAttributes sets datacontenttype (RFC 2046 media type),
// dataschema (absolute URI), subject and time (RFC 3339), in that order,
// on ec — invalid_attribute.
func optionalAttributes(ec *event.EventContextV1, members objectMembers) *InvalidError {
	if v, ok, ierr := members.attr("datacontenttype"); ierr != nil {
		return ierr
	} else if ok {
		if err := checkMediaType(v); err != nil {
			return invalid(ReasonInvalidAttribute, "datacontenttype: %v", err)
		}
		ec.DataContentType = &v
	}
	if v, ok, ierr := members.attr("dataschema"); ierr != nil {
		return ierr
	} else if ok {
		u, err := parseAbsoluteURI(v)
		if err != nil {
			return invalid(ReasonInvalidAttribute, "dataschema: %v", err)
		}
		ec.DataSchema = &types.URI{URL: *u}
	}
	if v, ok, ierr := members.attr("subject"); ierr != nil {
		return ierr
	} else if ok {
		ec.Subject = &v
	}
	if v, ok, ierr := members.attr("time"); ierr != nil {
		return ierr
	} else if ok {
		t, err := parseTime(v)
		if err != nil {
			return invalid(ReasonInvalidAttribute, "time %q: MUST be an RFC 3339 timestamp", truncate(v, 64))
		}
		ec.Time = &types.Timestamp{Time: t}
	}
	return nil
}

// extensionAttributes sets every member that is neither a context
// attribute nor data/data_base64 as an extension on ec, in name order (so
// the first bad one reported does not depend on member order); see
// extensionValue for the rules.
func extensionAttributes(ec *event.EventContextV1, members objectMembers) *InvalidError {
	names := make([]string, 0, len(members))
	for name := range members {
		if !contextAttributes[name] && name != memberData && name != memberDataBase64 {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		v, ierr := extensionValue(name, members[name])
		if ierr != nil {
			return ierr
		}
		if v == nil {
			continue
		}
		if err := ec.SetExtension(name, v); err != nil {
			return invalid(ReasonInvalidAttribute, "%s: %v", truncate(name, 64), err)
		}
	}
	return nil
}

// structuredData sets e's data from the data or data_base64 member
// (json-format §3.1.2).
func structuredData(e *event.Event, members objectMembers) *InvalidError {
	data, haveData := members[memberData]
	b64, haveB64 := members[memberDataBase64]
	if haveB64 && isNull(b64) {
		haveB64 = false // null is the same as absent (json-format §2.2)
	}
	mt := mediaType(e.DataContentType())
	switch {
	case haveData && haveB64:
		return invalid(ReasonConflictingData, "data and data_base64 are both present; they are mutually exclusive (json-format §3.1.1)")
	case haveB64:
		if b64[0] != '"' {
			return invalid(ReasonInvalidAttribute, "data_base64: MUST be a JSON string (json-format §3.1.1)")
		}
		s, err := decodeString(b64)
		if err != nil {
			return invalid(ReasonInvalidAttribute, "data_base64: %v", err)
		}
		bytes, err := decodeBase64(s)
		if err != nil {
			return invalid(ReasonInvalidAttribute, "data_base64: %v", err)
		}
		e.DataEncoded, e.DataBase64 = bytes, true
		if len(bytes) > 0 && isJSONMediaType(mt) {
			return checkJSONData("data_base64", bytes, e.DataContentType())
		}
	case !haveData || isNull(data):
		// No data, or an explicit null: both are JSON null in the body.
	case mt == "" || isJSONMediaType(mt):
		// §3.1.2: the member is the JSON value itself (already checked:
		// the whole value is UTF-8 JSON).
		e.DataEncoded = data
	default:
		if data[0] != '"' {
			return invalid(ReasonInvalidAttribute, "data: MUST be a JSON string for datacontenttype %q (json-format §3.1.2)", truncate(e.DataContentType(), 64))
		}
		s, err := decodeString(data)
		if err != nil {
			return invalid(ReasonInvalidUTF8, "data: %v: not Unicode text", err)
		}
		e.DataEncoded = []byte(s)
	}
	return nil
}

// extensionValue checks one extension member (core spec §Naming
// Conventions, §Type System; json-format §2.2) and returns its value as a
// CloudEvents type (string, bool or int32), or nil for null (unset).
func extensionValue(name string, raw []byte) (any, *InvalidError) {
	if err := checkAttributeName(name); err != nil {
		return nil, invalid(ReasonInvalidAttribute, "extension name %q: %v", truncate(name, 64), err)
	}
	name = truncate(name, 64)
	switch raw[0] {
	case 'n':
		return nil, nil
	case 't', 'f':
		return raw[0] == 't', nil
	case '"':
		s, err := decodeString(raw)
		if err == nil {
			err = checkString(s)
		}
		if err != nil {
			return nil, invalid(ReasonInvalidAttribute, "%s: %v", name, err)
		}
		return s, nil
	case '{', '[':
		return nil, invalid(ReasonInvalidAttribute, "%s: an extension value is a String, Boolean, Integer, URI, URI-reference, Timestamp or Binary, not a JSON object or array (json-format §2.2)", name)
	default:
		n, err := parseInteger(string(raw))
		if err != nil {
			return nil, invalid(ReasonInvalidAttribute, "%s: %v", name, err)
		}
		return n, nil
	}
}

// checkAttributeName: lower-case ASCII letters and digits, not empty (core
// spec §Naming Conventions, a MUST). The 20-character limit is a SHOULD
// and is not enforced.
func checkAttributeName(name string) error {
	if name == "" {
		return errors.New("an attribute name MUST NOT be empty")
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return errors.New("attribute names MUST consist of lower-case letters a-z and digits 0-9 (core spec §Naming Conventions)")
		}
	}
	return nil
}

// parseInteger reads a JSON number that is a CloudEvents Integer:
// "only the integer component optionally prefixed with a minus sign"
// (json-format §2.2), in the signed 32-bit range (core spec §Type System).
func parseInteger(s string) (int32, error) {
	if strings.ContainsAny(s, ".eE") {
		return 0, fmt.Errorf("number %s: an Integer is only the integer component, without fraction or exponent (json-format §2.2)", truncate(s, 32))
	}
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("number %s: an Integer is within -2147483648..2147483647 (core spec §Type System)", truncate(s, 32))
	}
	return int32(n), nil
}

// decodeBase64 decodes padded standard base64 (RFC 4648 §4) and refuses
// any character outside the alphabet, line breaks included (§3.3), and
// missing padding (§3.2). Non-zero pad bits are accepted (§3.5: MAY).
func decodeBase64(s string) ([]byte, error) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'A' || c > 'Z') && (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '+' && c != '/' && c != '=' {
			return nil, fmt.Errorf("not base64 (RFC 4648 §4): byte %d is %q", i, c)
		}
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("not padded standard base64 (RFC 4648 §4, §3.2): %v", err)
	}
	return b, nil
}

// checkJSONData checks data declared JSON: UTF-8 (RFC 8259 §8.1; Kafka
// binding §2.1) and JSON.
func checkJSONData(what string, data []byte, contentType string) *InvalidError {
	if !utf8.Valid(data) {
		return invalid(ReasonInvalidUTF8, "%s: not valid UTF-8 at byte %d for datacontenttype %q (RFC 8259 §8.1)", what, firstInvalidUTF8(data), truncate(contentType, 64))
	}
	if !json.Valid(data) {
		return invalid(ReasonBadJSON, "%s: not valid JSON for datacontenttype %q", what, truncate(contentType, 64))
	}
	return nil
}

func isHex(c byte) bool {
	return ('0' <= c && c <= '9') || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F')
}

func isNull(raw []byte) bool { return string(raw) == "null" }

// firstInvalidUTF8 is the offset of the first byte that is not part of a
// valid UTF-8 sequence, or len(b).
func firstInvalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}

// charset returns the charset parameter of a content type, lower-cased.
func charset(ct string) (string, bool) {
	if ct == "" {
		return "", false
	}
	_, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return "", false
	}
	cs, ok := params["charset"]
	return strings.ToLower(cs), ok
}

// isUTF8Charset: utf-8 or its subset us-ascii.
func isUTF8Charset(cs string) bool {
	switch strings.ToLower(cs) {
	case "utf-8", "utf8", "us-ascii":
		return true
	}
	return false
}

// parseTime reads an RFC 3339 timestamp (core spec §Type System). RFC 3339
// §5.6 allows a lower-case "t" and "z" (ABNF literals are case-insensitive),
// which Go's time.Parse refuses; the string has no other letters, so it is
// upper-cased first.
func parseTime(s string) (time.Time, error) {
	return types.ParseTime(strings.ToUpper(s))
}

// checkMediaType checks ct as an RFC 2046 media type: type "/" subtype and
// well-formed parameters (mime.ParseMediaType alone accepts a bare token
// such as "json").
func checkMediaType(ct string) error {
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil {
		typ, sub, ok := strings.Cut(mt, "/")
		if !ok || typ == "" || sub == "" || strings.Contains(sub, "/") {
			err = errors.New("no type/subtype")
		}
	}
	if err != nil {
		return fmt.Errorf("%q: MUST be an RFC 2046 media type (%v)", truncate(ct, 64), err)
	}
	return nil
}

// parseURIReference checks s as an RFC 3986 §4.1 URI-reference: only the
// characters RFC 3986 §2 allows, every '%' followed by two hex digits, at
// most one '#', and a syntax net/url accepts. The SDK's url.Parse alone
// accepts (and re-encodes) spaces and non-ASCII, which would silently
// change the source.
func parseURIReference(s string) (*url.URL, error) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("-._~:/?#[]@!$&'()*+,;=", c) >= 0:
		case c == '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return nil, fmt.Errorf("%q: '%%' at byte %d is not followed by two hex digits (RFC 3986 §2.1)", truncate(s, 64), i)
			}
		default:
			return nil, fmt.Errorf("%q: byte %d (%q) is not allowed in a URI-reference (RFC 3986 §2)", truncate(s, 64), i, c)
		}
	}
	if strings.Count(s, "#") > 1 {
		return nil, fmt.Errorf("%q: more than one '#' (RFC 3986 §3.5)", truncate(s, 64))
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("not a URI-reference (RFC 3986 §4.1): %v", err)
	}
	return u, nil
}

// parseAbsoluteURI checks s as a non-empty RFC 3986 §4.3 absolute URI:
// a URI-reference with a scheme and without a fragment.
func parseAbsoluteURI(s string) (*url.URL, error) {
	if s == "" {
		return nil, errors.New("MUST be a non-empty URI")
	}
	u, err := parseURIReference(s)
	if err != nil {
		return nil, err
	}
	if u.Scheme == "" || strings.Contains(s, "#") {
		return nil, fmt.Errorf("%q: MUST be an absolute URI (RFC 3986 §4.3: a scheme, no fragment)", truncate(s, 64))
	}
	return u, nil
}
