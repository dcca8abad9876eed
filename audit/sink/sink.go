// Package sink moves attempt records from the attempts topic into an
// audit.Inserter (the ClickHouse store in production): it consumes with
// read_committed in batches, inserts each batch, and commits the batch's
// offsets only after the insert succeeded, so a crash or a ClickHouse outage
// re-inserts rather than loses (the store deduplicates by attempt ID). It
// pairs each attempt's Sending row with its outcome and resolves a Sending
// row whose outcome never comes as Interrupted (see [Sink]). A store that is
// down when the sink starts (Options.Prepare) makes the sink wait, not
// ready, instead of failing.
package sink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/hookrelay/hookrelay/audit"
)

// Options configures [New].
type Options struct {
	// Brokers are the Kafka seed brokers, "host:port". Required.
	Brokers []string
	// Topic is the attempts topic, e.g. "hookrelay.attempts". Required.
	Topic string
	// Group is the consumer group ID, e.g. "hookrelay.audit". Required.
	Group string
	// Store receives the attempts. Required.
	Store audit.Inserter
	// Prepare readies the store before the sink reads anything, e.g.
	// connects to ClickHouse and applies its migrations. Optional. Run calls
	// it until it returns nil, waiting RetryBackoff, doubling up to
	// MaxRetryBackoff, between calls (the insert back-off); meanwhile the
	// sink reads nothing (so the consumer group's committed offsets stay
	// where they are and the sink catches up from there once prepared) and
	// [Sink.Ready] reports the last error. This is how the sink starts while
	// its store is down, instead of keeping its process from starting.
	Prepare func(ctx context.Context) error
	// KafkaOptions are extra franz-go client options: TLS, SASL, client ID,
	// logger. Optional. They are applied after the sink's own, so they must
	// not change what the sink relies on (consumer group, manual commits,
	// read_committed, BlockRebalanceOnPoll).
	KafkaOptions []kgo.Opt
	// BatchRows flushes the buffer once it holds this many records.
	// Optional. Default 50,000: ClickHouse inserts rows at a cost per
	// insert (a part in each table and view), so on the benchmark machine
	// a backlog drained at ~35,000 rows/s in batches of 5,000 and
	// 89,000–163,000 (median 113,000) in batches of 50,000 (BENCHMARKS.md,
	// scenario 7 of 2026-12-02).
	BatchRows int
	// BatchBytes flushes the buffer once it holds this many bytes,
	// whatever BatchRows says: the bound on the memory a batch holds,
	// counted as each record's value bytes plus a decoded row's fixed size
	// (an audit.Attempt, 336 bytes). A poll asks for no more records than
	// the bytes left hold at the last batch's mean size, so a batch ends
	// past BatchBytes by about one record. The sink holds up to
	// [MaxBatches] batches, so its batches hold up to MaxBatches ×
	// BatchBytes. Optional. Default 32 MiB.
	BatchBytes int64
	// FlushInterval flushes the buffer this long after its first record
	// arrived, however few it holds: the most a record waits before its
	// insert starts. Optional. Default 200 ms.
	FlushInterval time.Duration
	// InsertTimeout bounds one Insert call. Optional. Default 30 s.
	InsertTimeout time.Duration
	// RetryBackoff is the wait before the first retry of a failed insert;
	// each further retry waits twice as long, up to MaxRetryBackoff. No
	// jitter: one sink retries one batch. Optional. Default 100 ms.
	RetryBackoff time.Duration
	// MaxRetryBackoff caps the wait between insert retries. Optional.
	// Default 10 s.
	MaxRetryBackoff time.Duration
	// ShutdownTimeout bounds the final flush and commit after Run's context
	// is canceled. Optional. Default 10 s.
	ShutdownTimeout time.Duration
	// InterruptGrace is how long a Sending row waits for its attempt's
	// outcome (or for a later row of its delivery) before the sink resolves
	// it as Interrupted, counted from the later of its AttemptedAt and the
	// moment the sink read it. It must exceed the longest an outcome can
	// take to commit after its Sending row: the longest endpoint timeout
	// (60 s), plus the wait of a delivery finished above an unfinished one
	// (the dispatcher's MaxQueueWait and one more request), plus the
	// dispatcher's transaction timeout and abort back-off (30 s + 5 s).
	// Too short only writes Interrupted early: the real outcome still
	// replaces it when it arrives. Optional. Default 3 min.
	InterruptGrace time.Duration
	// Meter creates the sink's metrics (see [Sink]). Optional. Default: no
	// metrics.
	Meter metric.Meter
	// Logger receives undecodable records, insert and commit failures.
	// Optional. Default slog.Default().
	Logger *slog.Logger
}

// Defaults of [Options].
const (
	DefaultBatchRows       = 50000
	DefaultBatchBytes      = 32 << 20
	DefaultFlushInterval   = 200 * time.Millisecond
	DefaultInsertTimeout   = 30 * time.Second
	DefaultRetryBackoff    = 100 * time.Millisecond
	DefaultMaxRetryBackoff = 10 * time.Second
	DefaultShutdownTimeout = 10 * time.Second
	DefaultInterruptGrace  = 3 * time.Minute
)

