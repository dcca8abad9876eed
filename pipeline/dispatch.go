package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/metric"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/pipeline/delivery"
	"github.com/hookrelay/hookrelay/pipeline/endpoints"
	"github.com/hookrelay/hookrelay/ratelimit"
)

// EndpointSource answers which endpoint config applies to a delivery. The
// endpoints view implements it. Get must be safe for concurrent use and fast:
// it is called once per delivery and per attempt.
type EndpointSource interface {
	Get(id string) (*endpoints.Endpoint, bool)
}

// AttemptLog durably records that an attempt is starting, before its
// request leaves: Started writes a's row (outcome [audit.Sending]) to the
// attempts topic and returns only once it is written (acknowledged by every
// in-sync replica), or with the error that kept it from being written; then
// no request is made. It must return when ctx ends. Safe for concurrent use.
//
// The outcome row of the attempt (same AttemptID, AttemptedAt, EndpointID)
// is not written through AttemptLog: the dispatcher produces it to
// Topics.Attempts in the transaction that commits the delivery's offset, so
// it is written exactly when the delivery is retired. A process that dies
// between the two leaves a Sending row alone, which the audit sink resolves
// as [audit.Interrupted] (see audit/sink).
type AttemptLog interface {
	Started(ctx context.Context, a *audit.Attempt) error
}

// DispatcherOptions configures a [Dispatcher]. cmd/ fills it; nothing here
// reads flags or the environment.
type DispatcherOptions struct {
	// ClientOpts are the franz-go options for brokers, TLS and SASL.
	// Required (at least kgo.SeedBrokers).
	ClientOpts []kgo.Opt
	// Topics names every topic. Required.
	Topics Topics
	// Group is the consumer group of dispatchers. Optional. Default
	// "hookrelay-dispatch".
	Group string
	// TransactionalID identifies this process's transactional producer.
	// Required. It must be stable across restarts of one instance (so a
	// restart fences the previous incarnation's open transaction at once)
	// and unique among live instances.
	TransactionalID string
	// Endpoints resolves endpoint IDs. Required.
	Endpoints EndpointSource
	// Attempter sends one attempt. Required.
	Attempter Attempter
	// Attempts writes each attempt's Sending row before its request.
	// Required.
	Attempts AttemptLog
	// StartTimeout bounds the wait for an attempt's Sending row. If it is
	// not written in time (Kafka unavailable), the request is not made and
	// the delivery is parked in a delay tier without consuming an attempt.
	// Optional. Default 10s.
	StartTimeout time.Duration
	// Policy decides what follows an attempt. Required.
	Policy *RetryPolicy
	// EndpointBacklog caps the deliveries held in memory for one endpoint.
	// Optional. Default 1000. Past it, new deliveries for that endpoint are
	// parked in a delay tier without consuming an attempt.
	EndpointBacklog int
	// PartitionBacklog caps the deliveries held in memory for one partition
	// (all its endpoints). Past it, new deliveries of endpoints that already
	// have some queued are parked, so endpoints with nothing queued still get
	// theirs at once; past 1.5 times it (a last resort for memory), the
	// partition's fetching pauses until the backlog halves. Optional.
	// Default 20000.
	PartitionBacklog int
	// MaxQueueWait is the longest a delivery waits in an endpoint's queue
	// (for its bucket, in-flight cap or pause) before it is parked in a tier
	// instead. It bounds how long one slow endpoint can hold back its
	// partition's committed offset. Optional. Default: the smallest tier's
	// delay, but at least 5s.
	MaxQueueWait time.Duration
	// FlushInterval is the longest a finished delivery waits before its
	// offset and its follow-up record (retry tier, DLQ) are committed in one
	// transaction. Optional. Default 100ms.
	FlushInterval time.Duration
	// TransactionTimeout bounds one commit transaction (produce, offset
	// commit, end); it is also the Kafka transaction timeout, after which
	// the broker aborts a transaction left open by a dead process.
	// Optional. Default DefaultTransactionTimeout (10s).
	TransactionTimeout time.Duration
	// Health configures the failing-since clock, auto-disable and the
	// operational events (see HealthOptions). Optional; defaults there.
	Health HealthOptions
	// Meter receives the dispatcher's metrics. Optional. Default no-op.
	Meter metric.Meter
	// Logger. Optional. Default slog.Default().
	Logger *slog.Logger
}

