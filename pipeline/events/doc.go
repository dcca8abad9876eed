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
// item 2; one row per rule in TestSpecMUSTs). Sections refer to
// github.com/cloudevents/spec v1.0.2: core = spec.md, json =
// formats/json-format.md, kafka = bindings/kafka-protocol-binding.md. The
// reason is in brackets.
//
//   - JSON text is UTF-8 (RFC 8259 §8.1; a content-type charset other than
//     UTF-8 too) [invalid_utf8] and one JSON object (json §3) [bad_json];
//   - each attribute at most once (core §Context Attributes): a member name
//     twice, escaped or not [duplicate_attribute], a ce_ header twice
//     [bad_header];
//   - specversion, id, source and type present and non-empty (core
//     §REQUIRED Attributes; null is unset, json §2.2) [missing_attribute];
//     specversion "1.0" [unsupported_specversion];
//   - attribute values of their type (core §Type System, json §2.2): JSON
//     strings; Strings without U+0000-U+001F, U+007F-U+009F, noncharacters
//     or unpaired surrogates; source an RFC 3986 §4.1 URI-reference;
//     dataschema a non-empty absolute URI (§4.3); time RFC 3339;
//     datacontenttype an RFC 2046 type/subtype; subject non-empty
//     [invalid_attribute];
//   - extension names of a-z and 0-9 (core §Naming Conventions; the
//     20-character limit is a SHOULD and not enforced), values a String,
//     Boolean or Integer (integer component only, 32-bit), never an object
//     or array (json §2.2) [invalid_attribute in structured mode,
//     bad_header for a ce_ header name];
//   - data and data_base64 are mutually exclusive (json §3.1.1)
//     [conflicting_data]; data_base64 a JSON string of padded standard
//     base64 without line breaks (RFC 4648 §4, §3.2, §3.3); data of a
//     non-JSON datacontenttype a JSON string (json §3.1.2)
//     [invalid_attribute];
//   - header names and values UTF-8 (kafka §3.2.3) [bad_header]; the
//     content-type header is the datacontenttype, and a ce_datacontenttype
//     with another value contradicts it (kafka §3.2.1) [bad_header];
//   - the structured content-type names the JSON event format (kafka
//     §3.3.1, §1.3: no batch) [unsupported_format].
//
// The optional extension `tenantid` must be a string ([Tenant]).
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
