package endpoints

// The View and Store tests of view_test.go against the real broker
// (e2e/stack: HOOKRELAY_BROKERS, or a container), each with its own topic
// prefix and compacted topics.

import (
	"os"
	"testing"

	"github.com/hookrelay/hookrelay/e2e/stack"
)

func TestMain(m *testing.M) { os.Exit(stack.Main(m)) }

func newKafkaEnv(t *testing.T, partitions int32) *env {
	t.Helper()
	prefix := stack.TopicPrefix(t)
	e := &env{seeds: stack.Brokers(t), endpoints: prefix + "endpoints", state: prefix + "endpoint-status"}
	compact := "compact"
	resp, err := stack.Admin(t).CreateTopics(ctxT(t), partitions, 1, map[string]*string{"cleanup.policy": &compact}, e.endpoints, e.state)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("create topics: %v", err)
	}
	e.raw = newRawClient(t, e.seeds)
	return e
}

func TestViewKafkaReadyAfterCatchUp(t *testing.T) {
	testReadyAfterCatchUp(t, newKafkaEnv(t, 3))
}

func TestViewKafkaStoreLifecycle(t *testing.T) {
	testStoreLifecycle(t, newKafkaEnv(t, 3))
}

func TestViewKafkaLiveAndMalformed(t *testing.T) {
	testLiveAndMalformed(t, newKafkaEnv(t, 3))
}
