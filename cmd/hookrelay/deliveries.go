package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/metric"

	"github.com/hookrelay/hookrelay/pipeline"
)

// deliveriesCmd is `hookrelay deliveries`: the generations of the
// deliveries topic (pipeline/generation.go; docs/OPERATIONS.md, "Growing
// the deliveries topic").
func deliveriesCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "deliveries", Short: "Grow the deliveries topic to more partitions (generations): grow, status, retire"}
	addFlags(cmd.PersistentFlags(), "brokers", "kafka-tls", "kafka-tls-ca", "kafka-sasl-mechanism", "kafka-sasl-user",
		"kafka-sasl-password", "topic-prefix", "replication-factor", "min-insync-replicas")

	grow := &cobra.Command{
		Use:   "grow --partitions N",
		Short: "Create the next deliveries generation with N partitions and switch every producer to it",
		Long: `Create the next generation of the deliveries topic (<prefix>deliveries.g<n>) with
N partitions and write its switch record to <prefix>generations. Each running
hookrelay reads it within a fraction of a second: fan-out, the retry relay,
the dispatcher's short holds and the API's resend then produce to the new
topic; the dispatchers keep draining the old one and start the new one's
group once the old one is drained (or after 30 s). No restart, no flag change:
keep --partitions as it was (it describes generation 1).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			n, _ := cmd.Flags().GetInt32("partitions")
			return withGenerations(cmd, func(ctx context.Context, cfg *config, cl *kgo.Client, topics pipeline.Topics, gens []pipeline.Generation) error {
				if n <= 0 {
					return errors.New("--partitions is required (more than the current generation's)")
				}
				gen, err := pipeline.GrowDeliveries(ctx, cl, topics, gens, n, pipeline.TopicLayout{ReplicationFactor: cfg.Replication, MinInsyncReplicas: cfg.MinISR})
				if err != nil {
					return err
				}
				fmt.Printf("generation %d: %s, %d partitions (switch written %s)\n", gen.N, gen.Topic, gen.Partitions, gen.CreatedAt.Format(time.RFC3339Nano))
				return nil
			})
		},
	}
	grow.Flags().Int32("partitions", 0, "partitions of the new generation (more than the current one's)")

	status := &cobra.Command{
		Use:   "status",
		Short: "List the generations and whether each is drained",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withGenerations(cmd, func(ctx context.Context, _ *config, cl *kgo.Client, topics pipeline.Topics, gens []pipeline.Generation) error {
				w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "GENERATION\tTOPIC\tPARTITIONS\tSTATE\tUNDRAINED")
				for i, g := range gens {
					state := "live"
					switch {
					case !g.RetiredAt.IsZero():
						state = "retired " + g.RetiredAt.Format(time.RFC3339)
					case i == len(gens)-1:
						state = "current"
					}
					pending := "-"
					if g.RetiredAt.IsZero() {
						d, err := pipeline.Drained(ctx, cl, pipeline.GenerationGroup(topics.Prefix+"dispatch", g.N), g.Topic)
						switch {
						case err != nil:
							pending = "error: " + err.Error()
						case d.Drained:
							pending = "0 (drained)"
						default:
							pending = fmt.Sprintf("%d partitions with undelivered records, %d with an open transaction", d.PendingPartitions, d.Open)
						}
					}
					parts := fmt.Sprint(g.Partitions)
					if g.Partitions == 0 {
						parts = "-"
						if md, err := kadm.NewClient(cl).ListTopics(ctx, g.Topic); err == nil && md.Has(g.Topic) {
							parts = fmt.Sprint(len(md[g.Topic].Partitions))
						}
					}
					fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\n", g.N, g.Topic, parts, state, pending)
				}
				return w.Flush()
			})
		},
	}

	retire := &cobra.Command{
		Use:   "retire --generation N [--force]",
		Short: "Mark an older, drained generation retired: its dispatchers stop (the topic is kept for you to delete)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			n, _ := cmd.Flags().GetInt("generation")
			force, _ := cmd.Flags().GetBool("force")
			quiet, _ := cmd.Flags().GetDuration("quiet")
			if quiet < 0 {
				return fmt.Errorf("--quiet %v: must not be negative", quiet)
			}
			return withGenerations(cmd, func(ctx context.Context, _ *config, cl *kgo.Client, topics pipeline.Topics, gens []pipeline.Generation) error {
				gen, err := pipeline.RetireGeneration(ctx, cl, topics, gens, n, topics.Prefix+"dispatch", quiet, force)
				if err != nil {
					return err
				}
				fmt.Printf("generation %d (%s) retired; delete the topic when you like\n", gen.N, gen.Topic)
				return nil
			})
		},
	}
	retire.Flags().Int("generation", 0, "the generation to retire (older than the current one)")
	retire.Flags().Bool("force", false, "retire even if not drained or not quiet (its pending deliveries are then never sent)")
	retire.Flags().Duration("quiet", pipeline.DefaultRetireQuiet, "retire only if no record was written to the generation's topic within this time (a late writer's records would go unconsumed)")

	cmd.AddCommand(grow, status, retire)
	return cmd
}

// withGenerations loads the config, makes sure the generations topic
// exists, reads the generations and calls fn with an acks=all client.
func withGenerations(cmd *cobra.Command, fn func(context.Context, *config, *kgo.Client, pipeline.Topics, []pipeline.Generation) error) error {
	cfg, kopts, copts, err := loadKafkaConfig(cmd)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), 60*time.Second)
	defer cancel()
	topics := pipeline.NewTopics(cfg.TopicPrefix)
	cl, err := kgo.NewClient(append(copts, kgo.RequiredAcks(kgo.AllISRAcks()))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	md, err := kadm.NewClient(cl).ListTopics(ctx, topics.Deliveries)
	if err != nil {
		return fmt.Errorf("list topics: %w", err)
	}
	if !md.Has(topics.Deliveries) {
		return fmt.Errorf("topic %s does not exist (wrong --topic-prefix? `hookrelay run` creates it)", topics.Deliveries)
	}
	if err := pipeline.EnsureTopics(ctx, kadm.NewClient(cl), pipeline.Topics{Generations: topics.Generations},
		pipeline.TopicLayout{ReplicationFactor: cfg.Replication, MinInsyncReplicas: cfg.MinISR}); err != nil {
		return fmt.Errorf("topics: %w", err)
	}
	gens, err := pipeline.ReadGenerations(ctx, pipeline.GenerationsOptions{Brokers: cfg.Brokers, KafkaOptions: kopts, Topics: topics, Logger: slog.Default()})
	if err != nil {
		return err
	}
	return fn(ctx, cfg, cl, topics, gens)
}

// runGenerations runs a supervised dispatcher per live deliveries
// generation (pipeline.RunGenerations). Generation 1's dispatcher is first
// (built at start). Each generation is its own readiness stage (dispatch,
// dispatch.g2, …; restarts counted per stage), and the pipeline is ready
// while every live generation's dispatcher is in its group; a retired
// generation leaves both. A fatal error of any generation's dispatcher, or
// one that cannot be built, is returned (and ends the process).
func runGenerations(ctx context.Context, cfg *config, gens *pipeline.Generations, admin *kgo.Client, topics pipeline.Topics,
	first *pipeline.Dispatcher, newDispatcher func(pipeline.Generation, <-chan struct{}) (*pipeline.Dispatcher, error),
	ready *readiness, supervise func(string) pipeline.SuperviseOptions, meter metric.Meter, log *slog.Logger) error {
	gated, err := meter.Float64Histogram("hookrelay.generation.held",
		metric.WithDescription("Seconds a new deliveries generation's dispatchers were held while the previous generation drained (the pause of its endpoints' new deliveries)."),
		metric.WithUnit("s"))
	if err != nil {
		return err
	}
	if !gens.All()[0].RetiredAt.IsZero() {
		ready.dropStage("dispatch") // generation 1 retired: no stage of its own
	}
	gate := pipeline.GenerationGate{
		Drained: func(ctx context.Context, gen pipeline.Generation) (bool, error) {
			d, err := pipeline.Drained(ctx, admin, pipeline.GenerationGroup(topics.Prefix+"dispatch", gen.N), gen.Topic)
			return d.Drained, err
		},
		Logger: log,
	}
	run := func(rctx context.Context, gen pipeline.Generation, hold <-chan struct{}) error {
		d := first
		if gen.N != 1 || d == nil {
			var err error
			if d, err = newDispatcher(gen, hold); err != nil {
				return pipeline.Fatal(fmt.Errorf("dispatcher not built: %w", err))
			}
		}
		stage := pipeline.GenerationGroup("dispatch", gen.N)
		ready.setJoined(gen.N, false)
		err := pipeline.Supervise(rctx, stage, func(ctx context.Context) error {
			return runDispatcher(ctx, d, func(joined bool) {
				if ready.setJoined(gen.N, joined) {
					log.Info("hookrelay pipeline ready", "roles", cfg.Roles, "instance", cfg.InstanceID)
				}
			})
		}, supervise(stage))
		if rctx.Err() != nil && ctx.Err() == nil { // retired: the later generations' dispatchers run on
			ready.retired(gen.N)
			ready.dropStage(stage)
		}
		return err
	}
	return pipeline.RunGenerations(ctx, gens, gate, run, func(gen pipeline.Generation, waited time.Duration) {
		if gen.N > 1 {
			gated.Record(ctx, waited.Seconds())
		}
	})
}
