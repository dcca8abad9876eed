package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hookrelay/hookrelay/cmd/internal/childproc"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/hookrelay/hookrelay/pipeline"
	"github.com/hookrelay/hookrelay/retrytiers"
)

// bench holds what every scenario shares: the stack's clients, the run's
// identity and where its logs go.
type bench struct {
	o     options
	kcl   *kgo.Client // producer of events (and of the baseline's attempt rows)
	adm   *kadm.Client
	ch    driver.Conn // no default database: every statement names its own
	runID string      // "hb<unix>": prefixes topics and databases
	t0    time.Time
	stack map[string]int // pids of the stack's processes, for CPU figures
}

// logf prints one progress line, stamped with the time since the start.
func (b *bench) logf(format string, args ...any) {
	fmt.Printf("[%7.1fs] %s\n", time.Since(b.t0).Seconds(), fmt.Sprintf(format, args...))
}

func newBench(ctx context.Context, o options) (*bench, error) {
	b := &bench{o: o, t0: time.Now(), runID: fmt.Sprintf("hb%d", time.Now().Unix()), stack: map[string]int{}}
	var err error
	b.kcl, err = kgo.NewClient(
		kgo.SeedBrokers(strings.Split(o.brokers, ",")...),
		kgo.ProducerBatchMaxBytes(1<<20),
		kgo.MaxBufferedRecords(20000),
	)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	b.adm = kadm.NewClient(b.kcl)
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := b.kcl.Ping(pctx); err != nil {
		b.kcl.Close()
		return nil, fmt.Errorf("Kafka at %s is not reachable (is the stack up? `make up`): %w", o.brokers, err)
	}
	co, err := clickhouse.ParseDSN(o.clickhouse)
	if err != nil {
		b.kcl.Close()
		return nil, fmt.Errorf("-clickhouse: %w", err)
	}
	co.Auth.Database = ""
	co.MaxOpenConns = 8
	b.ch, err = clickhouse.Open(co)
	if err == nil {
		err = b.ch.Ping(pctx)
	}
	if err != nil {
		b.kcl.Close()
		return nil, fmt.Errorf("ClickHouse at %v is not reachable (is the stack up? `make up`): %w", co.Addr, err)
	}
	for _, name := range []string{"kafka", "clickhouse"} {
		raw, err := os.ReadFile(filepath.Join(o.stackPids, name+".pid"))
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(raw))); err == nil {
			if _, _, err := readProc(pid); err == nil {
				b.stack[name] = pid
			}
		}
	}
	b.stack["hookbench"] = os.Getpid()
	return b, nil
}

func (b *bench) Close() {
	b.kcl.Close()
	b.ch.Close()
}

// endpointSpec is one endpoint to register with `hookrelay endpoints add`.
type endpointSpec struct {
	ID          string
	URL         string
	Secret      string
	Events      []string
	Rate        float64 // requests per second
	MaxInFlight int
	Timeout     time.Duration // 0: hookrelay's default (10s)
}

// env is one scenario's slice of the stack: its own topic prefix and
// ClickHouse database, and at most one hookrelay process at a time.
type env struct {
	b        *bench
	name     string
	prefix   string
	db       string
	dsn      string
	httpAddr string
	extra    []string // extra HOOKRELAY_* settings of this scenario
	logPath  string
	dropAlso []string // more databases to drop in cleanup

	hr    *childproc.Proc
	smp   *sampler
	probe *kafkaProbe

	mmu     sync.Mutex
	mAt     []time.Time
	mSeries map[string][]float64
}

// trackedMetrics are the hookrelay metrics sampled every tick.
var trackedMetrics = []string{
	"hookrelay_events_total",
	"hookrelay_deliveries_created_total",
	"hookrelay_attempts_total",
	"hookrelay_deliveries_parked_total",
	"hookrelay_dispatch_backlog",
	"hookrelay_dispatch_in_flight",
	"hookrelay_audit_sink_records_total",
	"hookrelay_audit_sink_lag",
	"hookrelay_retry_relay_records_total",
	"hookrelay_retry_relay_buffered",
	"go_memstats_heap_inuse_bytes",
	"go_goroutines",
}

