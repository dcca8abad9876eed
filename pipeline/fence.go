package pipeline

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// DefaultTransactionTimeout is the Kafka transaction timeout of the
// fan-out and dispatch stages (and the retry relay's): 10s. It is how long
// a transaction left open by a process that died can block read_committed
// readers of its partitions when no restart of the same instance fences it
// (a peer's death), plus up to the broker's
// transaction.abort.timed.out.transaction.cleanup.interval.ms (default 10s).
// A live transaction must end within it, or the broker aborts it and its
// work is redone: each of ours produces one poll's records and commits its
// offsets, well under a second on a healthy cluster. See "Recovery bounds"
// in docs/ARCHITECTURE.md.
const DefaultTransactionTimeout = 10 * time.Second

// Fence makes cl, a transactional client, the current owner of its
// transactional ID now, with InitProducerID: the broker aborts whatever
// transaction a previous incarnation with the same ID left open (after a
// kill -9) and fences that incarnation, so its pending records and offset
// commits stop blocking read_committed readers and stable offset fetches
// at once.
//
// franz-go initialises the producer ID lazily, at the first produce. A
// restarted stage that cannot consume (its group's offset fetch waits on
// the very transaction to be aborted) never produces, so without Fence it
// waited for the broker to time the transaction out. Call it at the start
// of a stage's Run, before its first poll. It blocks until the broker
// answers, ctx ends, or franz-go's retries give up; an error means the
// stage is fenced at its first transaction instead, as before.
func Fence(ctx context.Context, cl *kgo.Client) error {
	if _, _, err := cl.ProducerID(ctx); err != nil {
		return fmt.Errorf("pipeline: fence the previous incarnation (InitProducerID): %w", err)
	}
	return nil
}

// offsetsAfterAddOffsets makes a transactional session add its group to
// each transaction with AddOffsetsToTxn before TxnOffsetCommit, as before
// KIP-890 part 2, by capping TxnOffsetCommit at v4 (every other request
// keeps franz-go's latest stable version).
//
// Why: right after a transaction ends, the broker is still writing its
// markers, and a request that adds to the next transaction gets
// CONCURRENT_TRANSACTIONS. franz-go retries that error on AddOffsetsToTxn
// and on produces, but a TxnOffsetCommit v5+ (which adds the group
// implicitly) that gets it makes GroupTransactSession.End abort the whole
// transaction. A transaction that commits offsets without producing first
// (most dispatcher flushes: nothing to retry or dead-letter) started within
// milliseconds of the previous one was therefore aborted, and its
// partitions rewound and re-fetched, several times a second under load
// with no fault (issue 10, finding 5). The cost of the cap is one
// AddOffsetsToTxn round trip per transaction.
func offsetsAfterAddOffsets() kgo.Opt {
	v := kversion.Stable()
	v.SetMaxKeyVersion(int16(kmsg.TxnOffsetCommit), 4)
	return kgo.MaxVersions(v)
}
