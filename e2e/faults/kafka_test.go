package faults

// The suite's private Kafka: started with the project's own scripts
// (deploy/local/up.sh, down.sh, and kafka-node.sh for the 3-node mode) on
// other ports and a temporary state folder, so broker faults never touch the
// shared stack on 127.0.0.1:9092.
//
// The single-node cluster advertises a fault proxy in front of its broker
// port, so that every client (hookrelay, the load generator, the checks)
// reaches it through the proxy; the scripts are run from a copy of
// deploy/local whose server.properties advertises the proxy's port. The
// 3-node cluster (HOOKRELAY_KAFKA_NODES=3; node i on KAFKA_PORT+10*(i-1))
// is reached directly.

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
)

// EnvKafkaLibs names the folder of the Kafka jars (default: kafka/libs of
// HOOKRELAY_STACK_DIR, else .local/kafka/libs of the repository; `make
// deps` fetches them).
const EnvKafkaLibs = "HOOKRELAY_KAFKA_LIBS"

type privateKafka struct {
	nodes   int
	root    string // temporary folder: repo copy, state
	scripts string // the deploy/local the scripts run from
	state   string
	env     []string
	port    int // KAFKA_PORT (node 1)
	brokers []string
	proxy   *toxiproxy.Proxy // single node: between every client and the broker
	proxyLn string
}

var (
	privMu sync.Mutex
	privs  = map[int]*privateKafka{} // by node count
)

// privKafka returns the private cluster of nodes brokers, starting it on
// first use; stopPrivateKafka (TestMain) stops it.
func privKafka(t testing.TB, nodes int) *privateKafka {
	t.Helper()
	privMu.Lock()
	defer privMu.Unlock()
	if k := privs[nodes]; k != nil {
		return k
	}
	k, err := startPrivateKafka(nodes)
	if err != nil {
		if k != nil {
			k.down()
		}
		t.Fatalf("faults: private Kafka (%d nodes): %v", nodes, err)
	}
	privs[nodes] = k
	return k
}

func stopPrivateKafka() {
	privMu.Lock()
	defer privMu.Unlock()
	for n, k := range privs {
		k.down()
		delete(privs, n)
	}
}

func startPrivateKafka(nodes int) (*privateKafka, error) {
	repo, err := repoRoot()
	if err != nil {
		return nil, err
	}
	libs, err := kafkaLibs(repo)
	if err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp("", "hookrelay-faults-kafka-")
	if err != nil {
		return nil, err
	}
	k := &privateKafka{nodes: nodes, root: root, state: filepath.Join(root, "state"), scripts: filepath.Join(repo, "deploy", "local")}
	base, err := freeBase(nodes)
	if err != nil {
		return k, err
	}
	k.port = base
	if nodes == 1 {
		// The proxy's own listener decides the advertised port.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return k, err
		}
		k.proxyLn = ln.Addr().String()
		ln.Close()
		if k.scripts, err = copyScripts(k.scripts, filepath.Join(root, "repo"), k.proxyLn); err != nil {
			return k, err
		}
		k.proxy = toxiproxy.NewProxy(toxServer(), "kafka", k.proxyLn, fmt.Sprintf("127.0.0.1:%d", base))
		if err := k.proxy.Start(); err != nil {
			return k, err
		}
		k.brokers = []string{k.proxyLn}
	} else {
		if _, err := os.Stat(filepath.Join(k.scripts, "kafka-node.sh")); err != nil {
			return k, fmt.Errorf("the 3-node mode of deploy/local (kafka-node.sh, HOOKRELAY_KAFKA_NODES) is not there yet: %v", err)
		}
		for i := range nodes {
			k.brokers = append(k.brokers, fmt.Sprintf("127.0.0.1:%d", base+10*i))
		}
	}
	if err := os.MkdirAll(filepath.Join(k.state, "kafka"), 0o755); err != nil {
		return k, err
	}
	if err := os.Symlink(libs, filepath.Join(k.state, "kafka", "libs")); err != nil {
		return k, err
	}
	k.env = []string{
		"HOOKRELAY_STACK_DIR=" + k.state,
		"HOOKRELAY_KAFKA_PORT=" + strconv.Itoa(base),
		"HOOKRELAY_KAFKA_CONTROLLER_PORT=" + strconv.Itoa(base+1),
		"HOOKRELAY_CLICKHOUSE_PORT=" + strconv.Itoa(base+2),
		"HOOKRELAY_CLICKHOUSE_HTTP_PORT=" + strconv.Itoa(base+3),
		"HOOKRELAY_KAFKA_HEAP=512m",
		// A SIGKILLed cluster recovers its logs first; on a busy 2-core
		// machine that took over up.sh's default 90 s.
		"HOOKRELAY_UP_TIMEOUT=300",
		"HOOKRELAY_KAFKA_NODES=" + strconv.Itoa(nodes),
	}
	start := time.Now()
	if out, err := k.script("up.sh"); err != nil {
		return k, fmt.Errorf("up.sh: %v\n%s", err, out)
	}
	fmt.Fprintf(os.Stderr, "faults: private Kafka (%d node(s), %s) up in %v\n", nodes, strings.Join(k.brokers, ","), time.Since(start).Round(time.Millisecond))
	return k, nil
}

// script runs one of the stack's scripts with the private environment.
func (k *privateKafka) script(name string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(k.scripts, name), args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HOOKRELAY_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, k.env...)
	return cmd.CombinedOutput()
}

func (k *privateKafka) down() {
	if k.env != nil {
		if out, err := k.script("down.sh"); err != nil {
			fmt.Fprintf(os.Stderr, "faults: private Kafka down.sh: %v\n%s", err, out)
		}
	}
	if k.proxy != nil {
		k.proxy.Stop()
	}
	_ = os.RemoveAll(k.root)
}