func (o *DispatcherOptions) validate() error {
	switch {
	case len(o.ClientOpts) == 0:
		return errors.New("pipeline: DispatcherOptions.ClientOpts is required")
	case o.Topics.Deliveries == "":
		return errors.New("pipeline: DispatcherOptions.Topics is required")
	case o.TransactionalID == "":
		return errors.New("pipeline: DispatcherOptions.TransactionalID is required")
	case o.Endpoints == nil:
		return errors.New("pipeline: DispatcherOptions.Endpoints is required")
	case o.Attempter == nil:
		return errors.New("pipeline: DispatcherOptions.Attempter is required")
	case o.Attempts == nil:
		return errors.New("pipeline: DispatcherOptions.Attempts is required")
	case o.Policy == nil:
		return errors.New("pipeline: DispatcherOptions.Policy is required")
	case o.EndpointBacklog < 0:
		return fmt.Errorf("pipeline: DispatcherOptions.EndpointBacklog must be >= 0, got %d", o.EndpointBacklog)
	case o.PartitionBacklog < 0:
		return fmt.Errorf("pipeline: DispatcherOptions.PartitionBacklog must be >= 0, got %d", o.PartitionBacklog)
	case o.MaxQueueWait < 0:
		return fmt.Errorf("pipeline: DispatcherOptions.MaxQueueWait must be >= 0, got %v", o.MaxQueueWait)
	case o.TransactionTimeout < 0:
		return fmt.Errorf("pipeline: DispatcherOptions.TransactionTimeout must be >= 0, got %v", o.TransactionTimeout)
	case o.StartTimeout < 0:
		return fmt.Errorf("pipeline: DispatcherOptions.StartTimeout must be >= 0, got %v", o.StartTimeout)
	case o.FlushInterval < 0:
		return fmt.Errorf("pipeline: DispatcherOptions.FlushInterval must be >= 0, got %v", o.FlushInterval)
	}
	if o.Group == "" {
		o.Group = "hookrelay-dispatch"
	}
	if o.EndpointBacklog == 0 {
		o.EndpointBacklog = 1000
	}
	if o.PartitionBacklog == 0 {
		o.PartitionBacklog = 20000
	}
	if o.FlushInterval == 0 {
		o.FlushInterval = 100 * time.Millisecond
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 10 * time.Second
	}
	if o.TransactionTimeout == 0 {
		o.TransactionTimeout = DefaultTransactionTimeout
	}
	if o.MaxQueueWait == 0 {
		o.MaxQueueWait = max(o.Policy.MinHold(), 5*time.Second)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return nil
}

// Dispatcher consumes the deliveries topic in a consumer group and delivers
// every record to its endpoint, paced per endpoint and isolated: endpoints
// of one partition are served concurrently, each within its own token bucket
// and in-flight cap, so a slow or hung endpoint delays only itself.
//
// Offsets: a partition's committed offset never passes an unfinished
// delivery; deliveries finished above it are listed in the commit metadata
// and skipped by the next owner. Every follow-up record (retry tier, DLQ,
// endpoint status, and the attempt's outcome row) is produced in the same
// Kafka transaction as the offset commit that retires its source record, so
// a crash never leaves two live copies of a delivery. Before each request
// the attempt's Sending row is written and awaited (see [AttemptLog]), so a
// request that may have reached the endpoint always has a row. See docs/ARCHITECTURE.md for the goroutine map.
type Dispatcher struct {
	o      DispatcherOptions
	m      *metrics
	sess   *kgo.GroupTransactSession
	health *healthTracker // see health.go

	mu    sync.Mutex
	parts map[int32]*partState // owned partitions of the deliveries topic

	limMu    sync.Mutex
	limiters map[string]*ratelimit.Endpoint // per endpoint; outlive partition moves within this process

	doneMu sync.Mutex
	done   []completion
	loose  []*kgo.Record // attempt rows of revoked partitions, and health transitions (health.go): tied to no offset; guarded by doneMu
	wake   chan struct{} // buffered(1): a completion is waiting

	joined chan struct{} // closed at the first assignment
	once   sync.Once

	lastCommit map[int32]commitInfo // what the last committed transaction stored; guarded by mu

	runCtx      context.Context // Run's context, for work done on the poll loop
	orphans     []*kgo.Record   // attempt rows tied to no owned offset, until a transaction commits them; poll loop only
	abortStreak int             // transactions aborted in a row; poll loop only
	nextFlushAt time.Time       // backoff after aborts; poll loop only
}

// outRecord is a follow-up record and the offset of the delivery it retires.
type outRecord struct {
	off int64
	rec *kgo.Record
}

type commitInfo struct {
	commit int64
	meta   string
}

type completion struct {
	p   *partState
	off int64
	out []*kgo.Record
}

// NewDispatcher validates o and connects. Run starts consuming.
func NewDispatcher(o DispatcherOptions) (*Dispatcher, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	health, err := newHealthTracker(o.Health)
	if err != nil {
		return nil, err
	}
	o.Endpoints = healthSource{o.Endpoints, health}
	d := &Dispatcher{
		o:        o,
		health:   health,
		m:        newMetrics(o.Meter),
		parts:    make(map[int32]*partState),
		limiters: make(map[string]*ratelimit.Endpoint),
		wake:     make(chan struct{}, 1),
		joined:   make(chan struct{}),
	}
	opts := append([]kgo.Opt{
		kgo.ConsumerGroup(o.Group),
		kgo.ConsumeTopics(o.Topics.Deliveries),
		kgo.TransactionalID(o.TransactionalID),
		kgo.TransactionTimeout(o.TransactionTimeout),
		offsetsAfterAddOffsets(), // no abort when a transaction follows the last at once (see there)
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.OnPartitionsAssigned(d.assigned),
		kgo.OnPartitionsRevoked(d.revoked),
		kgo.OnPartitionsLost(d.revoked),
		kgo.FetchMaxWait(250 * time.Millisecond),
		// Rebalance callbacks run only while the poll loop polls, so the
		// owned partitions never change between a poll and its commit.
		kgo.BlockRebalanceOnPoll(),
	}, o.ClientOpts...)
	sess, err := kgo.NewGroupTransactSession(opts...)
	if err != nil {
		return nil, fmt.Errorf("pipeline: dispatcher client: %w", err)
	}
	d.sess = sess
	if o.Meter != nil {
		d.registerGauges(o.Meter)
	}
	return d, nil
}

// Joined is closed once the dispatcher has been assigned partitions for the
// first time (the group is joined).
func (d *Dispatcher) Joined() <-chan struct{} { return d.joined }

// partState is one owned partition. Its tracker and out are owned by the
// poll loop; queues by mu; wg counts the goroutines working for it.
type partState struct {
	id     int32
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	tracker *offsetTracker
	skip    skipSet
	out     []outRecord // follow-up records awaiting a committed transaction
	paused  bool

	mu      sync.Mutex
	queues  map[string]*endpointQueue
	backlog int
}

// item is one delivery held by the dispatcher. key and value are copies:
// a record's slices point into its whole fetch batch, which a held item would
// otherwise keep alive (memory that grew with the backlog, not with the
// caps).
type item struct {
	off      int64
	key      []byte
	value    []byte // the exact webhook body
	meta     delivery.Meta
	queuedAt time.Time
}

// Run consumes until ctx ends, then finishes: it stops fetching, lets the
// attempts in flight end (each bounded by its endpoint's request timeout),
// commits what finished, and leaves the group. It returns nil after a clean
// shutdown, or the error that stopped it.
func (d *Dispatcher) Run(ctx context.Context) error {
	defer d.sess.Close()
	if err := Fence(ctx, d.sess.Client()); err != nil && ctx.Err() == nil {
		d.o.Logger.Warn("dispatch: not fenced at start; fenced at the first transaction instead", "err", err)
	}
	d.runCtx = ctx
	for {
		if ctx.Err() != nil {
			return d.shutdown()
		}
		pollCtx, cancel := context.WithTimeout(ctx, d.o.FlushInterval)
		fs := d.sess.PollRecords(pollCtx, 10000)
		cancel()
		if fs.IsClientClosed() {
			return nil
		}
		fs.EachError(func(t string, p int32, err error) {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				return
			}
			d.o.Logger.Warn("dispatch: fetch error", "topic", t, "partition", p, "err", err)
		})
		fs.EachPartition(func(ftp kgo.FetchTopicPartition) {
			d.mu.Lock()
			p := d.parts[ftp.Partition]
			d.mu.Unlock()
			if p == nil {
				return // revoked since the fetch
			}
			for _, r := range ftp.Records {
				d.accept(p, r)
			}
		})
		err := d.flush(ctx)
		d.sess.AllowRebalance()
		if err != nil {
			return err
		}
	}
}

