package endpoints

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrViewStopped is returned by waits on a View whose Run has returned.
var ErrViewStopped = errors.New("endpoints: view stopped")

// Config configures a [View].
type Config struct {
	// Brokers are the Kafka seed brokers, "host:port". Required.
	Brokers []string
	// KafkaOptions are extra options of the view's own Kafka client: TLS,
	// SASL, client ID. Optional. They must not set consumer or group
	// options: the view consumes both topics directly, every partition
	// from the start. The view adds kgo.RequiredAcks(kgo.AllISRAcks()) for
	// the writes of a [Store].
	KafkaOptions []kgo.Opt
	// EndpointsTopic is the compacted topic of endpoint configs
	// (`<prefix>endpoints`). Required.
	EndpointsTopic string
	// StatusTopic is the compacted topic of the pipeline's status records
	// (`<prefix>endpoint-status`). Required.
	StatusTopic string
	// Logger receives malformed-record warnings and fetch errors. Optional.
	// Default slog.Default().
	Logger *slog.Logger
	// OnChange, when set, is called from Run's goroutine after each change
	// of an endpoint becomes visible to readers (see [Change]), in ID order
	// within a batch, including while catching up. It must return quickly
	// and must not call the view's Sync or a Store's writes (they wait for
	// Run: deadlock). Optional.
	OnChange func(Change)
}

// Change is one endpoint's change as seen by a View. Old is nil for a new
// endpoint, New is nil for a deleted one; otherwise something changed: the
// config (a new Version) or the pipeline's status. Both are shared and
// immutable; compare Old.Active() with New.Active(), Old.RatePerSec with
// New.RatePerSec, and so on.
type Change struct {
	ID       string
	Old, New *Endpoint
}

// View is the in-memory table of endpoints, materialised from the compacted
// endpoints and endpoint-status topics and kept up to date while [View.Run]
// runs. Every process has one; there is no other database.
//
// Reads (Get, List, Match, Len) are lock-free loads of an immutable snapshot
// and safe for concurrent use from any number of goroutines; the snapshot is
// replaced, copy-on-write, after every fetched batch that changes anything.
// Readers should wait for [View.Ready] before trusting an absent endpoint.
//
// An endpoints record that cannot be used (bad JSON, an invalid config, an
// ID that differs from the key) is logged and kept as an invalid endpoint
// (Endpoint.ConfigError, EffectiveStatus Invalid): it replaces the previous
// config of that ID, so it is visible in Get and List, its matched events
// are recorded as config_error, and nothing is sent to it. Records with a
// key that is not an endpoint ID, and malformed status records, are logged,
// counted ([View.Skipped]) and ignored. None of them stops the view.
type View struct {
	cfg    Config
	log    *slog.Logger
	opts   []kgo.Opt
	topics []string

	// cl and adm are set by Run before anything else; other goroutines use
	// them only after Ready is closed.
	cl  *kgo.Client
	adm *kadm.Client

	snap    atomic.Pointer[snapshot]
	ready   chan struct{}
	done    chan struct{} // closed when Run returns
	started atomic.Bool
	skipped atomic.Int64

	mu       sync.Mutex
	pos      map[string]map[int32]int64 // next offset to apply, per topic and partition
	progress chan struct{}              // closed and replaced whenever pos advances

	// Owned by Run's goroutine.
	configs  map[string]*Endpoint
	statuses map[string]*Status
}

