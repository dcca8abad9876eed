package pipeline

import (
	"bytes"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/hookrelay/hookrelay/pipeline/delivery"
	"github.com/hookrelay/hookrelay/retrytiers"
)

// Relay defaults.
const (
	// DefaultFetchMaxWait is the relay's fetch long-poll: 250 ms. A resumed
	// partition waits for the fetch already in flight to its broker; with
	// franz-go's default of 5 s that made re-emits up to 4.5 s late.
	DefaultFetchMaxWait = 250 * time.Millisecond
	// DefaultPrefetch is how long before the newest buffered record of a
	// partition is ready the relay resumes fetching that partition: 1 s.
	DefaultPrefetch = time.Second
)

// Values of the "to" attribute of the relay's record counter.
const (
	relayToTier   = "tier"
	relayToTarget = "target"
	relayToDLQ    = "dlq"
)

// RelayOptions configures a [Relay]. The composition root (cmd/) fills it;
// the relay reads no flags or environment.
type RelayOptions struct {
	// Brokers are the Kafka seed brokers, "host:port". Required.
	Brokers []string
	// KafkaOptions are extra franz-go client options of the deployment:
	// TLS, SASL, client ID, static member ID, session timeout. Optional.
	// The relay appends its own options after these, so the following are
	// always the relay's: ConsumerGroup, ConsumeTopics, TransactionalID,
	// TransactionTimeout, FetchIsolationLevel (read_committed),
	// FetchMaxWait, ConsumeResetOffset (start), BlockRebalanceOnPoll and
	// the partition callbacks.
	KafkaOptions []kgo.Opt
	// Group is the consumer group shared by every relay instance, e.g.
	// "hookrelay.retry-relay". Required.
	Group string
	// TransactionalID is this instance's Kafka transactional ID. Required.
	// It must be stable across restarts of the instance (so that a restart
	// fences the previous incarnation's open transaction at once) and
	// unique among live instances (two live relays with one ID fence each
	// other in turn).
	TransactionalID string
	// Tiers are the tier topics to consume and to hop through, as built by
	// [retrytiers.TiersFor]. Required.
	Tiers retrytiers.Tiers
	// TargetTopic receives records that are due, or due sooner than the
	// smallest tier: the deliveries topic. Required.
	TargetTopic string
	// Target, when set, names the target topic per record instead of
	// TargetTopic: the newest deliveries generation
	// ([Generations.DeliveriesTopic]). Optional.
	Target func() string
	// DLQTopic receives records whose headers cannot be parsed, unchanged
	// but for a [delivery.HeaderReason] header. Required.
	DLQTopic string
	// TransactionTimeout is the Kafka transaction timeout. Optional;
	// 0 means [DefaultTransactionTimeout].
	TransactionTimeout time.Duration
	// FetchMaxWait is the fetch long-poll. Optional; 0 means
	// [DefaultFetchMaxWait].
	FetchMaxWait time.Duration
	// Prefetch is how long before the newest buffered record of a partition
	// is ready the partition resumes fetching, so that the records after
	// it are already in memory when they fall due. Optional; 0 means
	// [DefaultPrefetch].
	Prefetch time.Duration
	// Meter receives the relay's metrics. Optional; nil means no metrics.
	Meter metric.Meter
	// Logger receives the relay's logs. Optional. Default slog.Default().
	Logger *slog.Logger
	// Now is the relay's clock: it is compared with record append times and
	// stamps the records the relay produces (as CreateTime; tier topics
	// replace it with their append time). Optional; nil means time.Now.
	// Tests pass a shifted clock to make long tiers due.
	Now func() time.Time
}

