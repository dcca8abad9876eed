package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
	"golang.org/x/sync/errgroup"

	"github.com/hookrelay/hookrelay/audit/chstore"
	"github.com/hookrelay/hookrelay/audit/sink"
	"github.com/hookrelay/hookrelay/pipeline"
	"github.com/hookrelay/hookrelay/pipeline/endpoints"
	"github.com/hookrelay/hookrelay/pipeline/webhook"
)

func runCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the pipeline: fan-out, dispatch, retry tiers and the audit sink (see --roles)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(cmd.Flags())
			if err != nil {
				return err
			}
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			return run(ctx, cfg, slog.Default())
		},
	}
	addFlags(cmd.Flags())
	return cmd
}

// run starts every stage of cfg.Roles and owns their goroutines: it returns
// when ctx ends (after each stage has shut down) or on a fatal error (invalid
// config, a topic with the wrong partition count). Broker trouble is not
// fatal: topic set-up at start is retried with capped back-off while the
// cluster cannot be reached, and a stage whose Kafka session becomes
// unusable is restarted by pipeline.Supervise; meanwhile /readyz says why it
// is not ready and /healthz stays ok.
func run(ctx context.Context, cfg *config, log *slog.Logger) error {
	kopts, err := cfg.kafkaOpts() // TLS, SASL: every stage's KafkaOptions; the seeds are cfg.Brokers
	if err != nil {
		return err
	}
	copts, err := cfg.clientOpts()
	if err != nil {
		return err
	}
	topics := pipeline.NewTopics(cfg.TopicPrefix)
	policy, err := pipeline.NewRetryPolicy(cfg.RetrySchedule, topics, cfg.QueueTTL)
	if err != nil {
		return fmt.Errorf("invalid --retry-schedule (HOOKRELAY_RETRY_SCHEDULE): %w", err)
	}
	// Metrics: OpenTelemetry, exported in the Prometheus format.
	exporter, err := prometheus.New(prometheus.WithoutScopeInfo())
	if err != nil {
		return fmt.Errorf("metrics exporter: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer mp.Shutdown(context.Background())
	meter := mp.Meter("github.com/hookrelay/hookrelay")
	// counted is a copy of opts plus the count of the client's requests, by
	// client (hookrelay_kafka_requests_total{client}). Clipped: a caller
	// that appends to it (the API's scans, concurrently) copies instead of
	// writing into a shared array.
	counted := func(opts []kgo.Opt, client string) []kgo.Opt {
		return slices.Clip(append(slices.Clip(opts), pipeline.KafkaRequests(meter, client)))
	}
	// withID is kopts plus the static group member ID of one stage (and
	// its request count).
	withID := func(stage string) []kgo.Opt {
		return append(counted(kopts, stage), kgo.InstanceID(topics.Prefix+stage+"-"+cfg.InstanceID))
	}
	// --memory-budget, split between the stages (membudget.go). A
	// delivery record is at most an event plus its headers.
	mem := newMemoryShares(cfg.MemoryBudget, cfg.Roles)
	maxRecord := cfg.MaxEventBytes + 64<<10
	budgeted := func(stage string, fetch int64) []kgo.Opt { return append(withID(stage), fetchOpts(fetch)...) }

	tracer, stopTracing, err := newTracer(ctx)
	if err != nil {
		return err
	}
	defer stopTracing()

	// Clients do no I/O until used: nothing below needs the cluster.
	admin, err := kgo.NewClient(counted(copts, "admin")...)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer admin.Close()

	// Each role depends only on the services it uses: fan-out, dispatch and
	// retry on Kafka; the audit sink on Kafka and ClickHouse (a future api
	// role: Kafka, and ClickHouse for reads). ClickHouse is not dialled
	// here: the sink connects and migrates when it can (sink.Options.Prepare)
	// and is not ready until then, so an outage at start-up stops neither the
	// process nor the other roles.
	var store *chstore.Store
	if cfg.Roles["audit"] {
		sopts, err := cfg.storeOptions()
		if err != nil {
			return err
		}
		store, err = chstore.Open(sopts)
		if err != nil {
			return fmt.Errorf("invalid --clickhouse (HOOKRELAY_CLICKHOUSE): %w", err)
		}
		defer store.Close()
	}

	view, err := endpoints.NewView(endpoints.Config{
		Brokers: cfg.Brokers, KafkaOptions: counted(kopts, "endpoints"), EndpointsTopic: topics.Endpoints, StatusTopic: topics.EndpointStatus, Logger: log,
	})
	if err != nil {
		return err
	}

	// The deliveries generations (pipeline/generation.go): every producer
	// of deliveries sends to the newest; the dispatchers run one group per
	// live generation.
	gens, err := pipeline.NewGenerations(pipeline.GenerationsOptions{Brokers: cfg.Brokers, KafkaOptions: counted(kopts, "generations"), Topics: topics, Logger: log})
	if err != nil {
		return err
	}
	policy.SetDeliveriesTopic(gens.DeliveriesTopic)
	stray, err := pipeline.NewStrayWatcher(&pipeline.StrayWatcher{Admin: kadm.NewClient(admin), Gens: gens, Logger: log}, meter)
	if err != nil {
		return err
	}

	// hookrelay_consumer_lag{group,topic}, read by every process (the alerts
	// take the max): the dispatcher group of every live generation
	// (dispatch, dispatch.g2, …), read again at each collection.
	lag, err := pipeline.NewLagCollector(pipeline.LagOptions{Admin: kadm.NewClient(admin), Meter: meter, Logger: log,
		Groups: []string{topics.Prefix + "fanout", topics.Prefix + "retry-relay", topics.Prefix + "audit"},
		MoreGroups: func() []string {
			var gs []string
			for _, gen := range gens.All() {
				if gen.RetiredAt.IsZero() {
					gs = append(gs, pipeline.GenerationGroup(topics.Prefix+"dispatch", gen.N))
				}
			}
			return gs
		}})
	if err != nil {
		return err
	}

	ready := newReadiness()
	supervise := func(stage string) pipeline.SuperviseOptions {
		return pipeline.SuperviseOptions{State: ready.stage(stage), Meter: meter, Logger: log}
	}
	if err := ready.registerMetrics(meter); err != nil {
		return err
	}

	// The dispatcher is built once, so invalid options fail the start; its
	// Run creates and closes its own session, so a supervisor can run it
	// again after a non-fatal error.
	var dispatcher *pipeline.Dispatcher // generation 1's, built at start so invalid options fail it
	var newDispatcher func(pipeline.Generation, <-chan struct{}) (*pipeline.Dispatcher, error)
	if cfg.Roles["dispatch"] {
		// Keep-alive connections: up to 64 idle per endpoint host (an
		// endpoint's max_in_flight rarely exceeds it) and no total cap, so
		// many endpoints do not churn each other's connections (measured:
		// a 1024 total cap made 18k dials for 60k requests at 100 endpoints).
		sender, err := webhook.NewSender(webhook.Options{Version: version, AllowNetworks: cfg.AllowNetworks,
			MaxIdleConnsPerHost: 64, MaxIdleConns: 1 << 20})
		if err != nil {
			return err
		}
		defer sender.Close()
		// The attempts client writes each attempt's sending row and waits
		// for it (pipeline.KafkaAttemptLog): no linger (concurrent rows
		// still share a batch while one is in flight), and a bounded wait,
		// past which the request is not made. It outlives dispatcher
		// restarts: it is idempotent, not transactional, and retries on
		// its own.
		attemptsClient, err := kgo.NewClient(append(append(counted(copts, "attempts"), kgo.ProducerLinger(0), kgo.RecordDeliveryTimeout(10*time.Second)),
			produceOpts(mem.AttemptsProduce, maxRecord)...)...)
		if err != nil {
			return fmt.Errorf("kafka client: %w", err)
		}
		defer func() {
			fctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := attemptsClient.Flush(fctx); err != nil {
				log.Error("attempts: flush on shutdown", "err", err)
			}
			attemptsClient.Close()
		}()
		// One dispatcher per deliveries generation: generation 1 keeps the
		// names it always had; generation n > 1 appends ".g<n>" to the
		// group, the transactional ID's stage and the static member ID's.
		attemptLog := pipeline.NewKafkaAttemptLog(attemptsClient, topics.Attempts, cfg.AttemptFormat)
		newDispatcher = func(gen pipeline.Generation, hold <-chan struct{}) (*pipeline.Dispatcher, error) {
			stage := pipeline.GenerationGroup("dispatch", gen.N)
			t := topics
			t.Deliveries = gen.Topic
			return pipeline.NewDispatcher(pipeline.DispatcherOptions{
				Brokers:         cfg.Brokers,
				KafkaOptions:    append(budgeted(stage, mem.DispatchFetch), produceOpts(mem.DispatchProduce, maxRecord)...),
				MemoryBudget:    mem.DispatchHeld,
				Topics:          t,
				Group:           topics.Prefix + stage,
				TransactionalID: topics.Prefix + stage + "-" + cfg.InstanceID,
				Endpoints:       view,
				Attempter:       &pipeline.HTTPAttempter{Sender: sender, Tracer: tracer},
				Attempts:        attemptLog,
				AttemptFormat:   cfg.AttemptFormat,
				Policy:          policy,
				Hold:            hold,
				EndpointBacklog: cfg.EndpointBuffer,
				Health:          pipeline.HealthOptions{DisableAfter: cfg.DisableAfter, FailingNotifyAt: cfg.FailingNotify},
				Meter:           meter,
				Logger:          log.With("generation", gen.N),
			})
		}
		dispatcher, err = newDispatcher(pipeline.Generation{N: 1, Topic: topics.Deliveries}, nil)
		if err != nil {
			return err
		}
	}

	var fanout *pipeline.Fanout
	if cfg.Roles["fanout"] {
		fanout, err = pipeline.NewFanout(pipeline.FanoutOptions{
			Brokers:         cfg.Brokers,
			KafkaOptions:    budgeted("fanout", mem.StageFetch),
			Topics:          topics,
			DeliveriesTopic: gens.DeliveriesTopic,
			Group:           topics.Prefix + "fanout",
			TransactionalID: topics.Prefix + "fanout-" + cfg.InstanceID,
			Endpoints:       view,
			MaxEventBytes:   cfg.MaxEventBytes,
			AttemptFormat:   cfg.AttemptFormat,
			Linger:          cmp.Or(cfg.FanoutLinger, -1), // 0 (none) is negative for the option
			Meter:           meter,
			Logger:          log,
		})
		if err != nil {
			return err
		}
	}

	var relay *pipeline.Relay
	if cfg.Roles["retry"] {
		relay, err = pipeline.NewRelay(pipeline.RelayOptions{
			Brokers:         cfg.Brokers,
			KafkaOptions:    budgeted("retry", mem.StageFetch),
			Group:           topics.Prefix + "retry-relay",
			Tiers:           policy.Tiers(),
			TargetTopic:     topics.Deliveries,
			Target:          gens.DeliveriesTopic,
			DLQTopic:        topics.DLQ,
			TransactionalID: topics.Prefix + "retry-" + cfg.InstanceID,
			Meter:           meter,
			Logger:          log,
		})
		if err != nil {
			return err
		}
	}

	var auditSink *sink.Sink
	if cfg.Roles["audit"] {
		auditSink, err = sink.New(sink.Options{
			Brokers:        cfg.Brokers,
			KafkaOptions:   budgeted("audit", mem.StageFetch),
			BatchBytes:     mem.AuditBatch / sink.MaxBatches, // it holds up to MaxBatches batches
			Group:          topics.Prefix + "audit",
			Topic:          topics.Attempts,
			Store:          store,
			Prepare:        func(ctx context.Context) error { return prepareStore(ctx, store, log) },
			InterruptGrace: cfg.InterruptGrace,
			Meter:          meter,
			Logger:         log,
		})
		if err != nil {
			return err
		}
		ready.sink = auditSink
	}

	if cfg.Roles["fanout"] || cfg.Roles["dispatch"] || cfg.Roles["retry"] || cfg.Roles["api"] {
		ready.gens = gens
	}
	// Every supervised stage has its readiness part before the ops server
	// reads them.
	for name, on := range map[string]bool{"fanout": fanout != nil, "dispatch": dispatcher != nil,
		"retry-relay": relay != nil, "audit": auditSink != nil} {
		if on {
			ready.stage(name)
		}
	}

	// The ops server first, so /healthz and /readyz answer while the
	// cluster is waited for.
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("invalid --http-addr (HOOKRELAY_HTTP_ADDR): %w", err)
	}
	srv := &http.Server{Handler: opsHandler(ready.check), ReadHeaderTimeout: 5 * time.Second}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	})
	// The api role: the management API (pipeline/api) on --api-addr.
	if cfg.Roles["api"] {
		closeAPI, err := startAPI(gctx, g, cfg, counted(copts, "api"), topics, view, store, gens, log)
		if err != nil {
			return err
		}
		defer closeAPI()
	}
	if store != nil {
		g.Go(func() error { return checkClickHouse(gctx, store, cfg, log) })
	}
	log.Info("hookrelay starting", "http", ln.Addr().String(), "brokers", cfg.Brokers, "prefix", topics.Prefix,
		"retry_schedule", cfg.RetrySchedule.String(), "queue_ttl", cfg.QueueTTL.String())

	g.Go(func() error {
		if err := ensureTopics(gctx, kadm.NewClient(admin), topics, pipeline.TopicLayout{
			Partitions: cfg.Partitions, ReplicationFactor: cfg.Replication, MinInsyncReplicas: cfg.MinISR,
			TierTopics: policy.Tiers().Topics(),
		}, ready, cfg.kafkaConfigError, log); err != nil {
			return err
		}
		if gctx.Err() != nil {
			return nil
		}
		g.Go(func() error { return probeKafka(gctx, admin, ready, log) })
		g.Go(func() error { return view.Run(gctx) })
		g.Go(func() error { return lag.Run(gctx) })
		g.Go(func() error { return gens.Run(gctx) })
		// The audit sink produces no deliveries: it does not wait for the
		// generations.
		if auditSink != nil {
			g.Go(func() error { return pipeline.Supervise(gctx, "audit", auditSink.Run, supervise("audit")) })
			// Retention of the delivery log (HOOKRELAY_LOG_RETENTION).
			retainer := &chstore.Retainer{Store: store, Retention: cfg.LogRetention, Logger: log}
			g.Go(func() error { return retainer.Run(gctx) })
		}
		// No stage produces deliveries before the generations are known.
		select {
		case <-gens.Ready():
		case <-gctx.Done():
			return nil
		}
		// Every process warns of a record written to a retired generation
		// (hookrelay_generation_stray_records_total).
		g.Go(func() error { return stray.Run(gctx) })
		if relay != nil {
			g.Go(func() error { return pipeline.Supervise(gctx, "retry-relay", relay.Run, supervise("retry-relay")) })
		}
		// Stages that act on endpoints start once the view has caught up, so
		// an endpoint acknowledged before an event was produced gets that
		// event.
		select {
		case <-view.Ready():
		case <-gctx.Done():
			return nil
		}
		log.Info("endpoints view caught up", "endpoints", view.Len())
		if fanout != nil {
			g.Go(func() error { return pipeline.Supervise(gctx, "fanout", fanout.Run, supervise("fanout")) })
		}
		if dispatcher == nil {
			ready.pipeline.Store(true)
			log.Info("hookrelay pipeline ready", "roles", cfg.Roles, "instance", cfg.InstanceID)
			return nil
		}
		g.Go(func() error {
			return runGenerations(gctx, cfg, gens, admin, topics, dispatcher, newDispatcher, ready, supervise, meter, log)
		})
		return nil
	})
	err = g.Wait()
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		err = nil
	}
	log.Info("hookrelay stopped", "err", err)
	return err
}

