package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Standard Webhooks request headers (spec "Webhook headers").
const (
	HeaderWebhookID        = "webhook-id"
	HeaderWebhookTimestamp = "webhook-timestamp"
	HeaderWebhookSignature = "webhook-signature"
)

// signatureVersion is the symmetric (HMAC-SHA256) signature identifier.
const signatureVersion = "v1"

// Sign returns the webhook-signature header value for one attempt: for each
// non-zero secret, in order, "v1," followed by the standard base64 of
// HMAC-SHA256(key, webhookID + "." + unix seconds of ts + "." + body), the
// entries separated by single spaces (spec "Signature scheme", "Webhook
// headers"). Zero secrets are skipped; with none left the result is "".
//
// ts is the attempt's time, not the event's: every attempt is re-signed with
// a fresh webhook-timestamp, which the spec uses against replays. body must be
// the exact bytes sent.
func Sign(webhookID string, ts time.Time, body []byte, secrets ...Secret) string {
	var prefix [128]byte
	p := append(prefix[:0], webhookID...)
	p = append(p, '.')
	p = strconv.AppendInt(p, ts.Unix(), 10)
	p = append(p, '.')

	const entryLen = len(signatureVersion) + 1 + 44 // "v1," + base64 of 32 bytes
	var b strings.Builder
	b.Grow(len(secrets) * (entryLen + 1))
	var sum [sha256.Size]byte
	var enc [44]byte
	for _, s := range secrets {
		if s.IsZero() {
			continue
		}
		mac := hmac.New(sha256.New, s.key)
		mac.Write(p)
		mac.Write(body)
		mac.Sum(sum[:0])
		base64.StdEncoding.Encode(enc[:], sum[:])
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(signatureVersion)
		b.WriteByte(',')
		b.Write(enc[:])
	}
	return b.String()
}

// DefaultVerifyTolerance is how far a webhook-timestamp may be from now before
// Verify rejects it: 5 minutes, as the reference libraries use.
const DefaultVerifyTolerance = 5 * time.Minute

// Errors of Verify.
var (
	// ErrMissingHeaders: webhook-id, webhook-timestamp or webhook-signature is absent.
	ErrMissingHeaders = errors.New("webhook: missing webhook-id, webhook-timestamp or webhook-signature header")
	// ErrInvalidTimestamp: webhook-timestamp is not a decimal integer.
	ErrInvalidTimestamp = errors.New("webhook: webhook-timestamp is not unix seconds")
	// ErrTimestampTolerance: webhook-timestamp is further from now than the tolerance.
	ErrTimestampTolerance = errors.New("webhook: webhook-timestamp outside the tolerance")
	// ErrNoMatchingSignature: no v1 entry matches any of the secrets.
	ErrNoMatchingSignature = errors.New("webhook: no matching signature")
)

// Verify checks a received webhook as a Standard Webhooks consumer does: the
// three headers are present, webhook-timestamp is within tolerance of now
// (tolerance <= 0 means [DefaultVerifyTolerance]), and at least one "v1,"
// entry of webhook-signature equals, in constant time, the signature of
// webhook-id.webhook-timestamp.body under one of the secrets. It returns nil
// or one of the errors above (wrapped).
//
// hookrelay itself only signs; Verify is for tests and example receivers.
func Verify(header http.Header, body []byte, now time.Time, tolerance time.Duration, secrets ...Secret) error {
	id := header.Get(HeaderWebhookID)
	tsText := header.Get(HeaderWebhookTimestamp)
	sigs := header.Get(HeaderWebhookSignature)
	if id == "" || tsText == "" || sigs == "" {
		return ErrMissingHeaders
	}
	unix, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %q", ErrInvalidTimestamp, tsText)
	}
	if tolerance <= 0 {
		tolerance = DefaultVerifyTolerance
	}
	ts := time.Unix(unix, 0)
	if d := now.Sub(ts); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: %s off", ErrTimestampTolerance, d)
	}
	for _, s := range secrets {
		want := Sign(id, ts, body, s)
		if want == "" {
			continue
		}
		for entry := range strings.FieldsSeq(sigs) {
			if strings.HasPrefix(entry, signatureVersion+",") && hmac.Equal([]byte(entry), []byte(want)) {
				return nil
			}
		}
	}
	return ErrNoMatchingSignature
}