// Sink moves attempts from the attempts topic into a Store: it consumes the
// topic in a consumer group (read_committed, manual commits), decodes each
// record value into an [audit.Attempt], and inserts them in batches (BatchRows
// records, or whatever arrived within FlushInterval). It commits a batch's
// offsets only after its insert succeeded, so a crash or a ClickHouse outage
// loses nothing: uncommitted records are consumed again and, the store being
// idempotent by AttemptID, inserted without duplicates. A group without
// committed offsets starts at the topic's earliest record.
//
// A record that does not decode or fails [Attempt.Validate] is logged,
// counted (result "invalid") and skipped: its offset is committed with its
// batch, so one bad record never blocks a partition.
//
// A failed insert is retried, the same batch, with doubling backoff
// (RetryBackoff .. MaxRetryBackoff) until it succeeds or Run's context ends;
// meanwhile nothing is committed, and no more records are read once
// [MaxBatches] batches are held. Rebalances wait while a batch is buffered or
// on its way to the store (BlockRebalanceOnPoll), so the sink never commits
// for a partition it no longer owns; when a rebalance is waiting
// (OnPartitionsCallbackBlocked) the sink sends what it holds at once, without
// waiting for the batch's size or interval, and lets the rebalance in once
// every batch is committed: a wait of about one insert per batch held. If
// ClickHouse stays down past the group's rebalance timeout the member is
// removed from the group; its later commit fails (logged, counted) and the
// batch's records, already inserted, are read again by their new owner.
//
// Metrics (when Options.Meter is set):
//   - hookrelay.audit.sink.records{result=inserted|invalid|stored}: records
//     consumed; stored: rows found already stored and not inserted again
//   - hookrelay.audit.sink.inserts{result=ok|error}: Insert calls
//   - hookrelay.audit.sink.insert.rows: histogram of rows per successful insert
//   - hookrelay.audit.sink.insert.duration: histogram of seconds per Insert call
//   - hookrelay.audit.sink.commit.errors: failed offset commits
//   - hookrelay.audit.sink.interrupted: Sending rows resolved as Interrupted
//   - hookrelay.audit.sink.lag: gauge of records in the topic (up to the last
//     stable offset) not yet committed by this sink, over its partitions; on a
//     transactional topic a partition's commit marker may count as one.
//   - hookrelay.audit.sink.store.ready: gauge, 1 while the store accepts
//     writes ([Sink.Ready] is nil), else 0
//   - hookrelay.audit.sink.prepare.errors: failed Options.Prepare calls
//
// Exactly-once inserts: a store that implements [audit.Unstored] (the
// ClickHouse store, whose views count rows) gets every row once. The sink
// knows when a batch may hold rows already stored: a retry after a failed
// insert (the failure may have come after the rows were written), and rows
// of records below the offset their partition ended at when this sink got
// it (a previous owner, or this sink's previous run, may have inserted them
// without committing: a crash between insert and commit, a failed commit,
// a commit held back at a Sending row, an overlap during a rebalance). In
// exactly those cases it asks the store which rows it lacks and inserts
// only those; every other batch costs nothing extra. A restart behind a
// long backlog checks each batch of the backlog (one key-range query each).
//
// Readiness ([Sink.Ready]): the sink is ready while its store accepts
// writes: from the first successful Prepare (or the start of Run, without
// Prepare) until an insert fails, and again from the next insert that
// succeeds.
//
// Sending rows: the dispatcher writes an attempt's Sending row before its
// request and the outcome row (same AttemptID, AttemptedAt and endpoint, so
// the same partition, later) in the transaction that retires the delivery.
// The sink never stores a Sending row: it holds it, per partition, until it
// is resolved, by
//   - its outcome row (which is stored, as every other row),
//   - a later row of the same delivery with another AttemptID (the
//     partition's next owner attempted or decided the delivery, so the
//     process that made the attempt died or lost the partition): the sink
//     stores an Interrupted row for it,
//   - InterruptGrace passing without either: an Interrupted row too.
//
// An Interrupted row keeps the Sending row's AttemptID, AttemptedAt and
// endpoint, so an outcome that arrives after all replaces it in the store
// (a later insert of the same key wins). The held rows survive a restart
// of the sink because it never commits a partition's offset past its
// oldest unresolved Sending row: the next sink of the partition reads from
// there and rebuilds them; the rows after it are inserted again, which the
// store deduplicates (every row the sink writes, Interrupted ones included,
// is a function of the records, so a re-read writes the same rows). The
// cost is re-reading up to InterruptGrace of a partition after a restart,
// and a lag metric that counts the held rows. Within one insert the sink
// keeps only the last row per AttemptID.
//
// New only validates; each call of Run creates its own Kafka client and
// closes it before returning, so Run may be called again after it returned
// (never concurrently), e.g. by a supervisor restarting it.
type Sink struct {
	opts    Options
	log     *slog.Logger
	running atomic.Bool // a Run is running

	client *kgo.Client // the current run's; Run's goroutine only

	// notReady is why the store does not accept writes now; nil when it
	// does. Written by Run's goroutine, read by Ready.
	notReady atomic.Pointer[error]

	mRecords, mInserts, mCommitErrors, mPrepareErrors metric.Int64Counter
	mInterrupted                                      metric.Int64Counter
	mRows                                             metric.Int64Histogram
	mInsertDuration                                   metric.Float64Histogram

	// Per-run state, reset when a run starts (see resetRun).
	lagMu sync.Mutex
	ends  map[int32]int64 // partition -> last stable offset seen
	next  map[int32]int64 // partition -> first offset not yet committed

	lost []int32 // partitions revoked or lost, to drop from parts; guarded by lagMu

	// rebalanceWanted: a rebalance waits for this member to allow it (set
	// by the client's OnPartitionsCallbackBlocked goroutine, cleared by
	// Run's).
	rebalanceWanted atomic.Bool

	// Held Sending rows and read positions, per partition; Run's
	// goroutine only (rebalance callbacks pass lost partitions through
	// lost).
	parts map[int32]*partition
}

