package webhook

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// Secret sizes and form (spec "Signature scheme", symmetric column: "Random.
// At least 24 bytes (192 bits, 512 maximum)", "base64 encoded, prefixed with
// whsec_").
const (
	SecretPrefix   = "whsec_"
	MinSecretBytes = 24 // shortest decoded key accepted by ParseSecret
	MaxSecretBytes = 64 // longest decoded key accepted by ParseSecret
	NewSecretBytes = 32 // size of the keys NewSecret makes
)

// ErrInvalidSecret is wrapped by every error of ParseSecret and
// Secret.UnmarshalText.
var ErrInvalidSecret = errors.New("invalid webhook secret")

// Secret is a symmetric Standard Webhooks signing key. Its text form is
// "whsec_" followed by the standard base64 encoding (with padding) of the
// key, the form receivers' libraries accept.
//
// The zero value is no secret: [Sign] skips it and [Secret.IsZero] reports
// it. A Secret is immutable and safe for concurrent use. It implements
// encoding.TextMarshaler and encoding.TextUnmarshaler, so it can sit in a JSON
// config struct and be validated on decode.
type Secret struct {
	key []byte
}

// ParseSecret parses a "whsec_<base64>" secret. It fails, wrapping
// [ErrInvalidSecret], when the prefix is missing, the rest is not standard
// base64 with padding (the encoding third-party verifiers decode), or the key
// is shorter than 24 or longer than 64 bytes. The error never repeats the
// secret.
func ParseSecret(s string) (Secret, error) {
	rest, ok := strings.CutPrefix(s, SecretPrefix)
	if !ok {
		return Secret{}, fmt.Errorf("%w: must start with %q", ErrInvalidSecret, SecretPrefix)
	}
	key, err := base64.StdEncoding.Strict().DecodeString(rest)
	if err != nil {
		return Secret{}, fmt.Errorf("%w: the part after %q is not standard base64 with padding", ErrInvalidSecret, SecretPrefix)
	}
	if len(key) < MinSecretBytes || len(key) > MaxSecretBytes {
		return Secret{}, fmt.Errorf("%w: key is %d bytes, must be %d to %d", ErrInvalidSecret, len(key), MinSecretBytes, MaxSecretBytes)
	}
	return Secret{key: key}, nil
}

// NewSecret returns a new secret of 32 bytes from crypto/rand.
func NewSecret() Secret {
	key := make([]byte, NewSecretBytes)
	rand.Read(key) // never fails (crypto/rand, Go 1.24+)
	return Secret{key: key}
}

// IsZero reports whether s is the zero Secret (no key).
func (s Secret) IsZero() bool { return len(s.key) == 0 }

// String returns the full "whsec_<base64>" form, or "" for the zero Secret.
// It reveals the key: use [Secret.Masked] for display and logs.
func (s Secret) String() string {
	if s.IsZero() {
		return ""
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(s.key)
}

// Masked returns a display form that identifies the secret without revealing
// it: "whsec_" plus the first 4 base64 characters and "…" (e.g.
// "whsec_MfKQ…"), or "" for the zero Secret.
func (s Secret) Masked() string {
	if s.IsZero() {
		return ""
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(s.key)[:4] + "…"
}

// MarshalText implements encoding.TextMarshaler with the String form.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler with ParseSecret.
func (s *Secret) UnmarshalText(b []byte) error {
	v, err := ParseSecret(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}