// shutdown stops the partition workers, waits for in-flight attempts to end
// and commits their results.
func (d *Dispatcher) shutdown() error {
	d.mu.Lock()
	parts := make([]*partState, 0, len(d.parts))
	for _, p := range d.parts {
		parts = append(parts, p)
	}
	d.mu.Unlock()
	for _, p := range parts {
		p.mu.Lock()
		for _, q := range p.queues {
			q.closeQueue() // pumps exit; attempts in flight finish
		}
		p.mu.Unlock()
	}
	for _, p := range parts {
		p.wg.Wait()
	}
	err := d.flush(context.Background())
	for _, p := range parts {
		p.cancel()
	}
	return err
}

// assigned runs in the client's group goroutine when partitions are added.
// It reads the committed offsets with their metadata so deliveries that the
// previous owner finished above its committed offset are not sent again.
func (d *Dispatcher) assigned(ctx context.Context, cl *kgo.Client, assigned map[string][]int32) {
	// The group is joined, even when it gave this member nothing (more
	// members than partitions).
	defer d.once.Do(func() { close(d.joined) })
	ps := assigned[d.o.Topics.Deliveries]
	if len(ps) == 0 {
		return
	}
	skips := d.fetchSkips(ctx, cl, ps)
	d.mu.Lock()
	for _, id := range ps {
		pctx, cancel := context.WithCancel(context.Background())
		p := &partState{id: id, ctx: pctx, cancel: cancel, queues: make(map[string]*endpointQueue)}
		if s, ok := skips[id]; ok {
			p.tracker = newOffsetTracker(s.commit)
			p.skip = skipSet{ranges: s.ranges}
		} else {
			p.tracker = newOffsetTracker(-1)
		}
		d.parts[id] = p
		delete(d.lastCommit, id)
	}
	d.mu.Unlock()
	d.o.Logger.Info("dispatch: partitions assigned", "partitions", ps)
}

