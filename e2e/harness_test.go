package e2e

// The harness runs the real hookrelay binary as a subprocess against the real
// stack (package stack): every test gets its own topic prefix and ClickHouse
// database, builds nothing but what it needs, and polls conditions with
// deadlines instead of sleeping.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/e2e/stack"
)

// Headers of records the pipeline writes for operators (events.invalid and
// the DLQ). Spelled out here rather than imported: they are the contract.
const (
	hdrReason         = "hookrelay-reason"
	hdrOriginalTopic  = "hookrelay-original-topic"
	hdrOriginalPart   = "hookrelay-original-partition"
	hdrOriginalOffset = "hookrelay-original-offset"
	hdrWebhookID      = "hookrelay-webhook-id"
	hdrEndpointID     = "hookrelay-endpoint-id"
)

// Timeouts of the harness itself.
const (
	readyTimeout = 90 * time.Second // process start to /readyz 200 (includes a group rejoin after SIGKILL)
	stopTimeout  = 25 * time.Second // SIGTERM to exit before SIGKILL
	cliTimeout   = 30 * time.Second // one `hookrelay endpoints …` command
)

// binary is the hookrelay binary, built once per test binary; faultBinary
// the same with -tags faultinject (see pipeline/faultinject_on.go), built
// only by the tests that inject faults.
var binary, faultBinary builtBinary

type builtBinary struct {
	once sync.Once
	path string
	err  error
}

// hookrelayBinary builds ./cmd/hookrelay once per test binary and returns
// its path: $TMPDIR/hookrelay-e2e-bin/hookrelay-<pid>. There is no TestMain of
// ours to remove it when the tests end, so each build first removes the
// binaries of test processes that no longer run.
func hookrelayBinary(t testing.TB) string {
	t.Helper()
	return binary.build(t, "hookrelay")
}

// hookrelayFaultBinary is hookrelayBinary built with -tags faultinject, at
// $TMPDIR/hookrelay-e2e-bin/hookrelay-fault-<pid>.
func hookrelayFaultBinary(t testing.TB) string {
	t.Helper()
	return faultBinary.build(t, "hookrelay-fault", "-tags", "faultinject")
}

func (binary *builtBinary) build(t testing.TB, name string, flags ...string) string {
	t.Helper()
	binary.once.Do(func() {
		start := time.Now()
		dir := filepath.Join(os.TempDir(), "hookrelay-e2e-bin")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			binary.err = err
			return
		}
		removeStaleBinaries(dir)
		binary.path = filepath.Join(dir, fmt.Sprintf("%s-%d", name, os.Getpid()))
		args := append(append([]string{"build"}, flags...), "-o", binary.path, "github.com/hookrelay/hookrelay/cmd/hookrelay")
		cmd := exec.Command("go", args...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			binary.err = fmt.Errorf("go build %v ./cmd/hookrelay: %v\n%s", flags, err, out)
		}
		t.Logf("e2e: built %s in %v", name, time.Since(start).Round(time.Millisecond))
	})
	if binary.err != nil {
		t.Fatalf("e2e: %v", binary.err)
	}
	return binary.path
}