// partition is what the sink holds for one partition of the attempts topic.
type partition struct {
	sending    map[string]*held           // AttemptID -> its unresolved Sending row
	byDelivery map[string]map[string]bool // DeliveryID -> AttemptIDs in sending
	read       kgo.EpochOffset            // next offset to read
	committed  int64                      // offset last committed by this sink, -1 for none
	// checkBelow: records below this offset may have been inserted by
	// the partition's previous owner (or this sink's previous run): the
	// partition's end offset at its first fetch since it was assigned
	// (what any earlier owner can have read). -1 until that fetch.
	checkBelow int64
}

// held is an unresolved Sending row.
type held struct {
	a      audit.Attempt
	offset int64
	expiry time.Time // when InterruptGrace has passed
}

// New validates opts (KafkaOptions included) and fills in the defaults.
// Errors name the field. It creates no client, starts no goroutine and
// holds nothing to close: Run does. The metrics are registered here, once
// per Sink.
func New(opts Options) (*Sink, error) {
	switch {
	case len(opts.Brokers) == 0:
		return nil, errors.New("audit: Options.Brokers is required")
	case opts.Topic == "":
		return nil, errors.New("audit: Options.Topic is required")
	case opts.Group == "":
		return nil, errors.New("audit: Options.Group is required")
	case opts.Store == nil:
		return nil, errors.New("audit: Options.Store is required")
	case opts.BatchRows < 0:
		return nil, fmt.Errorf("audit: Options.BatchRows %d is negative", opts.BatchRows)
	case opts.BatchBytes < 0:
		return nil, fmt.Errorf("audit: Options.BatchBytes %d is negative", opts.BatchBytes)
	}
	for name, d := range map[string]time.Duration{
		"FlushInterval": opts.FlushInterval, "InsertTimeout": opts.InsertTimeout, "RetryBackoff": opts.RetryBackoff,
		"MaxRetryBackoff": opts.MaxRetryBackoff, "ShutdownTimeout": opts.ShutdownTimeout,
	} {
		if d < 0 {
			return nil, fmt.Errorf("audit: Options.%s %s is negative", name, d)
		}
	}
	setDefault(&opts.BatchRows, DefaultBatchRows)
	setDefault(&opts.BatchBytes, DefaultBatchBytes)
	setDefault(&opts.FlushInterval, DefaultFlushInterval)
	setDefault(&opts.InsertTimeout, DefaultInsertTimeout)
	setDefault(&opts.RetryBackoff, DefaultRetryBackoff)
	setDefault(&opts.MaxRetryBackoff, DefaultMaxRetryBackoff)
	setDefault(&opts.ShutdownTimeout, DefaultShutdownTimeout)
	if opts.InterruptGrace < 0 {
		return nil, fmt.Errorf("audit: Options.InterruptGrace %s is negative", opts.InterruptGrace)
	}
	setDefault(&opts.InterruptGrace, DefaultInterruptGrace)
	if opts.MaxRetryBackoff < opts.RetryBackoff {
		return nil, fmt.Errorf("audit: Options.MaxRetryBackoff %s is below RetryBackoff %s", opts.MaxRetryBackoff, opts.RetryBackoff)
	}
	if opts.Meter == nil {
		opts.Meter = noop.NewMeterProvider().Meter("")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Sink{
		opts:  opts,
		log:   opts.Logger.With("component", "audit-sink", "topic", opts.Topic),
		ends:  make(map[int32]int64),
		next:  make(map[int32]int64),
		parts: make(map[int32]*partition),
	}
	s.setNotReady(errNotStarted)
	if err := kgo.ValidateOpts(s.clientOpts()...); err != nil {
		return nil, fmt.Errorf("audit: Options.KafkaOptions: %w", err)
	}
	if err := s.initMetrics(); err != nil {
		return nil, fmt.Errorf("audit: Options.Meter: %w", err)
	}
	return s, nil
}

// clientOpts are the options of each run's client: the sink's own, then
// KafkaOptions.
func (s *Sink) clientOpts() []kgo.Opt {
	forget := func(_ context.Context, _ *kgo.Client, lost map[string][]int32) { s.forget(lost[s.opts.Topic]) }
	return append([]kgo.Opt{
		kgo.SeedBrokers(s.opts.Brokers...),
		kgo.ConsumerGroup(s.opts.Group),
		kgo.ConsumeTopics(s.opts.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsRevoked(forget),
		kgo.OnPartitionsLost(forget),
		kgo.OnPartitionsCallbackBlocked(func(context.Context, *kgo.Client) { s.rebalanceWanted.Store(true) }),
	}, s.opts.KafkaOptions...)
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

func (s *Sink) initMetrics() error {
	m := s.opts.Meter
	var err, e error
	s.mRecords, e = m.Int64Counter("hookrelay.audit.sink.records", metric.WithUnit("{record}"),
		metric.WithDescription("Attempt records consumed by the audit sink, by result (inserted, invalid)."))
	err = errors.Join(err, e)
	s.mInserts, e = m.Int64Counter("hookrelay.audit.sink.inserts", metric.WithUnit("{insert}"),
		metric.WithDescription("Batch inserts into the attempt store, by result (ok, error)."))
	err = errors.Join(err, e)
	s.mCommitErrors, e = m.Int64Counter("hookrelay.audit.sink.commit.errors", metric.WithUnit("{commit}"),
		metric.WithDescription("Offset commits of the audit sink that failed."))
	err = errors.Join(err, e)
	s.mInterrupted, e = m.Int64Counter("hookrelay.audit.sink.interrupted", metric.WithUnit("{row}"),
		metric.WithDescription("Sending rows the audit sink resolved as interrupted (no outcome arrived)."))
	err = errors.Join(err, e)
	s.mRows, e = m.Int64Histogram("hookrelay.audit.sink.insert.rows", metric.WithUnit("{row}"),
		metric.WithDescription("Rows per successful batch insert."),
		metric.WithExplicitBucketBoundaries(1, 10, 100, 500, 1000, 2000, 5000, 10000, 20000))
	err = errors.Join(err, e)
	s.mInsertDuration, e = m.Float64Histogram("hookrelay.audit.sink.insert.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of one batch insert call."),
		metric.WithExplicitBucketBoundaries(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))
	err = errors.Join(err, e)
	s.mPrepareErrors, e = m.Int64Counter("hookrelay.audit.sink.prepare.errors", metric.WithUnit("{call}"),
		metric.WithDescription("Failed calls of the audit sink's store preparation (connect, migrate); each is retried."))
	err = errors.Join(err, e)
	lag, e := m.Int64ObservableGauge("hookrelay.audit.sink.lag", metric.WithUnit("{record}"),
		metric.WithDescription("Records on the attempts topic not yet committed by the audit sink."))
	err = errors.Join(err, e)
	ready, e := m.Int64ObservableGauge("hookrelay.audit.sink.store.ready",
		metric.WithDescription("1 while the audit sink's store accepts writes, else 0 (not yet prepared, or inserts failing)."))
	err = errors.Join(err, e)
	if err != nil {
		return err
	}
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(lag, s.Lag())
		r := int64(0)
		if s.Ready() == nil {
			r = 1
		}
		o.ObserveInt64(ready, r)
		return nil
	}, lag, ready)
	return err
}

