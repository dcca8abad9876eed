package main

import (
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
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/prometheus"
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
// when ctx ends (after each stage has shut down) or when a stage fails.
func run(ctx context.Context, cfg *config, log *slog.Logger) error {
	kopts, err := cfg.kafkaOpts()
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
	tracer, stopTracing, err := newTracer(ctx)
	if err != nil {
		return err
	}
	defer stopTracing()

	admin, err := kgo.NewClient(kopts...)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer admin.Close()
	setupCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := pipeline.EnsureTopics(setupCtx, kadm.NewClient(admin), topics, pipeline.TopicLayout{
		Partitions: cfg.Partitions, ReplicationFactor: cfg.Replication, MinInsyncReplicas: cfg.MinISR,
		TierTopics: policy.Tiers().Topics(),
	}); err != nil {
		return fmt.Errorf("topics: %w", err)
	}

	// Each role depends only on the services it uses: fan-out, dispatch and
	// retry on Kafka; the audit sink on Kafka and ClickHouse (a future api
	// role: Kafka, and ClickHouse for reads). ClickHouse is not dialled
	// here: the sink connects and migrates when it can (sink.Options.Prepare)
	// and is not ready until then, so an outage at start-up stops neither the
	// process nor the other roles.
	var store *chstore.Store
	if cfg.Roles["audit"] {
		store, err = chstore.Open(chstore.Options{DSN: cfg.ClickHouseDSN})
		if err != nil {
			return fmt.Errorf("invalid --clickhouse (HOOKRELAY_CLICKHOUSE): %w", err)
		}
		defer store.Close()
	}

	view, err := endpoints.NewView(endpoints.Config{
		ClientOpts: kopts, EndpointsTopic: topics.Endpoints, StatusTopic: topics.EndpointStatus, Logger: log,
	})
	if err != nil {
		return err
	}

	// hookrelay_consumer_lag{group,topic}, read by every process (the alerts take the max).
	lag, err := pipeline.NewLagCollector(pipeline.LagOptions{Admin: kadm.NewClient(admin), Meter: meter, Logger: log,
		Groups: []string{topics.Prefix + "fanout", topics.Prefix + "dispatch", topics.Prefix + "retry-relay", topics.Prefix + "audit"}})
	if err != nil {
		return err
	}

	g, gctx := errgroup.WithContext(ctx)
	var ready readiness
	g.Go(func() error { return view.Run(gctx) })
	g.Go(func() error { return lag.Run(gctx) })

	var dispatcher *pipeline.Dispatcher
	var attemptsClient *kgo.Client
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
		// past which the request is not made.
		attemptsClient, err = kgo.NewClient(append([]kgo.Opt{kgo.ProducerLinger(0), kgo.RecordDeliveryTimeout(10 * time.Second)}, kopts...)...)
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
		dispatcher, err = pipeline.NewDispatcher(pipeline.DispatcherOptions{
			ClientOpts:      append(slices.Clip(kopts), kgo.InstanceID(topics.Prefix+"dispatch-"+cfg.InstanceID)),
			Topics:          topics,
			Group:           topics.Prefix + "dispatch",
			TransactionalID: topics.Prefix + "dispatch-" + cfg.InstanceID,
			Endpoints:       view,
			Attempter:       &pipeline.HTTPAttempter{Sender: sender, Tracer: tracer},
			Attempts:        pipeline.NewKafkaAttemptLog(attemptsClient, topics.Attempts),
			Policy:          policy,
			EndpointBacklog: cfg.EndpointBuffer,
			Health:          pipeline.HealthOptions{DisableAfter: cfg.DisableAfter, FailingNotifyAt: cfg.FailingNotify},
			Meter:           meter,
			Logger:          log,
		})
		if err != nil {
			return err
		}
	}

	var fanout *pipeline.Fanout
	if cfg.Roles["fanout"] {
		fanout, err = pipeline.NewFanout(pipeline.FanoutOptions{
			ClientOpts:      append(slices.Clip(kopts), kgo.InstanceID(topics.Prefix+"fanout-"+cfg.InstanceID)),
			Topics:          topics,
			Group:           topics.Prefix + "fanout",
			TransactionalID: topics.Prefix + "fanout-" + cfg.InstanceID,
			Endpoints:       view,
			MaxEventBytes:   cfg.MaxEventBytes,
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
			Kgo:             append(slices.Clip(kopts), kgo.InstanceID(topics.Prefix+"retry-"+cfg.InstanceID)),
			Group:           topics.Prefix + "retry-relay",
			Tiers:           policy.Tiers(),
			TargetTopic:     topics.Deliveries,
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
			KafkaOptions:   append(slices.Clip(kopts[1:]), kgo.InstanceID(topics.Prefix+"audit-"+cfg.InstanceID)), // TLS, SASL; the seeds are Brokers
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

	// Stages that act on endpoints start once the view has caught up, so an
	// endpoint acknowledged before an event was produced gets that event.
	g.Go(func() error {
		select {
		case <-view.Ready():
		case <-gctx.Done():
			return nil
		}
		log.Info("endpoints view caught up", "endpoints", view.Len())
		if fanout != nil {
			g.Go(func() error { return fanout.Run(gctx) })
		}
		if dispatcher != nil {
			g.Go(func() error { return dispatcher.Run(gctx) })
			select {
			case <-dispatcher.Joined():
			case <-gctx.Done():
				return nil
			}
		}
		ready.pipeline.Store(true)
		log.Info("hookrelay pipeline ready", "roles", cfg.Roles, "instance", cfg.InstanceID)
		return nil
	})
	if relay != nil {
		g.Go(func() error { return relay.Run(gctx) })
	}
	if auditSink != nil {
		g.Go(func() error { return auditSink.Run(gctx) })
	}

	srv := &http.Server{Addr: cfg.HTTPAddr, Handler: opsHandler(ready.check), ReadHeaderTimeout: 5 * time.Second}
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("invalid --http-addr (HOOKRELAY_HTTP_ADDR): %w", err)
	}
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
	log.Info("hookrelay starting", "http", ln.Addr().String(), "brokers", cfg.Brokers, "prefix", topics.Prefix,
		"retry_schedule", cfg.RetrySchedule.String(), "queue_ttl", cfg.QueueTTL.String())
	err = g.Wait()
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		err = nil
	}
	log.Info("hookrelay stopped", "err", err)
	return err
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
// ready or not and why.
type readiness struct {
	pipeline atomic.Bool // the endpoints view caught up and the dispatcher (if any) joined its group
	sink     *sink.Sink  // the audit sink; nil without the audit role
}

// check reports whether every part is ready, and one line per part:
// "pipeline: ready", or "audit: not ready: <reason>".
func (r *readiness) check() (bool, string) {
	var b strings.Builder
	ok := r.pipeline.Load()
	if ok {
		b.WriteString("pipeline: ready\n")
	} else {
		b.WriteString("pipeline: not ready: endpoints view catching up or consumer group not joined\n")
	}
	if r.sink != nil {
		if err := r.sink.Ready(); err != nil {
			ok = false
			fmt.Fprintf(&b, "audit: not ready: %v\n", err)
		} else {
			b.WriteString("audit: ready\n")
		}
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

// openStore connects to ClickHouse and applies pending migrations (for
// `hookrelay migrate`, which should fail at once when ClickHouse is down).
func openStore(ctx context.Context, cfg *config, log *slog.Logger) (*chstore.Store, error) {
	store, err := chstore.New(ctx, chstore.Options{DSN: cfg.ClickHouseDSN})
	if err != nil {
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