// removeStaleBinaries removes dir/hookrelay-[fault-]<pid> files whose
// process is gone.
func removeStaleBinaries(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		pid, err := strconv.Atoi(strings.TrimPrefix(strings.TrimPrefix(e.Name(), "hookrelay-"), "fault-"))
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// config is how a test runs hookrelay. The zero value is usable.
type config struct {
	// Partitions of the events/deliveries/tier topics. Default 4.
	Partitions int
	// RetrySchedule, e.g. "1s,2s". Default "1s,2s".
	RetrySchedule string
	// AllowNetworks is HOOKRELAY_ALLOW_NETWORKS. Default "127.0.0.0/8";
	// set NoAllowList for none at all.
	AllowNetworks string
	NoAllowList   bool
	// QueueTTL, e.g. "1h". Default: hookrelay's.
	QueueTTL string
	// Env holds extra KEY=VALUE entries for every hookrelay command.
	Env []string
	// FaultInject runs the binary built with -tags faultinject, so
	// HOOKRELAY_FAULT works (see pipeline/faultinject_on.go).
	FaultInject bool
	// BlackBox marks a test that needs only a running hookrelay with any
	// configuration (it publishes events, registers endpoints and tenants
	// named with h.name, receives, reads attempts): it also runs against an
	// existing deployment (HOOKRELAY_E2E_TARGET=existing, target_test.go),
	// where every other test is skipped. Its other fields are then ignored.
	BlackBox bool
}

// harness is one test's view of the stack and of hookrelay.
type harness struct {
	t       *testing.T
	prefix  string
	db      string
	env     []string // HOOKRELAY_* for every command
	bin     string   // the hookrelay binary
	cl      *kgo.Client
	started int // processes started, for log file names
	// existing: black-box mode (target_test.go); ns: the test's namespace
	// for endpoint IDs and tenants, see name.
	existing bool
	ns       string
}

// newHarness gives the test its own topic prefix and database and a
// producer. Nothing is started.
func newHarness(t *testing.T, c config) *harness {
	t.Helper()
	if c.Partitions == 0 {
		c.Partitions = 4
	}
	if c.RetrySchedule == "" {
		c.RetrySchedule = "1s,2s"
	}
	if c.AllowNetworks == "" && !c.NoAllowList {
		c.AllowNetworks = "127.0.0.0/8"
	}
	if tg := e2eTarget(t); tg.existing {
		return newExistingHarness(t, c, tg)
	}
	// The services first: under -short without a stack the test skips
	// (package stack) before spending a build on it.
	stack.Brokers(t)
	stack.ClickHouseDSN(t)
	h := &harness{
		t:      t,
		prefix: stack.TopicPrefix(t),
		db:     stack.Database(t),
		bin:    hookrelayBinary(t), // then build: a compile error fails before anything starts
		ns:     "e2e-" + randomHex(4) + "-",
	}
	if c.FaultInject {
		h.bin = hookrelayFaultBinary(t)
	}
	env := []string{
		"HOOKRELAY_BROKERS=" + strings.Join(stack.Brokers(t), ","),
		"HOOKRELAY_CLICKHOUSE=" + stack.DatabaseDSN(t),
		"HOOKRELAY_TOPIC_PREFIX=" + h.prefix,
		"HOOKRELAY_PARTITIONS=" + strconv.Itoa(c.Partitions),
		"HOOKRELAY_RETRY_SCHEDULE=" + c.RetrySchedule,
		"HOOKRELAY_ALLOW_NETWORKS=" + c.AllowNetworks,
	}
	if c.QueueTTL != "" {
		env = append(env, "HOOKRELAY_QUEUE_TTL="+c.QueueTTL)
	}
	h.env = append(env, c.Env...)
	h.cl = stack.Client(t,
		kgo.ProducerLinger(2*time.Millisecond),
		kgo.ProducerBatchMaxBytes(2<<20),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
	)
	t.Logf("e2e: prefix %s, database %s", h.prefix, h.db)
	return h
}

// topic returns the full name of a hookrelay topic, e.g. topic("events").
func (h *harness) topic(name string) string { return h.prefix + name }

// command returns an unstarted hookrelay command with the harness's
// environment (the parent's environment minus any HOOKRELAY_*).
func (h *harness) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, h.bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HOOKRELAY_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, h.env...)
	return cmd
}

