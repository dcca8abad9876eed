package webhook

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
)

// webhookIDDomain separates webhook-id hashes from any other use of SHA-256
// over the same bytes; changing it changes every webhook-id.
const webhookIDDomain = "hookrelay webhook-id v1\x00"

// webhookIDEncoding is lower-case RFC 4648 base32 without padding: letters and
// digits only, so the id never holds a '.' and survives any header or URL.
var webhookIDEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// WebhookIDPrefix starts every webhook-id, as in the spec's examples.
const WebhookIDPrefix = "msg_"

// WebhookID returns the Standard Webhooks webhook-id of the CloudEvent with
// the given source and id: "msg_" followed by 26 lower-case base32 characters
// (the first 128 bits of a SHA-256 over a length-prefixed encoding of source
// and id, so ("a","bc") and ("ab","c") differ).
//
// It is a pure function: the same event gets the same id on every attempt,
// after any crash or duplicate, and for every endpoint, which is what makes it
// the consumer's idempotency key (spec "Webhook metadata"). The result never
// contains '.', as the spec's "Signature scheme" requires. CloudEvents makes
// (source, id) unique per distinct event, so two distinct events never share
// a webhook-id short of a 128-bit hash collision.
func WebhookID(source, id string) string {
	h := sha256.New()
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(source)))
	h.Write([]byte(webhookIDDomain))
	h.Write(n[:])
	h.Write([]byte(source))
	h.Write([]byte(id))
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return WebhookIDPrefix + webhookIDEncoding.EncodeToString(sum[:16])
}