// Relay moves records through the tier topics: it consumes every tier topic
// in one consumer group, and when a record is ready (its append time plus
// its tier's delay) it produces the record, same key, value and headers, to
// the next tier chosen by [retrytiers.Tiers.Next] for the time left until [delivery.Meta].DueAt,
// or to the target topic when less than the smallest tier is left (the
// dispatcher holds that remainder). Records whose headers do not parse go to
// the DLQ topic with a reason. Nothing is dropped and no record blocks
// another partition.
//
// # No forks
//
// Every hop is one Kafka transaction holding the produced records and the
// consumer offsets past the records they came from (franz-go's
// GroupTransactSession). A crash before the commit leaves neither: the
// restarted instance's transactional ID fences and aborts the open
// transaction, and the group resumes from the last committed offsets. So at
// any time each delivery has exactly one live (committed, unconsumed) record.
// Readers of the tier and target topics must read with read_committed.
//
// # Pausing and buffering
//
// The relay never sleeps in a handler. Records fetched from a partition
// are kept in an in-memory FIFO per partition until they are ready; the
// committed offset of a partition is always that of its oldest buffered
// record, so buffered records are re-read, not lost, after a crash,
// rebalance or aborted transaction (which drops every buffer, because
// franz-go rewinds to the committed offsets). A partition is paused
// (PauseFetchPartitions) while the newest record in its buffer is more than
// Prefetch from ready, and resumed when that is no longer so or the buffer
// drains, so a buffer holds at most the records that fall due within
// Prefetch plus one fetch response. One timer, the deadline of the poll,
// serves every partition through a heap of their next ready times. A
// partition newly assigned (after a rebalance or restart) starts with no
// state and is evaluated afresh from its committed offset. A rebalance that
// revokes partitions from this member makes its next transaction abort
// (franz-go's session aborts after any revoke), so the member re-reads its
// buffers once per such rebalance; while the group rebalances, due records
// wait for it.
//
// Readiness is judged by the relay's clock against the broker's append
// time, so the two must agree (NTP); a tier topic with CreateTime instead of
// LogAppendTime still never relays early, but a record may wait behind a
// later-due head.
//
// # Metrics
//
//   - hookrelay.retry.relay.records{tier, to=tier|target|dlq}: records relayed.
//   - hookrelay.retry.relay.lag{tier} (s): commit time minus ready time,
//     per hop.
//   - hookrelay.retry.relay.lateness (s): commit time minus DueAt for
//     records released to the target topic, 0 when the dispatcher still
//     holds a remainder.
//   - hookrelay.retry.relay.aborts: transactions aborted (their work is
//     redone).
//   - hookrelay.retry.relay.buffered, hookrelay.retry.relay.paused_partitions.
type Relay struct {
	o   RelayOptions
	log *slog.Logger
	now func() time.Time
	m   relayMetrics

	// mu guards events, pollCancel and kicked, the only state the
	// partition callbacks (franz-go's group goroutine) touch.
	mu         sync.Mutex
	events     []map[string][]int32 // assigned, revoked or lost partitions, in order
	pollCancel context.CancelFunc
	kicked     bool

	// Owned by Run.
	parts map[topicPartition]*relayPart
	wake  wakeHeap

	buffered atomic.Int64
	paused   atomic.Int64

	// crashBeforeEnd, set by tests, is called after producing and before
	// ending a transaction; returning true makes Run return
	// errSimulatedCrash at once, leaving the transaction open.
	crashBeforeEnd func() bool
}

type relayMetrics struct {
	records  metric.Int64Counter
	lag      metric.Float64Histogram
	lateness metric.Float64Histogram
	aborts   metric.Int64Counter
}