// newEnv creates a scenario's database and names its topics. extra are
// HOOKRELAY_* assignments for every hookrelay command of the scenario.
func (b *bench) newEnv(ctx context.Context, name string, extra ...string) (*env, error) {
	e := &env{
		b: b, name: name,
		prefix:  b.runID + name + ".",
		db:      "hb_" + strings.TrimPrefix(b.runID, "hb") + "_" + name,
		extra:   extra,
		logPath: filepath.Join(b.o.runDir, name+"-hookrelay.log"),
		mSeries: map[string][]float64{},
	}
	u, err := url.Parse(b.o.clickhouse)
	if err != nil {
		return nil, err
	}
	u.Path = "/" + e.db
	e.dsn = u.String()
	if err := b.ch.Exec(ctx, "CREATE DATABASE IF NOT EXISTS "+e.db); err != nil {
		return nil, fmt.Errorf("create database %s: %w", e.db, err)
	}
	if e.httpAddr, err = childproc.FreeAddr(); err != nil {
		return nil, err
	}
	return e, nil
}

// environ is hookrelay's environment: ours without HOOKRELAY_*, plus the
// scenario's settings.
func (e *env) environ(more ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HOOKRELAY_") {
			out = append(out, kv)
		}
	}
	out = append(out,
		"HOOKRELAY_BROKERS="+e.b.o.brokers,
		"HOOKRELAY_CLICKHOUSE="+e.dsn,
		"HOOKRELAY_TOPIC_PREFIX="+e.prefix,
		"HOOKRELAY_INSTANCE_ID=hookbench-"+e.name,
		"HOOKRELAY_HTTP_ADDR="+e.httpAddr,
		"HOOKRELAY_API_ADDR=127.0.0.1:0", // the api role's port: any free one
		"HOOKRELAY_ALLOW_NETWORKS=127.0.0.0/8",
		"HOOKRELAY_PARTITIONS="+strconv.Itoa(e.b.o.partitions),
		// Binary attempt records (the next release's default; this
		// release's is json): reported as options.attempt-format.
		"HOOKRELAY_ATTEMPT_FORMAT="+e.b.o.attemptFmt,
	)
	out = append(out, e.extra...)
	return append(out, more...)
}

