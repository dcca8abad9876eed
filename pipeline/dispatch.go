package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/metric"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/pipeline/endpoints"
	"github.com/hookrelay/hookrelay/ratelimit"
)

// EndpointSource answers which endpoint config applies to a delivery. The
// endpoints view implements it. Get must be safe for concurrent use and fast:
// it is called once per delivery and per attempt.
type EndpointSource interface {
	Get(id string) (*endpoints.Endpoint, bool)
}

// AttemptLog durably records that attempts are starting, before their
// requests leave: Started writes the rows (outcome [audit.Sending]; one or
// more attempts to one endpoint, which the dispatcher starts together) to
// the attempts topic and returns nil only once every one is written
// (acknowledged by every in-sync replica), or else the error that kept one
// from being written; then no request of the batch is made (a row that was
// written anyway is resolved as [audit.Interrupted] by the sink). It must
// return when ctx ends. Safe for concurrent use.
//
// The outcome row of the attempt (same AttemptID, AttemptedAt, EndpointID)
// is not written through AttemptLog: the dispatcher produces it to
// Topics.Attempts in the transaction that commits the delivery's offset, so
// it is written exactly when the delivery is retired. A process that dies
// between the two leaves a Sending row alone, which the audit sink resolves
// as [audit.Interrupted] (see audit/sink).
type AttemptLog interface {
	Started(ctx context.Context, rows ...*audit.Attempt) error
}

// DispatcherOptions configures a [Dispatcher]. cmd/ fills it; nothing here
// reads flags or the environment.
type DispatcherOptions struct {
	// Brokers are the Kafka seed brokers, "host:port". Required.
	Brokers []string
	// KafkaOptions are extra franz-go client options: TLS, SASL, client
	// ID, static member ID (kgo.InstanceID). Optional. They are applied
	// after the dispatcher's own, so they must not change what it relies
	// on (consumer group, transactional ID, read_committed, the rebalance
	// callbacks, BlockRebalanceOnPoll).
	KafkaOptions []kgo.Opt
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
	// AttemptFormat encodes the outcome rows the dispatcher writes in its
	// transactions (give Attempts the same). Optional. Default AttemptJSON,
	// the form every release reads (see [AttemptFormat] for the rollout).
	AttemptFormat AttemptFormat
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
	// MemoryBudget caps the bytes of the deliveries held in memory (key,
	// value and headers of each record queued in an endpoint's queue, all
	// partitions together), in bytes. Past it, a new delivery makes room
	// by parking (reason "memory", without consuming an attempt) the
	// newest queued deliveries of the endpoints of its partition that hold
	// the most bytes, itself included; an endpoint's head-of-line delivery
	// is never parked for memory, so held bytes exceed the budget by at
	// most one record per endpoint holding only its head. Optional.
	// Default 0: the count bounds (EndpointBacklog, PartitionBacklog)
	// only. The fetch buffers are bounded by KafkaOptions (cmd/ passes
	// kgo.FetchMaxBytes and its kin from the same budget).
	MemoryBudget int64
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
	// TransactionTimeout is the Kafka transaction timeout, after which
	// the broker aborts a transaction left open by a dead process; one
	// commit transaction (produce, offset commit, end) is bounded by twice
	// it (the rule of every stage, see txnBound in txn.go).
	// Optional. Default DefaultTransactionTimeout (10s).
	TransactionTimeout time.Duration
	// Hold, when not nil, keeps the dispatcher from fetching deliveries
	// until it is closed: it joins its group and owns partitions, but
	// takes nothing (a new deliveries generation's dispatcher while the
	// old generation drains; see RunGenerations). Optional.
	Hold <-chan struct{}
	// Health configures the failing-since clock, auto-disable and the
	// operational events (see HealthOptions). Optional; defaults there.
	Health HealthOptions
	// Meter receives the dispatcher's metrics. Optional. Default no-op.
	Meter metric.Meter
	// Logger. Optional. Default slog.Default().
	Logger *slog.Logger
	// Now is the dispatcher's clock: every instant it compares or records
	// (queue waits, held due times, endpoint pauses, expiry, attempt
	// times, the back-off after an aborted transaction) is read from it,
	// never from time.Now directly. Optional. Default time.Now. Tests pass
	// a clock they move by hand; the waits themselves (the pump's timer,
	// the poll) are real timers set from durations of this clock.
	Now func() time.Time
}