// NewRelay validates o and returns a relay; it does not connect and starts
// nothing. Errors name the offending field.
func NewRelay(o RelayOptions) (*Relay, error) {
	switch {
	case len(o.Brokers) == 0:
		return nil, errors.New("pipeline: RelayOptions.Brokers is required")
	case o.Group == "":
		return nil, errors.New("pipeline: RelayOptions.Group is required")
	case o.TransactionalID == "":
		return nil, errors.New("pipeline: RelayOptions.TransactionalID is required")
	case o.TargetTopic == "":
		return nil, errors.New("pipeline: RelayOptions.TargetTopic is required")
	case o.DLQTopic == "":
		return nil, errors.New("pipeline: RelayOptions.DLQTopic is required")
	case o.TransactionTimeout < 0:
		return nil, errors.New("pipeline: RelayOptions.TransactionTimeout is negative")
	case o.FetchMaxWait < 0:
		return nil, errors.New("pipeline: RelayOptions.FetchMaxWait is negative")
	case o.Prefetch < 0:
		return nil, errors.New("pipeline: RelayOptions.Prefetch is negative")
	}
	if err := o.Tiers.Validate(); err != nil {
		return nil, fmt.Errorf("pipeline: RelayOptions.Tiers: %w", err)
	}
	for _, t := range o.Tiers {
		if t.Topic == o.TargetTopic || t.Topic == o.DLQTopic {
			return nil, fmt.Errorf("pipeline: RelayOptions.Tiers: topic %q is also the target or DLQ topic", t.Topic)
		}
	}
	if o.TransactionTimeout == 0 {
		o.TransactionTimeout = DefaultTransactionTimeout
	}
	if o.FetchMaxWait == 0 {
		o.FetchMaxWait = DefaultFetchMaxWait
	}
	if o.Prefetch == 0 {
		o.Prefetch = DefaultPrefetch
	}
	r := &Relay{o: o, log: o.Logger, now: o.Now}
	if r.log == nil {
		r.log = slog.Default()
	}
	if r.now == nil {
		r.now = time.Now
	}
	if err := kgo.ValidateOpts(r.clientOpts()...); err != nil {
		return nil, fmt.Errorf("pipeline: RelayOptions.KafkaOptions: %w", err)
	}
	meter := o.Meter
	if meter == nil {
		meter = noop.NewMeterProvider().Meter("hookrelay")
	}
	// Instrument creation fails only on invalid names, which are constants
	// here; the instrument returned is then a no-op, never nil.
	r.m.records, _ = meter.Int64Counter("hookrelay.retry.relay.records",
		metric.WithDescription("Records moved by the tier relay, by source tier and destination (tier, target, dlq)."))
	buckets := metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
	r.m.lag, _ = meter.Float64Histogram("hookrelay.retry.relay.lag", metric.WithUnit("s"), buckets,
		metric.WithDescription("Per hop: commit time of the relayed record minus its ready time (append time plus tier delay)."))
	r.m.lateness, _ = meter.Float64Histogram("hookrelay.retry.relay.lateness", metric.WithUnit("s"), buckets,
		metric.WithDescription("Records released to the deliveries topic: commit time minus due time, 0 when a remainder is left for the dispatcher."))
	r.m.aborts, _ = meter.Int64Counter("hookrelay.retry.relay.aborts",
		metric.WithDescription("Relay transactions aborted; their records are re-read and relayed again."))
	_, _ = meter.Int64ObservableGauge("hookrelay.retry.relay.buffered",
		metric.WithDescription("Records fetched from tier topics and held in memory until ready."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(r.buffered.Load())
			return nil
		}))
	_, _ = meter.Int64ObservableGauge("hookrelay.retry.relay.paused_partitions",
		metric.WithDescription("retrytiers.Tier partitions paused because their buffered records are not yet due."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(r.paused.Load())
			return nil
		}))
	return r, nil
}

// Run relays until ctx is done, then leaves the group and returns nil. It
// returns an error when the client cannot be created or a transaction
// cannot be ended (franz-go reports no retryable error there); the caller
// may then run a new Relay with the same options, whose transactional ID
// fences whatever the failed one left open. Each Run creates its own session
// and closes it before it returns, so Run may be called again after it
// returned (not concurrently), e.g. by [Supervise]; it owns the only
// goroutine that polls, produces and ends transactions.
func (r *Relay) Run(ctx context.Context) error {
	sess, err := newStageSession("relay", r.clientOpts())
	if err != nil {
		return err
	}
	defer sess.Close()
	// Partition changes of a previous run's session are void.
	r.mu.Lock()
	r.events, r.kicked = nil, false
	r.mu.Unlock()
	// Fence a predecessor's open transaction now, not at the first produce.
	if err := Fence(ctx, sess.Client()); err != nil && ctx.Err() == nil {
		r.log.Warn("retry relay: not fenced at start; fenced at the first transaction instead", "err", err)
	}
	txn := &transactor{sess: sess, stage: "retry-relay", timeout: txnBound(r.o.TransactionTimeout), log: r.log,
		aborts: r.m.aborts, beforeEnd: r.crashBeforeEnd}
	r.parts = make(map[topicPartition]*relayPart)
	r.wake = nil
	defer func() {
		r.buffered.Store(0)
		r.paused.Store(0)
	}()

	for {
		if ctx.Err() != nil {
			return nil
		}
		pollCtx, cancel := r.pollContext(ctx)
		r.mu.Lock()
		r.pollCancel = cancel
		if len(r.events) > 0 || r.kicked {
			cancel() // callbacks ran since the last poll: apply them now
		}
		r.kicked = false
		r.mu.Unlock()

		fetches := sess.PollFetches(pollCtx)

		r.mu.Lock()
		r.pollCancel = nil
		events := r.events
		r.events = nil
		r.mu.Unlock()
		cancel()

		if fetches.IsClientClosed() {
			return nil
		}
		fetches.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				r.log.Warn("retry relay: fetch error", "topic", topic, "partition", p, "err", err)
			}
		})
		err := r.step(ctx, txn, fetches, events)
		sess.AllowRebalance()
		if err != nil {
			return err
		}
	}
}

