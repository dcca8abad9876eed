package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/pipeline"
)

// publishCmd is `hookrelay publish`: produce one CloudEvent to the events
// topic, the way an upstream system would (structured content mode). For
// trying hookrelay out and for smoke tests; upstream systems use their own
// producers.
func publishCmd() *cobra.Command {
	var typ, source, id, tenant, data string
	cmd := &cobra.Command{
		Use:   "publish --type invoice.paid [--source /billing] [--id ID] [--tenant T] [--data '{…}' | --data @file.json]",
		Short: "Produce one CloudEvent (structured JSON) to the events topic",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(cmd.Flags())
			if err != nil {
				return err
			}
			if typ == "" {
				return errors.New("--type is required")
			}
			ev := cloudevents.New()
			ev.SetType(typ)
			ev.SetSource(source)
			if id == "" {
				var b [12]byte
				_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
				id = "evt_" + hex.EncodeToString(b[:])
			}
			ev.SetID(id)
			ev.SetTime(time.Now().UTC())
			if tenant != "" {
				ev.SetExtension("tenantid", tenant)
			}
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
				if err := ev.SetData("application/json", json.RawMessage(raw)); err != nil {
					return fmt.Errorf("invalid --data: %w", err)
				}
			}
			if err := ev.Validate(); err != nil {
				return fmt.Errorf("invalid event: %w", err)
			}
			value, err := json.Marshal(ev)
			if err != nil {
				return err
			}
			kopts, err := cfg.clientOpts()
			if err != nil {
				return err
			}
			cl, err := kgo.NewClient(kopts...)
			if err != nil {
				return err
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			topic := pipeline.NewTopics(cfg.TopicPrefix).Events
			r := &kgo.Record{Topic: topic, Key: []byte(id), Value: value,
				Headers: []kgo.RecordHeader{{Key: "content-type", Value: []byte("application/cloudevents+json")}}}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				return fmt.Errorf("produce to %s: %w", topic, err)
			}
			fmt.Printf("published event %s (type %s) to %s, partition %d, offset %d\n", id, typ, topic, r.Partition, r.Offset)
			return nil
		},
	}
	cmd.Flags().StringVar(&typ, "type", "", "CloudEvents type, e.g. invoice.paid (required)")
	cmd.Flags().StringVar(&source, "source", "/hookrelay/cli", "CloudEvents source")
	cmd.Flags().StringVar(&id, "id", "", "CloudEvents id (default: random); with source, it makes the webhook-id")
	cmd.Flags().StringVar(&tenant, "tenant", "", "tenantid extension: only endpoints of this tenant receive it")
	cmd.Flags().StringVar(&data, "data", "", "JSON data, or @file to read it from a file")
	addFlags(cmd.Flags(), "brokers", "kafka-tls", "kafka-tls-ca", "kafka-sasl-mechanism", "kafka-sasl-user", "kafka-sasl-password", "topic-prefix")
	return cmd
}
