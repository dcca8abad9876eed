package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/pipeline"
	"github.com/hookrelay/hookrelay/pipeline/api"
)

// apikeysCmd is `hookrelay apikeys create|list|revoke`: the keys of the
// management API (pipeline/api), kept as SHA-256 hashes in the compacted
// <prefix>apikeys topic that every api replica reads.
func apikeysCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "apikeys", Short: "Manage management-API keys (create, list, revoke)"}
	addFlags(cmd.PersistentFlags(), "brokers", "kafka-tls", "kafka-tls-ca", "kafka-sasl-mechanism", "kafka-sasl-user",
		"kafka-sasl-password", "topic-prefix", "replication-factor", "min-insync-replicas")

	var admin bool
	var tenant, name string
	create := &cobra.Command{
		Use:   "create (--admin | --tenant T) [--name N]",
		Short: "Create a key; prints it once (only its hash is stored)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if admin == (tenant != "") {
				return errors.New("give exactly one of --admin and --tenant")
			}
			return withKeys(cmd, func(ctx context.Context, k *api.Keys) error {
				rec, key, err := k.Create(ctx, admin, tenant, name)
				if err != nil {
					return err
				}
				fmt.Printf("%s\n(key %s; shown once: store it now, only its SHA-256 is kept)\n", key, rec.ID)
				return nil
			})
		},
	}
	create.Flags().BoolVar(&admin, "admin", false, "a key that sees and changes every endpoint")
	create.Flags().StringVar(&tenant, "tenant", "", "a key that sees and changes only this tenant's endpoints")
	create.Flags().StringVar(&name, "name", "", "a label for people, shown by list")

	list := &cobra.Command{
		Use:   "list",
		Short: "List keys (IDs, never the keys)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withKeys(cmd, func(ctx context.Context, k *api.Keys) error {
				keys, err := k.List(ctx)
				if err != nil {
					return err
				}
				var rows [][]string
				for _, key := range keys {
					role := "tenant"
					if key.Admin {
						role = "admin"
					}
					rows = append(rows, []string{key.ID, role, key.Tenant, key.Name, key.CreatedAt.Format(time.RFC3339)})
				}
				return printTable(os.Stdout, []string{"ID", "ROLE", "TENANT", "NAME", "CREATED"}, rows)
			})
		},
	}

	revoke := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a key: every api replica refuses it once it has read the revocation",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withKeys(cmd, func(ctx context.Context, k *api.Keys) error {
				if err := k.Revoke(ctx, args[0]); err != nil {
					return err
				}
				fmt.Printf("revoked %s\n", args[0])
				return nil
			})
		},
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}

// withKeys creates the apikeys topic when missing, runs the key table until
// fn returns, and stops it.
func withKeys(cmd *cobra.Command, fn func(context.Context, *api.Keys) error) error {
	cfg, err := loadConfig(cmd.Flags())
	if err != nil {
		return err
	}
	kopts, err := cfg.clientOpts() // with the seed brokers: every client below is ours
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), 60*time.Second)
	defer cancel()
	topics := pipeline.NewTopics(cfg.TopicPrefix)
	admin, err := kgo.NewClient(kopts...)
	if err != nil {
		return err
	}
	defer admin.Close()
	if err := pipeline.EnsureTopics(ctx, kadm.NewClient(admin), pipeline.Topics{APIKeys: topics.APIKeys}, pipeline.TopicLayout{
		ReplicationFactor: cfg.Replication, MinInsyncReplicas: cfg.MinISR,
	}); err != nil {
		return cfg.explainKafka(fmt.Errorf("topics: %w", err))
	}
	keys := api.NewKeys(topics.APIKeys, kopts, nil)
	kctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- keys.Run(kctx) }()
	err = fn(ctx, keys)
	stop()
	<-done
	return err
}