type committedSkips struct {
	commit int64
	ranges []offsetRange
}

// fetchSkips reads the group's committed offsets and metadata for ps,
// waiting out pending transactional commits (RequireStable). A failure only
// costs duplicates, never loss, so it is logged and tolerated.
func (d *Dispatcher) fetchSkips(ctx context.Context, cl *kgo.Client, ps []int32) map[int32]committedSkips {
	out := make(map[int32]committedSkips, len(ps))
	for try := 0; try < 20; try++ {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Group = d.o.Group
		req.RequireStable = true
		t := kmsg.NewOffsetFetchRequestTopic()
		t.Topic = d.o.Topics.Deliveries
		t.Partitions = ps
		req.Topics = append(req.Topics, t)
		resp, err := req.RequestWith(ctx, cl)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		unstable := false
		if err == nil {
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					if perr := kerr.ErrorForCode(rp.ErrorCode); perr != nil {
						if errors.Is(perr, kerr.UnstableOffsetCommit) {
							unstable = true
						}
						continue
					}
					if rp.Offset < 0 {
						continue
					}
					s := committedSkips{commit: rp.Offset}
					if rp.Metadata != nil {
						r, derr := decodeDoneAbove(rp.Offset, *rp.Metadata)
						if derr != nil {
							d.o.Logger.Warn("dispatch: ignoring commit metadata", "partition", rp.Partition, "err", derr)
						}
						s.ranges = r
					}
					out[rp.Partition] = s
				}
			}
		}
		if err == nil && !unstable {
			return out
		}
		if err != nil && !errors.Is(err, kerr.UnstableOffsetCommit) && !kerr.IsRetriable(err) {
			d.o.Logger.Warn("dispatch: reading commit metadata failed; finished deliveries above the commit may be sent again", "err", err)
			return out
		}
		select {
		case <-ctx.Done():
			return out
		case <-time.After(100 * time.Millisecond):
		}
	}
	return out
}

