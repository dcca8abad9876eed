// Command hookbench is hookrelay's benchmark harness (`make bench`): it runs
// the scenarios of the benchmark issue against the real local stack (Kafka at
// 127.0.0.1:9092 and ClickHouse at 127.0.0.1:9000, `make up`) and bin/hookrelay
// as a subprocess (`make build`), prints progress and human-readable results,
// and ends with ONE line of JSON holding every figure.
//
// Scenarios (-scenarios, default all; -quick shrinks every size so the whole
// run takes two to three minutes):
//
//  1. Throughput: -s1-endpoints fast endpoints, -s1-deliveries events
//     preloaded (one delivery each), hookrelay started, 2xx completions
//     counted at the receivers; the sustained rate is taken between 10 % and
//     90 % of the completions. Also hookrelay CPU seconds per 1,000
//     deliveries (from /proc/<pid>/stat) and RSS (/proc/<pid>/status). A
//     second pass does the same with the real GitHub payloads of
//     @octokit/webhooks-examples (-github-deliveries; 0 skips it).
//  2. Latency: an open-loop load of -s2-rate events/s; produce → receive
//     latency (produce instant carried in the payload) p50/p99/p99.9.
//  3. Isolation: -iso-fast fast endpoints plus one endpoint that hangs until
//     the request timeout and gets 20 % of the events; the fast endpoints'
//     p99 and throughput as a ratio to the same run without the hung
//     endpoint; the hung endpoint's peak concurrent requests.
//  4. Naive baseline: the same load through a shared pool of -naive-workers
//     workers with no per-endpoint pacing (hookbench's own consumer of the
//     deliveries topic, using hookrelay's webhook.Sender), run with and
//     without the hung endpoint.
//  5. Retry precision: a retry schedule of seconds (-s5-schedule), endpoints
//     failing the first attempts; lateness = arrival − due time.
//  6. Backlog: a dead endpoint accumulating -s6-pending deliveries; RSS at
//     -s6-first and at -s6-pending pending, healthy endpoints' throughput
//     meanwhile.
//  7. Audit sink: attempts/s the sink inserts into ClickHouse, and the time
//     of one endpoint's last-100 query on -s7-rows rows.
//  8. Ceiling: wrk (or a Go loop) posting 1 KiB bodies to the same receiver.
//  9. Steady: scenario 2's load at -steady-rate events/s (default 500), the
//     load most deployments see most of the time: cores of hookrelay plus
//     Kafka, and p99.
//  10. Burst: -burst-healthy endpoints at -burst-healthy-rate events/s while
//     one more endpoint receives -burst-events events produced at
//     -burst-rate; the healthy endpoints' latency during the burst.
//
// Scenario api (-scenarios api): management API reads. -api-rows synthetic
// attempt rows (default 10 M; -quick 500 k) over -api-endpoints endpoints
// (1,000, created through POST /v1/endpoints) and 7 days, inserted with
// chstore's batch insert (views attached: the insert rate), then `hookrelay
// run --roles api` and -api-requests HTTP round trips each of: the delivery
// log's first page and an event_id page, the 24 h chart per hour and per
// minute, and GET /v1/endpoints?include=stats.
//
// Every scenario that delivers reports hookrelay's and Kafka's CPU seconds
// per 1,000 deliveries (Kafka's from /proc/<pid>/stat of the broker named
// in -stack-pids). When the 1-minute load average at start is above 1.0,
// the output and the JSON (machine.busy, warnings) say so: the figures of a
// busy machine are not comparable with a quiet one's.
//
// Every scenario uses its own topic prefix ("hb<unix><scenario>.") and
// ClickHouse database, and every run that sends webhooks checks that
// ClickHouse holds one attempt row per request the receivers saw. Topics and
// databases are deleted afterwards unless -keep. Receivers are in-process
// net/http servers, one port per endpoint, that verify every
// -verify-every-th signature with the Standard Webhooks reference library.
//
// Other flags: -profile saves hookrelay's CPU and allocation profiles
// (scenario 1) and live-heap profiles at scenario 6's marks; -dump writes the
// paced scenarios' latency samples as CSV; -purge deletes what earlier runs
// left behind (-keep, interrupted runs) and exits.
//
// Exit status: 0 when every scenario ran and every check passed; 1
// otherwise (the JSON line is printed either way).
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// options are hookbench's flags.
type options struct {
	scenarios    string
	quick        bool
	hookrelay    string
	brokers      string
	clickhouse   string
	runDir       string
	stackPids    string
	partitions   int
	attemptFmt   string
	sample       time.Duration
	progress     time.Duration
	keep         bool
	purge        bool
	dump         bool
	profile      time.Duration
	verifyEvery  int
	payloadBytes int
	warmup       time.Duration
	drainTimeout time.Duration
	checkTimeout time.Duration

	s1Endpoints, s1Deliveries, s1MaxInFlight, s1Backlog int
	s1Rate                                              float64
	githubDeliveries                                    int
	githubDir                                           string

	s2Endpoints            int
	s2Rate, s2EndpointRate float64
	s2Duration             time.Duration

	isoFast, isoHungInFlight, naiveWorkers int
	isoRate, isoFastRate, isoHungRate      float64
	isoDuration, hangTimeout               time.Duration

	s5Endpoints, s5FailFirst int
	s5Rate                   float64
	s5Duration               time.Duration
	s5Schedule               string

	s6First, s6Pending, s6Healthy int
	s6HealthyRate                 float64

	s7Attempts, s7Rows int

	apiRows, apiEndpoints, apiRequests int

	s8Connections int
	s8Duration    time.Duration
	wrk           string

	steadyEndpoints int
	steadyRate      float64
	steadyDuration  time.Duration

	burstHealthy, burstEvents                      int
	burstHealthyRate, burstRate, burstEndpointRate float64
}