// errNotStarted is Ready's answer before Run has prepared the store.
var errNotStarted = errors.New("audit: sink not started")

// Ready returns nil while the sink's store accepts writes, else an error
// saying why not: not started, the last Prepare error, or the last insert
// error. Safe to call concurrently with Run.
func (s *Sink) Ready() error {
	if p := s.notReady.Load(); p != nil {
		return *p
	}
	return nil
}

func (s *Sink) setNotReady(err error) {
	if err == nil {
		s.notReady.Store(nil)
		return
	}
	s.notReady.Store(&err)
}

var (
	resultInserted = metric.WithAttributes(attribute.String("result", "inserted"))
	resultInvalid  = metric.WithAttributes(attribute.String("result", "invalid"))
	resultStored   = metric.WithAttributes(attribute.String("result", "stored"))
	resultOK       = metric.WithAttributes(attribute.String("result", "ok"))
	resultError    = metric.WithAttributes(attribute.String("result", "error"))
)

// Lag returns the records on the sink's partitions, up to the last stable
// offset it has seen, that it has not committed yet. Safe to call
// concurrently with Run.
func (s *Sink) Lag() int64 {
	s.lagMu.Lock()
	defer s.lagMu.Unlock()
	var lag int64
	for p, end := range s.ends {
		if next, ok := s.next[p]; ok && end > next {
			lag += end - next
		}
	}
	return lag
}

func (s *Sink) forget(partitions []int32) {
	s.lagMu.Lock()
	defer s.lagMu.Unlock()
	for _, p := range partitions {
		delete(s.ends, p)
		delete(s.next, p)
		s.lost = append(s.lost, p) // the next owner rebuilds its held rows from the committed offset
	}
}

// dropLost forgets the held rows of partitions revoked or lost since the
// last call. Run's goroutine.
func (s *Sink) dropLost() {
	s.lagMu.Lock()
	lost := s.lost
	s.lost = nil
	s.lagMu.Unlock()
	for _, p := range lost {
		delete(s.parts, p)
	}
}

// batch is what a flush inserts and then commits.
type batch struct {
	attempts []audit.Attempt
	records  int                       // records consumed, valid or not
	bytes    int64                     // their held size: value bytes plus attemptSize each
	rowBytes int64                     // mean held size per record of the last batch (kept by reset)
	offsets  map[int32]kgo.EpochOffset // partition -> offset to commit (next to read, or the oldest held Sending row)
	started  time.Time                 // when the first record (or Interrupted row) arrived
	// check: some rows may be stored already (a retry after a failed
	// insert, or rows from records below their partition's checkBelow),
	// so the flush inserts only the ones the store does not hold.
	check bool
}

// attemptSize is the fixed size of a decoded row (its strings' bytes are
// about the record's): a batch holds about its records' value bytes plus
// this per record.
var attemptSize = int64(reflect.TypeFor[audit.Attempt]().Size())

