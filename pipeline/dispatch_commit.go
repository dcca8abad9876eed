package pipeline

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// flush applies completions and, when anything is ready, commits the
// follow-up records and the offsets they retire in one transaction. It runs
// on the poll loop, between a poll and AllowRebalance, so the set of owned
// partitions cannot change under it (at shutdown too: shutdownFlush holds
// the callbacks off around each flush; d.mu guards the maps all the same).
//
// Its steps each have their file: gather (dispatch_gather.go), plan the
// commit (dispatch_followups.go), transact (here, through the stage's
// [transactor]), release after the commit or the abort
// (dispatch_release.go).
func (d *Dispatcher) flush(ctx context.Context) error {
	_, err := d.flushStep(ctx)
	return err
}

// flushState is what one flush left to do: its transaction aborted, or
// partitions with something to commit were left out because franz-go
// proposes nothing for them yet (rewound by an abort, not yet re-fetched).
type flushState struct {
	aborted bool
	waiting int
}

// flushStep is one flush (see flush), reporting what it left to do.
func (d *Dispatcher) flushStep(ctx context.Context) (flushState, error) {
	parts, last := d.gather()
	if d.now().Before(d.nextFlushAt) {
		return flushState{}, nil // backing off after aborted transactions
	}
	d.resumeDrained(parts)
	// What franz-go will propose to commit (everything polled, for the
	// partitions it owns) and which partitions it has commits for. Neither
	// changes before End: rebalances wait for AllowRebalance.
	cl := d.sess.Client()
	proposed := cl.UncommittedOffsets()[d.o.Topics.Deliveries]
	owned := cl.CommittedOffsets()[d.o.Topics.Deliveries]
	plan := planCommit(parts, last, proposed, owned, d.orphans)
	if len(plan.lost) > 0 {
		d.o.Logger.Warn("dispatch: partitions lost without a revoke callback; dropping them", "partitions", plan.lost)
		d.revoked(ctx, nil, map[string][]int32{d.o.Topics.Deliveries: plan.lost})
	}
	st := flushState{waiting: len(plan.waiting)}
	if !plan.due(last) {
		return st, nil
	}
	committed, err := d.transact(ctx, &plan)
	if err != nil {
		return st, err
	}
	if !committed {
		d.afterAbort(parts)
		st.aborted = true
		return st, nil
	}
	d.afterCommit(parts, &plan)
	return st, nil
}

// transact produces plan's follow-ups and commits its offsets in one
// transaction (the stage's [transactor]: fresh records, abort on any produce
// error, End bounded by TransactionTimeout). It reports whether it
// committed; an error means the session is unusable.
func (d *Dispatcher) transact(ctx context.Context, plan *commitPlan) (bool, error) {
	rows := len(d.attemptRows(plan.out)) > 0
	d.txn.beforeEnd = func() bool {
		if rows {
			faultPoint("crash-before-commit") // an attempt's outcome row is produced, not committed
		}
		return false
	}
	res, err := d.txn.transact(ctx, plan.out, func(req *kmsg.TxnOffsetCommitRequest) error {
		d.rewriteCommit(req, plan.commits)
		return nil
	})
	return res.Committed, err
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