// cli runs a short hookrelay command and returns its combined output; a
// non-zero exit fails the test.
func (h *harness) cli(args ...string) string {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	out, err := h.command(ctx, args...).CombinedOutput()
	if err != nil {
		h.t.Fatalf("hookrelay %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// endpoint is one endpoint as a test registers it.
type endpoint struct {
	ID          string
	URL         string
	Secret      string   // whsec_…
	Events      []string // filter: exact types, "prefix.*", "*"
	Tenant      string   // "" for none
	Rate        int      // requests per second; default 1000
	MaxInFlight int      // default 8
	Timeout     time.Duration
}

// addEndpoint registers ep with `hookrelay endpoints add`. Call it before
// start: hookrelay starts fan-out only after its endpoints view has caught
// up, so an endpoint added before start gets every event produced after.
func (h *harness) addEndpoint(ep endpoint) {
	h.t.Helper()
	h.checkBlackBoxEndpoint(ep)
	if ep.Rate == 0 {
		ep.Rate = 1000
	}
	if ep.MaxInFlight == 0 {
		ep.MaxInFlight = 8
	}
	args := []string{"endpoints", "add", "--id", ep.ID, "--url", ep.URL, "--secret", ep.Secret,
		"--events", strings.Join(ep.Events, ","),
		"--rate", strconv.Itoa(ep.Rate), "--max-in-flight", strconv.Itoa(ep.MaxInFlight)}
	if ep.Tenant != "" {
		args = append(args, "--tenant", ep.Tenant)
	}
	if ep.Timeout != 0 {
		args = append(args, "--timeout", ep.Timeout.String())
	}
	h.cli(args...)
	h.forgetAtEnd(ep.ID)
}

// newSecret returns a fresh whsec_ secret of 32 random bytes.
func newSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (Go 1.24+)
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

// process is one running `hookrelay run`.
type process struct {
	h        *harness
	name     string // instance ID
	cmd      *exec.Cmd
	logPath  string
	httpAddr string
	apiAddr  string        // the api role's address (HOOKRELAY_API_ADDR)
	done     chan struct{} // closed when the process has exited
	waitErr  error         // valid after done
}

// start runs `hookrelay run` as instance id (reuse an id to restart the
// same instance), waits until /readyz answers 200, and stops the process when
// the test ends (SIGTERM, then SIGKILL). On failure the test log gets the
// tail of the process's log.
func (h *harness) start(id string) *process {
	h.t.Helper()
	if h.existing {
		return h.deployment(id)
	}
	start := time.Now()
	p := h.spawn(id)
	p.waitReady(readyTimeout)
	h.t.Logf("e2e: hookrelay %s ready in %v", id, time.Since(start).Round(time.Millisecond))
	return p
}

// spawn is start without the wait for /readyz: it runs `hookrelay run` as
// instance id with env (extra KEY=VALUE entries, overriding the harness's)
// and returns at once. The process is stopped when the test ends.
func (h *harness) spawn(id string, env ...string) *process {
	h.t.Helper()
	h.started++
	p := &process{
		h:        h,
		name:     id,
		logPath:  filepath.Join(h.t.TempDir(), fmt.Sprintf("hookrelay-%d-%s.log", h.started, id)),
		httpAddr: freeAddr(h.t),
		apiAddr:  freeAddr(h.t),
		done:     make(chan struct{}),
	}
	logf, err := os.Create(p.logPath)
	if err != nil {
		h.t.Fatal(err)
	}
	p.cmd = h.command(context.Background(), "run")
	p.cmd.Env = append(p.cmd.Env, "HOOKRELAY_INSTANCE_ID="+id, "HOOKRELAY_HTTP_ADDR="+p.httpAddr, "HOOKRELAY_API_ADDR="+p.apiAddr)
	p.cmd.Env = append(p.cmd.Env, env...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		logf.Close()
		h.t.Fatalf("start hookrelay: %v", err)
	}
	go func() { // owner: p; done is awaited by stop/kill
		p.waitErr = p.cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	h.t.Cleanup(func() {
		p.stop()
		if h.t.Failed() || os.Getenv("E2E_LOG_TAIL") != "" {
			h.t.Logf("--- tail of %s (whole log kept at %s) ---\n%s", filepath.Base(p.logPath), keepLog(h.t, p.logPath), tail(p.logPath, 60))
		}
	})
	return p
}

func (p *process) waitReady(timeout time.Duration) {
	p.h.t.Helper()
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: time.Second}
	for {
		select {
		case <-p.done:
			p.h.t.Fatalf("hookrelay %s exited before ready (%v); log:\n%s", p.name, p.waitErr, tail(p.logPath, 60))
		default:
		}
		resp, err := client.Get("http://" + p.httpAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			p.h.t.Fatalf("hookrelay %s not ready after %v (last: %v); log:\n%s", p.name, timeout, statusOrErr(resp, err), tail(p.logPath, 60))
		}
		time.Sleep(100 * time.Millisecond) // polling interval
	}
}

func statusOrErr(resp *http.Response, err error) string {
	if err != nil {
		return err.Error()
	}
	return resp.Status
}

// kill sends SIGKILL and waits for the exit: nothing shuts down cleanly.
func (p *process) kill() {
	p.h.t.Helper()
	select {
	case <-p.done:
		p.h.t.Fatalf("hookrelay %s had already exited (%v)", p.name, p.waitErr)
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		p.h.t.Fatalf("SIGKILL hookrelay %s: %v", p.name, err)
	}
	<-p.done
}

// stop sends SIGTERM and waits up to stopTimeout, then SIGKILL. Safe to call
// on an exited process. It logs (does not fail on) an unclean exit.
func (p *process) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		if p.waitErr != nil {
			p.h.t.Logf("e2e: hookrelay %s exited after SIGTERM: %v", p.name, p.waitErr)
		}
	case <-time.After(stopTimeout):
		p.h.t.Logf("e2e: hookrelay %s still running %v after SIGTERM; SIGKILL", p.name, stopTimeout)
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}
}

// metric returns the sum of the samples of a Prometheus metric (e.g.
// "hookrelay_events_total") from /metrics over the label sets that contain
// every one of labels (e.g. `result="invalid"`), and whether any sample
// matched.
func (p *process) metric(name string, labels ...string) (float64, bool) {
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Get("http://" + p.httpAddr + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	var sum float64
	found := false
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
lines:
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		for _, l := range labels {
			if !strings.Contains(rest, l) {
				continue lines
			}
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			sum += v
			found = true
		}
	}
	return sum, found
}

// freeAddr returns 127.0.0.1:<a port that was free a moment ago>.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// keepLog copies a process log out of the test's temporary directory, which
// is removed when the test ends, to $TMPDIR/hookrelay-e2e-logs, and returns
// the copy's path.
func keepLog(t testing.TB, path string) string {
	dir := filepath.Join(os.TempDir(), "hookrelay-e2e-logs")
	b, err := os.ReadFile(path)
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()) + "-" + filepath.Base(path)
	dst := filepath.Join(dir, name)
	if err == nil {
		err = os.WriteFile(dst, b, 0o644)
	}
	if err != nil {
		return fmt.Sprintf("(not kept: %v)", err)
	}
	return dst
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// eventually polls cond every 100 ms until it returns true or timeout passes;
// then it fails the test with what cond last said.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	if !waitFor(t, timeout, what, cond) {
		t.FailNow()
	}
}