func (o *DispatcherOptions) validate() error {
	switch {
	case len(o.Brokers) == 0:
		return errors.New("pipeline: DispatcherOptions.Brokers is required")
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
	case o.AttemptFormat != "" && o.AttemptFormat != AttemptJSON && o.AttemptFormat != AttemptBinary:
		return fmt.Errorf("pipeline: DispatcherOptions.AttemptFormat %q: want json or binary", string(o.AttemptFormat))
	case o.Policy == nil:
		return errors.New("pipeline: DispatcherOptions.Policy is required")
	case o.EndpointBacklog < 0:
		return fmt.Errorf("pipeline: DispatcherOptions.EndpointBacklog must be >= 0, got %d", o.EndpointBacklog)
	case o.PartitionBacklog < 0:
		return fmt.Errorf("pipeline: DispatcherOptions.PartitionBacklog must be >= 0, got %d", o.PartitionBacklog)
	case o.MemoryBudget < 0:
		return fmt.Errorf("pipeline: DispatcherOptions.MemoryBudget must be >= 0, got %d", o.MemoryBudget)
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
	if o.Now == nil {
		o.Now = time.Now
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
// request that may have reached the endpoint always has a row. See
// docs/ARCHITECTURE.md for the goroutine map.
//
// A Dispatcher is a stage: [NewDispatcher] only validates; each
// [Dispatcher.Run] creates its own Kafka session and closes it before it
// returns, so Run may be called again after it returned (not concurrently),
// e.g. by a supervisor after a non-fatal error.
//
// The code is split by concern, each file calling only those below it:
//
//	dispatch.go            options, New, Run (the poll loop), shutdown
//	dispatch_partitions.go partition state; the assign and revoke callbacks
//	dispatch_commit.go     flush: one commit, by way of the next three
//	dispatch_gather.go       finished offsets and completions since the last flush
//	dispatch_followups.go    what a commit retires: its offsets and follow-ups, what waits
//	dispatch_release.go      after a commit or an abort: held work, resumes, bookkeeping
//	dispatch_accept.go     a fetched record joins its endpoint's queue (or is parked)
//	dispatch_endpoint.go   an endpoint's queue, its pump goroutine and start window
//	dispatch_attempt.go    one attempt: sending row, in-flight slot, request, decision
//	dispatch_outcome.go    a delivery's end (finish, complete, park, parkBusy, conclude) and its records
//	dispatch_park.go       busy parks and pace: when a busy endpoint's overflow comes back, the start window
//	identity.go            checkIdentity and refuse (a delivery not sent)
//	dispatch_metrics.go    metric attributes and gauges
//
// # Lock order
//
// A goroutine holding one of these locks may take only those after it, in
// this order, never one before it:
//
//	d.mu → partState.mu → d.health.mu → d.doneMu
//	d.limMu → (a ratelimit.Endpoint's own lock)
//	partState.mu → (a ratelimit.Endpoint's own lock), d.pacer.mu
//
// d.pacer.mu (busy-park slots) is a leaf: nothing is taken under it.
//
// d.mu (owned partitions, last commits) is held only to read or swap those
// maps; the poll loop, revoked and shutdown copy what they need and release
// it before taking a partition's lock. partState.mu guards the partition's
// queues, its backlog and every field of its endpointQueues (they have no
// lock of their own; q.wake is a channel). The pump calls complete (d.doneMu)
// and a limiter's methods with partState.mu held. d.health.mu (the health
// tracker's entries, health.go) is taken by healthSource.Get (every
// Endpoints.Get, the pump's with partState.mu held) and by observeHealth,
// which takes d.doneMu under it to queue loose records. d.limMu (the limiters map)
// is never held with d.mu, partState.mu or d.doneMu, and nothing is taken
// while holding d.doneMu. The poll-loop-only fields (partState.tracker, out,
// paused; d.orphans, d.nextFlushAt) need no lock.
type Dispatcher struct {
	o      DispatcherOptions
	m      *metrics
	sess   *kgo.GroupTransactSession  // this run's session; Run's goroutine (the poll loop) only
	txn    *transactor                // commits on sess; poll loop only
	live   atomic.Pointer[kgo.Client] // this run's client, for tests; nil between runs
	health *healthTracker             // failing-since clock and auto-disable (health.go)
	held   atomic.Int64               // bytes of the deliveries queued in every partition's endpoint queues (itemSize)

	mu         sync.Mutex
	parts      map[int32]*partState // owned partitions of the deliveries topic; guarded by mu
	lastCommit map[int32]commitInfo // what the last committed transaction stored; guarded by mu

	limMu    sync.Mutex
	limiters map[string]*ratelimit.Endpoint // per endpoint; outlive partition moves within this process; guarded by limMu

	pacer busyPacer // per endpoint: service time and the next busy-park slot (dispatch_park.go); its own leaf lock

	doneMu sync.Mutex
	done   []completion  // attempts finished since the last flush; guarded by doneMu
	loose  []*kgo.Record // attempt rows of revoked partitions, and health transitions (health.go): tied to no offset; guarded by doneMu

	joined       chan struct{} // closed at the first assignment of the current (or next) run; replaced by endRun; guarded by mu
	joinedClosed bool          // joined is closed; guarded by mu

	orphans     []*kgo.Record // attempt rows tied to no owned offset, until a transaction commits them; poll loop only
	nextFlushAt time.Time     // backoff after aborts; poll loop only
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

// NewDispatcher validates o (errors name the field, KafkaOptions included)
// and fills in the defaults. It does not connect, starts no goroutine and
// holds nothing to close: Run does.
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
		joined:   make(chan struct{}),
	}
	if err := kgo.ValidateOpts(d.clientOpts()...); err != nil {
		return nil, fmt.Errorf("pipeline: DispatcherOptions.KafkaOptions: %w", err)
	}
	if o.Meter != nil {
		d.registerGauges(o.Meter)
	}
	return d, nil
}

// clientOpts are the options of each run's session (the consumer group on
// the deliveries topic and the transactional producer of its commits): the
// dispatcher's own, then KafkaOptions.
func (d *Dispatcher) clientOpts() []kgo.Opt {
	return append([]kgo.Opt{
		kgo.SeedBrokers(d.o.Brokers...),
		kgo.ConsumerGroup(d.o.Group),
		kgo.ConsumeTopics(d.o.Topics.Deliveries),
		kgo.TransactionalID(d.o.TransactionalID),
		kgo.TransactionTimeout(d.o.TransactionTimeout),
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
	}, d.o.KafkaOptions...)
}

// newTransactor is the dispatcher's transaction shape on sess: each
// transaction bounded by 2 × TransactionTimeout (txnBound, the rule of
// every stage); after aborts in a row it backs
// off FlushInterval doubled per abort (the first wait is 2×FlushInterval),
// at most abortBackoffMax.
func (d *Dispatcher) newTransactor(sess *kgo.GroupTransactSession) *transactor {
	return &transactor{sess: sess, stage: "dispatch", timeout: txnBound(d.o.TransactionTimeout),
		base: 2 * d.o.FlushInterval, log: d.o.Logger, aborts: d.m.txnAborts}
}

// Joined returns a channel closed once the current run has joined its
// consumer group (its first assignment, even of no partitions). It refers
// to one run: called while Run runs, that run's; called before Run or after
// it returned, the next run's (a channel handed out earlier keeps its
// state). So a supervisor that calls it before each Run (or while it runs)
// sees "joined" only for a run that joined. Safe for concurrent use.
func (d *Dispatcher) Joined() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.joined
}

// markJoined closes the current run's Joined channel (once).
func (d *Dispatcher) markJoined() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.joinedClosed {
		close(d.joined)
		d.joinedClosed = true
	}
}