// NewView validates cfg (the client options with kgo.ValidateOpts). Run
// creates the view's client and closes it when it returns.
func NewView(cfg Config) (*View, error) {
	switch {
	case len(cfg.Brokers) == 0:
		return nil, errors.New("endpoints: Config.Brokers: required")
	case cfg.EndpointsTopic == "":
		return nil, errors.New("endpoints: Config.EndpointsTopic: required")
	case cfg.StatusTopic == "":
		return nil, errors.New("endpoints: Config.StatusTopic: required")
	case cfg.EndpointsTopic == cfg.StatusTopic:
		return nil, errors.New("endpoints: Config.StatusTopic: must differ from EndpointsTopic")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	topics := []string{cfg.EndpointsTopic, cfg.StatusTopic}
	// A short fetch wait bounds how late a change can be seen when the
	// broker does not answer a waiting fetch at once: with read_committed,
	// the first write to a fresh topic was seen only after the whole
	// default 5s wait (Kafka 4.1.1, measured); 1s costs one idle fetch a
	// second. KafkaOptions may override it.
	opts := append([]kgo.Opt{kgo.SeedBrokers(cfg.Brokers...), kgo.FetchMaxWait(time.Second)}, cfg.KafkaOptions...)
	opts = append(opts,
		kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// Committed records only: the dispatcher may write status records
		// in its transactions. Markers are kept so they advance the
		// position to the end offset.
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.RequiredAcks(kgo.AllISRAcks()),
	)
	if err := kgo.ValidateOpts(opts...); err != nil {
		return nil, fmt.Errorf("endpoints: Config.KafkaOptions: %w", err)
	}
	v := &View{
		cfg: cfg, log: log, opts: opts, topics: topics,
		ready:    make(chan struct{}),
		done:     make(chan struct{}),
		pos:      map[string]map[int32]int64{},
		progress: make(chan struct{}),
		configs:  map[string]*Endpoint{},
		statuses: map[string]*Status{},
	}
	v.snap.Store(emptySnapshot())
	return v, nil
}

// Ready returns a channel closed once the view has applied every record that
// was in both topics when Run started (their end offsets, read with kadm
// ListEndOffsets). From then on, an endpoint whose write was acknowledged
// before Run started is visible. Fan-out and dispatch must not start before.
func (v *View) Ready() <-chan struct{} { return v.ready }

// Get returns the endpoint with the given ID, active or not (see
// Endpoint.EffectiveStatus), or false. The endpoint is shared: do not modify
// it.
func (v *View) Get(id string) (*Endpoint, bool) {
	e, ok := v.snap.Load().byID[id]
	return e, ok
}

// List returns every endpoint, sorted by ID. The endpoints are shared: do not
// modify them.
func (v *View) List() []*Endpoint {
	byID := v.snap.Load().byID
	out := make([]*Endpoint, 0, len(byID))
	for _, e := range byID {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b *Endpoint) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Len returns the number of endpoints, active or not.
func (v *View) Len() int { return len(v.snap.Load().byID) }

// Match returns the active endpoints subscribed to an event of eventType and
// tenant ("" for an event without tenantid), sorted by ID, each once (see
// Endpoint.Matches for the rule). The slice and the endpoints are shared and
// must not be modified. Results are indexed by tenant and cached per event
// type, so Match is a few map lookups after the first call for a type.
func (v *View) Match(eventType, tenant string) []*Endpoint {
	return v.snap.Load().match(eventType, tenant).active
}

// Subscribed is Match including the endpoints that are not active
// (disabled, or invalid as far as their patterns and tenant could be read),
// so fan-out can record why each match is not sent.
func (v *View) Subscribed(eventType, tenant string) []*Endpoint {
	return v.snap.Load().match(eventType, tenant).all
}

// Skipped returns how many malformed records the view has ignored.
func (v *View) Skipped() int64 { return v.skipped.Load() }

// Run creates the view's client, consumes both topics from the start
// (committed records only) and applies every record until ctx is done, then
// closes the client and returns nil. It returns an error if called twice, or
// if the broker refuses to list the end offsets with a code that is not
// retriable (retriable ones, a topic that does not exist yet and an
// unreachable cluster are retried until ctx is done). Fetch errors are
// logged; the client retries.
func (v *View) Run(ctx context.Context) error {
	if !v.started.CompareAndSwap(false, true) {
		return errors.New("endpoints: View.Run called twice")
	}
	defer close(v.done)
	cl, err := kgo.NewClient(v.opts...)
	if err != nil {
		return fmt.Errorf("endpoints: kafka client: %w", err)
	}
	defer cl.Close()
	v.cl, v.adm = cl, kadm.NewClient(cl)

	targets, err := v.listTargets(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	v.checkReady(targets)

	for {
		fetches := v.cl.PollFetches(ctx)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			return nil
		}
		fetches.EachError(func(topic string, p int32, err error) {
			v.log.Warn("endpoints: fetch error", "topic", topic, "partition", p, "error", err)
		})
		v.apply(fetches)
		if targets != nil {
			if v.checkReady(targets) {
				targets = nil
			}
		}
	}
}

// listTargets returns the offsets each partition must reach for Ready: the
// end offset, for partitions that hold records (end > start).
func (v *View) listTargets(ctx context.Context) (map[string]map[int32]int64, error) {
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		targets, err := v.listEnds(ctx)
		if err == nil {
			return targets, nil
		}
		// A broker's refusal that no retry can cure ends Run; anything
		// else (a retriable code, a topic not there yet, a cluster that
		// cannot be reached) is waited out.
		var ke *kerr.Error
		if errors.As(err, &ke) && !ke.Retriable && !errors.Is(err, kerr.UnknownTopicOrPartition) {
			return nil, fmt.Errorf("endpoints: list end offsets of %v: %w", v.topics, err)
		}
		if attempt%10 == 1 {
			v.log.Warn("endpoints: waiting for topics", "topics", v.topics, "attempt", attempt, "error", err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// listEnds lists the end offsets of both topics and drops the partitions
// that hold no records (end <= start, which compaction or deletion can
// leave).
func (v *View) listEnds(ctx context.Context) (map[string]map[int32]int64, error) {
	ends, err := v.adm.ListEndOffsets(ctx, v.topics...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, err
	}
	for _, t := range v.topics {
		if len(ends[t]) == 0 {
			return nil, fmt.Errorf("topic %s: %w", t, kerr.UnknownTopicOrPartition)
		}
	}
	targets := map[string]map[int32]int64{}
	var needStart bool
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > v.position(o.Topic, o.Partition) {
			if targets[o.Topic] == nil {
				targets[o.Topic] = map[int32]int64{}
			}
			targets[o.Topic][o.Partition] = o.Offset
			needStart = true
		}
	})
	if !needStart {
		return targets, nil
	}
	starts, err := v.adm.ListStartOffsets(ctx, v.topics...)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, err
	}
	starts.Each(func(o kadm.ListedOffset) {
		if end, ok := targets[o.Topic][o.Partition]; ok && o.Offset >= end {
			delete(targets[o.Topic], o.Partition)
		}
	})
	return targets, nil
}

func (v *View) position(topic string, p int32) int64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.pos[topic][p]
}

// reached reports whether every target offset has been applied.
func (v *View) reached(targets map[string]map[int32]int64) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	for t, ps := range targets {
		for p, end := range ps {
			if v.pos[t][p] < end {
				return false
			}
		}
	}
	return true
}

