// Package webhook is hookrelay's HTTP edge: the Standard Webhooks body and
// signature, the HTTP sender with its SSRF guard, and the one function that
// turns an attempt's result into an audit outcome.
//
// It imports audit (for [audit.Outcome]) and nothing of the pipeline; the
// dispatcher composes the three parts below.
//
// # Standard Webhooks (https://www.standardwebhooks.com, spec 1.0.0)
//
// [WebhookID] derives the webhook-id header from the CloudEvent's source and
// id, so it is the same on every attempt, on any crash duplicate and for every
// endpoint ("Webhook metadata": the id is the consumer's idempotency key), and
// contains no '.' ("Signature scheme": the id must not contain a full stop).
//
// [Body] builds the request body {"type","timestamp","data"} ("Payload
// structure"), compact, and it is sent byte for byte as built: a delivery
// record's value is these bytes, and [Sign] signs exactly them.
//
// [Sign] produces the webhook-signature header: one "v1,<base64 HMAC-SHA256
// of id.timestamp.body>" entry per secret, space-separated ("Signature
// scheme", "Webhook headers"), so secret rotation with an overlap period works.
// [Verify] is the receiving side, used by tests and receivers.
//
// [Secret] is a whsec_-prefixed, base64-encoded symmetric key of 24 to 64
// bytes ("Signature scheme" table: at least 192 bits, at most 512).
//
// # CloudEvent data in the body
//
// [Body] takes the "data" member as a JSON value. How a CloudEvent's data of
// any content type becomes that value (JSON inline, text as a JSON string,
// binary as base64) is decided by package pipeline/events (events.DataJSON),
// which knows the event's datacontenttype.
//
// # HTTP sender
//
// [Sender] posts one signed request per [Sender.Send] with its own
// [http.Client] (never [http.DefaultClient]), never follows redirects (a 3xx
// is a result), reads at most [audit.MaxResponseBody] bytes of the response
// and checks every address it dials against the SSRF guard after DNS
// resolution, so DNS rebinding cannot slip through. A non-2xx answer is a
// result, not an error.
//
// A URL host that is an IP literal is judged before any lookup, in every
// spelling a resolver accepts ([ParseHost]: decimal "2130706433", octal
// "0177.0.0.1", hex "0x7f.1", short "127.1", trailing dot, IPv4-mapped,
// -compatible and NAT64 IPv6, zones, IDNA-mapped digits): [CheckHost] blocks
// one inside a refused range, and a non-canonical spelling of any other
// address, or a host that ends in a number but is no address, is a
// [*HostError] (class "invalid_host", permanent), never a DNS error retried
// through the schedule. Endpoint validation uses the same two functions.
//
// # Redaction and bounds
//
// Nothing this package returns for the log carries a URL's userinfo, query
// or fragment: [RedactURL] redacts one URL, [RedactText] every URL inside a
// free text (a *url.Error message repeats the request URL), Result.Err's
// *url.Error has its URL redacted, Result.Location is redacted, and every
// Classification.ErrorMessage goes through RedactText. Bounds: response
// body [audit.MaxResponseBody] (4 KiB), Location [MaxHeaderValue] (1 KiB; no
// other response header is kept), ErrorMessage [MaxErrorMessage] (1 KiB),
// response headers read at most 64 KiB in all.
//
// # Classification
//
// [Classify] is the one pure function that maps a [Result] to an
// [audit.Outcome], an error class and the endpoint-wide pause of a 429,
// following the delivery policy table of the seed "Webhook Delivery
// Throttling and Retries" and the spec's "Delivery success and failure".
package webhook