// hookrelayCmd runs one short `hookrelay …` command and returns its output.
func (e *env) hookrelayCmd(ctx context.Context, args ...string) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, e.b.o.hookrelay, args...)
	cmd.Env = e.environ()
	out, err := cmd.CombinedOutput()
	if err != nil {
		shown := strings.Join(args, " ")
		if i := strings.Index(shown, "whsec_"); i >= 0 {
			j := strings.IndexByte(shown[i:], ' ')
			if j < 0 {
				j = len(shown) - i
			}
			shown = shown[:i] + "whsec_…" + shown[i+j:]
		}
		return string(out), fmt.Errorf("hookrelay %s: %v\n%s", shown, err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// ensureTopics creates the scenario's topics as `hookrelay run` would
// (pipeline.EnsureTopics, with its partitions and retry schedule), so events
// can be preloaded before hookrelay starts. `endpoints add` creates only the
// endpoint topics.
func (e *env) ensureTopics(ctx context.Context) error {
	schedule := retrytiers.DefaultSchedule()
	for _, kv := range e.environ() {
		if v, ok := strings.CutPrefix(kv, "HOOKRELAY_RETRY_SCHEDULE="); ok {
			var err error
			if schedule, err = retrytiers.ParseSchedule(v); err != nil {
				return err
			}
		}
	}
	topics := pipeline.NewTopics(e.prefix)
	policy, err := pipeline.NewRetryPolicy(schedule, topics, 0)
	if err != nil {
		return err
	}
	return pipeline.EnsureTopics(ctx, e.b.adm, topics, pipeline.TopicLayout{
		Partitions: int32(e.b.o.partitions), TierTopics: policy.Tiers().Topics(),
	})
}

// addEndpoints creates the scenario's topics, then registers specs with
// `hookrelay endpoints add`, four at a time.
func (e *env) addEndpoints(ctx context.Context, specs []endpointSpec) error {
	if err := e.ensureTopics(ctx); err != nil {
		return fmt.Errorf("topics: %w", err)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for _, s := range specs {
		args := []string{"endpoints", "add", "--id", s.ID, "--url", s.URL, "--secret", s.Secret,
			"--events", strings.Join(s.Events, ","),
			"--rate", strconv.FormatFloat(s.Rate, 'f', -1, 64),
			"--max-in-flight", strconv.Itoa(s.MaxInFlight)}
		if s.Timeout > 0 {
			args = append(args, "--timeout", s.Timeout.String())
		}
		g.Go(func() error {
			_, err := e.hookrelayCmd(gctx, args...)
			return err
		})
	}
	return g.Wait()
}

// start runs `hookrelay run` (with extra settings, e.g. HOOKRELAY_ROLES),
// waits for /readyz, and starts sampling its CPU, RSS and metrics (and the
// stack's CPU) every -sample interval.
func (e *env) start(ctx context.Context, more ...string) error {
	if e.hr != nil && !e.hr.Exited() {
		return errors.New("hookrelay already running")
	}
	if err := e.waitTopics(ctx, 30*time.Second); err != nil {
		return err
	}
	cmd := exec.Command(e.b.o.hookrelay, "run")
	cmd.Env = e.environ(more...)
	hr, err := childproc.Start("hookrelay run", cmd, e.logPath, nil)
	if err != nil {
		return err
	}
	if err := childproc.WaitReady(ctx, hr, e.httpAddr, 90*time.Second); err != nil {
		hr.Stop(10 * time.Second)
		return err
	}
	e.hr = hr
	pids := map[string]int{"hookrelay": hr.Pid()}
	for k, v := range e.b.stack {
		pids[k] = v
	}
	e.smp = newSampler(e.b.o.sample, pids, e.scrape)
	if e.probe, err = e.startProbe(ctx, 100*time.Millisecond); err != nil {
		e.b.logf("  Kafka probe not started: %v", err)
	}
	return nil
}

// waitTopics waits until every topic of the scenario that exists has every
// partition led, so hookrelay's first produce to a just-created topic does
// not meet a metadata load error (franz-go then backs off for seconds,
// which would show as a start-up stall no production deployment has).
func (e *env) waitTopics(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		topics, err := e.b.adm.ListTopics(ctx)
		var bad string
		if err != nil {
			bad = err.Error()
		} else {
			for _, t := range topics.Sorted() {
				if !strings.HasPrefix(t.Topic, e.prefix) {
					continue
				}
				if t.Err != nil || len(t.Partitions) == 0 {
					bad = fmt.Sprintf("%s: %v (%d partitions)", t.Topic, t.Err, len(t.Partitions))
					break
				}
				for _, p := range t.Partitions {
					if p.Err != nil || p.Leader < 0 {
						bad = fmt.Sprintf("%s/%d: leader %d, %v", t.Topic, p.Partition, p.Leader, p.Err)
						break
					}
				}
			}
		}
		if bad == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("topics of %s not ready within %s: %s", e.prefix, timeout, bad)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// scrape records the tracked metrics; a failed scrape is skipped.
func (e *env) scrape(now time.Time) {
	if e.hr == nil || e.hr.Exited() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ms, err := scrapeMetrics(ctx, e.httpAddr)
	if err != nil {
		return
	}
	e.mmu.Lock()
	defer e.mmu.Unlock()
	e.mAt = append(e.mAt, now)
	for _, name := range trackedMetrics {
		e.mSeries[name] = append(e.mSeries[name], ms.Sum(name))
	}
}

// metric returns the tracked metric's latest value.
func (e *env) metric(name string) float64 {
	e.mmu.Lock()
	defer e.mmu.Unlock()
	s := e.mSeries[name]
	if len(s) == 0 {
		return 0
	}
	return s[len(s)-1]
}

// metricAt interpolates a tracked counter at t.
func (e *env) metricAt(name string, t time.Time) float64 {
	e.mmu.Lock()
	defer e.mmu.Unlock()
	s := e.mSeries[name]
	samples := make([]Sample, len(s))
	for i := range s {
		samples[i] = Sample{At: e.mAt[i], CPU: s[i]}
	}
	return valueAt(samples, t, func(x Sample) float64 { return x.CPU })
}

// metricSeries copies a tracked metric's samples.
func (e *env) metricSeries(name string) ([]time.Time, []float64) {
	e.mmu.Lock()
	defer e.mmu.Unlock()
	return append([]time.Time(nil), e.mAt...), append([]float64(nil), e.mSeries[name]...)
}

// stop stops hookrelay (SIGTERM, 60 s grace) and the sampler. A non-clean
// exit is returned as an error naming the log.
func (e *env) Stop() error {
	if e.hr == nil {
		return nil
	}
	e.probe.Stop()
	err := e.hr.Stop(60 * time.Second)
	if e.smp != nil {
		e.smp.Stop()
	}
	if err != nil {
		return fmt.Errorf("hookrelay run did not stop cleanly: %v; last lines of %s:\n%s", err, e.logPath, childproc.Tail(e.logPath, 10))
	}
	return nil
}

// procFigures are one process's CPU and memory over a window.
type procFigures struct {
	CPUSeconds float64 `json:"cpu_s"`
	Cores      float64 `json:"cores"` // CPU seconds per wall second
	PeakRSSMiB float64 `json:"peak_rss_mib"`
}

// cpuReport gives every sampled process's CPU use over [from, to].
func (e *env) cpuReport(from, to time.Time) map[string]procFigures {
	out := map[string]procFigures{}
	if e.smp == nil {
		return out
	}
	secs := to.Sub(from).Seconds()
	for name := range e.smp.pids {
		ser := e.smp.Series(name)
		if len(ser) == 0 {
			continue
		}
		cpu := cpuBetween(ser, from, to)
		f := procFigures{CPUSeconds: round3(cpu), PeakRSSMiB: round1(float64(peakRSS(ser, from, to)) / 1024)}
		if secs > 0 {
			f.Cores = round3(cpu / secs)
		}
		out[name] = f
	}
	return out
}

// dump writes the receivers' latency samples to <run-dir>/<scenario>-latency.csv
// when -dump is set.
func (e *env) dump(rs receivers) {
	if !e.b.o.dump {
		return
	}
	path := filepath.Join(e.b.o.runDir, e.name+"-latency.csv")
	if err := rs.dumpLatency(path); err != nil {
		e.b.logf("  dump: %v", err)
		return
	}
	e.b.logf("  latency samples in %s", path)
}

// waitDeleted waits (bounded by ctx) until the deleted topics are gone from
// the metadata, so the next scenario does not start while the broker is
// still busy removing hundreds of partitions.
func (e *env) waitDeleted(ctx context.Context, topics []string) {
	for ctx.Err() == nil {
		md, err := e.b.adm.ListTopics(ctx, topics...)
		if err == nil {
			left := 0
			for _, t := range md.Sorted() {
				if t.Err == nil {
					left++
				}
			}
			if left == 0 {
				return
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// profile saves one of hookrelay's pprof endpoints to
// <run-dir>/<scenario>-<name>.pprof (look with `go tool pprof -top`).
func (e *env) profile(ctx context.Context, name, path string) {
	out := filepath.Join(e.b.o.runDir, e.name+"-"+name+".pprof")
	cl := &http.Client{Timeout: e.b.o.profile + 30*time.Second}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+e.httpAddr+path, nil)
	if err == nil {
		var res *http.Response
		if res, err = cl.Do(req); err == nil {
			defer res.Body.Close()
			if res.StatusCode != http.StatusOK {
				err = fmt.Errorf("GET %s: %s", path, res.Status)
			} else {
				var f *os.File
				if f, err = os.Create(out); err == nil {
					_, err = io.Copy(f, res.Body)
					err = errors.Join(err, f.Close())
				}
			}
		}
	}
	if err != nil {
		e.b.logf("  profile %s: %v", name, err)
		return
	}
	e.b.logf("  %s profile in %s", name, out)
}

// cleanup deletes the scenario's topics and database unless -keep.
func (e *env) cleanup(ctx context.Context) {
	if e.b.o.keep {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	topics, err := e.b.adm.ListTopics(ctx)
	if err == nil {
		var mine []string
		for _, t := range topics.Names() {
			if strings.HasPrefix(t, e.prefix) {
				mine = append(mine, t)
			}
		}
		if len(mine) > 0 {
			if _, err := e.b.adm.DeleteTopics(ctx, mine...); err != nil {
				e.b.logf("  cleanup: delete topics of %s: %v", e.prefix, err)
			} else {
				e.waitDeleted(ctx, mine)
			}
		}
	}
	for _, db := range append([]string{e.db}, e.dropAlso...) {
		if err := e.b.ch.Exec(ctx, "DROP DATABASE IF EXISTS "+db); err != nil {
			e.b.logf("  cleanup: drop database %s: %v", db, err)
		}
	}
}
