package endpoints

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Errors of a Store; test with errors.Is.
var (
	// ErrNotFound: no endpoint has that ID.
	ErrNotFound = errors.New("endpoints: not found")
	// ErrExists: Create found an endpoint with that ID.
	ErrExists = errors.New("endpoints: already exists")
	// ErrConflict: Put with a Version found the endpoint at another version
	// (someone else wrote it, or deleted it, since it was read).
	ErrConflict = errors.New("endpoints: version conflict")
)

// Store writes endpoints and status records, for the CLI, the dispatcher
// (410 → disabled) and, later, the REST API. It writes with the client of a
// running [View] (acks from all in-sync replicas, idempotent) and reads
// through that view; every write waits until the view has applied it, so a
// Get right after a write sees it (read your writes).
//
// Versioned writes are checked against the view, which is caught up to the
// store's own writes but not necessarily to another writer's concurrent one:
// the check narrows, but does not close, the window for lost updates between
// two operators. Endpoint records of one ID always land on one partition, so
// the last write wins everywhere alike.
//
// A Store is safe for concurrent use. Its methods fail with
// [ErrViewStopped] once the view's Run has returned.
type Store struct {
	v     *View
	now   func() time.Time
	allow []netip.Prefix
	check bool // apply ValidateAddress to new endpoints and changed URLs
}

// StoreOption configures a Store.
type StoreOption interface{ apply(*Store) }

type storeOpt func(*Store)

func (f storeOpt) apply(s *Store) { f(s) }

// CheckAddresses makes Put and Create refuse, with a *FieldError for "url",
// a new endpoint or a changed URL whose host is an IP literal (in any
// spelling) inside a range the SSRF guard refuses and allow does not allow
// ([Endpoint.ValidateAddress]); allow is the process's
// HOOKRELAY_ALLOW_NETWORKS. A write that keeps the URL (enable, disable, a
// new secret) is not refused for it. Default: no address check.
func CheckAddresses(allow []netip.Prefix) StoreOption {
	allow = slices.Clone(allow)
	return storeOpt(func(s *Store) { s.allow, s.check = allow, true })
}

// NewStore returns a Store over v. v must be running (Run) for the Store's
// methods to return.
func NewStore(v *View, opts ...StoreOption) *Store {
	s := &Store{v: v, now: time.Now}
	for _, o := range opts {
		o.apply(s)
	}
	return s
}

// View returns the view the store reads from.
func (s *Store) View() *View { return s.v }

// Get returns the endpoint with the given ID, waiting for the view to be
// ready first. The endpoint is shared: Clone it to modify it.
func (s *Store) Get(ctx context.Context, id string) (*Endpoint, error) {
	if err := s.waitReady(ctx); err != nil {
		return nil, err
	}
	e, ok := s.v.Get(id)
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	return e, nil
}

// List returns every endpoint sorted by ID, waiting for the view to be ready
// first. The endpoints are shared; use Masked for display.
func (s *Store) List(ctx context.Context) ([]*Endpoint, error) {
	if err := s.waitReady(ctx); err != nil {
		return nil, err
	}
	return s.v.List(), nil
}

// Create writes a new endpoint, like Put, but fails with [ErrExists] if the
// ID is taken.
func (s *Store) Create(ctx context.Context, e Endpoint) (*Endpoint, error) {
	return s.put(ctx, e, true)
}

// Put writes the endpoint's config (creating or replacing it) and returns it
// as the view now shows it, with its new Version. It applies defaults
// (SetDefaults), validates (a [*FieldError] per problem, joined; with
// [CheckAddresses], also the URL's address), and requires at least one
// secret unexpired now. CreatedAt is kept from the
// current config (or set to now for a new one) and UpdatedAt is set to now;
// the values given are ignored. Incarnation likewise: a new one for an ID
// that does not exist, else the current one.
//
// If e.Version is non-zero, Put writes only if the endpoint is still at that
// version, else fails with [ErrConflict]. Any write supersedes a disabled
// status the pipeline set on an earlier version (see
// Endpoint.EffectiveStatus): writing Status Active re-enables the endpoint.
//
// The record is produced with acks=all and Put returns once the view has
// applied it.
func (s *Store) Put(ctx context.Context, e Endpoint) (*Endpoint, error) {
	return s.put(ctx, e, false)
}