// waitFor polls cond every 100 ms until it returns true (it reports true)
// or timeout passes: then it marks the test failed (t.Errorf, with what cond
// last said) and reports false, so the test can go on to say precisely what
// is missing.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) bool {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok {
			return true
		}
		if time.Now().After(deadline) {
			t.Errorf("timed out after %v waiting for %s: %s", timeout, what, why)
			return false
		}
		time.Sleep(100 * time.Millisecond) // polling interval
	}
}

// reader returns a client that reads topic from the start with
// read_committed, as the pipeline's own consumers do.
func (h *harness) reader(topic string, extra ...kgo.Opt) *kgo.Client {
	h.t.Helper()
	return stack.Client(h.t, append([]kgo.Opt{
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(200 * time.Millisecond),
	}, extra...)...)
}

// countByKey reads topic from the start with read_committed until a whole
// second brings nothing new, and counts records by key. For diagnostics.
func (h *harness) countByKey(topic string) map[string]int {
	h.t.Helper()
	cl := h.reader(topic)
	defer cl.Close()
	out := map[string]int{}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		if fs.NumRecords() == 0 {
			break
		}
		fs.EachRecord(func(r *kgo.Record) { out[string(r.Key)]++ })
	}
	return out
}

// cloudEvent is an event as a test produces it.
type cloudEvent struct {
	ID     string
	Source string
	Type   string
	Tenant string // tenantid extension; "" for none
	Time   time.Time
	Data   any // JSON-encodable
}

// structured encodes e in structured content mode (the whole event as JSON,
// content-type application/cloudevents+json).
func (e cloudEvent) structured(topic string, key []byte) *kgo.Record {
	m := map[string]any{
		"specversion":     "1.0",
		"id":              e.ID,
		"source":          e.Source,
		"type":            e.Type,
		"datacontenttype": "application/json",
		"data":            e.Data,
	}
	if !e.Time.IsZero() {
		m["time"] = e.Time.UTC().Format(time.RFC3339Nano)
	}
	if e.Tenant != "" {
		m["tenantid"] = e.Tenant
	}
	v, err := json.Marshal(m)
	if err != nil {
		panic(err) // test data only
	}
	return &kgo.Record{Topic: topic, Key: key, Value: v, Headers: []kgo.RecordHeader{
		{Key: "content-type", Value: []byte("application/cloudevents+json; charset=utf-8")},
	}}
}

// binary encodes e in binary content mode (ce_* headers, data as the value).
func (e cloudEvent) binary(topic string, key []byte) *kgo.Record {
	v, err := json.Marshal(e.Data)
	if err != nil {
		panic(err)
	}
	hs := []kgo.RecordHeader{
		{Key: "ce_specversion", Value: []byte("1.0")},
		{Key: "ce_id", Value: []byte(e.ID)},
		{Key: "ce_source", Value: []byte(e.Source)},
		{Key: "ce_type", Value: []byte(e.Type)},
		{Key: "content-type", Value: []byte("application/json")},
	}
	if !e.Time.IsZero() {
		hs = append(hs, kgo.RecordHeader{Key: "ce_time", Value: []byte(e.Time.UTC().Format(time.RFC3339Nano))})
	}
	if e.Tenant != "" {
		hs = append(hs, kgo.RecordHeader{Key: "ce_tenantid", Value: []byte(e.Tenant)})
	}
	return &kgo.Record{Topic: topic, Key: key, Value: v, Headers: hs}
}

// produce writes records synchronously (acks=all) and fails the test on any
// error. It fills in the offsets.
func (h *harness) produce(recs ...*kgo.Record) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := h.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		h.t.Fatalf("produce: %v", err)
	}
}