// Run consumes until ctx ends, then finishes: it stops fetching, lets the
// attempts in flight end (each bounded by its endpoint's request timeout),
// commits what finished, and leaves the group. It returns nil after a clean
// shutdown, or the error that stopped it: the session is then unusable (a
// transaction could not be begun or ended) and closed. Each call creates
// its own session and closes it before returning, revoking whatever
// partitions it still owns, so Run may be called again after it returned
// (never concurrently); the new session's transactional ID fences what the
// last one left open. The pacing state of endpoints, and the attempt rows
// of attempts cut short by a revoke, carry over to the next run.
func (d *Dispatcher) Run(ctx context.Context) error {
	d.resetRun()
	sess, err := newStageSession("dispatcher", d.clientOpts())
	if err != nil {
		return err
	}
	d.sess, d.txn = sess, d.newTransactor(sess)
	d.live.Store(sess.Client())
	defer d.endRun()
	if err := Fence(ctx, sess.Client()); err != nil && ctx.Err() == nil {
		d.o.Logger.Warn("dispatch: not fenced at start; fenced at the first transaction instead", "err", err)
	}
	held := d.o.Hold != nil && !isClosed(d.o.Hold)
	if held {
		sess.Client().PauseFetchTopics(d.o.Topics.Deliveries)
	}
	for {
		if ctx.Err() != nil {
			return d.shutdown()
		}
		if held && isClosed(d.o.Hold) {
			held = false
			sess.Client().ResumeFetchTopics(d.o.Topics.Deliveries) // partitions paused one by one stay paused
		}
		pollCtx, cancel := context.WithTimeout(ctx, d.o.FlushInterval)
		fs := sess.PollRecords(pollCtx, 10000)
		cancel()
		if fs.IsClientClosed() {
			return nil
		}
		d.take(fs)
		err := d.flush(ctx)
		sess.AllowRebalance()
		if err != nil {
			return err
		}
	}
}