// allScenarios are the scenario keys, in the order they run.
var allScenarios = []string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "api"}

func main() {
	var o options
	fs := flag.CommandLine
	fs.StringVar(&o.scenarios, "scenarios", strings.Join(allScenarios, ","), "scenarios to run, comma-separated (1-10)")
	fs.BoolVar(&o.quick, "quick", false, "smoke run: every size shrunk (flags set explicitly still win); two to three minutes")
	fs.StringVar(&o.hookrelay, "hookrelay", "bin/hookrelay", "hookrelay binary (`make build`)")
	fs.StringVar(&o.brokers, "brokers", cmp.Or(os.Getenv("HOOKRELAY_BROKERS"), "127.0.0.1:9092"), "Kafka brokers (env HOOKRELAY_BROKERS)")
	fs.StringVar(&o.clickhouse, "clickhouse", cmp.Or(os.Getenv("HOOKRELAY_CLICKHOUSE"), "clickhouse://127.0.0.1:9000/default"), "ClickHouse DSN (env HOOKRELAY_CLICKHOUSE); each scenario replaces the database")
	fs.StringVar(&o.runDir, "run-dir", "", "where hookrelay logs go (default .local/bench/<run id>)")
	fs.StringVar(&o.stackPids, "stack-pids", ".local/pids", "directory of kafka.pid and clickhouse.pid, to report the stack's CPU (optional)")
	fs.IntVar(&o.partitions, "partitions", 12, "HOOKRELAY_PARTITIONS of every scenario")
	fs.StringVar(&o.attemptFmt, "attempt-format", "binary", "HOOKRELAY_ATTEMPT_FORMAT of every scenario: binary (the next release's default, measured here) or json (this release's default)")
	fs.DurationVar(&o.sample, "sample", time.Second, "CPU/RSS/metrics sampling interval")
	fs.DurationVar(&o.progress, "progress", 5*time.Second, "progress line interval")
	fs.BoolVar(&o.keep, "keep", false, "keep each scenario's topics and database")
	fs.BoolVar(&o.purge, "purge", false, "delete the topics and databases earlier runs left (-keep, interrupted runs), then exit")
	fs.DurationVar(&o.profile, "profile", 0, "scenario 1: save a CPU profile of hookrelay this long (from 10 % delivered) and an allocation profile to <run-dir>; 0: none")
	fs.BoolVar(&o.dump, "dump", false, "write each paced scenario's latency samples to <run-dir>/<scenario>-latency.csv")
	fs.IntVar(&o.verifyEvery, "verify-every", 10, "receivers verify every n-th request's signature (1: all)")
	fs.IntVar(&o.payloadBytes, "payload-bytes", 1024, "size of each synthetic event's data")
	fs.DurationVar(&o.warmup, "warmup", 5*time.Second, "paced scenarios: load before the measurement window")
	fs.DurationVar(&o.drainTimeout, "drain-timeout", 15*time.Minute, "longest wait for a preloaded backlog to drain or be taken in")
	fs.DurationVar(&o.checkTimeout, "check-timeout", 2*time.Minute, "longest wait for ClickHouse to hold every attempt row")

	fs.IntVar(&o.s1Endpoints, "s1-endpoints", 100, "scenario 1: endpoints")
	fs.IntVar(&o.s1Deliveries, "s1-deliveries", 200000, "scenario 1: deliveries (events preloaded, one delivery each)")
	fs.Float64Var(&o.s1Rate, "s1-rate", 1000, "scenario 1: rate limit per endpoint, requests/s")
	fs.IntVar(&o.s1MaxInFlight, "s1-max-in-flight", 16, "scenario 1: max in flight per endpoint")
	fs.IntVar(&o.s1Backlog, "s1-endpoint-backlog", 5000, "scenario 1: HOOKRELAY_ENDPOINT_BACKLOG, above the per-endpoint share so the preloaded burst is not parked")
	fs.IntVar(&o.githubDeliveries, "github-deliveries", 50000, "scenario 1: deliveries of the GitHub-payload pass (0: skip it)")
	fs.StringVar(&o.githubDir, "github-dir", "e2e/receiver/node_modules/@octokit/webhooks-examples", "the @octokit/webhooks-examples package (`make deps`)")

	fs.IntVar(&o.s2Endpoints, "s2-endpoints", 10, "scenario 2: endpoints")
	fs.Float64Var(&o.s2Rate, "s2-rate", 1000, "scenario 2: offered events/s")
	fs.Float64Var(&o.s2EndpointRate, "s2-endpoint-rate", 500, "scenario 2: rate limit per endpoint")
	fs.DurationVar(&o.s2Duration, "s2-duration", 60*time.Second, "scenario 2: measurement window")

	fs.IntVar(&o.isoFast, "iso-fast", 50, "scenarios 3-4: fast endpoints")
	fs.Float64Var(&o.isoRate, "iso-rate", 1000, "scenarios 3-4: offered events/s (20 % to the hung endpoint)")
	fs.Float64Var(&o.isoFastRate, "iso-fast-rate", 100, "scenarios 3-4: rate limit per fast endpoint")
	fs.Float64Var(&o.isoHungRate, "iso-hung-rate", 50, "scenarios 3-4: rate limit of the hung endpoint")
	fs.IntVar(&o.isoHungInFlight, "iso-hung-max-in-flight", 10, "scenarios 3-4: max in flight of the hung endpoint")
	fs.DurationVar(&o.hangTimeout, "hang-timeout", 5*time.Second, "scenarios 3-4: the hung endpoint's request timeout")
	fs.DurationVar(&o.isoDuration, "iso-duration", 60*time.Second, "scenarios 3-4: measurement window")
	fs.IntVar(&o.naiveWorkers, "naive-workers", 50, "scenario 4: workers of the shared pool")

	fs.IntVar(&o.s5Endpoints, "s5-endpoints", 10, "scenario 5: endpoints")
	fs.IntVar(&o.s5FailFirst, "s5-fail-first", 3, "scenario 5: attempts answered 503 before a 200")
	fs.Float64Var(&o.s5Rate, "s5-rate", 200, "scenario 5: offered events/s")
	fs.DurationVar(&o.s5Duration, "s5-duration", 20*time.Second, "scenario 5: how long events are produced")
	fs.StringVar(&o.s5Schedule, "s5-schedule", "1s,2s,4s", "scenario 5: HOOKRELAY_RETRY_SCHEDULE")

	fs.IntVar(&o.s6First, "s6-first", 100000, "scenario 6: first pending mark")
	fs.IntVar(&o.s6Pending, "s6-pending", 1000000, "scenario 6: last pending mark")
	fs.IntVar(&o.s6Healthy, "s6-healthy", 10, "scenario 6: healthy endpoints")
	fs.Float64Var(&o.s6HealthyRate, "s6-healthy-rate", 200, "scenario 6: offered healthy events/s")

	fs.IntVar(&o.s7Attempts, "s7-attempts", 1000000, "scenario 7: attempt records the sink drains (a million: the sink inserts 50,000 at a time, and its rate is read from once-a-second samples)")
	fs.IntVar(&o.s7Rows, "s7-rows", 10000000, "scenario 7: rows in the table queried")

	fs.IntVar(&o.apiRows, "api-rows", 10000000, "scenario api: synthetic attempt rows (over 7 days)")
	fs.IntVar(&o.apiEndpoints, "api-endpoints", 1000, "scenario api: endpoints")
	fs.IntVar(&o.apiRequests, "api-requests", 100, "scenario api: requests per measured query")
	fs.IntVar(&o.s8Connections, "s8-connections", 64, "scenario 8: connections")
	fs.DurationVar(&o.s8Duration, "s8-duration", 30*time.Second, "scenario 8: duration")
	fs.StringVar(&o.wrk, "wrk", "wrk", "scenario 8: the wrk binary (a Go loop is used when missing)")

	fs.IntVar(&o.steadyEndpoints, "steady-endpoints", 10, "scenario 9: endpoints")
	fs.Float64Var(&o.steadyRate, "steady-rate", 500, "scenario 9: offered events/s")
	fs.DurationVar(&o.steadyDuration, "steady-duration", 60*time.Second, "scenario 9: measurement window")

	fs.IntVar(&o.burstHealthy, "burst-healthy", 10, "scenario 10: healthy endpoints")
	fs.Float64Var(&o.burstHealthyRate, "burst-healthy-rate", 200, "scenario 10: offered healthy events/s (all healthy endpoints together)")
	fs.IntVar(&o.burstEvents, "burst-events", 1000000, "scenario 10: events of the burst, all for one endpoint")
	fs.Float64Var(&o.burstRate, "burst-rate", 20000, "scenario 10: offered burst events/s")
	fs.Float64Var(&o.burstEndpointRate, "burst-endpoint-rate", 1000, "scenario 10: rate limit of the burst endpoint, requests/s")
	flag.Parse()
	if o.quick {
		applyQuick(&o, fs)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	report, err := run(ctx, o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "hookbench: %v\n", err)
		if report == nil {
			os.Exit(1)
		}
		report.Failures = append(report.Failures, err.Error())
		report.OK = false
	}
	line, jerr := json.Marshal(report)
	if jerr != nil {
		fmt.Fprintf(os.Stderr, "hookbench: encode report: %v\n", jerr)
		os.Exit(1)
	}
	fmt.Println(string(line))
	if !report.OK {
		os.Exit(1)
	}
}