// clientOpts are the options of Run's session: the seeds, KafkaOptions, then
// the relay's own.
func (r *Relay) clientOpts() []kgo.Opt {
	opts := append([]kgo.Opt{kgo.SeedBrokers(r.o.Brokers...)}, r.o.KafkaOptions...)
	return append(opts,
		kgo.ConsumerGroup(r.o.Group),
		kgo.ConsumeTopics(r.o.Tiers.Topics()...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.TransactionalID(r.o.TransactionalID),
		kgo.TransactionTimeout(r.o.TransactionTimeout),
		offsetsAfterAddOffsets(),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(r.o.FetchMaxWait),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(r.onPartitions),
		kgo.OnPartitionsRevoked(r.onPartitions),
		kgo.OnPartitionsLost(r.onPartitions),
	)
}

// pollContext returns the context of the next poll: done at the earliest
// wake-up of a partition, or with ctx.
func (r *Relay) pollContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if len(r.wake) == 0 {
		return context.WithCancel(ctx)
	}
	wait := r.wake[0].wakeAt.Sub(r.now())
	return context.WithDeadline(ctx, time.Now().Add(wait))
}

// kick makes Run's current poll return at once (tests, after moving the
// clock).
func (r *Relay) kick() {
	r.mu.Lock()
	r.kicked = true
	if r.pollCancel != nil {
		r.pollCancel()
	}
	r.mu.Unlock()
}

// onPartitions is the assigned, revoked and lost callback. With
// BlockRebalanceOnPoll it never runs while Run processes a poll; it queues
// the change for Run and wakes Run's poll.
func (r *Relay) onPartitions(_ context.Context, _ *kgo.Client, tps map[string][]int32) {
	if len(tps) == 0 {
		return
	}
	r.mu.Lock()
	r.events = append(r.events, tps)
	if r.pollCancel != nil {
		r.pollCancel()
	}
	r.mu.Unlock()
	r.log.Info("retry relay: partitions changed hands", "partitions", tps)
}

// step processes one poll: partition changes, new records, due records, one
// transaction, then pauses and wake-ups.
func (r *Relay) step(ctx context.Context, txn *transactor, fetches kgo.Fetches, events []map[string][]int32) error {
	cl := txn.sess.Client()
	for _, tps := range events {
		// Assigned: start afresh. Revoked or lost: forget. Either way the
		// client must not keep a pause of ours on the partition.
		resume := make(map[string][]int32)
		for topic, ps := range tps {
			for _, p := range ps {
				r.drop(topicPartition{topic, p})
				resume[topic] = append(resume[topic], p)
			}
		}
		cl.ResumeFetchPartitions(resume)
	}

	now := r.now()
	var touched []*relayPart
	touch := func(st *relayPart) {
		if !st.touched {
			st.touched = true
			touched = append(touched, st)
		}
	}
	fetches.EachPartition(func(p kgo.FetchTopicPartition) {
		if len(p.Records) == 0 {
			return
		}
		st := r.state(p.Topic, p.Partition)
		for _, rec := range p.Records {
			if rec.Offset < st.next {
				continue // already buffered or relayed; cannot happen without a rewind, which drops state
			}
			// A copy: a fetched record's slices point into its whole
			// decompressed batch, which a buffered record would otherwise
			// keep alive for as long as it waits.
			st.buf = append(st.buf, detach(rec))
			st.next = rec.Offset + 1
			r.buffered.Add(1)
		}
		touch(st)
	})
	for len(r.wake) > 0 && !r.wake[0].wakeAt.After(now) {
		touch(heap.Pop(&r.wake).(*relayPart))
	}

	var hops []hop
	for _, st := range touched {
		for len(st.buf) > 0 && !st.readyAt(st.buf[0]).After(now) {
			hops = append(hops, r.route(st, st.buf[0], now))
			st.buf[0] = nil
			st.buf = st.buf[1:]
			r.buffered.Add(-1)
		}
		if len(st.buf) == 0 {
			st.buf = nil
		}
	}

	if len(hops) > 0 {
		committed, err := r.transact(ctx, txn, hops)
		if err != nil {
			return err
		}
		if !committed {
			// franz-go rewound every partition to its committed offset:
			// drop all state and let the records be fetched again, after
			// the transactor's back-off.
			r.reset(cl)
			select {
			case <-ctx.Done():
			case <-time.After(txn.backoff()):
			}
			return nil
		}
		at := r.now()
		for _, h := range hops {
			attrs := metric.WithAttributes(attribute.String("tier", h.from.Topic), attribute.String("to", h.kind))
			r.m.records.Add(ctx, 1, attrs)
			r.m.lag.Record(ctx, at.Sub(h.readyAt).Seconds(), metric.WithAttributes(attribute.String("tier", h.from.Topic)))
			if h.kind == relayToTarget && !h.dueAt.IsZero() {
				r.m.lateness.Record(ctx, max(at.Sub(h.dueAt), 0).Seconds())
			}
		}
	}

	pause := make(map[string][]int32)
	resume := make(map[string][]int32)
	for _, st := range touched {
		st.touched = false
		r.schedule(st, now, pause, resume)
	}
	if len(pause) > 0 {
		cl.PauseFetchPartitions(pause)
	}
	if len(resume) > 0 {
		cl.ResumeFetchPartitions(resume)
	}
	return nil
}