func newBatch() *batch { return &batch{offsets: make(map[int32]kgo.EpochOffset)} }

// noteMean sets rowBytes to the mean held size of b's records, if any.
func (b *batch) noteMean() {
	if b.records > 0 {
		b.rowBytes = max(b.bytes/int64(b.records), 1)
	}
}

func (b *batch) reset() {
	b.noteMean()
	clear(b.attempts) // the rows' strings are not kept alive by the array
	if cap(b.attempts) > 2*max(len(b.attempts), 1024) {
		b.attempts = nil // a large batch's array is not kept for small ones
	}
	b.attempts = b.attempts[:0]
	b.records, b.bytes = 0, 0
	b.check = false
	clear(b.offsets)
}

// full reports whether b holds BatchRows records or BatchBytes bytes.
func (b *batch) full(o Options) bool { return b.records >= o.BatchRows || b.bytes >= o.BatchBytes }

// pollMax is how many records the next poll may add to b: what BatchRows
// leaves, and what BatchBytes leaves at the last batch's mean record size
// (at least one), so one poll overshoots BatchBytes by about a record, not
// a whole fetch.
func (b *batch) pollMax(o Options) int {
	n := o.BatchRows - b.records
	if b.rowBytes > 0 {
		n = min(n, int(max(o.BatchBytes-b.bytes, 0)/b.rowBytes)+1)
	}
	return max(n, 1)
}

// pending reports whether b holds anything to insert or commit.
func (b *batch) pending() bool { return b.records > 0 || len(b.attempts) > 0 }

// interruptedMessage is the error_message of an Interrupted row.
const interruptedMessage = "the attempt's outcome was never recorded: the process stopped (or lost the partition) during the attempt; the receiver may have got the request"

// interrupted is the Interrupted row of Sending row a.
func interrupted(a audit.Attempt) audit.Attempt {
	a.Outcome = audit.Interrupted
	a.ErrorClass = string(audit.Interrupted)
	a.ErrorMessage = interruptedMessage
	return a
}

func (s *Sink) part(p int32) *partition {
	ps := s.parts[p]
	if ps == nil {
		ps = &partition{sending: map[string]*held{}, byDelivery: map[string]map[string]bool{}, committed: -1, checkBelow: -1}
		s.parts[p] = ps
	}
	return ps
}

// resolve removes Sending row id of ps; with asInterrupted, it adds its
// Interrupted row to b.
func (s *Sink) resolve(b *batch, ps *partition, id string, asInterrupted bool) {
	h := ps.sending[id]
	if h == nil {
		return
	}
	delete(ps.sending, id)
	if ids := ps.byDelivery[h.a.DeliveryID]; ids != nil {
		delete(ids, id)
		if len(ids) == 0 {
			delete(ps.byDelivery, h.a.DeliveryID)
		}
	}
	if asInterrupted {
		if !b.pending() {
			b.started = time.Now()
		}
		b.attempts = append(b.attempts, interrupted(h.a))
		if h.offset < ps.checkBelow {
			b.check = true // a previous owner may have written it too
		}
		s.mInterrupted.Add(context.Background(), 1)
	}
}

// route takes one decoded row of partition p at offset off into b.
func (s *Sink) route(b *batch, p int32, off int64, a audit.Attempt, now time.Time) {
	ps := s.part(p)
	s.resolve(b, ps, a.AttemptID, false)
	if a.DeliveryID != "" {
		for id := range ps.byDelivery[a.DeliveryID] {
			s.resolve(b, ps, id, true) // a later row of its delivery: the attempt was cut short
		}
	}
	if a.Outcome == audit.Sending {
		expiry := a.AttemptedAt
		if now.After(expiry) {
			expiry = now
		}
		ps.sending[a.AttemptID] = &held{a: a, offset: off, expiry: expiry.Add(s.opts.InterruptGrace)}
		ids := ps.byDelivery[a.DeliveryID]
		if ids == nil {
			ids = map[string]bool{}
			ps.byDelivery[a.DeliveryID] = ids
		}
		ids[a.AttemptID] = true
		return
	}
	b.attempts = append(b.attempts, a)
}

// expire resolves as Interrupted every held Sending row whose grace has
// passed at now.
func (s *Sink) expire(b *batch, now time.Time) {
	for _, ps := range s.parts {
		for id, h := range ps.sending {
			if !now.Before(h.expiry) {
				s.resolve(b, ps, id, true)
			}
		}
	}
}

// nextExpiry returns when the earliest held Sending row expires (zero if
// none is held).
func (s *Sink) nextExpiry() time.Time {
	var next time.Time
	for _, ps := range s.parts {
		for _, h := range ps.sending {
			if next.IsZero() || h.expiry.Before(next) {
				next = h.expiry
			}
		}
	}
	return next
}

// commitOffsets sets b.offsets: per partition, the next offset to read, but
// no further than its oldest held Sending row, when that moves the commit.
func (s *Sink) commitOffsets(b *batch) {
	clear(b.offsets)
	for p, ps := range s.parts {
		if ps.read.Offset == 0 && ps.read.Epoch == 0 {
			continue // nothing read yet
		}
		to := ps.read
		for _, h := range ps.sending {
			if h.offset < to.Offset {
				to = kgo.EpochOffset{Epoch: -1, Offset: h.offset}
			}
		}
		if to.Offset > ps.committed {
			b.offsets[p] = to
		}
	}
}