// applyQuick shrinks every size the user did not set explicitly.
func applyQuick(o *options, fs *flag.FlagSet) {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	quick := map[string]string{
		"sample": "500ms", "progress": "3s", "warmup": "2s", "drain-timeout": "3m", "check-timeout": "60s",
		"s1-deliveries": "20000", "github-deliveries": "5000",
		"s2-duration": "8s",
		"iso-rate":    "500", "iso-duration": "8s", "hang-timeout": "3s",
		"s5-rate": "100", "s5-duration": "4s",
		"s6-first": "10000", "s6-pending": "100000",
		"s7-attempts": "50000", "s7-rows": "1000000",
		"api-rows":        "500000",
		"s8-duration":     "5s",
		"steady-duration": "8s",
		"burst-events":    "100000",
	}
	for name, v := range quick {
		if !set[name] {
			if err := fs.Set(name, v); err != nil {
				panic(err) // a typo in the table above
			}
		}
	}
}

// Report is the JSON line.
type Report struct {
	Hookbench string         `json:"hookbench"`
	Mode      string         `json:"mode"`
	RunID     string         `json:"run_id"`
	Started   time.Time      `json:"started"`
	Elapsed   float64        `json:"elapsed_s"`
	Machine   Machine        `json:"machine"`
	Options   map[string]any `json:"options"`
	Results   map[string]any `json:"scenarios"`
	Summary   map[string]any `json:"summary"`
	Warnings  []string       `json:"warnings,omitempty"`
	OK        bool           `json:"ok"`
	Failures  []string       `json:"failures,omitempty"`
}