// hop is one record to relay.
type hop struct {
	from    retrytiers.Tier
	out     *kgo.Record
	kind    string
	readyAt time.Time
	dueAt   time.Time
}

// route decides where a ready record goes.
func (r *Relay) route(st *relayPart, rec *kgo.Record, now time.Time) hop {
	h := hop{from: st.tier, readyAt: st.readyAt(rec)}
	m, err := delivery.ParseMeta(rec.Headers)
	if err != nil {
		reason := fmt.Sprintf("malformed headers in %s/%d@%d: %v", rec.Topic, rec.Partition, rec.Offset, err)
		hs := make([]kgo.RecordHeader, 0, len(rec.Headers)+1)
		for _, hd := range rec.Headers {
			if hd.Key != delivery.HeaderReason {
				hs = append(hs, hd)
			}
		}
		hs = append(hs, kgo.RecordHeader{Key: delivery.HeaderReason, Value: []byte(reason)})
		h.kind = relayToDLQ
		h.out = &kgo.Record{Topic: r.o.DLQTopic, Key: rec.Key, Value: rec.Value, Headers: hs, Timestamp: now}
		r.log.Error("retry relay: record sent to the DLQ", "reason", reason)
		return h
	}
	h.dueAt = m.DueAt
	topic, kind := r.o.TargetTopic, relayToTarget
	if r.o.Target != nil {
		topic = r.o.Target()
	}
	if next, ok := r.o.Tiers.Next(m.DueAt.Sub(now)); ok {
		topic, kind = next.Topic, relayToTier
	}
	h.kind = kind
	// Timestamp is a CreateTime for the target topic; tier topics replace
	// it with their append time (LogAppendTime).
	h.out = &kgo.Record{Topic: topic, Key: rec.Key, Value: rec.Value, Headers: rec.Headers, Timestamp: now}
	return h
}

// transact produces hops and commits them with the offsets past them in one
// transaction. It reports whether the transaction committed; an error is
// fatal for this client.
func (r *Relay) transact(ctx context.Context, txn *transactor, hops []hop) (bool, error) {
	recs := make([]*kgo.Record, len(hops))
	for i, h := range hops {
		recs[i] = h.out
	}
	res, err := txn.transact(ctx, recs, r.commitBufferHeads)
	return res.Committed, err
}

func (r *Relay) commitBufferHeads(req *kmsg.TxnOffsetCommitRequest) error {
	for i := range req.Topics {
		t := &req.Topics[i]
		for j := range t.Partitions {
			p := &t.Partitions[j]
			if st := r.parts[topicPartition{t.Topic, p.Partition}]; st != nil && len(st.buf) > 0 {
				p.Offset = st.buf[0].Offset
				p.LeaderEpoch = st.buf[0].LeaderEpoch
			}
		}
	}
	return nil
}

