package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/metric"
)

// errSimulatedCrash is returned by a transaction whose beforeEnd hook (set
// by tests) asks for a crash: nothing is ended, as if the process died.
var errSimulatedCrash = errors.New("pipeline: simulated crash before the end of a transaction")

// Transaction back-off after an abort: abortBackoffMin doubling per abort in
// a row, at most abortBackoffMax.
const (
	abortBackoffMin = 100 * time.Millisecond
	abortBackoffMax = 5 * time.Second
)

// The one transaction rule of every Kafka stage (fan-out, dispatcher,
// retry relay), stated here only:
//
//   - one transaction, End included, is bounded by txnBound of the stage's
//     Kafka transaction timeout T (its TransactionTimeout option): 2 × T.
//     The broker aborts a transaction left open T after it began; the
//     second T lets End learn that verdict instead of being cut short
//     (which leaves the session unusable, costing a restart);
//   - a session the stage's options cannot create ([newStageSession]) is a
//     [Fatal] error: the options do not change between runs, so a
//     supervised restart cannot cure it.
func txnBound(kafkaTimeout time.Duration) time.Duration { return 2 * kafkaTimeout }

// newStageSession creates the transactional group session of one run of
// stage ("fan-out", "dispatcher", "relay"); its error is [Fatal] (see
// txnBound for the rule).
func newStageSession(stage string, opts []kgo.Opt) (*kgo.GroupTransactSession, error) {
	sess, err := kgo.NewGroupTransactSession(opts...)
	if err != nil {
		return nil, Fatal(fmt.Errorf("pipeline: %s client: %w", stage, err))
	}
	return sess, nil
}

// abortBackoff is the wait before the next transaction after streak aborts
// in a row (streak ≥ 1): base doubled streak-1 times, at most
// abortBackoffMax. base ≤ 0 means abortBackoffMin.
func abortBackoff(base time.Duration, streak int) time.Duration {
	if base <= 0 {
		base = abortBackoffMin
	}
	return min(base<<min(max(streak-1, 0), 6), abortBackoffMax)
}

// transactor runs the one transaction shape of every Kafka stage (fan-out,
// dispatcher, retry relay): begin → produce → flush → commit the session's
// offsets → end, with the rules the review of the first round taught:
//
//   - every record is produced as a fresh copy (topic, partition, key,
//     value, headers, timestamp), because franz-go keeps state (context,
//     producer ID, sequence) in a produced record and one from an aborted
//     transaction must not be produced again;
//   - any produce error aborts: franz-go fails a refused record's promise
//     (e.g. too large) without failing the transaction, so committing would
//     move the offsets past records that were never written. The first
//     error aborts the records still buffered (kgo.AbortingFirstErrPromise);
//   - End is never cut short by the stage's context (cancelling it leaves
//     the client unusable): it runs under context.WithoutCancel, bounded by
//     timeout;
//   - after an abort franz-go has rewound the session to the last committed
//     offsets; the stage must drop or re-derive what it read since, and
//     resume the partitions it paused (a paused partition is never
//     re-fetched, so never proposed for commit again). [transactor.backoff]
//     then tells it how long to wait before the next try, so a record that
//     can never be produced costs a slow, visible loop (log and the
//     hookrelay.transactions.aborted metric), not a hot one.
//
// A transactor is driven by one stage loop: not safe for concurrent use.
type transactor struct {
	sess    *kgo.GroupTransactSession
	stage   string        // metric attribute and log prefix: "fanout", "dispatch", "retry-relay"
	timeout time.Duration // bounds one transaction (End included): txnBound of the stage's transaction timeout; > 0
	base    time.Duration // first back-off after an abort; 0 means abortBackoffMin
	log     *slog.Logger
	aborts  metric.Int64Counter // nil: not counted

	// beforeEnd, set by tests, runs after the flush and before End; true
	// simulates a crash there (transact returns errSimulatedCrash).
	beforeEnd func() bool

	streak int // aborted transactions in a row
}

// txnResult is what one call of [transactor.transact] did.
type txnResult struct {
	Committed  bool  // the records and the offsets are committed
	Produced   int   // records produced (before an abort, if any)
	ProduceErr error // the first produce error, when that caused the abort
}

// transact produces recs and commits the session's offsets in one
// transaction. rewrite, when non-nil, edits the offset commit before it is
// sent (kgo.PreTxnCommitFnContext): the dispatcher commits its lowest
// unfinished offset with metadata, the relay the head of its buffers.
//
// It returns Committed false, with a nil error, when the transaction was
// aborted: a produce failed, the group rebalanced since Begin, or the offset
// commit hit an abortable error; the session has then rewound and
// [transactor.backoff] says how long to wait. A non-nil error means the
// session is unusable (franz-go documents Begin's and End's errors as not
// retryable): the stage must close it and start a new one.
func (t *transactor) transact(ctx context.Context, recs []*kgo.Record, rewrite func(*kmsg.TxnOffsetCommitRequest) error) (txnResult, error) {
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.timeout)
	defer cancel()
	if err := t.sess.Begin(); err != nil {
		return txnResult{}, fmt.Errorf("pipeline: %s: begin transaction: %w", t.stage, err)
	}
	promise := kgo.AbortingFirstErrPromise(t.sess.Client())
	for _, r := range recs {
		fresh := &kgo.Record{Topic: r.Topic, Partition: r.Partition, Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp}
		t.sess.Produce(tctx, fresh, promise.Promise())
	}
	produceErr := promise.Err() // waits for every record: the flush
	if t.beforeEnd != nil && t.beforeEnd() {
		return txnResult{Produced: len(recs)}, errSimulatedCrash
	}
	try := kgo.TryCommit
	if produceErr != nil {
		try = kgo.TryAbort
	}
	endCtx := tctx
	if rewrite != nil {
		endCtx = kgo.PreTxnCommitFnContext(tctx, rewrite)
	}
	committed, err := t.sess.End(endCtx, try)
	if err != nil {
		return txnResult{Produced: len(recs), ProduceErr: produceErr}, fmt.Errorf("pipeline: %s: end transaction: %w", t.stage, err)
	}
	res := txnResult{Committed: committed, Produced: len(recs), ProduceErr: produceErr}
	if committed {
		t.streak = 0
		return res, nil
	}
	t.streak++
	if t.aborts != nil {
		t.aborts.Add(ctx, 1, metric.WithAttributes(attrStage(t.stage)))
	}
	t.log.Warn(t.stage+": transaction aborted; its work is redone", "records", len(recs),
		"aborts_in_a_row", t.streak, "produce_err", produceErr, "next_try_in", t.backoff())
	return res, nil
}

// backoff is how long to wait before the next transaction: zero after a
// commit, else [abortBackoff] of the aborts in a row.
func (t *transactor) backoff() time.Duration {
	if t.streak == 0 {
		return 0
	}
	return abortBackoff(t.base, t.streak)
}