// revoked runs in the client's group goroutine before partitions are taken
// away. In-flight attempts of those partitions are cancelled and awaited, so
// no delivery is ever sent by two consumers at once; their results are not
// committed, so the next owner sends them again (same webhook-id, same body).
func (d *Dispatcher) revoked(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
	ps := revoked[d.o.Topics.Deliveries]
	var gone []*partState
	d.mu.Lock()
	for _, id := range ps {
		if p := d.parts[id]; p != nil {
			gone = append(gone, p)
			delete(d.parts, id)
		}
		delete(d.lastCommit, id)
	}
	d.mu.Unlock()
	for _, p := range gone {
		p.cancel()
		p.mu.Lock()
		for _, q := range p.queues {
			q.closeQueue()
		}
		n := p.backlog
		p.backlog = 0
		p.mu.Unlock()
		d.m.backlog.Add(context.Background(), -int64(n))
	}
	for _, p := range gone {
		p.wg.Wait()
	}
	if len(gone) > 0 {
		d.o.Logger.Info("dispatch: partitions revoked", "partitions", ps)
	}
}

// accept takes one fetched record into its partition. It runs on the poll
// loop.
func (d *Dispatcher) accept(p *partState, r *kgo.Record) {
	if p.tracker.next < 0 {
		// No committed offset: the partition started from the reset offset.
		p.tracker.next = r.Offset
	}
	if !p.tracker.add(r.Offset) {
		return // re-fetched after an aborted transaction; already held
	}
	if p.skip.has(r.Offset) {
		p.tracker.done(r.Offset)
		d.m.duplicateSkips.Add(context.Background(), 1)
		return
	}
	meta, err := delivery.ParseMeta(r.Headers)
	if err != nil {
		d.finish(p, r.Offset, []*kgo.Record{d.deadLetter(r, "bad_headers: "+err.Error())})
		return
	}
	now := time.Now()
	it := &item{off: r.Offset, key: bytes.Clone(r.Key), value: bytes.Clone(r.Value), meta: meta, queuedAt: now}
	ep, ok := d.o.Endpoints.Get(meta.EndpointID)
	if !ok {
		ep = nil
	}
	if v := checkIdentity(&meta, ep); v.outcome != "" {
		d.finish(p, r.Offset, d.refuse(it, ep, v, now))
		return
	}
	if d.o.Policy.Expired(meta, now) {
		d.finish(p, r.Offset, d.conclude(it, ep, audit.Expired, now))
		return
	}
	lim, err := d.limiter(ep)
	if err != nil {
		d.finish(p, r.Offset, d.conclude(it, ep, audit.Abandoned, now))
		return
	}
	if meta.PauseUntil.After(now) {
		lim.Pause(d.o.Policy.CapPause(meta.PauseUntil, now)) // a 429's pause travels with parked records
	}
	p.mu.Lock()
	q := p.queues[meta.EndpointID]
	if q == nil {
		q = newEndpointQueue(meta.EndpointID, lim)
		p.queues[meta.EndpointID] = q
	}
	// Park instead of holding: the endpoint is paused past the smallest
	// tier, its local backlog is full, or the partition's is and this
	// endpoint already has deliveries waiting. No attempt is consumed.
	if reason, until := d.parkReason(p, q, now); reason != "" {
		if q.len() == 0 && q.active == 0 && !q.running {
			delete(p.queues, q.id)
		}
		p.mu.Unlock()
		d.park(p, it, reason, until, now, d.finish)
		return
	}
	q.push(it)
	p.backlog++
	backlog := p.backlog
	if !q.running {
		q.running = true
		p.wg.Add(1)
		go d.pump(p, q)
	}
	p.mu.Unlock()
	d.m.backlog.Add(context.Background(), 1)
	if backlog >= d.o.PartitionBacklog*3/2 && !p.paused {
		p.paused = true
		d.sess.Client().PauseFetchPartitions(map[string][]int32{d.o.Topics.Deliveries: {p.id}})
		d.m.partitionPauses.Add(context.Background(), 1)
	}
}