// runDispatcher runs d until it returns; joined(true) is called at d's
// first group join, joined(false) when d's Run returns.
func runDispatcher(ctx context.Context, d *pipeline.Dispatcher, joined func(bool)) error {
	stop, done := make(chan struct{}), make(chan struct{})
	// This run's channel: the last run has returned (see Joined).
	j := d.Joined()
	go func() { // owner: runDispatcher, which waits on done
		defer close(done)
		select {
		case <-j:
			joined(true)
		case <-stop:
		}
	}()
	err := d.Run(ctx)
	close(stop)
	<-done
	joined(false)
	return err
}

// Back-off of the topic set-up at start while the cluster cannot be
// reached: 1 s doubling to 30 s. One try is bounded by topicsTryTimeout.
const (
	topicsBackoff    = time.Second
	topicsMaxBackoff = 30 * time.Second
	topicsTryTimeout = 30 * time.Second
	kafkaProbeEvery  = 5 * time.Second
)

// ensureTopics creates and checks the topics, retrying with capped
// back-off while that fails for a reason a retry may cure (an unreachable
// cluster); ready's kafka part says why meanwhile. It returns nil once the
// topics are there or ctx has ended, and an error naming the fault for one
// that no retry cures: pipeline.IsFatal (e.g. a deliveries topic with
// another partition count), or what misconfigured explains as a TLS or SASL
// misconfiguration (given the try's error and the streak of tries that
// ended in kgo.ErrFirstReadEOF, how many and for how long; see
// config.kafkaConfigError and kafkaFirstEOFSpan).
func ensureTopics(ctx context.Context, adm *kadm.Client, topics pipeline.Topics, l pipeline.TopicLayout, ready *readiness,
	misconfigured func(err error, eofs eofStreak) error, log *slog.Logger) error {
	wait := topicsBackoff
	var (
		eofs     eofStreak
		eofSince time.Time
	)
	for try := 1; ; try++ {
		start := time.Now()
		tctx, cancel := context.WithTimeout(ctx, topicsTryTimeout)
		err := pipeline.EnsureTopics(tctx, adm, topics, l)
		cancel()
		if _, ok := errors.AsType[*kgo.ErrFirstReadEOF](err); ok {
			if eofs.Tries == 0 {
				eofSince = start
			}
			eofs.Tries++
			eofs.For = time.Since(eofSince)
		} else {
			eofs = eofStreak{}
		}
		switch {
		case err == nil:
			ready.setKafka(nil)
			return nil
		case ctx.Err() != nil:
			return nil
		case pipeline.IsFatal(err):
			ready.setKafka(err)
			return fmt.Errorf("topics: %w", err)
		}
		if ferr := misconfigured(err, eofs); ferr != nil {
			ready.setKafka(ferr)
			return ferr
		}
		ready.setKafka(fmt.Errorf("topics not set up yet (try %d, next in %v): %w", try, wait, err))
		log.Warn("kafka: topics not set up; retrying", "err", err, "try", try, "backoff", wait.String())
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		wait = min(2*wait, topicsMaxBackoff)
	}
}

