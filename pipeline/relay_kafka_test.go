package pipeline

// Integration tests against the real broker (e2e/stack: HOOKRELAY_BROKERS,
// or a container). They create their tier topics with retrytiers.TierTopicConfig, so
// the broker stamps LogAppendTime as in production.

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/e2e/stack"
	"github.com/hookrelay/hookrelay/pipeline/delivery"
	"github.com/hookrelay/hookrelay/retrytiers"
)

func TestMain(m *testing.M) { os.Exit(stack.Main(m)) }

// Deliveries due at random times over the doubling tiers, produced as a
// steady stream: none is relayed before its ready time, each reaches the
// target exactly once, and the lateness metric has one observation per
// delivery. Lateness and hop lag are logged, not asserted: a loaded machine
// stretches them (issue 8, item 12); the figures belong to hookbench's
// retry-precision scenario.
func TestRelayKafkaPrecision(t *testing.T) {
	prefix := stack.TopicPrefix(t)
	e := newRelayEnv(t, stack.Brokers(t), prefix, doublingSchedule, 6)
	obs := e.observe(append(e.tiers.Topics(), e.target, e.dlq)...)
	mr := newMetricsReader()
	o := e.options("a")
	o.Meter = mr.mp.Meter("test")
	e.start(o)
	e.warmUp(obs)

	const n = 300
	metas := make(map[string]delivery.Meta, n)
	for batch := range 10 {
		for id, m := range parkMany(e, batch*n/10, n/10, 6, time.Second, 7500*time.Millisecond, uint64(batch)) {
			metas[id] = m
		}
		time.Sleep(300 * time.Millisecond) // a stream, not one burst
	}
	waitWithin(t, 60*time.Second, "every delivery in the target", func() bool { return len(obs.in(e.target)) >= n+1 })
	time.Sleep(time.Second) // let any duplicate show up before judging
	rep := checkPaths(t, e, obs, metas, false)
	if d := obs.in(e.dlq); len(d) != 0 {
		t.Errorf("%d records in the DLQ, want 0", len(d))
	}
	for _, topic := range e.tiers.Topics() {
		for _, s := range obs.in(topic) {
			if s.rec.Attrs.TimestampType() != 1 {
				t.Fatalf("%s: record timestamp type %d, want LogAppendTime (1)", topic, s.rec.Attrs.TimestampType())
			}
		}
	}
	t.Logf("real Kafka: %d deliveries, %d hops", n, rep.hops)
	t.Logf("hop lag (new record's time - ready time): p50 %v p99 %v max %v",
		percentile(rep.lag, 50), percentile(rep.lag, 99), percentile(rep.lag, 100))
	t.Logf("hop lag of hops to the target (decision time - ready time): p50 %v p99 %v max %v",
		percentile(rep.lagTarget, 50), percentile(rep.lagTarget, 99), percentile(rep.lagTarget, 100))
	t.Logf("lateness at release (decision - due, 0 if a remainder is held): p50 %v p99 %v max %v",
		percentile(rep.emitLate, 50), percentile(rep.emitLate, 99), percentile(rep.emitLate, 100))
	t.Logf("lateness as seen by a read_committed reader: p50 %v p99 %v max %v",
		percentile(rep.visibleLate, 50), percentile(rep.visibleLate, 99), percentile(rep.visibleLate, 100))
	c, mx := mr.histogram(t, "hookrelay.retry.relay.lateness")
	t.Logf("lateness histogram: %d observations, max %vs", c, mx)
	if c != n+1 {
		t.Errorf("lateness histogram: %d observations, want %d (one per delivery and the warm-up)", c, n+1)
	}
}

// childConfig is what a relay child process runs with.
type childConfig struct {
	Seeds    []string `json:"seeds"`
	Prefix   string   `json:"prefix"`
	Schedule string   `json:"schedule"`
	ID       string   `json:"id"`
	KillAt   int      `json:"kill_at"` // SIGKILL itself before ending this transaction (1-based); 0 never
}

const childEnv = "HOOKRELAY_TEST_RELAY_CHILD"

