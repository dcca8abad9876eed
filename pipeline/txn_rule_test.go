package pipeline

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/retrytiers"
)

// TestStagesShareTheTransactionRule: every stage bounds one transaction
// (End included) by twice its Kafka transaction timeout, and a session its
// options cannot create is a fatal error (options do not change between
// runs, so a supervised restart cannot cure it). It failed before: the
// dispatcher bounded by 1× and returned the error unmarked (fan-out and
// relay: 2×, Fatal).
func TestStagesShareTheTransactionRule(t *testing.T) {
	topics := NewTopics("tr.")
	policy, err := NewRetryPolicy(retrytiers.DefaultSchedule(), topics, 0)
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDispatcher(DispatcherOptions{
		Brokers: []string{"127.0.0.1:1"}, Topics: topics, TransactionalID: "tr.dispatch",
		Endpoints: fakeEndpoints{}, Attempter: newFakeAttempter(), Attempts: &memAttempts{}, Policy: policy,
		TransactionTimeout: 3 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := d.newTransactor(nil).timeout; got != 6*time.Second {
		t.Errorf("dispatcher bounds a transaction by %v; want 2 × TransactionTimeout = 6s", got)
	}
	// An option the session refuses (direct partitions with a group).
	d.o.KafkaOptions = append(d.o.KafkaOptions, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"x": {0: kgo.NewOffset()}}))
	if err := d.Run(context.Background()); err == nil || !IsFatal(err) {
		t.Errorf("dispatcher Run with options its session refuses = %v; want a Fatal error", err)
	}
}