// probeKafka pings the cluster every kafkaProbeEvery until ctx ends and
// keeps ready's kafka part up to date; it logs each change.
func probeKafka(ctx context.Context, admin *kgo.Client, ready *readiness, log *slog.Logger) error {
	t := time.NewTicker(kafkaProbeEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, kafkaProbeEvery)
		err := admin.Ping(pctx)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		was := ready.kafkaErr()
		if err != nil {
			err = fmt.Errorf("unreachable: %w", err)
			if was == nil {
				log.Warn("kafka: cluster unreachable", "err", err)
			}
		} else if was != nil {
			log.Info("kafka: cluster reachable again")
		}
		ready.setKafka(err)
	}
}

// newTracer returns the tracer of the attempt spans. Spans are recorded and
// exported over OTLP/HTTP when the standard OTEL_EXPORTER_OTLP_ENDPOINT (or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set; otherwise the tracer is a
// no-op that still carries each event's trace context to the endpoint in
// traceparent, at no cost.
func newTracer(ctx context.Context) (trace.Tracer, func(), error) {
	const name = "github.com/hookrelay/hookrelay"
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return tracenoop.NewTracerProvider().Tracer(name), func() {}, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("OTLP trace exporter (OTEL_EXPORTER_OTLP_*): %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "hookrelay"))))
	return tp.Tracer(name), func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tp.Shutdown(sctx)
	}, nil
}