// resetRun resets the per-run state before a run creates its session
// (whose callbacks fill it): no partitions owned, no commit remembered, no
// back-off.
func (d *Dispatcher) resetRun() {
	d.mu.Lock()
	d.parts = make(map[int32]*partState)
	d.lastCommit = nil
	d.mu.Unlock()
	d.nextFlushAt = time.Time{}
}

// endRun closes the run's session (leaving the group revokes its
// partitions) and then revokes any partition still held (one the client
// gave up without a callback reaching us), so no goroutine of this run
// outlives it.
func (d *Dispatcher) endRun() {
	d.sess.Close()
	d.mu.Lock()
	ids := make([]int32, 0, len(d.parts))
	for id := range d.parts {
		ids = append(ids, id)
	}
	d.mu.Unlock()
	if len(ids) > 0 {
		d.revoked(context.Background(), nil, map[string][]int32{d.o.Topics.Deliveries: ids})
	}
	d.live.Store(nil)
	d.sess, d.txn = nil, nil
	d.mu.Lock()
	d.joined, d.joinedClosed = make(chan struct{}), false // the next run's
	d.mu.Unlock()
}

// take logs the fetch errors of fs and accepts its records, partition by
// partition. It runs on the poll loop.
func (d *Dispatcher) take(fs kgo.Fetches) {
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
}

// shutdown stops the partition workers, waits for in-flight attempts to end
// and commits their results (shutdownFlush).
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
	err := d.shutdownFlush()
	for _, p := range parts {
		p.cancel()
	}
	return err
}

// shutdownFlush is the last flush of a run: it ignores the back-off of
// earlier aborts (a shutdown within it would commit nothing: outcome rows
// lost, shown as interrupted; loose health records lost; deliveries sent
// again) and retries until everything finished is committed: after an
// abort it waits the transactor's back-off, then polls once so franz-go
// re-fetches the rewound partitions (it proposes a partition for commit
// only once it is fetched again; the records polled are not taken on, and
// the commit never passes the tracker's, so none of them is skipped).
// Retries stop once TransactionTimeout has passed since the first (a
// transaction already begun runs to its own bound): what is still
// uncommitted then is redone by the next owner, its outcome rows shown as
// interrupted. Poll loop only.
func (d *Dispatcher) shutdownFlush() error {
	ctx, cancel := context.WithTimeout(context.Background(), d.o.TransactionTimeout)
	defer cancel()
	for {
		d.nextFlushAt = time.Time{}
		d.holdRebalances() // revoked moves p.out: not while this flush reads it
		st, err := d.flushStep(ctx)
		d.sess.AllowRebalance()
		if err != nil || (!st.aborted && st.waiting == 0) {
			return err
		}
		if st.aborted {
			select {
			case <-ctx.Done():
			case <-time.After(d.txn.backoff()):
			}
		}
		if ctx.Err() != nil {
			d.o.Logger.Warn("dispatch: shutdown: last commit not done within the transaction timeout; the next owner redoes what remains",
				"aborted", st.aborted, "partitions_waiting", st.waiting)
			return nil
		}
		pctx, pcancel := context.WithTimeout(ctx, d.o.FlushInterval)
		d.sess.PollRecords(pctx, 10000) // not taken: only re-fetched, so proposed for commit
		pcancel()
		d.sess.AllowRebalance()
	}
}

// holdRebalances blocks the rebalance callbacks until the next
// AllowRebalance, as a poll does (BlockRebalanceOnPoll): a poll with an
// ended context fetches nothing and returns at once.
func (d *Dispatcher) holdRebalances() {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d.sess.PollRecords(ctx, 1)
}

// now is the dispatcher's clock (DispatcherOptions.Now).
func (d *Dispatcher) now() time.Time { return d.o.Now() }
