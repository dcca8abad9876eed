package main

import (
	"github.com/twmb/franz-go/pkg/kgo"
)

// minMemoryBudget is the smallest --memory-budget accepted: 16 MiB, so each
// consumer's fetch share is at least 1 MiB (one default-sized batch).
const minMemoryBudget = 16 << 20

// memoryShares is how one process's --memory-budget is split, in bytes:
// the dispatcher holds deliveries in its queues (half the budget: the
// backlog the issue-14 goal bounds) and buffers its transactions' records
// (parking, follow-ups; an eighth); every consumer stage buffers fetches
// (the dispatcher an eighth, fan-out, retry relay and audit sink a
// sixteenth each); the attempts producer a thirty-second, and the audit
// sink's insert batches the rest (a thirty-second: 6 MiB at the default
// budget over sink.MaxBatches = 3 batches, about 1,500 rows of 1 KiB each).
// The shares of stages this process does not run go to the audit sink's
// batches, when it runs the audit role (a sink-only process at the default
// budget holds 174 MiB, 58 MiB per batch, so its 50,000-row cap binds for
// rows up to ~900 bytes: fewer, larger inserts, fewer ClickHouse parts);
// no other stage gets more than its share: the budget is a bound, not a
// target.
type memoryShares struct {
	DispatchHeld, DispatchFetch, DispatchProduce, StageFetch, AttemptsProduce, AuditBatch int64
}

// newMemoryShares splits budget for a process running roles (as
// Config.Roles: "fanout", "dispatch", "retry", "audit", "api").
func newMemoryShares(budget int64, roles map[string]bool) memoryShares {
	m := memoryShares{
		DispatchHeld:    budget / 2,
		DispatchFetch:   budget / 8,
		DispatchProduce: budget / 8,
		StageFetch:      budget / 16,
		AttemptsProduce: budget / 32,
		AuditBatch:      budget / 32,
	}
	if !roles["dispatch"] {
		m.AuditBatch += m.DispatchHeld + m.DispatchFetch + m.DispatchProduce + m.AttemptsProduce
	}
	for _, r := range []string{"fanout", "retry"} {
		if !roles[r] {
			m.AuditBatch += m.StageFetch
		}
	}
	return m
}

// fetchOpts bound a consumer's fetch buffers to about n bytes: one fetch
// in flight per client (franz-go's default is unbounded), at most n per
// fetch response and 1 MiB (or n) per partition. Kafka still returns a
// batch larger than these when it is the first, so no record is stuck; the
// broker read cap leaves room for it.
func fetchOpts(n int64) []kgo.Opt {
	return []kgo.Opt{
		kgo.MaxConcurrentFetches(1),
		kgo.FetchMaxBytes(int32(n)),
		kgo.FetchMaxPartitionBytes(int32(min(n, 1<<20))),
		kgo.BrokerMaxReadBytes(int32(n + 8<<20)),
	}
}

// produceOpts bound a producer's buffered records to n bytes (at least
// four of the largest records, maxRecord bytes): Produce blocks until
// buffered records are acknowledged. Inside a transaction that cannot
// deadlock: the producer sends buffered records on its own (linger), and
// the stages produce from one goroutine that holds no lock a produce
// promise needs.
func produceOpts(n int64, maxRecord int) []kgo.Opt {
	return []kgo.Opt{kgo.MaxBufferedBytes(int(max(n, 4*int64(maxRecord))))}
}