// readiness is what /readyz reports: each part of the process's roles,
// ready or not and why. Safe for concurrent use.
type readiness struct {
	kafka    atomic.Pointer[error] // nil: topics set up and the cluster answers
	pipeline atomic.Bool           // the endpoints view caught up and every live generation's dispatcher (if any) joined its group
	sink     *sink.Sink            // the audit sink; nil without the audit role; set before the ops server starts
	gens     *pipeline.Generations // the deliveries generations view; nil without a role that produces or reads deliveries; set before the ops server starts
	mu       sync.Mutex
	stages   map[string]*pipeline.StageState // by stage; under mu
	names    []string                        // stages in report order; under mu
	// joined is, per live deliveries generation this process runs, whether
	// its dispatcher has joined its group (setJoined); under mu.
	joined map[int]bool
}

func newReadiness() *readiness {
	r := &readiness{stages: map[string]*pipeline.StageState{}, joined: map[int]bool{}}
	r.setKafka(errors.New("connecting"))
	return r
}

// stage returns the state of stage, added to the report (a deliveries
// generation's dispatch.g<n> is added when it starts).
func (r *readiness) stage(name string) *pipeline.StageState {
	r.mu.Lock()
	defer r.mu.Unlock()
	if st, ok := r.stages[name]; ok {
		return st
	}
	st := new(pipeline.StageState)
	r.stages[name] = st
	r.names = append(r.names, name)
	slices.Sort(r.names)
	return st
}