// parkReason says whether a new delivery for q must be parked instead of
// queued, and until when at least. Called with the partition lock held.
func (d *Dispatcher) parkReason(p *partState, q *endpointQueue, now time.Time) (string, time.Time) {
	if until := q.lim.PausedUntil(); until.Sub(now) >= d.o.Policy.MinHold() {
		return "paused", until
	}
	if q.len() >= d.o.EndpointBacklog {
		return "backlog", time.Time{}
	}
	if p.backlog >= d.o.PartitionBacklog && q.len() > 0 {
		return "partition_backlog", time.Time{}
	}
	return "", time.Time{}
}

// park finishes it by moving it to a tier (see RetryPolicy.Park), through
// done: finish on the poll loop, complete elsewhere.
func (d *Dispatcher) park(p *partState, it *item, reason string, until, now time.Time, done func(*partState, int64, []*kgo.Record)) {
	out := d.o.Policy.Park(it.meta, it.key, it.value, until, now)
	d.m.parked.Add(context.Background(), 1, metric.WithAttributes(attrReason(reason)))
	done(p, it.off, []*kgo.Record{out})
}

// limiter returns the pacing state of ep, created on first use and updated
// when the endpoint's limits change.
func (d *Dispatcher) limiter(ep *endpoints.Endpoint) (*ratelimit.Endpoint, error) {
	want := ratelimit.Limit{RatePerSec: ep.RatePerSec, MaxInFlight: ep.MaxInFlight}
	d.limMu.Lock()
	defer d.limMu.Unlock()
	lim := d.limiters[ep.ID]
	if lim == nil {
		l, err := ratelimit.New(want)
		if err != nil {
			return nil, err
		}
		d.limiters[ep.ID] = l
		return l, nil
	}
	if cur := lim.Limit(); cur != want {
		if err := lim.SetLimit(want, time.Now()); err != nil {
			return nil, err
		}
	}
	return lim, nil
}

// finish reports a delivery finished without an attempt in flight. It runs
// on the poll loop, which owns the tracker.
func (d *Dispatcher) finish(p *partState, off int64, out []*kgo.Record) {
	p.tracker.done(off)
	for _, r := range out {
		p.out = append(p.out, outRecord{off, r})
	}
}

// complete is finish for attempt goroutines: the poll loop applies it at
// its next flush.
func (d *Dispatcher) complete(p *partState, off int64, out []*kgo.Record) {
	d.doneMu.Lock()
	d.done = append(d.done, completion{p: p, off: off, out: out})
	d.doneMu.Unlock()
}

