// Command hookrelay-demo runs hookrelay's main job end to end on real input:
// every GitHub webhook payload of the npm package @octokit/webhooks-examples,
// published as CloudEvents, delivered to three local receivers that verify
// every signature with the third-party `standardwebhooks` npm package, with
// every attempt read back from ClickHouse. `make demo` runs it.
//
// It expects the local stack to be up (`make up`: Kafka at 127.0.0.1:9092,
// ClickHouse at 127.0.0.1:9000), `make build` (bin/hookrelay) and `make deps`
// (npm ci in e2e/receiver) to have run, and the working directory to be the
// repository root (or -hookrelay and -receiver-dir to say where things are).
//
// What it does, in order:
//  1. loads every distinct payload of the package's index files
//     (api.github.com and the ghes-* versions; a payload repeated byte for
//     byte is published once);
//  2. starts three receivers (e2e/receiver/receiver.js): fast (200 at once),
//     slow (200 after -slow-ms, default 900 ms) and fail-first (500 to the
//     first request of each webhook-id, then 200), each with its own fresh
//     whsec_ secret;
//  3. creates an admin key of the management API with `hookrelay apikeys
//     create --admin`;
//  4. starts `hookrelay run` with a short retry schedule (2s,5s,10s) and the
//     SSRF allow-list 127.0.0.0/8, and waits for GET /readyz 200;
//  5. registers one endpoint per receiver through the management API
//     (POST /v1/endpoints with the admin key): fast "*" at 200/s, slow
//     "issues.*,push" at 20/s with 4 in flight, fail-first
//     "pull_request.*,release.*" at 50/s;
//  6. publishes every payload as a CloudEvent to <prefix>events, most in
//     structured mode, every -binary-every-th in binary mode;
//  7. waits until every (event, endpoint) pair its own filters select has a
//     final attempt row in ClickHouse (-timeout, default 180 s);
//  8. prints per endpoint (from ClickHouse) and per receiver (GET /stats) what
//     happened, and checks it;
//  9. prints the management API's address, the admin key and the console's
//     address (/console/); with -serve keeps hookrelay and the receivers
//     running for them until Ctrl-C;
//  10. stops hookrelay (SIGTERM) and the receivers; the stack stays up.
//
// Isolation: each run uses a fresh topic prefix ("demo<unix>.") and a fresh
// ClickHouse database ("demo_<unix>"), so reruns never see each other's
// endpoints, events or attempts. A successful run deletes its topics and
// consumer groups at the end (-keep keeps them; a failed run always does, to
// be investigated). The database is left in place so the delivery log can be
// read afterwards (the `hookrelay log` command to do so is printed); DROP
// DATABASE, or `make reset`, removes it.
//
// It exits non-zero, naming what went wrong, when: the stack or a binary is
// missing, hookrelay does not become ready, an expected delivery has no final
// attempt row in time, a delivery the filters do not select was attempted,
// any signature failed the receiver's verification, a receiver was sent an
// event twice with success, a receiver saw a different number of requests
// than ClickHouse holds answered attempts for its endpoint, or an expected
// delivery's final outcome is not "delivered".
//
// Logs of the run (hookrelay's, each receiver's, and each receiver's
// per-request JSON lines) go to .local/demo/<prefix>/.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hookrelay/hookrelay/cmd/internal/childproc"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/twmb/franz-go/pkg/kgo"
)

type options struct {
	hookrelay   string
	receiverDir string
	node        string
	brokers     string
	clickhouse  string
	database    string
	prefix      string
	runDir      string
	timeout     time.Duration
	slow        time.Duration
	binaryEvery int
	keep        bool
	serve       bool
}