// dropStage removes stage from the report (a retired generation's).
func (r *readiness) dropStage(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.stages, name)
	r.names = slices.DeleteFunc(r.names, func(n string) bool { return n == name })
}

// setJoined records whether generation n's dispatcher is in its group;
// the pipeline is ready while every live generation's is (and at least
// one runs). It reports whether the pipeline became ready by this call.
func (r *readiness) setJoined(n int, joined bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.joined[n] = joined
	return r.updatePipeline()
}

// retired drops generation n from the pipeline's readiness (its
// dispatchers stopped because it was retired, not because of a fault).
func (r *readiness) retired(n int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.joined, n)
	return r.updatePipeline()
}

// updatePipeline sets pipeline from joined; r.mu held.
func (r *readiness) updatePipeline() bool {
	all := len(r.joined) > 0
	for _, j := range r.joined {
		all = all && j
	}
	return !r.pipeline.Swap(all) && all
}

func (r *readiness) setKafka(err error) {
	if err == nil {
		r.kafka.Store(nil)
		return
	}
	r.kafka.Store(&err)
}

func (r *readiness) kafkaErr() error {
	if p := r.kafka.Load(); p != nil {
		return *p
	}
	return nil
}

// registerMetrics exports hookrelay.kafka.ready (1 while the cluster
// answers and the topics are set up, else 0); restarts are counted by
// pipeline.Supervise as hookrelay.stage.restarts{stage}.
func (r *readiness) registerMetrics(m metric.Meter) error {
	_, err := m.Int64ObservableGauge("hookrelay.kafka.ready",
		metric.WithDescription("1 while the Kafka cluster answers and the topics are set up, else 0 (see /readyz for why)."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			v := int64(1)
			if r.kafkaErr() != nil {
				v = 0
			}
			o.Observe(v)
			return nil
		}))
	return err
}