// TestRelayChildProcess is not a test: it is the relay process that
// TestRelayKafkaCrash starts and kills.
func TestRelayChildProcess(t *testing.T) {
	raw := os.Getenv(childEnv)
	if raw == "" {
		t.Skip("helper process for TestRelayKafkaCrash")
	}
	var c childConfig
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		t.Fatal(err)
	}
	s, err := retrytiers.ParseSchedule(c.Schedule)
	if err != nil {
		t.Fatal(err)
	}
	tiers, err := retrytiers.TiersFor(c.Prefix, s)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRelay(RelayOptions{
		Brokers:         c.Seeds,
		KafkaOptions:    []kgo.Opt{kgo.SessionTimeout(6 * time.Second)},
		Group:           c.Prefix + "retry-relay",
		TransactionalID: c.Prefix + "relay-" + c.ID,
		Tiers:           tiers,
		TargetTopic:     c.Prefix + "deliveries",
		DLQTopic:        c.Prefix + "dlq",
	})
	if err != nil {
		t.Fatal(err)
	}
	txns := 0
	r.crashBeforeEnd = func() bool {
		txns++
		if txns == c.KillAt {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
		return false
	}
	// SIGTERM stops it cleanly; a safety net: never outlive the parent
	// test by much.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := r.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

// startChild runs the relay in a child process (this test binary).
func startChild(t *testing.T, c childConfig) *exec.Cmd {
	t.Helper()
	raw, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRelayChildProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		// Our own child, by pid: stop it cleanly so it leaves the group.
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	return cmd
}

// txnState describes the child's transactional ID on the broker, e.g.
// "Ongoing" when it died inside a transaction.
func txnState(t *testing.T, adm *kadm.Client, txnID string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ds, err := adm.DescribeTransactions(ctx, txnID)
	if err != nil {
		return "unknown: " + err.Error()
	}
	d, ok := ds[txnID]
	if !ok {
		return "absent"
	}
	if d.Err != nil {
		return "error: " + d.Err.Error()
	}
	return d.State
}

// Relay processes are SIGKILLed, once inside a transaction (produced and
// flushed, not committed) and once at a random moment; after restarts with
// the same transactional ID every delivery reaches the target exactly once
// (read_committed) and no tier holds two records of one delivery.
func TestRelayKafkaCrash(t *testing.T) {
	prefix := stack.TopicPrefix(t)
	seeds := stack.Brokers(t)
	// retrytiers.Tiers 1s…8s, waits up to 15s: long enough for the second kill to land
	// mid-stream, and no plan uses a tier twice.
	sched := retrytiers.Schedule{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}
	e := newRelayEnv(t, seeds, prefix, sched, 6)
	obs := e.observe(append(e.tiers.Topics(), e.target, e.dlq)...)
	adm := kadm.NewClient(e.prod)
	const n = 200
	metas := parkMany(e, 0, n, 6, time.Second, 15*time.Second, 7)
	cfg := childConfig{Seeds: seeds, Prefix: prefix, Schedule: sched.String(), ID: "a"}
	txnID := prefix + "relay-a"

	// 1. Dies by its own SIGKILL inside its 3rd transaction.
	cfg.KillAt = 3
	first := startChild(t, cfg)
	waitWithin(t, 60*time.Second, "the first relay to die", func() bool {
		return processGone(first.Process.Pid)
	})
	state1 := txnState(t, adm, txnID)
	if state1 != "Ongoing" {
		t.Errorf("after the in-transaction kill the transaction is %q, want Ongoing (the test did not crash mid-transaction)", state1)
	}
	after1 := len(obs.in(e.target))

	// 2. Restarted, then killed by us once it made progress.
	cfg.KillAt = 0
	second := startChild(t, cfg)
	waitWithin(t, 60*time.Second, "progress after the first restart", func() bool { return len(obs.in(e.target)) >= after1+40 })
	if err := second.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitWithin(t, 30*time.Second, "the second relay to die", func() bool { return processGone(second.Process.Pid) })
	state2 := txnState(t, adm, txnID)
	after2 := len(obs.in(e.target))

	// 3. Restarted for good.
	startChild(t, cfg)
	waitWithin(t, 90*time.Second, "every delivery in the target", func() bool { return len(obs.in(e.target)) >= n })
	time.Sleep(2 * time.Second) // let any duplicate show up before judging
	rep := checkPaths(t, e, obs, metas, false)
	t.Logf("kill 1 (in txn): txn %s, %d/%d delivered; kill 2 (random): txn %s, %d/%d delivered; then %d delivered, %d hops",
		state1, after1, n, state2, after2, n, len(obs.in(e.target)), rep.hops)
	if got := len(obs.in(e.target)); got != n {
		t.Errorf("target holds %d records, want %d", got, n)
	}
}

// processGone reports whether pid has exited (and was reaped, or is a zombie).
func processGone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	// Field 3 is the state; Z is a zombie, X dead.
	for i, f := 0, 0; i < len(b); i++ {
		if b[i] == ')' {
			f = i + 2
			return f < len(b) && (b[f] == 'Z' || b[f] == 'X')
		}
	}
	return false
}