func main() {
	now := time.Now()
	o := options{}
	flag.StringVar(&o.hookrelay, "hookrelay", "bin/hookrelay", "hookrelay binary (built by `make build`)")
	flag.StringVar(&o.receiverDir, "receiver-dir", "e2e/receiver", "directory of receiver.js and its node_modules (`make deps`)")
	flag.StringVar(&o.node, "node", "node", "Node.js binary")
	flag.StringVar(&o.brokers, "brokers", cmp.Or(os.Getenv("HOOKRELAY_BROKERS"), "127.0.0.1:9092"), "Kafka bootstrap brokers, comma-separated (env HOOKRELAY_BROKERS)")
	flag.StringVar(&o.clickhouse, "clickhouse", cmp.Or(os.Getenv("HOOKRELAY_CLICKHOUSE"), "clickhouse://127.0.0.1:9000/hookrelay"), "ClickHouse DSN (env HOOKRELAY_CLICKHOUSE); its database is replaced by -database")
	flag.StringVar(&o.database, "database", fmt.Sprintf("demo_%d", now.Unix()), "ClickHouse database of this run (created by hookrelay's migrations)")
	flag.StringVar(&o.prefix, "topic-prefix", fmt.Sprintf("demo%d.", now.Unix()), "topic prefix of this run")
	flag.StringVar(&o.runDir, "run-dir", "", "where the run's logs go (default .local/demo/<topic prefix>)")
	flag.DurationVar(&o.timeout, "timeout", 180*time.Second, "how long to wait for every expected delivery's final attempt row")
	flag.DurationVar(&o.slow, "slow", 900*time.Millisecond, "how long the slow receiver takes to answer")
	flag.IntVar(&o.binaryEvery, "binary-every", 25, "publish every n-th event in binary content mode (0: none)")
	flag.BoolVar(&o.keep, "keep", false, "keep the run's Kafka topics and consumer groups after a successful run (a failed run always keeps them)")
	flag.BoolVar(&o.serve, "serve", false, "after a successful run, keep hookrelay (its API and console) and the receivers running until Ctrl-C")
	flag.Parse()
	if o.runDir == "" {
		o.runDir = filepath.Join(".local", "demo", strings.TrimSuffix(o.prefix, "."))
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("interrupted (%v); hookrelay and the receivers were stopped", err)
		}
		fmt.Fprintf(os.Stderr, "\ndemo FAILED: %v\n", err)
		os.Exit(1)
	}
}

// demoEndpoints are the endpoints the demo registers, one per receiver.
var demoEndpoints = []demoEndpoint{
	{ID: "fast", Behaviour: "fast", Events: []string{"*"}, Rate: 200, MaxInFlight: 16},
	{ID: "slow", Behaviour: "slow", Events: []string{"issues.*", "push"}, Rate: 20, MaxInFlight: 4},
	{ID: "fail-first", Behaviour: "fail-first", Events: []string{"pull_request.*", "release.*"}, Rate: 50, MaxInFlight: 4},
}

