package apitest

import (
	"context"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// FakeKafka starts a one-broker in-process Kafka (kfake) for t, closed when
// t ends, with topics (3 partitions each) and compacted topics (1
// partition, cleanup.policy=compact, like the API's tables), and returns
// its seed brokers.
func FakeKafka(t testing.TB, topics, compacted []string) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	for _, topic := range topics {
		if err := c.CreateTopic(topic, 3, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, topic := range compacted {
		if err := c.CreateTopic(topic, 1, map[string]string{"cleanup.policy": "compact"}); err != nil {
			t.Fatal(err)
		}
	}
	return c.ListenAddrs()
}

// RunAll runs each of runs (an endpoints view's or an API table's Run) in
// its own goroutine until t ends; t's cleanup cancels them and waits for
// every one to return.
func RunAll(t testing.TB, runs ...func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, run := range runs {
		wg.Add(1)
		go func() { defer wg.Done(); _ = run(ctx) }()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
}