// Machine describes where the run happened.
type Machine struct {
	CPUs       int    `json:"cpus"`
	CPUModel   string `json:"cpu_model"`
	MemoryMiB  int64  `json:"memory_mib"`
	Kernel     string `json:"kernel"`
	Go         string `json:"go"`
	ClickHouse string `json:"clickhouse"`
	Load1      string `json:"loadavg_at_start"`
	// Busy: the 1-minute load average at start was above busyLoad; the
	// figures are not comparable with a quiet machine's.
	Busy bool `json:"busy"`
}

// busyLoad is the 1-minute load average above which a run is flagged busy.
const busyLoad = 1.0

func run(ctx context.Context, o options) (*Report, error) {
	want := map[string]bool{}
	for _, s := range strings.Split(o.scenarios, ",") {
		if s = strings.TrimSpace(s); s != "" {
			if !slices.Contains(allScenarios, s) {
				return nil, fmt.Errorf("-scenarios: unknown scenario %q (want 1-10 or api)", s)
			}
			want[s] = true
		}
	}
	if _, err := os.Stat(o.hookrelay); err != nil && (len(want) > 1 || !want["8"]) {
		return nil, fmt.Errorf("%w (run `make build`)", err)
	}
	if abs, err := filepath.Abs(o.hookrelay); err == nil {
		o.hookrelay = abs
	}
	b, err := newBench(ctx, o)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	if o.purge {
		return &Report{Hookbench: "1", Mode: "purge", RunID: b.runID, OK: true}, b.purge(ctx)
	}
	if o.runDir == "" {
		o.runDir = filepath.Join(".local", "bench", b.runID)
	}
	if err := os.MkdirAll(o.runDir, 0o755); err != nil {
		return nil, err
	}
	b.o = o
	rep := &Report{Hookbench: "1", Mode: "full", RunID: b.runID, Started: b.t0.UTC(), Machine: machine(ctx, b),
		Options: optionMap(), Results: map[string]any{}, Summary: map[string]any{}, OK: true}
	if o.quick {
		rep.Mode = "quick"
	}
	b.logf("hookbench %s run %s: scenarios %s; logs in %s; machine: %d CPUs (%s), %d MiB, load %s",
		rep.Mode, b.runID, o.scenarios, o.runDir, rep.Machine.CPUs, rep.Machine.CPUModel, rep.Machine.MemoryMiB, rep.Machine.Load1)
	if rep.Machine.Busy {
		w := fmt.Sprintf("WARNING: load average at start %s (1-minute above %.1f): the machine is busy, figures are not comparable with a quiet run", rep.Machine.Load1, busyLoad)
		rep.Warnings = append(rep.Warnings, w)
		b.logf("%s", w)
	}

	fail := func(key string, err error) {
		rep.OK = false
		rep.Failures = append(rep.Failures, fmt.Sprintf("scenario %s: %v", key, err))
		b.logf("scenario %s FAILED: %v", key, err)
	}
	check := func(key string, c Check) {
		if !c.OK {
			rep.OK = false
			rep.Failures = append(rep.Failures, fmt.Sprintf("scenario %s: audit check failed: %s", key, checkWord(c)))
		}
	}
	// The ceiling first: it is the yardstick and needs an idle stack.
	if want["8"] && ctx.Err() == nil {
		if r, err := b.runCeiling(ctx); err != nil {
			fail("8", err)
		} else {
			rep.Results["8_ceiling"] = r
			rep.Summary["ceiling_requests_per_s"] = r.RequestsPerSec
		}
	}
	if want["api"] && ctx.Err() == nil {
		if r, err := b.runAPI(ctx); err != nil {
			fail("api", err)
		} else {
			rep.Results["api"] = r
			rep.Summary["api_log_p99_ms"] = r.LogFirstPage.P99
			rep.Summary["api_chart_minute_p99_ms"] = r.ChartMinute.P99
			rep.Summary["api_endpoints_stats_p99_ms"] = r.EndpointsPage.P99
			rep.Summary["api_insert_rows_per_s"] = r.InsertPerSec
		}
	}
	if want["1"] && ctx.Err() == nil {
		if r, err := b.runThroughput(ctx, false); err != nil {
			fail("1", err)
		} else {
			rep.Results["1_throughput"] = r
			check("1", r.Check)
			rep.Summary["deliveries_per_s"] = r.DeliveriesPerSec
			rep.Summary["cpu_s_per_1000_deliveries"] = r.CPUPer1000
			rep.Summary["kafka_cpu_s_per_1000_deliveries"] = r.KafkaCPUPer1000
			rep.Summary["throughput_peak_rss_mib"] = r.PeakRSSMiB
		}
		if o.githubDeliveries > 0 && ctx.Err() == nil {
			if r, err := b.runThroughput(ctx, true); err != nil {
				fail("1 (GitHub payloads)", err)
			} else {
				rep.Results["1_throughput_github"] = r
				check("1 (GitHub payloads)", r.Check)
				rep.Summary["github_deliveries_per_s"] = r.DeliveriesPerSec
				rep.Summary["github_cpu_s_per_1000_deliveries"] = r.CPUPer1000
				rep.Summary["github_kafka_cpu_s_per_1000_deliveries"] = r.KafkaCPUPer1000
			}
		}
	}
	if want["2"] && ctx.Err() == nil {
		if r, err := b.runLatency(ctx, latencyLoad{key: "2", title: "latency", endpoints: o.s2Endpoints,
			rate: o.s2Rate, epRate: o.s2EndpointRate, window: o.s2Duration}); err != nil {
			fail("2", err)
		} else {
			rep.Results["2_latency"] = r
			check("2", r.Check)
			rep.Summary["latency_p50_ms"] = r.Latency.P50
			rep.Summary["latency_p99_ms"] = r.Latency.P99
			rep.Summary["latency_p999_ms"] = r.Latency.P999
			rep.Summary["latency_kafka_cpu_s_per_1000_deliveries"] = r.KafkaCPUPer1000
		}
	}
	if want["9"] && ctx.Err() == nil {
		if r, err := b.runLatency(ctx, latencyLoad{key: "9", title: "steady", endpoints: o.steadyEndpoints,
			rate: o.steadyRate, epRate: o.s2EndpointRate, window: o.steadyDuration}); err != nil {
			fail("9", err)
		} else {
			rep.Results["9_steady"] = r
			check("9", r.Check)
			rep.Summary["steady_p99_ms"] = r.Latency.P99
			rep.Summary["steady_hookrelay_plus_kafka_cores"] = r.StackCores
			rep.Summary["steady_hookrelay_cores"] = r.HookrelayCores
			rep.Summary["steady_kafka_cores"] = r.KafkaCores
		}
	}
	if (want["3"] || want["4"]) && ctx.Err() == nil {
		r, err := b.runIsolationAll(ctx, want["3"], want["4"])
		if r != nil {
			rep.Results["3_4_isolation"] = r
			for name, run := range r.Runs {
				check(name, run.Check)
			}
			if want["3"] {
				rep.Summary["isolation_fast_p99_ratio"] = r.P99Ratio
				rep.Summary["isolation_fast_throughput_ratio"] = r.ThroughputRatio
				if h := r.Runs["hookrelay_hung"]; h != nil {
					rep.Summary["isolation_hung_peak_in_flight"] = h.HungPeakInFlight
					rep.Summary["isolation_hung_peak_in_flight_live"] = h.HungPeakLive
				}
			}
			if want["4"] {
				rep.Summary["naive_fast_p99_ratio"] = r.NaiveP99Ratio
				rep.Summary["naive_fast_throughput_ratio"] = r.NaiveThruRatio
				if h := r.Runs["naive_hung"]; h != nil {
					rep.Summary["naive_hung_peak_in_flight"] = h.HungPeakInFlight
					rep.Summary["naive_hung_peak_in_flight_live"] = h.HungPeakLive
					rep.Summary["naive_fast_delivered_fraction"] = h.FastDeliveredFrac
				}
			}
		}
		if err != nil {
			fail("3/4", err)
		}
	}
	if want["5"] && ctx.Err() == nil {
		if r, err := b.runRetry(ctx); err != nil {
			fail("5", err)
		} else {
			rep.Results["5_retry"] = r
			check("5", r.Check)
			if r.Lateness.Below > 0 || r.Unmatched > 0 {
				rep.OK = false
				rep.Failures = append(rep.Failures, fmt.Sprintf("scenario 5: %d retries arrived early, %d unmatched", r.Lateness.Below, r.Unmatched))
			}
			rep.Summary["retry_lateness_p50_ms"] = r.Lateness.P50
			rep.Summary["retry_lateness_p99_ms"] = r.Lateness.P99
			rep.Summary["retry_early"] = r.Lateness.Below
		}
	}
	if want["6"] && ctx.Err() == nil {
		if r, err := b.runBacklog(ctx); err != nil {
			fail("6", err)
		} else {
			rep.Results["6_backlog"] = r
			check("6", r.Check)
			rep.Summary["backlog_rss_ratio"] = r.RSSRatio
			rep.Summary["backlog_bounded"] = r.Bounded
			rep.Summary["backlog_healthy_ratio"] = r.HealthyRatio
		}
	}
	if want["10"] && ctx.Err() == nil {
		if r, err := b.runBurst(ctx); err != nil {
			fail("10", err)
		} else {
			rep.Results["10_burst"] = r
			check("10", r.Check)
			rep.Summary["burst_healthy_p99_ms"] = r.HealthyLatency.P99
			rep.Summary["burst_healthy_p99_lower_bound_ms"] = r.HealthyP99Bound
			rep.Summary["burst_healthy_delivered_fraction"] = r.HealthyFrac
		}
	}
	if want["7"] && ctx.Err() == nil {
		r, err := b.runAudit(ctx)
		if r != nil {
			rep.Results["7_audit"] = r
			check("7", r.SinkCheck)
			rep.Summary["sink_rows_per_s"] = r.SinkRowsPerSec
			rep.Summary["last100_query_warm_p50_ms"] = r.QueryWarm.P50
			rep.Summary["last100_query_rows"] = r.Rows
		}
		if err != nil {
			fail("7", err)
		}
	}
	if c, ok := rep.Summary["ceiling_requests_per_s"].(float64); ok && c > 0 {
		if d, ok := rep.Summary["deliveries_per_s"].(float64); ok {
			rep.Summary["throughput_fraction_of_ceiling"] = ratio(d, c)
		}
	}
	if ctx.Err() != nil {
		rep.OK = false
		rep.Failures = append(rep.Failures, "interrupted")
	}
	rep.Elapsed = round1(time.Since(b.t0).Seconds())
	printSummary(rep)
	return rep, nil
}