func run(ctx context.Context, o options) error {
	t0 := time.Now()
	step := func(format string, args ...any) {
		fmt.Printf("[%6.1fs] %s\n", time.Since(t0).Seconds(), fmt.Sprintf(format, args...))
	}
	dsn, err := databaseDSN(o.clickhouse, o.database)
	if err != nil {
		return err
	}
	for _, p := range []struct{ path, hint string }{
		{o.hookrelay, "run `make build`"},
		{filepath.Join(o.receiverDir, "receiver.js"), "run from the repository root or pass -receiver-dir"},
		{filepath.Join(o.receiverDir, "node_modules", "standardwebhooks"), "run `make deps`"},
	} {
		if _, err := os.Stat(p.path); err != nil {
			return fmt.Errorf("%w (%s)", err, p.hint)
		}
	}
	for _, p := range []*string{&o.hookrelay, &o.receiverDir, &o.runDir} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			return err
		}
		*p = abs
	}
	if err := os.MkdirAll(o.runDir, 0o755); err != nil {
		return err
	}

	evs, dups, err := loadExamples(filepath.Join(o.receiverDir, examplesPackage), o.binaryEvery)
	if err != nil {
		return err
	}
	binary, types := 0, map[string]bool{}
	for _, ev := range evs {
		types[ev.Type] = true
		if ev.Binary {
			binary++
		}
	}
	want := expectedPairs(evs, demoEndpoints)
	step("hookrelay demo: %d distinct GitHub webhook payloads (%d repeats skipped), %d event types; topic prefix %q, ClickHouse database %s; logs in %s",
		len(evs), dups, len(types), o.prefix, o.database, o.runDir)

	// The stack.
	kcl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(o.brokers, ",")...), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer kcl.Close()
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = kcl.Ping(pctx)
	cancel()
	if err != nil {
		return fmt.Errorf("Kafka at %s is not reachable (is the stack up? `make up`): %w", o.brokers, err)
	}
	chOpts, err := clickhouse.ParseDSN(dsn)
	if err != nil {
		return fmt.Errorf("-clickhouse: %w", err)
	}
	chOpts.Auth.Database = "" // ours does not exist until hookrelay migrates
	ch, err := clickhouse.Open(chOpts)
	if err != nil {
		return fmt.Errorf("ClickHouse: %w", err)
	}
	defer ch.Close()
	pctx, cancel = context.WithTimeout(ctx, 10*time.Second)
	err = ch.Ping(pctx)
	cancel()
	if err != nil {
		return fmt.Errorf("ClickHouse at %v is not reachable (is the stack up? `make up`): %w", chOpts.Addr, err)
	}

	// Receivers.
	var receivers []*receiver
	defer func() {
		for _, r := range receivers {
			r.Stop(5 * time.Second)
		}
	}()
	for _, ep := range demoEndpoints {
		var extra []string
		if ep.Behaviour == "slow" {
			extra = []string{"--delay-ms", strconv.FormatInt(o.slow.Milliseconds(), 10)}
		}
		r, err := startReceiver(ctx, o.node, o.receiverDir, o.runDir, ep.Behaviour, extra...)
		if err != nil {
			return err
		}
		receivers = append(receivers, r)
		step("receiver %-10s %s (pid %d)", ep.Behaviour, r.url, r.Pid())
	}

	// hookrelay.
	httpAddr, err := childproc.FreeAddr()
	if err != nil {
		return err
	}
	apiAddr, err := childproc.FreeAddr()
	if err != nil {
		return err
	}
	env := hookrelayEnv(o, dsn, httpAddr, apiAddr)
	adminKey, err := createAdminKey(ctx, o.hookrelay, env)
	if err != nil {
		return err
	}
	step("admin key of the management API created (`hookrelay apikeys create --admin`)")
	cmd := exec.Command(o.hookrelay, "run")
	cmd.Env = env
	hr, err := childproc.Start("hookrelay run", cmd, filepath.Join(o.runDir, "hookrelay.log"), nil)
	if err != nil {
		return err
	}
	defer func() {
		if err := hr.Stop(30 * time.Second); err != nil {
			fmt.Fprintf(os.Stderr, "hookrelay run: %v (see %s)\n", err, hr.Log)
		}
	}()
	step("hookrelay run started (pid %d, http %s, log %s); waiting for /readyz", cmd.Process.Pid, httpAddr, hr.Log)
	if err := childproc.WaitReady(ctx, hr, httpAddr, 90*time.Second); err != nil {
		return err
	}
	step("hookrelay ready; management API on http://%s", apiAddr)
	api := &apiClient{base: "http://" + apiAddr, key: adminKey}
	for i, ep := range demoEndpoints {
		if err := api.createEndpoint(ctx, ep, receivers[i]); err != nil {
			return err
		}
		step("endpoint %-10s -> %s  events=%s rate=%d/s max-in-flight=%d (POST /v1/endpoints)", ep.ID, receivers[i].url, strings.Join(ep.Events, ","), ep.Rate, ep.MaxInFlight)
	}

	// Publish.
	step("publishing %d events to %sevents (%d structured, %d binary mode)", len(evs), o.prefix, len(evs)-binary, binary)
	tPub := time.Now()
	if err := publish(ctx, kcl, o.prefix+"events", evs, os.Stdout); err != nil {
		return err
	}
	pubTook := time.Since(tPub)
	step("published in %s; waiting for %d expected deliveries to have a final attempt row (timeout %s)", pubTook.Round(time.Millisecond), len(want), o.timeout)
	if err := waitFinal(ctx, ch, o.database, want, o.timeout, os.Stdout); err != nil {
		return err
	}
	deliverTook := time.Since(tPub)
	step("all %d deliveries final %s after the first publish", len(want), deliverTook.Round(time.Millisecond))

	problems, err := summarize(ctx, os.Stdout, ch, dsn, o.database, evs, want, receivers)
	if err != nil {
		return err
	}

	fmt.Printf("\nAPI: http://%s/v1 (OpenAPI document at /v1/openapi.json)\nadmin key: %s\nconsole: http://%s/console/\n", apiAddr, adminKey, apiAddr)
	if o.serve && len(problems) == 0 {
		fmt.Println("hookrelay and the receivers keep running (-serve): Ctrl-C stops them")
		<-ctx.Done()
		ctx = context.WithoutCancel(ctx) // the clean-up below still runs
	} else {
		fmt.Println("(hookrelay stops now: `make demo DEMO_FLAGS=-serve` keeps it and the console running)")
	}

	// Stop hookrelay here, not in the deferred cleanup, to report its exit.
	step("stopping hookrelay and the receivers (the stack stays up)")
	if err := hr.Stop(30 * time.Second); err != nil {
		problems = append(problems, fmt.Sprintf("hookrelay run did not stop cleanly: %v (see %s)", err, hr.Log))
	}
	if len(problems) == 0 && !o.keep {
		topics, groups, err := deleteRun(ctx, kcl, o.prefix)
		if err != nil {
			problems = append(problems, fmt.Sprintf("deleting the run's topics: %v", err))
		} else {
			step("deleted the run's %d topics and %d consumer groups (-keep keeps them; groups with static members expire by themselves); ClickHouse database %s stays", topics, groups, o.database)
		}
	}
	fmt.Printf("\nTiming: publish %s; publish to all final %s; whole demo %s.\n",
		pubTook.Round(time.Millisecond), deliverTook.Round(time.Millisecond), time.Since(t0).Round(100*time.Millisecond))
	fmt.Printf("Inspect: HOOKRELAY_CLICKHOUSE=%s %s log --endpoint fast --limit 20\n", dsn, o.hookrelay)
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "\n  "))
	}
	fmt.Println("demo OK: every expected delivery arrived, every signature verified")
	return nil
}

