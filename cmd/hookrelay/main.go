// Command hookrelay delivers CloudEvents from Kafka as signed webhooks.
//
//	hookrelay run                 run the pipeline (all roles, or --roles)
//	hookrelay migrate             apply ClickHouse migrations
//	hookrelay endpoints …         add, list, get, update, disable, enable, delete endpoints
//	hookrelay log --endpoint ID   print an endpoint's delivery log
//	hookrelay apikeys …           create, list, revoke management-API keys
//	hookrelay recover …           resend what did not reach an endpoint (management API)
//	hookrelay dlq …               list, show, replay DLQ records (management API)
//
// Every flag also reads a HOOKRELAY_* environment variable (see --help).
// This package is the only one that reads flags or the environment.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/audit/chstore"
)

// version is sent in the user-agent header; set with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	slog.SetDefault(slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))
	if err := rootCmd().ExecuteContext(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "hookrelay:", err)
		os.Exit(1)
	}
}

// rootCmd is the command tree (README.md's command table is checked
// against it by docs_test.go).
func rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "hookrelay",
		Short:         "Reliable outbound webhooks from Kafka",
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
		// An explicitly empty flag is an error, naming the flag (issue 8, item 8).
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error { return refuseEmptyFlags(cmd.Flags()) },
	}
	root.AddCommand(runCmd(), migrateCmd(), endpointsCmd(), logCmd(), publishCmd(), apikeysCmd(), recoverCmd(), dlqCmd(), deliveriesCmd())
	return root
}

// signalContext ends on SIGINT or SIGTERM: the graceful shutdown.
func signalContext(parent context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
}

func migrateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply pending ClickHouse migrations (run also does this at start-up)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(cmd.Flags())
			if err != nil {
				return err
			}
			store, err := openStore(cmd.Context(), cfg, slog.Default())
			if err != nil {
				return err
			}
			defer store.Close()
			v, err := store.SchemaVersion(cmd.Context())
			if err != nil {
				return err
			}
			fmt.Printf("schema version %d\n", v)
			return nil
		},
	}
	addFlags(cmd.Flags(), "clickhouse", "clickhouse-password", "clickhouse-tls-ca")
	return cmd
}

func logCmd() *cobra.Command {
	var endpoint, event string
	var limit int
	var follow bool
	cmd := &cobra.Command{
		Use:   "log",
		Short: "Print an endpoint's delivery log from ClickHouse, newest first; --follow streams new attempts from Kafka",
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(cmd.Flags())
			if err != nil {
				return err
			}
			if endpoint == "" {
				return fmt.Errorf("--endpoint is required")
			}
			if follow {
				ctx, stop := signalContext(cmd.Context())
				defer stop()
				return followLog(ctx, cfg, endpoint, event, os.Stdout, os.Stderr)
			}
			if limit < 1 || limit > audit.MaxLimit {
				return fmt.Errorf("invalid --limit: must be 1 to %d, got %d", audit.MaxLimit, limit)
			}
			// Read only: no migration, so a mistyped database is an error,
			// not a new empty one.
			sopts, err := cfg.storeOptions()
			if err != nil {
				return err
			}
			store, err := chstore.New(cmd.Context(), sopts)
			if err != nil {
				if ferr := cfg.clickhouseConfigError(err); ferr != nil {
					return ferr
				}
				return fmt.Errorf("clickhouse (--clickhouse, HOOKRELAY_CLICKHOUSE): %w", err)
			}
			defer store.Close()
			if v, err := store.SchemaVersion(cmd.Context()); err != nil || v == 0 {
				return fmt.Errorf("no delivery log in database %q (schema version %d, %v): check --clickhouse (HOOKRELAY_CLICKHOUSE)", store.Database(), v, err)
			}
			rows, err := store.Log(cmd.Context(), audit.Query{EndpointID: endpoint, EventID: event, Limit: limit})
			if err != nil {
				return err
			}
			return audit.WriteLog(os.Stdout, rows)
		},
	}
	cmd.Flags().StringVar(&endpoint, "endpoint", "", "endpoint ID (required)")
	cmd.Flags().StringVar(&event, "event", "", "only this event ID")
	cmd.Flags().IntVar(&limit, "limit", 100, "rows to print (at most 1000)")
	cmd.Flags().BoolVar(&follow, "follow", false, "stream the endpoint's attempts as they are written (from the attempts topic, from now) until Ctrl-C")
	addFlags(cmd.Flags(), "clickhouse", "clickhouse-password", "clickhouse-tls-ca", "brokers", "kafka-tls", "kafka-tls-ca", "kafka-sasl-mechanism", "kafka-sasl-user", "kafka-sasl-password", "topic-prefix")
	return cmd
}