func (v *View) checkReady(targets map[string]map[int32]int64) bool {
	if !v.reached(targets) {
		return false
	}
	select {
	case <-v.ready:
	default:
		close(v.ready)
	}
	return true
}

// Sync waits until the view has applied every record that was in both
// topics when Sync was called (one ListOffsets round trip, then the wait),
// or until ctx is done. After Sync returns nil, every write acknowledged
// before the call is visible. It returns [ErrViewStopped] if Run returns
// first. Safe for concurrent use; must not be called from OnChange.
func (v *View) Sync(ctx context.Context) error {
	select {
	case <-v.done:
		return ErrViewStopped
	default:
	}
	select {
	case <-v.ready:
	case <-v.done:
		return ErrViewStopped
	case <-ctx.Done():
		return ctx.Err()
	}
	targets, err := v.listEnds(ctx)
	if err != nil {
		select {
		case <-v.done:
			return ErrViewStopped
		default:
		}
		return fmt.Errorf("endpoints: sync: %w", err)
	}
	return v.waitFor(ctx, func() bool { return v.reached(targets) })
}

// waitApplied waits until the record at offset of topic/partition has been
// applied (and is visible to readers).
func (v *View) waitApplied(ctx context.Context, topic string, partition int32, offset int64) error {
	return v.waitFor(ctx, func() bool { return v.position(topic, partition) > offset })
}

