package stack

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// cleanupTimeout bounds each cleanup a helper registers (topic and group
// deletion, database drop).
const cleanupTimeout = 30 * time.Second

// prefixes memoizes TopicPrefix per test: map[testing.TB]string.
var prefixes sync.Map

// Client returns a franz-go client seeded with [Brokers] and then opts (later
// options override earlier ones), closed when the test ends. It fails the
// test if the options are invalid.
func Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	all := append([]kgo.Opt{kgo.SeedBrokers(Brokers(t)...)}, opts...)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		t.Fatalf("stack: kgo.NewClient: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Admin returns a kadm client over a fresh [Client], closed when the test ends.
func Admin(t testing.TB) *kadm.Client {
	t.Helper()
	return kadm.NewClient(Client(t))
}

// TopicPrefix returns the test's own topic prefix, "t" + 8 random hex digits
// + ".", e.g. "t3fa9c1d0.". Every call in one test returns the same prefix.
// When the test ends, every topic and every consumer group whose name starts
// with the prefix is deleted, so tests should name their groups with it too.
// A topic that cannot be deleted fails the test; a group that cannot be
// (e.g. still has members) is only logged.
func TopicPrefix(t testing.TB) string {
	t.Helper()
	if p, ok := prefixes.Load(t); ok {
		return p.(string)
	}
	seeds := Brokers(t)
	prefix := "t" + randomID(4) + "."
	if p, loaded := prefixes.LoadOrStore(t, prefix); loaded {
		return p.(string)
	}
	t.Cleanup(func() {
		prefixes.Delete(t)
		deletePrefixed(t, seeds, prefix)
	})
	return prefix
}

func deletePrefixed(t testing.TB, seeds []string, prefix string) {
	t.Helper()
	// t.Context() is already canceled when cleanups run.
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Errorf("stack: cleanup of %s*: %v", prefix, err)
		return
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	topics, err := adm.ListTopics(ctx)
	if err != nil {
		t.Errorf("stack: cleanup of %s*: listing topics: %v", prefix, err)
		return
	}
	var doomed []string
	for _, name := range topics.Names() {
		if strings.HasPrefix(name, prefix) {
			doomed = append(doomed, name)
		}
	}
	if len(doomed) > 0 {
		resps, err := adm.DeleteTopics(ctx, doomed...)
		if err == nil {
			err = resps.Error()
		}
		if err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
			t.Errorf("stack: cleanup of %s*: deleting topics %v: %v", prefix, doomed, err)
		}
	}

	groups, err := adm.ListGroups(ctx)
	if err != nil {
		t.Logf("stack: cleanup of %s*: listing groups: %v", prefix, err)
		return
	}
	var doomedGroups []string
	for _, g := range groups.Groups() {
		if strings.HasPrefix(g, prefix) {
			doomedGroups = append(doomedGroups, g)
		}
	}
	if len(doomedGroups) == 0 {
		return
	}
	resps, err := adm.DeleteGroups(ctx, doomedGroups...)
	if err != nil {
		t.Logf("stack: cleanup of %s*: deleting groups: %v", prefix, err)
		return
	}
	for g, r := range resps {
		if r.Err != nil && !errors.Is(r.Err, kerr.GroupIDNotFound) {
			t.Logf("stack: cleanup of %s*: deleting group %s: %v", prefix, g, r.Err)
		}
	}
}

// ClusterID returns the cluster ID that the test Kafka reports in its
// metadata. Compare it with [ExpectedClusterID] to prove that the broker is
// the one the harness meant (and not, say, an in-process fake).
func ClusterID(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	md, err := Admin(t).BrokerMetadata(ctx)
	if err != nil {
		t.Fatalf("stack: broker metadata: %v", err)
	}
	return md.Cluster
}

// ExpectedClusterID returns the cluster ID the test Kafka should report:
// HOOKRELAY_CLUSTER_ID when set; else, for a container this package started,
// that container's; else the cluster.id in the local stack's
// kafka/data/meta.properties under HOOKRELAY_STACK_DIR (default: .local at
// the repository root, found by walking up from the working directory to
// the go.mod of github.com/hookrelay/hookrelay), or in
// kafka/node-1/data/meta.properties when HOOKRELAY_KAFKA_NODES is above 1
// (`make up KAFKA_NODES=3`). It fails the test when none of these gives one.
func ExpectedClusterID(t testing.TB) string {
	t.Helper()
	if id := strings.TrimSpace(os.Getenv(EnvClusterID)); id != "" {
		return id
	}
	Brokers(t) // starts the container, if that is where Kafka comes from
	containersMu.Lock()
	id := kafkaContainerClusterID
	containersMu.Unlock()
	if id != "" {
		return id
	}
	dir, err := StackDir()
	if err != nil {
		t.Fatalf("stack: expected cluster ID: %v (or set %s)", err, EnvClusterID)
	}
	meta := filepath.Join(dir, "kafka", "data", "meta.properties")
	if n := os.Getenv("HOOKRELAY_KAFKA_NODES"); n != "" && n != "1" {
		meta = filepath.Join(dir, "kafka", "node-1", "data", "meta.properties")
	}
	id, err = readProperty(meta, "cluster.id")
	if err != nil {
		t.Fatalf("stack: expected cluster ID: %v (run `make up`, or set %s)", err, EnvClusterID)
	}
	return id
}

// StackDir returns the local stack's state folder: HOOKRELAY_STACK_DIR when
// set, else .local at the repository root. It does not check that the
// folder exists.
func StackDir() (string, error) {
	if d := os.Getenv(EnvStackDir); d != "" {
		return d, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(strings.TrimSpace(string(b)), "module github.com/hookrelay/hookrelay\n") {
			return filepath.Join(dir, ".local"), nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("no go.mod of github.com/hookrelay/hookrelay above %s; set %s", wd, EnvStackDir)
		}
	}
}

// readProperty returns the value of key in a Java properties file of
// key=value lines.
func readProperty(path, key string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("%s: no %s", path, key)
}
