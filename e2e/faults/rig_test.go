package faults

// A rig is one scenario's world: its brokers and topics, its ClickHouse
// database, ten receivers and their endpoints, the load, and the hookrelay
// processes it started.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/e2e/stack"
)

// rigOpts says how a scenario's world is built. The zero value uses the
// shared stack.
type rigOpts struct {
	Brokers       []string // private brokers; nil for the shared stack's
	Partitions    int      // default 6
	ClickHouseDSN string   // DSN hookrelay uses; default the test database on the shared ClickHouse
	ReceiverProxy bool     // endpoints reach their receivers through a fault proxy each
	Malformed     bool     // 10 % of the load is malformed input
	Env           []string // extra HOOKRELAY_* for every hookrelay command
}

type rig struct {
	t       *testing.T
	s       sizes
	brokers []string
	prefix  string
	db      string
	env     []string
	logDir  string
	opts    rigOpts

	recv      map[string]*receiver
	recvProxy map[string]*toxiproxy.Proxy
	cl        *kgo.Client
	load      *loadGen
	faultAt   time.Time // first fault; the gap is measured from here

	mu       sync.Mutex
	all      []*relay
	launched int
	stalls   int // stalls dumped so far (dumpStall)
}

func newRig(t *testing.T, o rigOpts) *rig {
	t.Helper()
	if o.Partitions == 0 {
		o.Partitions = 6
	}
	hookrelayBinary(t)
	r := &rig{t: t, s: size(), opts: o, recv: map[string]*receiver{}, recvProxy: map[string]*toxiproxy.Proxy{}}
	if o.Brokers == nil {
		r.brokers = stack.Brokers(t)
		r.prefix = stack.TopicPrefix(t)
	} else {
		r.brokers = o.Brokers
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		r.prefix = "f" + hex.EncodeToString(b) + "." // the private cluster is discarded whole
	}
	r.db = stack.Database(t)
	dsn := o.ClickHouseDSN
	if dsn == "" {
		dsn = stack.DatabaseDSN(t)
	}
	r.logDir = filepath.Join(os.TempDir(), "hookrelay-faults-logs",
		strings.NewReplacer("/", "_").Replace(t.Name())+"-"+time.Now().Format("150405"))
	if err := os.MkdirAll(r.logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	r.env = append([]string{
		"HOOKRELAY_BROKERS=" + strings.Join(r.brokers, ","),
		"HOOKRELAY_CLICKHOUSE=" + dsn,
		"HOOKRELAY_TOPIC_PREFIX=" + r.prefix,
		"HOOKRELAY_PARTITIONS=" + strconv.Itoa(o.Partitions),
		// Long enough that no fault of the suite exhausts the attempts: a
		// DLQ'd delivery would be counted as lost.
		"HOOKRELAY_RETRY_SCHEDULE=1s,2s,5s,10s,20s,30s,60s,60s",
		"HOOKRELAY_ALLOW_NETWORKS=127.0.0.0/8",
	}, o.Env...)
	r.cl = newClient(t, r.brokers,
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytes(1<<20),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
	)
	for _, id := range endpointIDs {
		rc := newReceiver(t, id)
		r.recv[id] = rc
		url := "http://" + rc.Addr + "/" + id
		if o.ReceiverProxy {
			p := newProxy(t, "recv-"+id, "127.0.0.1:0", rc.Addr)
			r.recvProxy[id] = p
			url = "http://" + p.Listen + "/" + id
		}
		r.cli(endpointArgs(id, url, rc.Secret)...)
	}
	t.Cleanup(func() {
		if r.load != nil {
			r.load.stop(t)
		}
		r.mu.Lock()
		all := append([]*relay(nil), r.all...)
		r.mu.Unlock()
		for _, p := range all {
			_ = p.stop()
		}
		if t.Failed() {
			t.Logf("faults: hookrelay logs kept in %s", r.logDir)
		} else {
			_ = os.RemoveAll(r.logDir)
		}
	})
	t.Logf("faults: %s sizes, prefix %s, database %s, brokers %s", r.s.Name, r.prefix, r.db, strings.Join(r.brokers, ","))
	return r
}

// endpointArgs are the `hookrelay endpoints add` arguments of endpoint id
// (see load_test.go for the subscriptions).
func endpointArgs(id, url, secret string) []string {
	i, _ := strconv.Atoi(strings.TrimPrefix(id, "ep"))
	events := fmt.Sprintf("u.%d,u.%d", i, (i+1)%ringSize)
	args := []string{"endpoints", "add", "--id", id, "--url", url, "--secret", secret,
		"--rate", "1000", "--max-in-flight", "8", "--timeout", "5s"}
	if i >= ringSize {
		events = "a.*"
		args = append(args, "--tenant", tenant)
	}
	return append(args, "--events", events)
}

// newClient returns a franz-go client of brokers, closed when the test ends.
func newClient(t testing.TB, brokers []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// startLoad starts the load generator at the scenario's rate.
func (r *rig) startLoad() {
	r.load = startLoad(r.cl, r.prefix+"events", r.s.Rate, r.opts.Malformed)
}

// delivered is the number of requests the receivers saw so far.
func (r *rig) delivered() int {
	n := 0
	for _, rc := range r.recv {
		n += rc.Count()
	}
	return n
}

// waitFlow waits until the receivers saw n more requests than now, or
// timeout; it reports whether they did. It never fails the test: a stall
// is measured as the delivery gap instead.
func (r *rig) waitFlow(n int, timeout time.Duration) bool {
	from := r.delivered()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if r.delivered() >= from+n {
			return true
		}
		time.Sleep(50 * time.Millisecond) // polling interval
	}
	r.t.Logf("faults: only %d of %d more deliveries within %v (a stall; measured as the gap)", r.delivered()-from, n, timeout)
	r.dumpStall()
	return false
}

// fault marks the start of the faults (once) and logs what happens.
func (r *rig) fault(format string, args ...any) {
	if r.faultAt.IsZero() {
		r.faultAt = time.Now()
	}
	r.t.Logf("faults: %s: %s", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// settle lets the load run for the scenario's settle time.
func (r *rig) settle() { time.Sleep(r.s.Settle) } // the load runs meanwhile: this is the scenario's timeline

// withCtx runs f with a context bounded by d.
func withCtx(d time.Duration, f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return f(ctx)
}