// lastPerAttempt keeps, in order, only the last row of each AttemptID, so
// one insert never holds two rows of an attempt.
func lastPerAttempt(rows []audit.Attempt) []audit.Attempt {
	seen := make(map[string]bool, len(rows))
	keep := len(rows)
	for i := len(rows) - 1; i >= 0; i-- {
		if seen[rows[i].AttemptID] {
			continue
		}
		seen[rows[i].AttemptID] = true
		keep--
		rows[keep] = rows[i]
	}
	n := copy(rows, rows[keep:]) // to the front, so the batch's array holds no stale row
	clear(rows[n:])
	return rows[:n]
}

// Run creates the run's Kafka client, consumes until ctx is canceled, then
// flushes what it holds (bounded by ShutdownTimeout), leaves the group and
// closes the client. It returns nil after a cancellation, and an error only
// if the Kafka client was closed under it or another Run of s is running.
// Records not committed when Run returns are consumed again by the next run
// (of this Sink or another of the group). Run may be called again after it
// returned: each run starts from the group's committed offsets, not ready
// until its Prepare succeeds, with no partition state of the last run.
//
// Run's goroutine polls, decodes and seals batches; each sealed batch is a
// flight on a goroutine of its own (owned by Run, which waits for it before
// returning) that looks up its stored rows, waits for the flight before it,
// then inserts and commits (see [MaxBatches]).
func (s *Sink) Run(ctx context.Context) error {
	if !s.running.CompareAndSwap(false, true) {
		return errors.New("audit: Sink.Run called while another Run of the Sink is running")
	}
	defer s.running.Store(false)
	s.resetRun()
	client, err := kgo.NewClient(s.clientOpts()...)
	if err != nil {
		return fmt.Errorf("audit: sink Kafka client: %w", err)
	}
	s.client = client
	defer func() {
		client.CloseAllowingRebalance() // its revoke callbacks still reach s.forget
		s.client = nil
	}()
	if !s.prepare(ctx) {
		return nil
	}
	var wg sync.WaitGroup
	defer wg.Wait() // before the client closes: a flight commits with it
	b := newBatch()
	var flights []*flight // in seal order: each commits after the one before
	var free []*batch     // landed flights' batches, for reuse
	// land waits for the oldest flight and applies its commit; false means
	// Run's context ended before the flight was inserted.
	land := func() bool {
		f := flights[0]
		<-f.done
		if !f.ok {
			return false
		}
		flights = flights[1:]
		s.landed(f)
		f.b.reset()
		free = append(free, f.b)
		return true
	}
	launch := func() bool {
		if len(flights) == maxFlights && !land() {
			return false
		}
		f := &flight{b: b, done: make(chan struct{})}
		if n := len(flights); n > 0 {
			f.prev = flights[n-1]
		}
		s.seal(b)
		wg.Go(func() { s.fly(ctx, client, f) })
		flights = append(flights, f)
		next := newBatch()
		if n := len(free); n > 0 {
			next, free = free[n-1], free[:n-1]
		}
		next.rowBytes = b.rowBytes
		b = next
		return true
	}
	for {
		s.dropLost()
		for len(flights) > 0 && isDone(flights[0]) {
			if !land() {
				s.shutdown(ctx, client, flights, b)
				return nil
			}
		}
		if !b.pending() && len(flights) == 0 {
			// Nothing held: a poll that returned (even empty, at its
			// deadline) blocks rebalances until this.
			s.client.AllowRebalance()
		}
		if s.rebalanceWanted.Swap(false) && (b.pending() || len(flights) > 0) {
			// A rebalance waits for this member: finish what it holds now
			// rather than at the batch's size or interval.
			if b.pending() && !launch() {
				s.shutdown(ctx, client, flights, b)
				return nil
			}
			for len(flights) > 0 {
				if !land() {
					s.shutdown(ctx, client, flights, b)
					return nil
				}
			}
			s.client.AllowRebalance()
			continue
		}
		pollCtx, cancel := ctx, context.CancelFunc(func() {})
		var deadline time.Time
		if b.pending() {
			deadline = b.started.Add(s.opts.FlushInterval)
		} else if next := s.nextExpiry(); !next.IsZero() {
			deadline = next
		}
		if len(flights) > 0 {
			// Wake to land the flights (and let a rebalance in) when no
			// record comes.
			if d := time.Now().Add(s.opts.FlushInterval); deadline.IsZero() || d.Before(deadline) {
				deadline = d
			}
		}
		if !deadline.IsZero() {
			pollCtx, cancel = context.WithDeadline(ctx, deadline)
		}
		fetches := s.client.PollRecords(pollCtx, b.pollMax(s.opts))
		cancel()
		if fetches.IsClientClosed() {
			return errors.New("audit: sink Kafka client closed")
		}
		fetches.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				s.log.Warn("fetch error", "partition", p, "err", err)
			}
		})
		s.dropLost()
		s.add(b, fetches)
		s.expire(b, time.Now())
		if ctx.Err() != nil {
			s.shutdown(ctx, client, flights, b)
			return nil
		}
		if b.pending() && (b.full(s.opts) || time.Since(b.started) >= s.opts.FlushInterval) && !launch() {
			s.shutdown(ctx, client, flights, b)
			return nil
		}
	}
}