// check reports whether every part is ready, and one line per part:
// "kafka: ready", "pipeline: ready", "fanout stage: not ready: restarting in
// 2s: …", "audit: not ready: <reason>" (the audit sink's store).
func (r *readiness) check() (bool, string) {
	var b strings.Builder
	ok := true
	part := func(name string, err error) {
		if err != nil {
			ok = false
			fmt.Fprintf(&b, "%s: not ready: %v\n", name, err)
			return
		}
		fmt.Fprintf(&b, "%s: ready\n", name)
	}
	part("kafka", r.kafkaErr())
	if r.gens != nil {
		part("generations", r.gens.Err())
	}
	if r.pipeline.Load() {
		part("pipeline", nil)
	} else {
		part("pipeline", errors.New("endpoints view catching up or consumer group not joined"))
	}
	r.mu.Lock()
	for _, name := range r.names {
		part(name+" stage", r.stages[name].Err())
	}
	r.mu.Unlock()
	if r.sink != nil {
		part("audit", r.sink.Ready())
	}
	return ok, b.String()
}

// opsHandler serves /metrics, /healthz (the process is up), /readyz (200
// when ready reports true, else 503; the body names each part and why it is
// not ready) and /debug/pprof/.
func opsHandler(ready func() (bool, string)) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.Handler())
	// Profiles for operators; the ops address defaults to loopback.
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		ok, detail := ready()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte("not ready\n" + detail))
			return
		}
		w.Write([]byte("ready\n" + detail))
	})
	return mux
}