// printSummary prints the headline figures.
func printSummary(rep *Report) {
	fmt.Printf("\n=== hookbench %s run %s: %.0fs, ok=%v ===\n", rep.Mode, rep.RunID, rep.Elapsed, rep.OK)
	fmt.Printf("  %-36s %v\n", "hookrelay attempt format", rep.Options["attempt-format"])
	keys := make([]string, 0, len(rep.Summary))
	for k := range rep.Summary {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Printf("  %-36s %v\n", k, rep.Summary[k])
	}
	for _, w := range rep.Warnings {
		fmt.Printf("  %s\n", w)
	}
	for _, f := range rep.Failures {
		fmt.Printf("  FAILURE: %s\n", f)
	}
	fmt.Println()
}

// optionMap is the options as they were, for the JSON line.
func optionMap() map[string]any {
	m := map[string]any{}
	flag.VisitAll(func(f *flag.Flag) { m[f.Name] = f.Value.String() })
	return m
}

// machine gathers the machine's description.
func machine(ctx context.Context, b *bench) Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version()}
	if raw, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(raw), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				m.CPUModel = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	if raw, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(raw), "\n") {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				var kb int64
				fmt.Sscan(strings.TrimSpace(v), &kb)
				m.MemoryMiB = kb / 1024
			}
		}
	}
	if raw, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(raw))
	}
	if raw, err := os.ReadFile("/proc/loadavg"); err == nil {
		f := strings.Fields(string(raw))
		m.Load1 = strings.Join(f[:3], " ")
		if l, err := strconv.ParseFloat(f[0], 64); err == nil && l > busyLoad {
			m.Busy = true
		}
	}
	_ = b.ch.QueryRow(ctx, "SELECT version()").Scan(&m.ClickHouse)
	return m
}