func (v *View) waitFor(ctx context.Context, cond func() bool) error {
	for {
		v.mu.Lock()
		ch := v.progress
		v.mu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-ch:
		case <-v.done:
			if cond() {
				return nil
			}
			return ErrViewStopped
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// apply applies one poll's records, publishes a new snapshot if anything
// changed, then advances the positions (so a waiter woken by the position
// sees the new snapshot) and calls OnChange.
func (v *View) apply(fetches kgo.Fetches) {
	dirty := map[string]struct{}{}
	next := map[string]map[int32]int64{}
	fetches.EachRecord(func(r *kgo.Record) {
		if next[r.Topic] == nil {
			next[r.Topic] = map[int32]int64{}
		}
		next[r.Topic][r.Partition] = r.Offset + 1
		if r.Attrs.IsControl() {
			return
		}
		if id, ok := v.applyRecord(r); ok {
			dirty[id] = struct{}{}
		}
	})
	if len(next) == 0 {
		return
	}

	var changes []Change
	if len(dirty) > 0 {
		old := v.snap.Load()
		byID := make(map[string]*Endpoint, len(v.configs))
		for id, e := range old.byID {
			byID[id] = e
		}
		ids := make([]string, 0, len(dirty))
		for id := range dirty {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			prev := old.byID[id]
			cur := v.entry(id)
			if cur == nil {
				delete(byID, id)
			} else {
				byID[id] = cur
			}
			if prev != nil || cur != nil {
				changes = append(changes, Change{ID: id, Old: prev, New: cur})
			}
		}
		if len(changes) > 0 {
			v.snap.Store(&snapshot{byID: byID, tenants: buildIndex(byID)})
		}
	}

	v.mu.Lock()
	for t, ps := range next {
		if v.pos[t] == nil {
			v.pos[t] = map[int32]int64{}
		}
		for p, o := range ps {
			v.pos[t][p] = o
		}
	}
	close(v.progress)
	v.progress = make(chan struct{})
	v.mu.Unlock()

	if v.cfg.OnChange != nil {
		for _, c := range changes {
			v.cfg.OnChange(c)
		}
	}
}

// entry builds the visible endpoint of id from its config and status, or
// nil when it has no config.
func (v *View) entry(id string) *Endpoint {
	cfg := v.configs[id]
	if cfg == nil {
		return nil
	}
	e := *cfg
	e.PipelineStatus = v.statuses[id]
	return &e
}

// applyRecord applies one record to the configs or statuses and returns the
// endpoint ID it concerns, or false when it was skipped.
func (v *View) applyRecord(r *kgo.Record) (string, bool) {
	id := string(r.Key)
	skip := func(why string, err error) (string, bool) {
		v.skipped.Add(1)
		v.log.Warn("endpoints: skipping malformed record", "topic", r.Topic, "partition", r.Partition,
			"offset", r.Offset, "key", truncate(id, MaxIDLen), "why", why, "error", err)
		return "", false
	}
	if err := ValidateID(id); err != nil {
		return skip("bad key", err)
	}
	switch r.Topic {
	case v.cfg.EndpointsTopic:
		if len(r.Value) == 0 {
			delete(v.configs, id)
			return id, true
		}
		var e Endpoint
		var bad error
		if err := json.Unmarshal(r.Value, &e); err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) {
				err = fieldErr("value", "not endpoint JSON: %v", err)
			}
			bad = err
		}
		if e.ID == "" {
			e.ID = id
		}
		if e.ID != id {
			bad = errors.Join(bad, fieldErr("id", "%q differs from the record key", truncate(e.ID, MaxIDLen)))
			e.ID = id
		}
		e.SetDefaults()
		bad = errors.Join(bad, e.Validate())
		if bad != nil {
			// Kept, as invalid: visible, and its matches are recorded.
			v.log.Warn("endpoints: invalid endpoint record; nothing is sent to it", "topic", r.Topic,
				"partition", r.Partition, "offset", r.Offset, "key", id, "error", ProblemText(bad))
			e.ConfigError = bad
		}
		e.Version = r.Offset + 1
		e.PipelineStatus = nil
		v.configs[id] = &e
		return id, true
	case v.cfg.StatusTopic:
		if len(r.Value) == 0 {
			delete(v.statuses, id)
			return id, true
		}
		var s Status
		if err := json.Unmarshal(r.Value, &s); err != nil {
			return skip("bad JSON", err)
		}
		if err := s.Validate(); err != nil {
			return skip("invalid status", err)
		}
		v.statuses[id] = &s
		return id, true
	}
	return "", false
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
