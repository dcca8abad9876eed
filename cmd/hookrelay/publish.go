package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/pipeline"
	"github.com/hookrelay/hookrelay/publish"
)

// publishCmd is `hookrelay publish`: produce one CloudEvent to the events
// topic with package publish, the way an upstream Go service would. For
// trying hookrelay out and for smoke tests; docs/PRODUCING.md shows
// upstream systems how to produce themselves.
func publishCmd() *cobra.Command {
	var typ, source, id, tenant, data, mode, key string
	cmd := &cobra.Command{
		Use:   "publish --type invoice.paid [--source /billing] [--id ID] [--tenant T] [--data '{…}' | --data @file.json] [--mode structured|binary] [--key K]",
		Short: "Produce one CloudEvent (structured or binary mode) to the events topic",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(cmd.Flags())
			if err != nil {
				return err
			}
			if typ == "" {
				return errors.New("--type is required")
			}
			var m publish.Mode
			switch mode {
			case "structured":
				m = publish.Structured
			case "binary":
				m = publish.Binary
			default:
				return fmt.Errorf("invalid --mode %q: want structured or binary", mode)
			}
			var payload any
			if data != "" {
				raw := []byte(data)
				if path, ok := strings.CutPrefix(data, "@"); ok {
					if raw, err = os.ReadFile(path); err != nil {
						return fmt.Errorf("invalid --data: %w", err)
					}
				}
				if !json.Valid(raw) {
					return errors.New("invalid --data: not JSON")
				}
				payload = json.RawMessage(raw)
			}
			ev, err := publish.NewEvent(source, typ, payload)
			if err != nil {
				return fmt.Errorf("invalid --data: %w", err)
			}
			if id != "" {
				ev.SetID(id)
			}
			publish.SetTenant(&ev, tenant)
			kopts, err := cfg.clientOpts()
			if err != nil {
				return err
			}
			cl, err := kgo.NewClient(kopts...)
			if err != nil {
				return err
			}
			defer cl.Close()
			topic := pipeline.NewTopics(cfg.TopicPrefix).Events
			p, err := publish.New(cl, publish.Options{Topic: topic, Mode: m, MaxBytes: cfg.MaxEventBytes})
			if err != nil {
				return err
			}
			var popts []publish.Option
			if key != "" {
				popts = append(popts, publish.Key(key))
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			r, err := p.Record(ctx, ev, popts...)
			if err != nil {
				return fmt.Errorf("invalid event: %w", err)
			}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				return fmt.Errorf("produce to %s: %w", topic, err)
			}
			id = ev.ID()
			fmt.Printf("published event %s (type %s) to %s, partition %d, offset %d\n", id, typ, topic, r.Partition, r.Offset)
			return nil
		},
	}
	cmd.Flags().StringVar(&typ, "type", "", "CloudEvents type, e.g. invoice.paid (required)")
	cmd.Flags().StringVar(&source, "source", "/hookrelay/cli", "CloudEvents source")
	cmd.Flags().StringVar(&id, "id", "", "CloudEvents id (default: random); with source, it makes the webhook-id")
	cmd.Flags().StringVar(&tenant, "tenant", "", "tenantid extension: only endpoints of this tenant receive it")
	cmd.Flags().StringVar(&data, "data", "", "JSON data, or @file to read it from a file")
	cmd.Flags().StringVar(&mode, "mode", "structured", "CloudEvents Kafka content mode: structured or binary")
	cmd.Flags().StringVar(&key, "key", "", "record key (default: the event id); events with one key are fanned out in order")
	addFlags(cmd.Flags(), "brokers", "kafka-tls", "kafka-tls-ca", "kafka-sasl-mechanism", "kafka-sasl-user", "kafka-sasl-password", "topic-prefix", "max-event-bytes")
	return cmd
}