// schedule sets a partition's pause and wake-up after a step.
func (r *Relay) schedule(st *relayPart, now time.Time, pause, resume map[string][]int32) {
	if st.dropped {
		return
	}
	wantPause := false
	var wakeAt time.Time
	if len(st.buf) > 0 {
		wakeAt = st.readyAt(st.buf[0])
		refill := st.readyAt(st.buf[len(st.buf)-1]).Add(-r.o.Prefetch)
		if refill.After(now) {
			wantPause = true
			if refill.Before(wakeAt) {
				wakeAt = refill
			}
		}
	}
	switch {
	case wantPause && !st.paused:
		pause[st.tp.topic] = append(pause[st.tp.topic], st.tp.partition)
		r.paused.Add(1)
	case !wantPause && st.paused:
		resume[st.tp.topic] = append(resume[st.tp.topic], st.tp.partition)
		r.paused.Add(-1)
	}
	st.paused = wantPause
	switch {
	case wakeAt.IsZero() && st.index >= 0:
		heap.Remove(&r.wake, st.index)
	case wakeAt.IsZero():
	case st.index >= 0:
		st.wakeAt = wakeAt
		heap.Fix(&r.wake, st.index)
	default:
		st.wakeAt = wakeAt
		heap.Push(&r.wake, st)
	}
}

// state returns the partition's state, creating it.
func (r *Relay) state(topic string, partition int32) *relayPart {
	tp := topicPartition{topic, partition}
	st := r.parts[tp]
	if st == nil {
		tier, _ := r.o.Tiers.ByTopic(topic)
		st = &relayPart{tp: tp, tier: tier, next: -1, index: -1}
		r.parts[tp] = st
	}
	return st
}

// drop forgets a partition's state; its pause, if any, is the caller's to
// lift.
func (r *Relay) drop(tp topicPartition) {
	st := r.parts[tp]
	if st == nil {
		return
	}
	if st.index >= 0 {
		heap.Remove(&r.wake, st.index)
	}
	if st.paused {
		r.paused.Add(-1)
	}
	r.buffered.Add(-int64(len(st.buf)))
	st.dropped = true
	delete(r.parts, tp)
}

// reset forgets every partition and lifts every pause.
func (r *Relay) reset(cl *kgo.Client) {
	resume := make(map[string][]int32)
	for tp, st := range r.parts {
		if st.paused {
			resume[tp.topic] = append(resume[tp.topic], tp.partition)
		}
		r.drop(tp)
	}
	if len(resume) > 0 {
		cl.ResumeFetchPartitions(resume)
	}
}

type topicPartition struct {
	topic     string
	partition int32
}

// relayPart is one assigned tier partition, owned by Run.
type relayPart struct {
	tp      topicPartition
	tier    retrytiers.Tier
	buf     []*kgo.Record // fetched, not yet relayed, in offset order
	next    int64         // offset after the last buffered record; -1 before any
	paused  bool          // paused in the client by us
	touched bool          // in the current step's work list
	dropped bool          // forgotten; ignore
	wakeAt  time.Time     // next ready or refill time, while in the heap
	index   int           // position in the heap, -1 when absent
}

// readyAt is when rec may leave this partition: its append time plus the
// tier delay.
func (st *relayPart) readyAt(rec *kgo.Record) time.Time {
	return rec.Timestamp.Add(st.tier.Delay)
}

// wakeHeap orders partitions by wakeAt (container/heap).
type wakeHeap []*relayPart

func (h wakeHeap) Len() int           { return len(h) }
func (h wakeHeap) Less(i, j int) bool { return h[i].wakeAt.Before(h[j].wakeAt) }
func (h wakeHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *wakeHeap) Push(x any) {
	st := x.(*relayPart)
	st.index = len(*h)
	*h = append(*h, st)
}
func (h *wakeHeap) Pop() any {
	old := *h
	st := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	st.index = -1
	return st
}

// detach returns a copy of r whose key, value and headers no longer share
// memory with the fetch that produced it.
func detach(r *kgo.Record) *kgo.Record {
	c := *r
	c.Key = bytes.Clone(r.Key)
	c.Value = bytes.Clone(r.Value)
	c.Headers = make([]kgo.RecordHeader, len(r.Headers))
	for i, h := range r.Headers {
		c.Headers[i] = kgo.RecordHeader{Key: strings.Clone(h.Key), Value: bytes.Clone(h.Value)}
	}
	return &c
}
