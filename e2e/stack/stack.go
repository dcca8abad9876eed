// Package stack gives integration and e2e tests a real Kafka and a real
// ClickHouse, and isolates each test inside them.
//
// # Where the services come from
//
// For each service, in this order (issue 2, point 6):
//
//  1. the address in an environment variable: HOOKRELAY_BROKERS, a comma
//     list of host:port seeds (e.g. "127.0.0.1:9092"), and
//     HOOKRELAY_CLICKHOUSE, a clickhouse-go DSN for the native protocol
//     (e.g. "clickhouse://127.0.0.1:9000/default"). `make test` sets both
//     from the local stack that `make up` starts (deploy/local/);
//  2. otherwise, when a Docker daemon answers, a container started with
//     testcontainers-go, once per test binary (see [Main] for its end);
//  3. otherwise the test fails (t.Fatal) with a message saying how to
//     provide the service.
//
// Under `go test -short`, a service whose variable is unset is not looked
// for: the test is skipped (t.Skip, naming the variable) and no container is
// ever started, so `go test -short ./...` passes on a machine with no stack
// and no Docker. A variable that is set is honoured under -short too (and a
// service it names that does not answer still fails the test). Outside
// -short a test is never skipped for want of a service: `make test` runs
// without -short, and deploy/local/testreport fails the run when an e2e
// test skips.
//
// The container path is compile-checked only on the development machines of
// this project, which have no Docker engine.
//
// # Isolation
//
// [TopicPrefix] gives each test its own topic (and consumer group) prefix and
// deletes what carries it when the test ends; [Database] gives each test its
// own ClickHouse database and drops it when the test ends.
//
// Every function here is safe for concurrent use by parallel tests.
package stack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/testcontainers/testcontainers-go"
	tcclickhouse "github.com/testcontainers/testcontainers-go/modules/clickhouse"
	tckafka "github.com/testcontainers/testcontainers-go/modules/kafka"
)

// Environment variables read by this package.
const (
	// EnvBrokers names the Kafka seed brokers, a comma-separated host:port
	// list such as "127.0.0.1:9092".
	EnvBrokers = "HOOKRELAY_BROKERS"
	// EnvClickHouse is a clickhouse-go v2 DSN for the native protocol, such
	// as "clickhouse://127.0.0.1:9000/default".
	EnvClickHouse = "HOOKRELAY_CLICKHOUSE"
	// EnvStackDir is the state folder of the local stack (default: .local
	// at the repository root); [ExpectedClusterID] reads the cluster ID
	// that deploy/local/up.sh formatted the broker with from it.
	EnvStackDir = "HOOKRELAY_STACK_DIR"
	// EnvClusterID, when set, is the Kafka cluster ID that
	// [ExpectedClusterID] returns, for a broker that is not the local stack
	// (e.g. an existing cluster named in HOOKRELAY_BROKERS).
	EnvClusterID = "HOOKRELAY_CLUSTER_ID"
)

// Images started by the testcontainers path.
const (
	// KafkaImage is the image of the Kafka container; the testcontainers
	// kafka module (v0.44.0) only drives confluent-local images.
	KafkaImage = "confluentinc/confluent-local:7.5.0"
	// ClickHouseImage is the image of the ClickHouse container.
	ClickHouseImage = "clickhouse/clickhouse-server:23.3.8.21-alpine"
)

// containerStartTimeout bounds the start of one container, image pull included.
const containerStartTimeout = 5 * time.Minute

// howTo is appended to every "no service" failure.
const howTo = "start the local stack with `make up` and set " + EnvBrokers + "=127.0.0.1:9092 " +
	EnvClickHouse + "=clickhouse://127.0.0.1:9000/default (`make test` does both), " +
	"or make a Docker daemon reachable for testcontainers-go"

// service is one lazily provided service, shared by every test of the binary.
type service struct {
	once sync.Once
	addr []string // Kafka seeds, or one ClickHouse DSN
	err  error
}

var (
	kafkaSvc      service
	clickhouseSvc service

	// containersMu guards containers and kafkaContainerClusterID.
	containersMu            sync.Mutex
	containers              []testcontainers.Container
	kafkaContainerClusterID string
)

// Brokers returns the seed brokers of the test Kafka, as host:port strings.
// It fails the test when no Kafka can be had (see the package doc for the
// order in which sources are tried).
func Brokers(t testing.TB) []string {
	t.Helper()
	skipShort(t, EnvBrokers, "Kafka")
	kafkaSvc.once.Do(func() { kafkaSvc.addr, kafkaSvc.err = provideKafka() })
	if kafkaSvc.err != nil {
		t.Fatalf("stack: no Kafka for this test: %v", kafkaSvc.err)
	}
	return append([]string(nil), kafkaSvc.addr...)
}

// ClickHouseDSN returns a clickhouse-go v2 DSN (native protocol) of the test
// ClickHouse, pointing at its default database. Tests should work in their
// own database instead: see [Database] and [DatabaseDSN]. It fails the test
// when no ClickHouse can be had.
func ClickHouseDSN(t testing.TB) string {
	t.Helper()
	skipShort(t, EnvClickHouse, "ClickHouse")
	clickhouseSvc.once.Do(func() {
		var dsn string
		dsn, clickhouseSvc.err = provideClickHouse()
		clickhouseSvc.addr = []string{dsn}
	})
	if clickhouseSvc.err != nil {
		t.Fatalf("stack: no ClickHouse for this test: %v", clickhouseSvc.err)
	}
	return clickhouseSvc.addr[0]
}

