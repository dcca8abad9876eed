// Package endpoints holds hookrelay's endpoint configuration: the
// [Endpoint] type and its validation, subscription matching, the [View] that
// materialises the endpoint topics in memory in every process, and the
// [Store] that writes them. Kafka is the only store: there is no other
// database (delivery-path issue, "Endpoints and subscriptions").
//
// # Topics
//
// `<prefix>endpoints` (compacted) holds the operator's configuration: key =
// endpoint ID, value = the JSON below, a tombstone (null value) deletes.
// `<prefix>endpoint-status` (compacted) holds the pipeline's own verdicts
// ([Status]): key = endpoint ID, written by the dispatcher's endpoint
// health (the failing-since clock in FailingSince; disabled, reason
// "failing", after sustained failure; disabled, reason "gone", after a
// 410). Keeping them apart means a status change by the pipeline never
// overwrites a concurrent config edit by an operator. The
// caller names both topics (Config.EndpointsTopic, Config.StatusTopic); the
// topic owner should give the endpoints topic a fixed partition count.
//
// # Endpoint record
//
//	{
//	  "id": "acme-billing",
//	  "url": "https://hooks.acme.example/billing",
//	  "secrets": [
//	    {"value": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
//	    {"value": "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD", "expires_at": "2026-07-01T00:00:00Z"}
//	  ],
//	  "event_types": ["invoice.*", "customer.created"],
//	  "tenantid": "acme",
//	  "rate_per_sec": 10,
//	  "max_in_flight": 4,
//	  "timeout": "10s",
//	  "connect_timeout": "3s",
//	  "status": "active",
//	  "disabled_reason": "",
//	  "created_at": "2026-05-01T12:00:00Z",
//	  "updated_at": "2026-05-02T08:30:00Z",
//	  "incarnation": "9f86d081884c7d659a2feaa0c55ad015"
//	}
//
// Durations are Go duration strings. Missing optional members take their
// defaults (rate 10/s, 4 in flight, 10s, 3s, active); unknown members are
// ignored, so a newer writer can add fields. Validation rules are on the
// Endpoint fields and in [Endpoint.Validate]. Secret rotation: several
// secrets, each optionally expiring; every unexpired secret signs.
//
// # Effective status
//
// An endpoint is delivered to only while its effective status is active
// ([Endpoint.EffectiveStatus]): it is disabled when the operator's "status"
// is "disabled", or when the pipeline's status record is disabled and was
// decided on this config write or a later one. Each config write has a
// Version, the offset of its record plus one; a status record carries the
// ConfigVersion it acted on. So any operator write made after the pipeline's
// verdict (re-enable, URL fix) supersedes it, a verdict reached on an older
// config (a 410 from the old URL) never disables a newer one, and no clock
// is compared. Re-enable: [Store.Enable], or any [Store.Put].
//
// # Matching
//
// An event of type T with tenant N (its tenantid extension; "" for none)
// goes to every active endpoint whose TenantID equals N and one of whose
// patterns matches T: equal to T, "*", or a prefix ending in "*" that T
// extends ("invoice.*" matches "invoice.paid", not "invoice."). So an event
// without a tenant never reaches a tenant's endpoint, and a tenant's event
// never reaches an endpoint without a tenant or of another tenant.
// [View.Match] (active endpoints) and [View.Subscribed] (any status) index
// endpoints by tenant, then by exact type, wildcard prefix and "*", and
// cache the sorted result per event type.
//
// # Identity and invalid records
//
// Incarnation (set by [Store] when an ID is created, kept by updates)
// tells an endpoint from an earlier or later one with the same ID; a
// pending delivery is sent only while [Endpoint.Mismatch] finds no
// difference in incarnation, tenant or subscription. A record the View
// cannot use is kept with [Endpoint.ConfigError] set: effective status
// [Invalid], visible, never sent to.
//
// # Ready and Sync
//
// A View's Ready channel closes once it has applied every record that was in
// both topics when Run started; fan-out and dispatch wait for it, so an
// endpoint acknowledged before start receives every later event.
// [View.Sync] extends the guarantee to a later instant: after it returns,
// every write acknowledged before the call is visible. It relies on the
// record at each partition's end offset minus one being readable, which
// holds because Kafka never compacts a partition's active segment and the
// view keeps transaction markers (kgo.KeepControlRecords).
package endpoints
