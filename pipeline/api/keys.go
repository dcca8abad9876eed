package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// KeyPrefix starts every API key, so a leaked key is recognisable (secret
// scanners) and never confused with a whsec_ signing secret.
const KeyPrefix = "hrk_"

// ErrKeyNotFound: no live API key has that ID.
var ErrKeyNotFound = errors.New("api: key not found")

// Key is one API key's record in the compacted `<prefix>apikeys` topic,
// keyed by ID. The key itself is never stored: only the SHA-256 of it.
type Key struct {
	// ID is the key's public part: 16 hex characters, also inside the key.
	ID string `json:"id"`
	// Hash is the lowercase hex SHA-256 of the whole key string.
	Hash string `json:"hash"`
	// Admin keys see and change every endpoint.
	Admin bool `json:"admin,omitempty"`
	// Tenant, for a non-admin key, is the tenant whose endpoints (tenantid)
	// the key sees; required then.
	Tenant    string    `json:"tenant,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// Name is a free-form label for people. Optional.
	Name string `json:"name,omitempty"`
}

// Principal is who a request acts for: an admin, or one tenant.
type Principal struct {
	KeyID  string
	Admin  bool
	Tenant string // "" for an admin
}

// Keys is the API key table: the compacted apikeys topic, read by every api
// replica from the start. Create it with NewKeys and run Run. Safe for
// concurrent use.
type Keys struct{ t *table }

// NewKeys returns the key table of topic (`<prefix>apikeys`). clientOpts are
// the Kafka connection options (seed brokers, TLS, SASL).
func NewKeys(topic string, clientOpts []kgo.Opt, log *slog.Logger) *Keys {
	if log == nil {
		log = slog.Default()
	}
	return &Keys{t: newTable(topic, clientOpts, log)}
}

// Run reads the topic until ctx ends.
func (k *Keys) Run(ctx context.Context) error { return k.t.Run(ctx) }

// Create makes a new key (admin, or for tenant) and returns its record and
// the key string, which exists nowhere else: show it once. A key is
// "hrk_" + ID (16 hex) + "_" + base64url of 32 random bytes (crypto/rand).
func (k *Keys) Create(ctx context.Context, admin bool, tenant, name string) (Key, string, error) {
	if admin == (tenant != "") {
		return Key{}, "", errors.New("api: a key is either admin or for one tenant")
	}
	var id [8]byte
	var secret [32]byte
	_, _ = rand.Read(id[:]) // crypto/rand.Read never fails (Go 1.24+)
	_, _ = rand.Read(secret[:])
	rec := Key{ID: hex.EncodeToString(id[:]), Admin: admin, Tenant: tenant, CreatedAt: time.Now().UTC(), Name: name}
	token := KeyPrefix + rec.ID + "_" + base64.RawURLEncoding.EncodeToString(secret[:])
	rec.Hash = hashKey(token)
	b, err := json.Marshal(rec)
	if err != nil {
		return Key{}, "", err
	}
	if err := k.t.put(ctx, rec.ID, b); err != nil {
		return Key{}, "", err
	}
	return rec, token, nil
}

// List returns every live key, by creation time.
func (k *Keys) List(ctx context.Context) ([]Key, error) {
	rows, err := k.t.all(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Key, 0, len(rows))
	for _, r := range rows {
		var rec Key
		if json.Unmarshal(r.value, &rec) == nil {
			out = append(out, rec)
		}
	}
	slices.SortFunc(out, func(a, b Key) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}

// Revoke deletes the key with the given ID (a tombstone): every replica
// refuses it once it has read the tombstone. ErrKeyNotFound if none.
func (k *Keys) Revoke(ctx context.Context, id string) error {
	if _, ok, err := k.t.get(ctx, id); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("%w: %q", ErrKeyNotFound, id)
	}
	return k.t.put(ctx, id, nil)
}

// Authenticate returns the principal of a key string, or false. The hash
// comparison is constant-time (crypto/subtle).
func (k *Keys) Authenticate(ctx context.Context, token string) (Principal, bool, error) {
	rest, ok := strings.CutPrefix(token, KeyPrefix)
	if !ok {
		return Principal{}, false, nil
	}
	id, _, ok := strings.Cut(rest, "_")
	if !ok || len(id) != 16 {
		return Principal{}, false, nil
	}
	r, ok, err := k.t.get(ctx, id)
	if err != nil || !ok {
		return Principal{}, false, err
	}
	var rec Key
	if err := json.Unmarshal(r.value, &rec); err != nil {
		return Principal{}, false, nil
	}
	want, err := hex.DecodeString(rec.Hash)
	got := sha256.Sum256([]byte(token))
	if err != nil || subtle.ConstantTimeCompare(want, got[:]) != 1 {
		return Principal{}, false, nil
	}
	if !rec.Admin && rec.Tenant == "" {
		return Principal{}, false, nil // a malformed record grants nothing
	}
	return Principal{KeyID: rec.ID, Admin: rec.Admin, Tenant: rec.Tenant}, true, nil
}

func hashKey(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}