// stopNode stops broker node i (1-based) with sig (SIGTERM or SIGKILL)
// and waits until it has exited.
func (k *privateKafka) stopNode(t testing.TB, i int, sig syscall.Signal) {
	t.Helper()
	if k.nodes > 1 {
		verb := map[syscall.Signal]string{syscall.SIGTERM: "stop", syscall.SIGKILL: "kill"}[sig]
		if out, err := k.script("kafka-node.sh", verb, strconv.Itoa(i)); err != nil {
			t.Fatalf("faults: kafka-node.sh %s %d: %v\n%s", verb, i, err, out)
		}
		return
	}
	b, err := os.ReadFile(filepath.Join(k.state, "pids", "kafka.pid"))
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		t.Fatalf("faults: private Kafka pid: %v %q", err, b)
	}
	if err := syscall.Kill(pid, sig); err != nil {
		t.Fatalf("faults: signal %v to the private broker %d: %v", sig, pid, err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for alive(pid) {
		if !portOpen(k.port) {
			// The broker closed its listener: clients see a refused
			// connection, as with no broker at all, not a proxy that
			// accepts and closes.
			k.proxy.Stop()
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("faults: private broker %d still running 60 s after %v", pid, sig)
		}
		time.Sleep(50 * time.Millisecond) // polling interval
	}
	k.proxy.Stop()
}

// portOpen reports whether something accepts connections on 127.0.0.1:port.
func portOpen(port int) bool {
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// startNode starts broker node i again and waits until it is healthy.
func (k *privateKafka) startNode(t testing.TB, i int) {
	t.Helper()
	if k.nodes > 1 {
		if out, err := k.script("kafka-node.sh", "start", strconv.Itoa(i)); err != nil {
			t.Fatalf("faults: kafka-node.sh start %d: %v\n%s", i, err, out)
		}
		return
	}
	if out, err := k.script("up.sh"); err != nil {
		t.Fatalf("faults: up.sh: %v\n%s", err, out)
	}
	// Only once the broker is healthy, so that clients see a refused
	// connection, not a closed one, while it starts.
	if err := k.proxy.Start(); err != nil {
		t.Fatalf("faults: restarting the Kafka proxy: %v", err)
	}
}

// startAll starts every node that is not running with up.sh, which
// launches them side by side and waits until all are healthy. (Nodes of a
// stopped 3-node cluster cannot be started one after the other: a lone
// controller never becomes healthy without a quorum.)
func (k *privateKafka) startAll(t testing.TB) {
	t.Helper()
	if out, err := k.script("up.sh"); err != nil {
		t.Fatalf("faults: up.sh: %v\n%s", err, out)
	}
	if k.proxy != nil {
		if err := k.proxy.Start(); err != nil && !errors.Is(err, toxiproxy.ErrProxyAlreadyStarted) {
			t.Fatalf("faults: restarting the Kafka proxy: %v", err)
		}
	}
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] != 'Z'
	}
	return true
}

// copyScripts copies deploy/local into dst/deploy/local (env.sh finds the
// repository from its own path) with a server.properties that advertises
// advertised instead of the broker's own port.
func copyScripts(src, dst, advertised string) (string, error) {
	out := filepath.Join(dst, "deploy", "local")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", err
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return "", err
		}
		if e.Name() == "server.properties" {
			old := "advertised.listeners=PLAINTEXT://127.0.0.1:@KAFKA_PORT@"
			if !bytes.Contains(b, []byte(old)) {
				return "", fmt.Errorf("%s has no line %q", filepath.Join(src, e.Name()), old)
			}
			b = bytes.Replace(b, []byte(old), []byte("advertised.listeners=PLAINTEXT://"+advertised), 1)
		}
		info, _ := e.Info()
		if err := os.WriteFile(filepath.Join(out, e.Name()), b, info.Mode().Perm()); err != nil {
			return "", err
		}
	}
	return out, nil
}

// freeBase returns a port p such that p..p+4 (p+4: the secured listener),
// p+442 (ClickHouse's TLS port) and, per further node, p+10*i..p+10*i+4
// are free.
func freeBase(nodes int) (int, error) {
	for range 50 {
		base := 20000 + 100*rand.IntN(90)
		ok := true
		for i := range nodes {
			for _, p := range []int{base + 10*i, base + 10*i + 1, base + 10*i + 2, base + 10*i + 3, base + 10*i + 4, base + 442} {
				ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
				if err != nil {
					ok = false
					break
				}
				ln.Close()
			}
		}
		if ok {
			return base, nil
		}
	}
	return 0, errors.New("no free port range for the private Kafka")
}

func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.HasPrefix(b, []byte("module github.com/hookrelay/hookrelay\n")) {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("no go.mod of github.com/hookrelay/hookrelay above %s", wd)
		}
	}
}

// kafkaLibs finds the Kafka jars (see EnvKafkaLibs).
func kafkaLibs(repo string) (string, error) {
	var cands []string
	if d := os.Getenv(EnvKafkaLibs); d != "" {
		cands = append(cands, d)
	}
	if d := os.Getenv("HOOKRELAY_STACK_DIR"); d != "" {
		cands = append(cands, filepath.Join(d, "kafka", "libs"))
	}
	cands = append(cands, filepath.Join(repo, ".local", "kafka", "libs"))
	for _, d := range cands {
		if _, err := os.Stat(filepath.Join(d, ".complete")); err == nil {
			return filepath.Abs(d)
		}
	}
	return "", fmt.Errorf("no Kafka jars (a libs folder with .complete) in %s; run `make deps` or set %s", strings.Join(cands, ", "), EnvKafkaLibs)
}
