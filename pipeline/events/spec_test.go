package events

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Spec documents cited by the rows below (github.com/cloudevents/spec, v1.0.2):
//   core  = cloudevents/spec.md
//   json  = cloudevents/formats/json-format.md
//   kafka = cloudevents/bindings/kafka-protocol-binding.md
//   RFC 8259 (JSON), RFC 4648 (base64), RFC 3986 (URI), RFC 3339 (time), RFC 2046 (media types).

// ev builds a structured value from the minimal valid event plus members
// (a JSON fragment starting with a comma, or "" for none).
func ev(members string) []byte {
	return []byte(`{"specversion":"1.0","id":"e1","source":"/qa","type":"t.c"` + members + `}`)
}

// bin returns the headers of a minimal valid binary-mode event plus extra.
func bin(extra ...string) []kgo.RecordHeader {
	return hdrs(append([]string{"ce_specversion", "1.0", "ce_id", "e1", "ce_source", "/qa", "ce_type", "t.a"}, extra...)...)
}

// TestSpecMUSTs is the list of MUSTs of the CloudEvents JSON event format
// and Kafka protocol binding that an event can break: one row per rule,
// with an input that breaks it and the reason it must be refused with. No
// row may be delivered (a silent repair is a failure too).
func TestSpecMUSTs(t *testing.T) {
	tests := []struct {
		rule   string // the rule and where it is written
		rec    *kgo.Record
		reason string
		detail string // substring of Detail
	}{
		// The JSON text itself.
		{"RFC 8259 §8.1: JSON text MUST be UTF-8", &kgo.Record{Value: ev(`,"subject":"a` + "\xff" + `"`), Headers: ceJSON}, "invalid_utf8", "UTF-8"},
		{"RFC 8259 §8.1: invalid UTF-8 inside structured data", &kgo.Record{Value: ev(`,"data":{"s":"` + "\xff\xfe" + ` ok"}`), Headers: ceJSON}, "invalid_utf8", ""},
		{"json §3 / RFC 8259 §2: the value is one JSON object, nothing after it", &kgo.Record{Value: append(ev(""), []byte(` {"x":1}`)...), Headers: ceJSON}, "bad_json", ""},
		{"json §3: the value is a JSON object", &kgo.Record{Value: []byte(`"just a string"`), Headers: ceJSON}, "bad_json", "object"},
		{"core §Context Attributes: each attribute MUST appear at most once (duplicate member)", &kgo.Record{Value: ev(`,"id":"e2"`), Headers: ceJSON}, "duplicate_attribute", "id"},
		{"core §Context Attributes: at most once, also when the name is escaped", &kgo.Record{Value: ev(`,"\u0069d":"e2"`), Headers: ceJSON}, "duplicate_attribute", "id"},
		{"core §Context Attributes: at most once (duplicate extension)", &kgo.Record{Value: ev(`,"ext":"a","ext":"b"`), Headers: ceJSON}, "duplicate_attribute", "ext"},
		{"json §3.1.1: data and data_base64 are mutually exclusive", &kgo.Record{Value: ev(`,"data":{"x":1},"data_base64":"eyJ5IjoyfQ=="`), Headers: ceJSON}, "conflicting_data", "data_base64"},
		{"json §3.1.1: data and data_base64 exclusive, also with data null", &kgo.Record{Value: ev(`,"data":null,"data_base64":"AAEC"`), Headers: ceJSON}, "conflicting_data", ""},
		{"json §3.1.1: data_base64 MUST be a JSON string", &kgo.Record{Value: ev(`,"data_base64":1`), Headers: ceJSON}, ReasonInvalidAttribute, "data_base64"},
		{"json §3.1.1: data_base64 MUST be a JSON string (object)", &kgo.Record{Value: ev(`,"data_base64":{"a":1}`), Headers: ceJSON}, ReasonInvalidAttribute, "data_base64"},
		{"RFC 4648 §4: data_base64 uses the base64 alphabet", &kgo.Record{Value: ev(`,"data_base64":"AA%EC"`), Headers: ceJSON}, ReasonInvalidAttribute, "base64"},
		{"RFC 4648 §3.2: data_base64 is padded", &kgo.Record{Value: ev(`,"data_base64":"AAECAw"`), Headers: ceJSON}, ReasonInvalidAttribute, "base64"},
		{"RFC 4648 §3.3: no line breaks or spaces inside data_base64", &kgo.Record{Value: ev(`,"data_base64":"AAEC\r\nAw=="`), Headers: ceJSON}, ReasonInvalidAttribute, "base64"},
		{"RFC 4648 §4: not the URL-safe alphabet", &kgo.Record{Value: ev(`,"data_base64":"-_-_"`), Headers: ceJSON}, ReasonInvalidAttribute, "base64"},
		{"json §3.1.2: data of a JSON content type is JSON (data_base64)", &kgo.Record{Value: ev(`,"datacontenttype":"application/json","data_base64":"bm90IGpzb24="`), Headers: ceJSON}, ReasonBadJSON, ""},
		{"kafka §2.1 / RFC 8259 §8.1: data_base64 declared JSON is UTF-8", &kgo.Record{Value: ev(`,"datacontenttype":"application/json","data_base64":"eyJzIjoi//4gb2sifQ=="`), Headers: ceJSON}, "invalid_utf8", ""},
		{"json §3.1.2: data of a non-JSON content type is a string", &kgo.Record{Value: ev(`,"datacontenttype":"text/plain","data":{"a":1}`), Headers: ceJSON}, ReasonInvalidAttribute, "data"},
		{"core §Type System: text data is a sequence of Unicode characters (no lone surrogate)", &kgo.Record{Value: ev(`,"datacontenttype":"text/plain","data":"a\udead"`), Headers: ceJSON}, "invalid_utf8", "surrogate"},

		// specversion.
		{"core §specversion: REQUIRED", &kgo.Record{Value: []byte(`{"id":"e1","source":"/qa","type":"t"}`), Headers: ceJSON}, ReasonMissingAttribute, "specversion"},
		{"json §2.2: null is unset, so a null specversion is missing", &kgo.Record{Value: []byte(`{"specversion":null,"id":"e1","source":"/qa","type":"t"}`), Headers: ceJSON}, ReasonMissingAttribute, "specversion"},
		{"json §2.2: specversion is a JSON string", &kgo.Record{Value: []byte(`{"specversion":1.0,"id":"e1","source":"/qa","type":"t"}`), Headers: ceJSON}, ReasonInvalidAttribute, "specversion"},
		{"core §specversion: 1.0 only", &kgo.Record{Value: []byte(`{"specversion":"1.0.2","id":"e1","source":"/qa","type":"t"}`), Headers: ceJSON}, ReasonUnsupportedSpecVersion, ""},

		// id, source, type.
		{"core §id: REQUIRED", &kgo.Record{Value: []byte(`{"specversion":"1.0","source":"/qa","type":"t"}`), Headers: ceJSON}, ReasonMissingAttribute, "id"},
		{"core §id: MUST be a non-empty string", &kgo.Record{Value: []byte(`{"specversion":"1.0","id":"","source":"/qa","type":"t"}`), Headers: ceJSON}, ReasonMissingAttribute, "id"},
		{"json §2.2: id is a JSON string", &kgo.Record{Value: []byte(`{"specversion":"1.0","id":7,"source":"/qa","type":"t"}`), Headers: ceJSON}, ReasonInvalidAttribute, "id"},
		{"json §2.2: null id is unset, so missing", &kgo.Record{Value: []byte(`{"specversion":"1.0","id":null,"source":"/qa","type":"t"}`), Headers: ceJSON}, ReasonMissingAttribute, "id"},
		{"core §Type System String: no control characters U+0000-U+001F", &kgo.Record{Value: []byte(`{"specversion":"1.0","id":"a\u0000b","source":"/qa","type":"t"}`), Headers: ceJSON}, ReasonInvalidAttribute, "id"},
		{"core §Type System String: no control characters U+007F-U+009F", &kgo.Record{Value: []byte(`{"specversion":"1.0","id":"e1","source":"/qa","type":"t\u0085"}`), Headers: ceJSON}, ReasonInvalidAttribute, "type"},
		{"core §Type System String: no noncharacters", &kgo.Record{Value: []byte(`{"specversion":"1.0","id":"e1","source":"/qa","type":"t\uFFFE"}`), Headers: ceJSON}, ReasonInvalidAttribute, "type"},
		{"core §Type System String: no unpaired surrogates", &kgo.Record{Value: []byte(`{"specversion":"1.0","id":"a\uDEAD","source":"/qa","type":"t"}`), Headers: ceJSON}, ReasonInvalidAttribute, "id"},
		{"core §source: REQUIRED", &kgo.Record{Value: []byte(`{"specversion":"1.0","id":"e1","type":"t"}`), Headers: ceJSON}, ReasonMissingAttribute, "source"},
		{"core §source: MUST be a non-empty URI-reference", &kgo.Record{Value: []byte(`{"specversion":"1.0","id":"e1","source":"","type":"t"}`), Headers: ceJSON}, ReasonMissingAttribute, "source"},
		{"core §source: a URI-reference (RFC 3986 §4.1): no spaces", &kgo.Record{Value: []byte(`{"specversion":"1.0","id":"e1","source":"/my context","type":"t"}`), Headers: ceJSON}, ReasonInvalidAttribute, "source"},
		{"core §source: a URI-reference (RFC 3986 §2.1): percent-encoding", &kgo.Record{Value: []byte(`{"specversion":"1.0","id":"e1","source":"/a%zz","type":"t"}`), Headers: ceJSON}, ReasonInvalidAttribute, "source"},
		{"core §source: a URI-reference (RFC 3986 §2): no non-ASCII", &kgo.Record{Value: []byte(`{"specversion":"1.0","id":"e1","source":"/café","type":"t"}`), Headers: ceJSON}, ReasonInvalidAttribute, "source"},
		{"json §2.2: source is a JSON string", &kgo.Record{Value: []byte(`{"specversion":"1.0","id":"e1","source":{"a":1},"type":"t"}`), Headers: ceJSON}, ReasonInvalidAttribute, "source"},
		{"core §type: REQUIRED", &kgo.Record{Value: []byte(`{"specversion":"1.0","id":"e1","source":"/qa"}`), Headers: ceJSON}, ReasonMissingAttribute, "type"},
		{"json §2.2: type is a JSON string", &kgo.Record{Value: []byte(`{"specversion":"1.0","id":"e1","source":"/qa","type":true}`), Headers: ceJSON}, ReasonInvalidAttribute, "type"},

		// OPTIONAL attributes.
		{"core §time: RFC 3339", &kgo.Record{Value: ev(`,"time":"2018-04-05 17:31:00"`), Headers: ceJSON}, ReasonInvalidAttribute, "time"},
		{"json §2.2: time is a JSON string", &kgo.Record{Value: ev(`,"time":1522949460`), Headers: ceJSON}, ReasonInvalidAttribute, "time"},
		{"core §dataschema: MUST be a non-empty URI", &kgo.Record{Value: ev(`,"dataschema":""`), Headers: ceJSON}, ReasonInvalidAttribute, "dataschema"},
		{"core §dataschema: an absolute URI (RFC 3986 §4.3)", &kgo.Record{Value: ev(`,"dataschema":"/schemas/pr.json"`), Headers: ceJSON}, ReasonInvalidAttribute, "dataschema"},
		{"core §datacontenttype: RFC 2046", &kgo.Record{Value: ev(`,"datacontenttype":"json"`), Headers: ceJSON}, ReasonInvalidAttribute, "datacontenttype"},
		{"core §datacontenttype: RFC 2046, not empty", &kgo.Record{Value: ev(`,"datacontenttype":""`), Headers: ceJSON}, ReasonInvalidAttribute, "datacontenttype"},
		{"json §2.2: datacontenttype is a JSON string", &kgo.Record{Value: ev(`,"datacontenttype":["application/json"]`), Headers: ceJSON}, ReasonInvalidAttribute, "datacontenttype"},
		{"core §subject: MUST be a non-empty string", &kgo.Record{Value: ev(`,"subject":""`), Headers: ceJSON}, ReasonInvalidAttribute, "subject"},

		// Extensions.
		{"core §Naming Conventions: lower-case a-z and 0-9 only", &kgo.Record{Value: ev(`,"comExample":"x"`), Headers: ceJSON}, ReasonInvalidAttribute, "comExample"},
		{"core §Naming Conventions: no punctuation", &kgo.Record{Value: ev(`,"com-example":"x"`), Headers: ceJSON}, ReasonInvalidAttribute, "com-example"},
		{"core §Naming Conventions: no underscore (data_base64 aside)", &kgo.Record{Value: ev(`,"my_ext":"x"`), Headers: ceJSON}, ReasonInvalidAttribute, "my_ext"},
		{"core §Naming Conventions: not empty", &kgo.Record{Value: ev(`,"":"x"`), Headers: ceJSON}, ReasonInvalidAttribute, "name"},
		{"json §2.2: an extension value is not an object", &kgo.Record{Value: ev(`,"ext":{"a":1}`), Headers: ceJSON}, ReasonInvalidAttribute, "ext"},
		{"json §2.2: an extension value is not an array", &kgo.Record{Value: ev(`,"ext":[1]`), Headers: ceJSON}, ReasonInvalidAttribute, "ext"},
		{"json §2.2: Integer is only the integer component (no fraction)", &kgo.Record{Value: ev(`,"ext":1.5`), Headers: ceJSON}, ReasonInvalidAttribute, "ext"},
		{"json §2.2: Integer is only the integer component (no exponent)", &kgo.Record{Value: ev(`,"ext":1e3`), Headers: ceJSON}, ReasonInvalidAttribute, "ext"},
		{"core §Type System Integer: 32-bit range", &kgo.Record{Value: ev(`,"ext":2147483648`), Headers: ceJSON}, ReasonInvalidAttribute, "ext"},
		{"core §Type System String: extension strings too", &kgo.Record{Value: ev(`,"ext":"a\u001fb"`), Headers: ceJSON}, ReasonInvalidAttribute, "ext"},
		{"hookrelay: tenantid is a String", &kgo.Record{Value: ev(`,"tenantid":42`), Headers: ceJSON}, ReasonInvalidAttribute, "tenantid"},

		// Kafka protocol binding.
		{"kafka §3.3.1: the content-type names an event format hookrelay reads (JSON)", &kgo.Record{Value: ev(""), Headers: hdrs("content-type", "application/cloudevents+xml")}, ReasonUnsupportedFormat, ""},
		{"kafka §1.3: no batch mode", &kgo.Record{Value: []byte(`[` + string(ev("")) + `]`), Headers: hdrs("content-type", "application/cloudevents-batch+json")}, ReasonUnsupportedFormat, ""},
		{"RFC 8259 §8.1: a structured JSON event in another charset", &kgo.Record{Value: ev(""), Headers: hdrs("content-type", "application/cloudevents+json; charset=iso-8859-1")}, "invalid_utf8", "charset"},
		{"kafka §3.2.3: header values MUST be UTF-8", &kgo.Record{Headers: bin("ce_subject", "\xff\xfe")}, ReasonBadHeader, "ce_subject"},
		{"kafka §3.2.3: header keys MUST be UTF-8", &kgo.Record{Headers: bin("ce_ext\xff", "x")}, ReasonBadHeader, ""},
		{"kafka §3.2.3: content-type value MUST be UTF-8", &kgo.Record{Value: []byte("x"), Headers: bin("content-type", "text/plain\xff")}, ReasonBadHeader, "content-type"},
		{"core §Context Attributes: at most once (duplicate header)", &kgo.Record{Headers: bin("ce_type", "t.b")}, ReasonBadHeader, "ce_type"},
		{"kafka §3.2.1: content-type is the datacontenttype; a different ce_datacontenttype contradicts it", &kgo.Record{Value: []byte(`{}`), Headers: bin("content-type", "application/json", "ce_datacontenttype", "text/plain")}, ReasonBadHeader, "datacontenttype"},
		{"core §Naming Conventions: header attribute names", &kgo.Record{Headers: bin("ce_my-ext", "x")}, ReasonBadHeader, "ce_my-ext"},
		{"core §Naming Conventions: no attribute named data", &kgo.Record{Headers: bin("ce_data", "x")}, ReasonBadHeader, ""},
		{"core §specversion: binary mode ce_specversion 1.0 only", &kgo.Record{Headers: hdrs("ce_specversion", "0.3", "ce_id", "e1", "ce_source", "/qa", "ce_type", "t")}, ReasonUnsupportedSpecVersion, ""},
		{"core §id: binary mode REQUIRED", &kgo.Record{Headers: hdrs("ce_specversion", "1.0", "ce_source", "/qa", "ce_type", "t")}, ReasonMissingAttribute, "id"},
		{"core §Type System String: binary mode header values", &kgo.Record{Headers: bin("ce_subject", "a\nb")}, ReasonInvalidAttribute, "subject"},
		{"core §source: binary mode URI-reference", &kgo.Record{Headers: hdrs("ce_specversion", "1.0", "ce_id", "e1", "ce_source", "/my context", "ce_type", "t")}, ReasonInvalidAttribute, "source"},
		{"core §dataschema: binary mode absolute URI", &kgo.Record{Headers: bin("ce_dataschema", "schemas/x.json")}, ReasonInvalidAttribute, "dataschema"},
		{"core §time: binary mode RFC 3339", &kgo.Record{Headers: bin("ce_time", "15 May 2019")}, ReasonInvalidAttribute, "time"},
		{"core §datacontenttype: binary mode RFC 2046", &kgo.Record{Value: []byte("x"), Headers: bin("content-type", "not a media type;;")}, ReasonInvalidAttribute, "datacontenttype"},
		{"kafka §2.1: JSON data is JSON", &kgo.Record{Value: []byte(`{"a":`), Headers: bin("content-type", "application/json")}, ReasonBadJSON, "data"},

		// Issue 8 item 3: a body sent as JSON is UTF-8 JSON.
		{"kafka §2.1 / RFC 8259 §8.1: binary JSON data is UTF-8", &kgo.Record{Value: []byte("{\"s\":\"\xff\xfe ok\"}"), Headers: bin("content-type", "application/json")}, "invalid_utf8", "data"},
		{"RFC 8259 §8.1: binary +json data is UTF-8", &kgo.Record{Value: []byte("[\"\xc3\"]"), Headers: bin("content-type", "application/vnd.api+json; charset=utf-8")}, "invalid_utf8", ""},
		{"RFC 8259 §8.1: binary text/json data is UTF-8", &kgo.Record{Value: []byte("\"\xed\xa0\x80\""), Headers: bin("content-type", "text/json")}, "invalid_utf8", ""},
		{"RFC 2046 §4.1: text data in UTF-8 (or ASCII) is valid in that charset", &kgo.Record{Value: []byte("caf\xe9"), Headers: bin("content-type", "text/plain; charset=utf-8")}, "invalid_utf8", ""},
		{"RFC 2046 §4.1.2: text data without a charset is ASCII/UTF-8", &kgo.Record{Value: []byte("caf\xe9"), Headers: bin("content-type", "text/csv")}, "invalid_utf8", ""},
		{"RFC 2046: +xml text data is UTF-8", &kgo.Record{Value: []byte("<a>\xff</a>"), Headers: bin("content-type", "application/atom+xml")}, "invalid_utf8", ""},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			ev, err := Decode(tt.rec, 0)
			if err == nil {
				data, _ := DataJSON(ev)
				t.Fatalf("accepted: %s\ndata %s", ev, data)
			}
			var ie *InvalidError
			if !errors.As(err, &ie) {
				t.Fatalf("Decode error = %v (%T), want *InvalidError", err, err)
			}
			if ie.Reason != tt.reason {
				t.Errorf("Reason = %q (%s), want %q", ie.Reason, ie.Detail, tt.reason)
			}
			if !strings.Contains(ie.Detail, tt.detail) {
				t.Errorf("Detail = %q, want it to contain %q", ie.Detail, tt.detail)
			}
		})
	}
}