// events returns records of evs in structured mode for the events topic,
// keyed by event ID.
func (h *harness) events(evs []cloudEvent) []*kgo.Record {
	recs := make([]*kgo.Record, len(evs))
	for i, e := range evs {
		recs[i] = e.structured(h.topic("events"), []byte(e.ID))
	}
	return recs
}

// readTopic reads topic from the start with read_committed until want
// returns true for everything read so far, or fails after timeout.
func (h *harness) readTopic(topic string, timeout time.Duration, want func([]*kgo.Record) (bool, string)) []*kgo.Record {
	h.t.Helper()
	cl := h.reader(topic, kgo.FetchMaxBytes(8<<20))
	var got []*kgo.Record
	deadline := time.Now().Add(timeout)
	for {
		if ok, _ := want(got); ok {
			return got
		}
		ctx, cancel := context.WithDeadline(context.Background(), minTime(deadline, time.Now().Add(300*time.Millisecond)))
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				h.t.Logf("e2e: reading %s[%d]: %v", t, p, err)
			}
		})
		got = append(got, fs.Records()...)
		if time.Now().After(deadline) {
			ok, why := want(got)
			if !ok {
				h.t.Fatalf("timed out after %v reading %s: %s", timeout, topic, why)
			}
			return got
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// header returns the value of the last header named key, and whether any.
func header(r *kgo.Record, key string) (string, bool) {
	v, ok := "", false
	for _, h := range r.Headers {
		if h.Key == key {
			v, ok = string(h.Value), true
		}
	}
	return v, ok
}

// attemptRow is one row of the attempts table.
type attemptRow struct {
	AttemptID     string
	DeliveryID    string
	EventID       string
	WebhookID     string
	EventType     string
	Tenant        string
	EndpointID    string
	AttemptNumber int
	AttemptedAt   time.Time
	HTTPStatus    int
	Outcome       string
	ErrorClass    string
	NextAttemptAt time.Time
}

// attempts reads every row of the test database's attempts table with FINAL,
// ordered by endpoint, attempt time and number. A missing table (hookrelay
// not started) fails the test.
func (h *harness) attempts() []attemptRow {
	h.t.Helper()
	conn := h.clickhouse()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := conn.Query(ctx, `
SELECT attempt_id, delivery_id, event_id, webhook_id, event_type, tenant, endpoint_id,
       toUInt32(attempt_number), toUInt64(toUInt32(attempted_at)) * 1000 + attempted_ms,
       toUInt32(http_status), outcome, error_class,
       toUInt64(toUInt32(next_attempt_at)) * 1000 + next_attempt_ms
FROM `+h.db+`.attempts FINAL `+h.attemptsScope()+`
ORDER BY endpoint_id, attempted_at, attempted_ms, attempt_number`)
	if err != nil {
		h.t.Fatalf("query attempts: %v", err)
	}
	defer rows.Close()
	var out []attemptRow
	for rows.Next() {
		var r attemptRow
		var n, status uint32
		var at, next uint64
		if err := rows.Scan(&r.AttemptID, &r.DeliveryID, &r.EventID, &r.WebhookID, &r.EventType, &r.Tenant,
			&r.EndpointID, &n, &at, &status, &r.Outcome, &r.ErrorClass, &next); err != nil {
			h.t.Fatalf("scan attempts: %v", err)
		}
		r.AttemptNumber, r.HTTPStatus = int(n), int(status)
		r.AttemptedAt = time.UnixMilli(int64(at))
		if next > 0 {
			r.NextAttemptAt = time.UnixMilli(int64(next))
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		h.t.Fatalf("read attempts: %v", err)
	}
	return out
}

// waitAttempts polls the attempts table until cond holds.
func (h *harness) waitAttempts(timeout time.Duration, what string, cond func([]attemptRow) (bool, string)) []attemptRow {
	h.t.Helper()
	var rows []attemptRow
	eventually(h.t, timeout, what, func() (bool, string) {
		rows = h.attempts()
		return cond(rows)
	})
	return rows
}

// percentile returns the p-th percentile (0..100, nearest rank) of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(float64(len(s))*p/100)) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// sortedKeys returns the keys of m, sorted.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// firstN joins at most n items of ss for a failure message.
func firstN(ss []string, n int) string {
	if len(ss) <= n {
		return strings.Join(ss, ", ")
	}
	return strings.Join(ss[:n], ", ") + fmt.Sprintf(", … (%d more)", len(ss)-n)
}

// jsonEqual reports whether two JSON texts hold equal values.
func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return bytes.Equal(ja, jb)
}