// maxFlights is how many sealed batches may be on their way to the store at
// once: one inserting and committing, one looking up its stored rows (and
// then waiting for the first).
const maxFlights = 2

// MaxBatches is the most batches a running sink holds: the one it fills
// from Kafka and [maxFlights] sealed ones on their way to the store, each
// up to Options.BatchBytes. So the sink's batches hold at most MaxBatches ×
// BatchBytes (a process that bounds its memory gives the sink its share
// divided by MaxBatches). The flights overlap the store's work with
// Kafka's: while one batch is inserted, the next is looked up and the one
// after is polled and decoded, and a batch commits only after every batch
// sealed before it (so a commit never passes a row not yet inserted).
const MaxBatches = maxFlights + 1

// flight is a sealed batch on its way to the store, on its own goroutine.
type flight struct {
	b    *batch
	prev *flight       // the flight sealed before, which commits first; nil if none was in flight
	done chan struct{} // closed when the flight ended
	// Set before done is closed:
	ok        bool // inserted, and its commit made (committed says if it succeeded)
	committed bool
}

func isDone(f *flight) bool {
	select {
	case <-f.done:
		return true
	default:
		return false
	}
}

// seal readies b for its flight: one row per AttemptID, and the offsets to
// commit once it is inserted (what was read by now, held back by the
// oldest held Sending row). Run's goroutine.
func (s *Sink) seal(b *batch) {
	b.attempts = lastPerAttempt(b.attempts)
	s.commitOffsets(b)
	b.noteMean()
}

// fly takes sealed flight f to the store: it looks up f's stored rows (when
// f.b.check is set) while the flight before inserts, then, once that one
// has committed, inserts and commits f. It gives up, with f.ok false,
// when ctx ends first or the flight before gave up.
func (s *Sink) fly(ctx context.Context, client *kgo.Client, f *flight) {
	defer close(f.done)
	if f.prev != nil && !isDone(f.prev) {
		// Overlap the look-up with the insert before; an error here is
		// retried (and logged) by deliver.
		_ = s.unstored(ctx, f.b)
		<-f.prev.done
	}
	if f.prev != nil && !f.prev.ok {
		return
	}
	f.ok, f.committed = s.deliver(ctx, client, f.b)
}

// landed applies flight f's commit to its partitions. Run's goroutine.
func (s *Sink) landed(f *flight) {
	if !f.committed {
		return
	}
	for p, o := range f.b.offsets {
		if ps := s.parts[p]; ps != nil && o.Offset > ps.committed {
			ps.committed = o.Offset
		}
	}
}

// resetRun resets the per-run state before a run creates its client (whose
// callbacks fill it): not ready, no partition owned, no row held.
func (s *Sink) resetRun() {
	s.setNotReady(errNotStarted)
	s.lagMu.Lock()
	s.ends = make(map[int32]int64)
	s.next = make(map[int32]int64)
	s.lost = nil
	s.lagMu.Unlock()
	s.parts = make(map[int32]*partition)
	s.rebalanceWanted.Store(false)
}

// prepare calls Options.Prepare until it succeeds (with the insert
// back-off) and reports true, or reports false when ctx ends first.
func (s *Sink) prepare(ctx context.Context) bool {
	if s.opts.Prepare == nil {
		s.setNotReady(nil)
		return true
	}
	backoff := s.opts.RetryBackoff
	for {
		err := s.opts.Prepare(ctx)
		if err == nil {
			s.setNotReady(nil)
			s.log.Info("store ready")
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		s.mPrepareErrors.Add(ctx, 1)
		s.setNotReady(fmt.Errorf("store not ready: %w", err))
		s.log.Warn("store not ready; reading nothing until it is", "backoff", backoff, "err", err)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
		backoff = min(2*backoff, s.opts.MaxRetryBackoff)
	}
}

// add decodes fetched records into b and notes the partitions' end offsets.
func (s *Sink) add(b *batch, fetches kgo.Fetches) {
	s.lagMu.Lock()
	fetches.EachPartition(func(p kgo.FetchTopicPartition) {
		end := p.LastStableOffset
		if end <= 0 {
			end = p.HighWatermark
		}
		if end > 0 {
			s.ends[p.Partition] = end
		}
		if _, ok := s.next[p.Partition]; !ok && len(p.Records) > 0 {
			s.next[p.Partition] = p.Records[0].Offset
		}
		if ps := s.part(p.Partition); ps.checkBelow < 0 && (len(p.Records) > 0 || end > 0) {
			ps.checkBelow = max(end, 0)
			if n := len(p.Records); n > 0 {
				ps.checkBelow = max(ps.checkBelow, p.Records[n-1].Offset+1)
			}
		}
	})
	s.lagMu.Unlock()
	now := time.Now()
	fetches.EachRecord(func(r *kgo.Record) {
		if !b.pending() {
			b.started = now
		}
		b.records++
		b.bytes += int64(len(r.Value)) + attemptSize
		ps := s.part(r.Partition)
		ps.read = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset + 1}
		if r.Offset < ps.checkBelow {
			b.check = true
		}
		var a audit.Attempt
		err := a.Unmarshal(r.Value)
		if err == nil {
			err = a.Validate()
		}
		if err != nil {
			s.mRecords.Add(context.Background(), 1, resultInvalid)
			s.log.Warn("skipping undecodable attempt record", "partition", r.Partition, "offset", r.Offset, "err", err)
			return
		}
		s.route(b, r.Partition, r.Offset, a, now)
	})
}