func (s *Store) put(ctx context.Context, e Endpoint, create bool) (*Endpoint, error) {
	now := s.now().UTC()
	e.SetDefaults()
	if err := e.Validate(); err != nil {
		return nil, fmt.Errorf("endpoints: endpoint %q: %w", e.ID, err)
	}
	if len(e.ActiveSecrets(now)) == 0 {
		return nil, fmt.Errorf("endpoints: endpoint %q: %w", e.ID, fieldErr("secrets", "every secret has expired"))
	}
	if err := s.waitReady(ctx); err != nil {
		return nil, err
	}
	cur, exists := s.v.Get(e.ID)
	if s.check && (!exists || cur.URL != e.URL) {
		if err := e.ValidateAddress(s.allow); err != nil {
			return nil, fmt.Errorf("endpoints: endpoint %q: %w", e.ID, err)
		}
	}
	switch {
	case create && exists:
		return nil, fmt.Errorf("%w: %q", ErrExists, e.ID)
	case e.Version != 0 && !exists:
		return nil, fmt.Errorf("%w: %q was deleted", ErrConflict, e.ID)
	case e.Version != 0 && cur.Version != e.Version:
		return nil, fmt.Errorf("%w: %q is at version %d, not %d", ErrConflict, e.ID, cur.Version, e.Version)
	}
	// Identity: a new endpoint gets a new incarnation; an update keeps the
	// current one, whatever e says (see Endpoint.Incarnation).
	e.CreatedAt, e.Incarnation = now, NewIncarnation()
	if exists {
		e.CreatedAt, e.Incarnation = cur.CreatedAt, cur.Incarnation
	}
	e.UpdatedAt = now
	value, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("endpoints: encode %q: %w", e.ID, err)
	}
	if err := s.produce(ctx, s.v.cfg.EndpointsTopic, e.ID, value); err != nil {
		return nil, err
	}
	got, ok := s.v.Get(e.ID)
	if !ok {
		return nil, fmt.Errorf("%w: %q was deleted concurrently", ErrConflict, e.ID)
	}
	return got, nil
}

// Enable sets the operator's Status to Active (clearing DisabledReason) and
// writes the config, which also supersedes a disabled status the pipeline
// set (e.g. after a 410). It fails with [ErrNotFound] or, if the endpoint
// changes meanwhile, [ErrConflict].
func (s *Store) Enable(ctx context.Context, id string) (*Endpoint, error) {
	return s.update(ctx, id, func(e *Endpoint) { e.Status, e.DisabledReason = Active, "" })
}

// Disable sets the operator's Status to Disabled with reason (at most 64
// bytes; "" reads as "operator"). Deliveries to a disabled endpoint are not
// sent. Errors as for Enable.
func (s *Store) Disable(ctx context.Context, id, reason string) (*Endpoint, error) {
	return s.update(ctx, id, func(e *Endpoint) { e.Status, e.DisabledReason = Disabled, reason })
}

func (s *Store) update(ctx context.Context, id string, change func(*Endpoint)) (*Endpoint, error) {
	cur, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	e := cur.Clone()
	e.PipelineStatus = nil
	change(e)
	return s.Put(ctx, *e)
}

// Delete writes tombstones for the endpoint's config and status record. It
// fails with [ErrNotFound] when the view has no such endpoint.
func (s *Store) Delete(ctx context.Context, id string) error {
	if _, err := s.Get(ctx, id); err != nil {
		return err
	}
	// Config first: if the status tombstone then fails, the stale status
	// cannot disable a later endpoint of the same ID (its Version is newer).
	if err := s.produce(ctx, s.v.cfg.EndpointsTopic, id, nil); err != nil {
		return err
	}
	return s.produce(ctx, s.v.cfg.StatusTopic, id, nil)
}

// SetStatus writes the pipeline's status record for an endpoint (e.g.
// {State: Disabled, Reason: ReasonGone, At: attempt time, ConfigVersion:
// the Version of the endpoint the attempt used}). It never touches the
// config, so it cannot overwrite an operator's edit; the effective status
// rule (Endpoint.EffectiveStatus) decides between the two. It validates st
// and returns once the view has applied it. The endpoint need not exist.
func (s *Store) SetStatus(ctx context.Context, id string, st Status) error {
	if err := ValidateID(id); err != nil {
		return fmt.Errorf("endpoints: status of %q: %w", id, fieldErr("id", "%s", err.Error()))
	}
	st.At = st.At.UTC()
	if err := st.Validate(); err != nil {
		return fmt.Errorf("endpoints: status of %q: %w", id, err)
	}
	value, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("endpoints: encode status of %q: %w", id, err)
	}
	return s.produce(ctx, s.v.cfg.StatusTopic, id, value)
}

// produce writes one record (nil value: a tombstone) and waits until the
// view has applied it.
func (s *Store) produce(ctx context.Context, topic, key string, value []byte) error {
	if err := s.waitReady(ctx); err != nil {
		return err
	}
	select {
	case <-s.v.done:
		return ErrViewStopped
	default:
	}
	r := &kgo.Record{Topic: topic, Key: []byte(key), Value: value}
	if err := s.v.cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		return fmt.Errorf("endpoints: write %s/%s: %w", topic, key, err)
	}
	if err := s.v.waitApplied(ctx, r.Topic, r.Partition, r.Offset); err != nil {
		return fmt.Errorf("endpoints: wait for %s/%s to be applied: %w", topic, key, err)
	}
	return nil
}

func (s *Store) waitReady(ctx context.Context) error {
	select {
	case <-s.v.ready:
		return nil
	case <-s.v.done:
		return ErrViewStopped
	case <-ctx.Done():
		return ctx.Err()
	}
}