// prepareStore checks that ClickHouse answers and applies pending
// migrations: the audit sink's Prepare, retried by the sink until it
// succeeds. Migrate is idempotent and safe to run concurrently.
func prepareStore(ctx context.Context, store *chstore.Store, log *slog.Logger) error {
	if err := store.Ping(ctx); err != nil {
		return err
	}
	applied, err := store.Migrate(ctx)
	if err != nil {
		return fmt.Errorf("ClickHouse migrations: %w", err)
	}
	for _, m := range applied {
		log.Info("clickhouse migration applied", "version", m.Version, "name", m.Name)
	}
	return nil
}

// Back-off of the start-up check of ClickHouse while it cannot be reached:
// 1 s doubling to 30 s; one try is bounded by clickhouseTryTimeout.
const (
	clickhouseBackoff    = time.Second
	clickhouseMaxBackoff = 30 * time.Second
	clickhouseTryTimeout = 10 * time.Second
)

// checkClickHouse pings store until it answers, then returns nil (the
// audit sink and the api read their own state from then on). A refused
// password or an untrusted certificate (config.clickhouseConfigError) is
// returned at once, ending the process; a server that is down is retried
// with capped back-off, as the sink's own Prepare retries it. It returns
// nil when ctx ends.
func checkClickHouse(ctx context.Context, store *chstore.Store, cfg *config, log *slog.Logger) error {
	wait := clickhouseBackoff
	for try := 1; ; try++ {
		pctx, cancel := context.WithTimeout(ctx, clickhouseTryTimeout)
		err := store.Ping(pctx)
		cancel()
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return nil
		}
		if ferr := cfg.clickhouseConfigError(err); ferr != nil {
			return ferr
		}
		log.Warn("clickhouse: not reachable yet; retrying", "err", err, "try", try, "backoff", wait.String())
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		wait = min(2*wait, clickhouseMaxBackoff)
	}
}

// openStore connects to ClickHouse and applies pending migrations (for
// `hookrelay migrate`, which should fail at once when ClickHouse is down).
func openStore(ctx context.Context, cfg *config, log *slog.Logger) (*chstore.Store, error) {
	sopts, err := cfg.storeOptions()
	if err != nil {
		return nil, err
	}
	store, err := chstore.New(ctx, sopts)
	if err != nil {
		if ferr := cfg.clickhouseConfigError(err); ferr != nil {
			return nil, ferr
		}
		return nil, fmt.Errorf("clickhouse (--clickhouse, HOOKRELAY_CLICKHOUSE): %w", err)
	}
	applied, err := store.Migrate(ctx)
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("clickhouse migrations: %w", err)
	}
	for _, m := range applied {
		log.Info("clickhouse migration applied", "version", m.Version, "name", m.Name)
	}
	return store, nil
}