// databaseDSN returns dsn with its database (the URL path) replaced by db.
func databaseDSN(dsn, db string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", fmt.Errorf("-clickhouse %q: %w", dsn, err)
	}
	if u.Scheme != "clickhouse" && u.Scheme != "tcp" {
		return "", fmt.Errorf("-clickhouse %q: want a native-protocol DSN, clickhouse://host:9000/db", dsn)
	}
	u.Path = "/" + db
	return u.String(), nil
}

// hookrelayEnv is the environment of every hookrelay command of the run: the
// demo's own environment without HOOKRELAY_* variables, plus the run's.
func hookrelayEnv(o options, dsn, httpAddr, apiAddr string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HOOKRELAY_") {
			env = append(env, kv)
		}
	}
	return append(env,
		"HOOKRELAY_BROKERS="+o.brokers,
		"HOOKRELAY_CLICKHOUSE="+dsn,
		"HOOKRELAY_TOPIC_PREFIX="+o.prefix,
		"HOOKRELAY_ALLOW_NETWORKS=127.0.0.0/8",
		"HOOKRELAY_HTTP_ADDR="+httpAddr,
		"HOOKRELAY_API_ADDR="+apiAddr,
		"HOOKRELAY_RETRY_SCHEDULE=2s,5s,10s",
		"HOOKRELAY_INSTANCE_ID=demo",
	)
}

// createAdminKey creates an admin key of the management API with
// `hookrelay apikeys create --admin` and returns it.
func createAdminKey(ctx context.Context, bin string, env []string) (string, error) {
	actx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(actx, bin, "apikeys", "create", "--admin", "--name", "demo")
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s apikeys create --admin: %v", bin, err)
	}
	key, _, _ := strings.Cut(string(out), "\n")
	if !strings.HasPrefix(key, "hrk_") {
		return "", fmt.Errorf("%s apikeys create --admin printed no key", bin)
	}
	return key, nil
}