// flush applies completions and, when anything is ready, commits the
// follow-up records and the offsets they retire in one transaction. It runs
// on the poll loop, between a poll and AllowRebalance, so the set of owned
// partitions cannot change under it (but at shutdown, where callbacks may
// run: hence d.mu around the maps).
func (d *Dispatcher) flush(ctx context.Context) error {
	d.doneMu.Lock()
	done := d.done
	d.done = nil
	d.orphans = append(d.orphans, d.loose...)
	d.loose = nil
	d.doneMu.Unlock()

	d.mu.Lock()
	parts := make(map[int32]*partState, len(d.parts))
	for id, p := range d.parts {
		parts[id] = p
	}
	last := make(map[int32]commitInfo, len(d.lastCommit))
	for id, c := range d.lastCommit {
		last[id] = c
	}
	d.mu.Unlock()

	for _, c := range done {
		if parts[c.p.id] != c.p {
			// Revoked: the next owner redoes the delivery, but the
			// attempt happened, so its row is still written.
			d.orphans = append(d.orphans, d.attemptRows(c.out)...)
			continue
		}
		c.p.tracker.done(c.off)
		for _, r := range c.out {
			c.p.out = append(c.p.out, outRecord{c.off, r})
		}
	}
	if time.Now().Before(d.nextFlushAt) {
		return nil // backing off after aborted transactions
	}
	// What franz-go will propose to commit (everything polled, for the
	// partitions it owns) and which partitions it has commits for. Neither
	// changes before End: rebalances wait for AllowRebalance.
	proposed := d.sess.Client().UncommittedOffsets()[d.o.Topics.Deliveries]
	owned := d.sess.Client().CommittedOffsets()[d.o.Topics.Deliveries]
	commits := make(map[int32]commitInfo, len(parts))
	out := slices.Clip(d.orphans)
	held := make(map[int32][]outRecord, len(parts))
	var included, lost []int32
	for id, p := range parts {
		if p.paused {
			p.mu.Lock()
			low := p.backlog <= d.o.PartitionBacklog/2
			p.mu.Unlock()
			if low {
				p.paused = false
				d.sess.Client().ResumeFetchPartitions(map[string][]int32{d.o.Topics.Deliveries: {id}})
			}
		}
		if p.tracker.next < 0 {
			continue // nothing fetched yet
		}
		c, meta, covered := p.tracker.commitInfo()
		ci := commitInfo{commit: c, meta: meta}
		if _, ok := proposed[id]; !ok && ci != last[id] {
			// franz-go has nothing to commit here although we do: either
			// it rewound after an abort and has not re-fetched yet (wait),
			// or the partition was lost without a revoke reaching us (a
			// committed partition it no longer lists). Either way its
			// follow-up records must not commit without its offsets.
			if _, ok := owned[id]; !ok {
				if _, had := last[id]; had {
					lost = append(lost, id)
				}
			}
			continue
		}
		commits[id] = ci
		included = append(included, id)
		// Only follow-ups of deliveries this commit retires go out now;
		// the rest wait for a commit that covers them (no forks).
		for _, o := range p.out {
			if o.off < c || o.off <= covered {
				out = append(out, o.rec)
			} else {
				held[id] = append(held[id], o)
			}
		}
	}
	if len(lost) > 0 {
		d.o.Logger.Warn("dispatch: partitions lost without a revoke callback; dropping them", "partitions", lost)
		d.revoked(ctx, nil, map[string][]int32{d.o.Topics.Deliveries: lost})
	}
	due := false
	for id, c := range commits {
		if last[id] != c {
			due = true
		}
	}
	if len(out) == 0 && !due {
		return nil
	}
	// A transaction is never cut short by shutdown: cancelling End leaves
	// the client unusable. It is bounded instead.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.o.TransactionTimeout)
	defer cancel()
	if err := d.sess.Begin(); err != nil {
		return fmt.Errorf("pipeline: dispatcher begin transaction: %w", err)
	}
	var produceErr atomic.Value
	for _, r := range out {
		// A fresh record per try: franz-go keeps state (context, partition,
		// timestamp) in a produced record, so one from an aborted
		// transaction is not produced again.
		r = &kgo.Record{Topic: r.Topic, Key: r.Key, Value: r.Value, Headers: r.Headers}
		d.sess.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				produceErr.CompareAndSwap(nil, err)
			}
		})
	}
	endCtx := kgo.PreTxnCommitFnContext(ctx, func(req *kmsg.TxnOffsetCommitRequest) error {
		d.rewriteCommit(req, commits)
		return nil
	})
	try := kgo.TryCommit
	if err := d.sess.Client().Flush(ctx); err != nil || produceErr.Load() != nil {
		try = kgo.TryAbort
	}
	if len(d.attemptRows(out)) > 0 {
		faultPoint("crash-before-commit") // an attempt's outcome row is produced, not committed
	}
	committed, err := d.sess.End(endCtx, try)
	if err != nil {
		return fmt.Errorf("pipeline: dispatcher end transaction: %w", err)
	}
	if !committed {
		// Everything produced was aborted and the client rewound every
		// partition to its last commit. Owned partitions keep their state
		// (re-fetched records are dropped by the tracker) and their
		// follow-up records go out again in the next transaction, after a
		// backoff. Paused partitions are resumed, or they would never be
		// re-fetched and so never proposed for commit again.
		d.abortStreak++
		d.nextFlushAt = time.Now().Add(min(d.o.FlushInterval<<min(d.abortStreak, 6), 5*time.Second))
		for id, p := range parts {
			if p.paused {
				p.paused = false
				d.sess.Client().ResumeFetchPartitions(map[string][]int32{d.o.Topics.Deliveries: {id}})
			}
		}
		d.m.txnAborts.Add(ctx, 1, metric.WithAttributes(attrStage("dispatch")))
		d.o.Logger.Warn("dispatch: transaction aborted; retrying its records", "records", len(out),
			"aborts_in_a_row", d.abortStreak, "produce_err", produceErr.Load())
		return nil
	}
	d.abortStreak = 0
	d.orphans = nil
	d.mu.Lock()
	if d.lastCommit == nil {
		d.lastCommit = make(map[int32]commitInfo)
	}
	for _, id := range included {
		parts[id].out = held[id]
		if d.parts[id] == parts[id] {
			d.lastCommit[id] = commits[id]
		}
	}
	d.mu.Unlock()
	return nil
}