// skipShort skips the test under -short when env is unset: the service
// would otherwise come from a container (or fail the test).
func skipShort(t testing.TB, env, service string) {
	t.Helper()
	if _, set := os.LookupEnv(env); set || !testing.Short() {
		return
	}
	t.Skipf("stack: -short and %s unset: skipping a test that needs a real %s (run without -short, e.g. `make test`, to run it)", env, service)
}

// Main runs the tests of a package and then terminates the containers this
// package started, if any, returning m.Run's exit code. Use it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(stack.Main(m)) }
//
// A test binary without it leaves its containers to testcontainers' reaper
// (Ryuk), which removes them shortly after the process exits. With the
// environment variables set, no container is started and Main only runs m.
func Main(m *testing.M) int {
	code := m.Run()
	if err := terminateContainers(); err != nil {
		fmt.Fprintf(os.Stderr, "stack: terminating containers: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

func terminateContainers() error {
	containersMu.Lock()
	defer containersMu.Unlock()
	var errs []string
	for _, c := range containers {
		if err := testcontainers.TerminateContainer(c); err != nil {
			errs = append(errs, err.Error())
		}
	}
	containers = nil
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

func provideKafka() ([]string, error) {
	if v, ok := os.LookupEnv(EnvBrokers); ok {
		var seeds []string
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				seeds = append(seeds, s)
			}
		}
		if len(seeds) == 0 {
			return nil, fmt.Errorf("%s is set but names no broker (%q); %s", EnvBrokers, v, howTo)
		}
		if err := anyAnswers(seeds); err != nil {
			return nil, fmt.Errorf("%s=%s: %v; %s", EnvBrokers, v, err, howTo)
		}
		return seeds, nil
	}
	if err := dockerReachable(); err != nil {
		return nil, fmt.Errorf("%s is not set and no Docker daemon answers (%v); %s", EnvBrokers, err, howTo)
	}
	ctx, cancel := context.WithTimeout(context.Background(), containerStartTimeout)
	defer cancel()
	c, err := tckafka.Run(ctx, KafkaImage)
	if c != nil {
		track(c)
	}
	if err != nil {
		return nil, fmt.Errorf("starting Kafka container %s: %w", KafkaImage, err)
	}
	seeds, err := c.Brokers(ctx)
	if err != nil {
		return nil, fmt.Errorf("Kafka container %s: brokers: %w", KafkaImage, err)
	}
	containersMu.Lock()
	kafkaContainerClusterID = c.ClusterID
	containersMu.Unlock()
	return seeds, nil
}

func provideClickHouse() (string, error) {
	if v, ok := os.LookupEnv(EnvClickHouse); ok {
		v = strings.TrimSpace(v)
		if v == "" {
			return "", fmt.Errorf("%s is set but empty; %s", EnvClickHouse, howTo)
		}
		opts, err := clickhouse.ParseDSN(v)
		if err != nil {
			return "", fmt.Errorf("%s=%s: %w", EnvClickHouse, v, err)
		}
		if err := anyAnswers(opts.Addr); err != nil {
			return "", fmt.Errorf("%s=%s: %v; %s", EnvClickHouse, v, err, howTo)
		}
		return v, nil
	}
	if err := dockerReachable(); err != nil {
		return "", fmt.Errorf("%s is not set and no Docker daemon answers (%v); %s", EnvClickHouse, err, howTo)
	}
	ctx, cancel := context.WithTimeout(context.Background(), containerStartTimeout)
	defer cancel()
	c, err := tcclickhouse.Run(ctx, ClickHouseImage)
	if c != nil {
		track(c)
	}
	if err != nil {
		return "", fmt.Errorf("starting ClickHouse container %s: %w", ClickHouseImage, err)
	}
	dsn, err := c.ConnectionString(ctx)
	if err != nil {
		return "", fmt.Errorf("ClickHouse container %s: DSN: %w", ClickHouseImage, err)
	}
	return dsn, nil
}

func track(c testcontainers.Container) {
	containersMu.Lock()
	containers = append(containers, c)
	containersMu.Unlock()
}

// dialTimeout bounds the reachability check of a service named in the
// environment, so that a stack that is down fails tests at once instead of
// after client retries.
const dialTimeout = 3 * time.Second

// anyAnswers returns nil when at least one of addrs (host:port) accepts a
// TCP connection.
func anyAnswers(addrs []string) error {
	var errs []string
	for _, a := range addrs {
		c, err := net.DialTimeout("tcp", a, dialTimeout)
		if err == nil {
			return c.Close()
		}
		errs = append(errs, err.Error())
	}
	return fmt.Errorf("nothing answers (%s)", strings.Join(errs, "; "))
}

// dockerReachable reports why testcontainers cannot reach a Docker daemon,
// or nil when it can. Without one it fails within milliseconds.
func dockerReachable() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("docker provider panicked: %v", r)
		}
	}()
	p, err := testcontainers.ProviderDocker.GetProvider()
	if err != nil {
		return err
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return p.Health(ctx)
}

// randomID returns n random bytes as lower-case hex.
func randomID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never returns an error (Go 1.24+).
	return hex.EncodeToString(b)
}
