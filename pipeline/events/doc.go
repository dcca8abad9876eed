// Package events turns records of the events topic into CloudEvents 1.0 and
// records that are not valid CloudEvents into records for the
// `<prefix>events.invalid` topic.
//
// # Content modes
//
// [Decode] reads both content modes of the CloudEvents Kafka protocol binding
// (github.com/cloudevents/spec, cloudevents/bindings/kafka-protocol-binding.md)
// through the CloudEvents Go SDK's binding machinery (binding.ToEvent over a
// binding.Message adapter of the kgo.Record), then validates with the SDK's
// event.Validate:
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
// Required attributes id, source, type and specversion, specversion "1.0"
// (0.3 is refused with "unsupported_specversion"). The optional extension
// `tenantid` must be a string ([Tenant]). Data declared as JSON
// (application/json, text/json, any +json) must be valid JSON. The record as a
// whole (key, value, header keys and values) must not exceed the size limit,
// [DefaultMaxBytes] unless the caller says otherwise. Every refusal is an
// [*InvalidError] whose Reason is a short machine code ([Reasons]).
//
// # Data in the webhook body
//
// [DataJSON] gives the JSON value that becomes the webhook body's "data"
// member. The datacontenttype decides, so a receiver can rely on one
// representation per content type:
//
//   - no data: null;
//   - a JSON content type (application/json, text/json, */*+json): the JSON
//     value inline (also when it travelled as data_base64);
//   - data_base64 (structured mode) with any other content type: a JSON
//     string holding the standard base64 (with padding) of the bytes;
//   - a text content type (text/*, application/xml, */*+xml,
//     application/yaml, application/x-yaml,
//     application/x-www-form-urlencoded): a JSON string of the text when it
//     is valid UTF-8, else base64 as above;
//   - no content type: inline when the bytes are valid JSON, else a JSON
//     string when valid UTF-8, else base64;
//   - any other content type (application/octet-stream, application/protobuf,
//     image/png, …): a base64 JSON string, whatever the bytes.
//
// # Invalid records
//
// [InvalidRecord] builds the record for the invalid topic: the original key,
// value, headers and timestamp, plus headers naming the reason and the
// original topic, partition and offset ([HeaderReason] and the other Header
// constants). A bad record never stops its partition: the caller produces it
// there, counts it and moves on.
package events