// attemptRows returns the records of recs that are attempt rows.
func (d *Dispatcher) attemptRows(recs []*kgo.Record) []*kgo.Record {
	var rows []*kgo.Record
	for _, r := range recs {
		if r.Topic == d.o.Topics.Attempts {
			rows = append(rows, r)
		}
	}
	return rows
}

// rewriteCommit turns the offsets franz-go proposes (everything polled) into
// what may be committed: per partition, the lowest unfinished offset, with
// the finished offsets above it as metadata. Partitions not in commits are
// removed: their polled records were never taken on, or their follow-up
// records are not in this transaction.
func (d *Dispatcher) rewriteCommit(req *kmsg.TxnOffsetCommitRequest, commits map[int32]commitInfo) {
	topics := req.Topics[:0]
	for _, t := range req.Topics {
		if t.Topic != d.o.Topics.Deliveries {
			continue
		}
		ps := t.Partitions[:0]
		for _, pp := range t.Partitions {
			ci, ok := commits[pp.Partition]
			if !ok {
				continue
			}
			pp.Offset = ci.commit
			pp.LeaderEpoch = -1
			meta := ci.meta
			pp.Metadata = &meta
			ps = append(ps, pp)
		}
		if len(ps) > 0 {
			t.Partitions = ps
			topics = append(topics, t)
		}
	}
	req.Topics = topics
}