// deliver inserts sealed batch b (retrying until it succeeds or ctx ends),
// then commits its offsets with client. It reports whether b was inserted
// (false if ctx ended first) and whether its commit succeeded. Safe to call
// from a flight's goroutine: it touches only b, the store, the client and
// the lag state (under lagMu).
func (s *Sink) deliver(ctx context.Context, client *kgo.Client, b *batch) (inserted, committed bool) {
	backoff := s.opts.RetryBackoff
	for {
		err := s.unstored(ctx, b)
		if err == nil {
			err = s.insert(ctx, b.attempts)
		}
		if err == nil {
			break
		}
		b.check = true // the failed insert may have stored some or all rows
		if ctx.Err() != nil {
			return false, false
		}
		s.log.Warn("insert failed; retrying", "rows", len(b.attempts), "backoff", backoff, "err", err)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return false, false
		case <-t.C:
		}
		backoff = min(2*backoff, s.opts.MaxRetryBackoff)
	}
	return true, s.commit(ctx, client, b)
}

// unstored, when b.check is set and the store implements [audit.Unstored],
// drops from b the rows the store already holds, so that every row is
// inserted once and the store's views (which count rows) stay exact.
func (s *Sink) unstored(ctx context.Context, b *batch) error {
	u, ok := s.opts.Store.(audit.Unstored)
	if !b.check || !ok || len(b.attempts) == 0 {
		return nil
	}
	ictx, cancel := context.WithTimeout(ctx, s.opts.InsertTimeout)
	defer cancel()
	rows, err := u.Unstored(ictx, b.attempts)
	if err != nil {
		return fmt.Errorf("look up stored rows: %w", err)
	}
	if skipped := len(b.attempts) - len(rows); skipped > 0 {
		s.mRecords.Add(ctx, int64(skipped), resultStored)
	}
	b.attempts = rows
	b.check = false // until an insert fails
	return nil
}

func (s *Sink) insert(ctx context.Context, attempts []audit.Attempt) error {
	if len(attempts) == 0 {
		return nil
	}
	ictx, cancel := context.WithTimeout(ctx, s.opts.InsertTimeout)
	defer cancel()
	start := time.Now()
	err := s.opts.Store.Insert(ictx, attempts)
	s.mInsertDuration.Record(ctx, time.Since(start).Seconds())
	if err != nil {
		s.mInserts.Add(ctx, 1, resultError)
		if ctx.Err() == nil {
			s.setNotReady(fmt.Errorf("inserts failing: %w", err))
		}
		return err
	}
	s.setNotReady(nil)
	s.mInserts.Add(ctx, 1, resultOK)
	s.mRows.Record(ctx, int64(len(attempts)))
	s.mRecords.Add(ctx, int64(len(attempts)), resultInserted)
	return nil
}

// commit commits sealed batch b's offsets with client and reports whether
// the commit succeeded. A failed commit is logged and counted, not retried:
// the rows are in the store, and either a later commit covers the offsets
// or, if the partition moved, its new owner reads them again and the store
// drops the duplicates.
func (s *Sink) commit(ctx context.Context, client *kgo.Client, b *batch) bool {
	if len(b.offsets) == 0 {
		return true
	}
	// Not bounded by Run's context alone: a commit after a successful insert
	// is worth finishing during shutdown.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.ShutdownTimeout)
	defer cancel()
	offsets := map[string]map[int32]kgo.EpochOffset{s.opts.Topic: b.offsets}
	var cerr error
	client.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			cerr = err
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil && cerr == nil {
					cerr = fmt.Errorf("partition %d: %w", p.Partition, err)
				}
			}
		}
	})
	if cerr != nil {
		s.mCommitErrors.Add(ctx, 1)
		s.log.Warn("offset commit failed; the inserted records may be read again", "records", b.records, "err", cerr)
		return false
	}
	s.lagMu.Lock()
	for p, o := range b.offsets {
		if _, owned := s.ends[p]; owned && o.Offset > s.next[p] {
			s.next[p] = o.Offset
		}
	}
	s.lagMu.Unlock()
	return true
}

// shutdown, after Run's context ended, waits for the flights, takes to the
// store in order those that gave up, then b: all bounded by one
// ShutdownTimeout. It stops at the first batch it cannot insert (a later
// one must not commit past it): the records of that batch and the ones
// after are read again by the next run.
func (s *Sink) shutdown(ctx context.Context, client *kgo.Client, flights []*flight, b *batch) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.ShutdownTimeout)
	defer cancel()
	ok := true
	lost := 0
	for _, f := range flights {
		<-f.done
		fok := f.ok
		if !fok && ok {
			// Into a copy: the next flight's goroutine may still read f.ok.
			redo := &flight{b: f.b}
			redo.ok, redo.committed = s.deliver(sctx, client, f.b)
			f, fok = redo, redo.ok
		}
		if ok = ok && fok; ok {
			s.landed(f)
		} else {
			lost += f.b.records
		}
	}
	if b.pending() {
		if ok {
			s.seal(b)
			ok, _ = s.deliver(sctx, client, b)
		}
		if !ok {
			lost += b.records
		}
	}
	if !ok {
		s.log.Warn("shutdown: batches not inserted; their records will be read again", "records", lost)
	}
}