// TestSpecAllowed lists what the spec allows next to the MUSTs above, so a
// check is not stricter than the rule.
func TestSpecAllowed(t *testing.T) {
	tests := []struct {
		name string
		rec  *kgo.Record
		data string // DataJSON; "" to skip
	}{
		{"json §2.2: null optional attributes and extensions are unset", &kgo.Record{Value: ev(`,"subject":null,"time":null,"dataschema":null,"datacontenttype":null,"ext":null,"data":{"a":1}`), Headers: ceJSON}, `{"a":1}`},
		{"json §3.1.1: data_base64 null next to data is no data_base64", &kgo.Record{Value: ev(`,"data":{"a":1},"data_base64":null`), Headers: ceJSON}, `{"a":1}`},
		{"json §2.2: Integer extension, -0 and the int32 bounds", &kgo.Record{Value: ev(`,"a":-0,"b":-2147483648,"c":2147483647`), Headers: ceJSON}, "null"},
		{"json §2.2: Boolean extension", &kgo.Record{Value: ev(`,"flag":false`), Headers: ceJSON}, "null"},
		{"core §Naming Conventions: long extension names are a SHOULD, not a MUST", &kgo.Record{Value: ev(`,"averyveryverylongextensionname":"x"`), Headers: ceJSON}, "null"},
		{"core §Type System String: surrogate pairs", &kgo.Record{Value: ev(`,"subject":"\uD83D\uDE00"`), Headers: ceJSON}, "null"},
		{"json §3.1.2: JSON data may hold any JSON, even a lone surrogate escape", &kgo.Record{Value: ev(`,"data":"\udead"`), Headers: ceJSON}, `"\udead"`},
		{"json §3.1.1: empty data_base64 is empty data", &kgo.Record{Value: ev(`,"data_base64":""`), Headers: ceJSON}, "null"},
		{"kafka §3.2.1: the same datacontenttype in content-type and ce_datacontenttype", &kgo.Record{Value: []byte(`{}`), Headers: bin("content-type", "application/json", "ce_datacontenttype", "application/json")}, `{}`},
		{"RFC 2046: text in another declared charset is sent as bytes (base64)", &kgo.Record{Value: []byte("caf\xe9"), Headers: bin("content-type", "text/plain; charset=iso-8859-1")}, `"Y2Fm6Q=="`},
		{"binary octet-stream may be any bytes", &kgo.Record{Value: []byte{0xff, 0xfe}, Headers: bin("content-type", "application/octet-stream")}, `"//4="`},
		{"binary without content type: not UTF-8 is base64, never inline", &kgo.Record{Value: []byte("{\"s\":\"\xff\"}"), Headers: bin()}, `"eyJzIjoi/yJ9"`},
		{"RFC 3339 §5.6: lower-case t and z", &kgo.Record{Value: ev(`,"time":"2018-04-05t17:31:00z"`), Headers: ceJSON}, "null"},
		{"RFC 3339 §5.6: lower-case t and z in binary mode", &kgo.Record{Headers: bin("ce_time", "2018-04-05t17:31:00.5z")}, "null"},
		{"RFC 3986: source with percent-encoding and a query", &kgo.Record{Value: []byte(`{"specversion":"1.0","id":"e1","source":"https://example.com/a%20b?x=1#f","type":"t"}`), Headers: ceJSON}, "null"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := Decode(tt.rec, 0)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			data, err := DataJSON(ev)
			if err != nil {
				t.Fatalf("DataJSON: %v", err)
			}
			if tt.data != "" && string(data) != tt.data {
				t.Errorf("DataJSON = %s, want %s", data, tt.data)
			}
		})
	}
}
