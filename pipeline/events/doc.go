// Package events turns records of the events topic into CloudEvents 1.0 and
// records that are not valid CloudEvents into records for the
// `<prefix>events.invalid` topic.
//
// # Content modes
//
// [Decode] reads both content modes of the CloudEvents Kafka protocol binding
// (github.com/cloudevents/spec v1.0.2, cloudevents/bindings/kafka-protocol-binding.md):
// binary mode through the CloudEvents Go SDK's binding machinery
// (binding.ToEvent over a binding.Message adapter of the kgo.Record),
// structured mode with its own reader of the JSON event format
// (json-format.md) that builds the SDK's event types; both are then
// validated with the SDK's event.Validate plus the checks the SDK omits:
//
//   - structured (§3.3): a `content-type` header starting with
//     `application/cloudevents` (case-insensitive, §3). Only the JSON event
//     format (`application/cloudevents+json`, any parameters) is supported;
//     any other event format (batch, avro, …) is invalid with reason
//     "unsupported_format". As a lenient extension, a record with neither a
//     `content-type` nor a `ce_specversion` header whose value is a JSON
//     object is also read as a structured JSON event: it cannot be a binary
//     mode event, and many producers omit the header.
//   - binary (§3.2): every other record. `ce_<name>` headers carry the
//     attributes and extensions (§3.2.3; header names matched
//     case-insensitively, values must be UTF-8), the `content-type` header
//     is the datacontenttype (§3.2.1) and the value is the data, as is
//     (§3.2.2). `ce_specversion` is required.
//
// The record key is not mapped into the event: §3.1 forbids a key mapper to
// add attributes (no partitionkey is made up from it).
//
// # What is valid
//
// Every MUST of the JSON event format and the Kafka binding that an event
// can break is checked, and a breach is refused, never repaired (issue 8
// item 2; the rules and their spec sections are listed at decodeStructured
// and readBinaryHeaders, one test row each in TestSpecMUSTs): required
// attributes id, source, type and specversion, specversion "1.0" (0.3 is
// refused with "unsupported_specversion"); attribute types (String without
// control characters or noncharacters, source an RFC 3986 URI-reference,
// dataschema an absolute URI, time RFC 3339, datacontenttype RFC 2046);
// extension names of a-z0-9 and values that are Strings, Booleans or
// 32-bit Integers; no attribute twice (duplicate JSON members or headers);
// data and data_base64 never both; data_base64 padded standard base64;
// header names and values UTF-8. The optional extension `tenantid` must be
// a string ([Tenant]).
//
// A body sent as JSON is valid UTF-8 JSON (issue 8 item 3): the structured
// value is UTF-8 JSON; data declared as JSON (application/json, text/json,
// any +json) is valid UTF-8 JSON; text data (below) without a charset or in
// UTF-8 is valid UTF-8 — else "invalid_utf8" (or "bad_json"). The record as
// a whole (key, value, header keys and values) must not exceed the size
// limit, [DefaultMaxBytes] unless the caller says otherwise. Every refusal is
// an [*InvalidError] whose Reason is a short machine code ([Reasons]).
//
// # Data in the webhook body
//
// [DataJSON] gives the JSON value that becomes the webhook body's "data"
// member, in a canonical form: every serialisation of the same event
// (whitespace, member order of the event, string escapes, pretty printing,
// binary or structured mode) gives the same bytes (issue 8 item 1). The
// datacontenttype decides, so a receiver can rely on one representation
// per content type:
//
//   - no data: null;
//   - a JSON content type (application/json, text/json, */*+json): the JSON
//     value inline (also when it travelled as data_base64);
//   - data_base64 (structured mode) with any other content type: a JSON
//     string holding the standard base64 (with padding) of the bytes;
//   - a text content type (text/*, application/xml, */*+xml,
//     application/yaml, application/x-yaml,
//     application/x-www-form-urlencoded) without a charset or in UTF-8: a
//     JSON string of the text; in another declared charset: base64;
//   - no content type: inline when the bytes are valid UTF-8 JSON, else a
//     JSON string when valid UTF-8, else base64;
//   - any other content type (application/octet-stream, application/protobuf,
//     image/png, …): a base64 JSON string, whatever the bytes.
//
// # Invalid records
//
// [InvalidRecord] builds the record for the invalid topic: the original key,
// value, headers and timestamp, plus headers naming the reason and the
// original topic, partition and offset ([HeaderReason] and the other Header
// constants), and the event's id, source, type and tenantid as far as they
// can be recovered cheaply ([HeaderEventID] …; issue 8 item 9). A bad record
// never stops its partition: the caller produces it there, counts it and
// moves on.
package events
