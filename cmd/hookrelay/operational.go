package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/pipeline"
	"github.com/hookrelay/hookrelay/pipeline/endpoints"
	"github.com/hookrelay/hookrelay/pipeline/operational"
)

// publishOperational publishes the operational event an operator's change
// causes (enabled, disabled, secret rotated), for the endpoint's owner to be notified like
// the pipeline's own health events. The change is already written when it
// runs: a failure says so and is returned, so the command exits non-zero.
func publishOperational(cmd *cobra.Command, typ string, e *endpoints.Endpoint, d operational.Data) error {
	fail := func(err error) error {
		return fmt.Errorf("endpoint %s was changed, but its %s event was not published: %w", e.ID, typ, err)
	}
	cfg, err := loadConfig(cmd.Flags())
	if err != nil {
		return fail(err)
	}
	kopts, err := cfg.kafkaOpts()
	if err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
	defer cancel()
	topics := pipeline.NewTopics(cfg.TopicPrefix)
	cl, err := kgo.NewClient(kopts...)
	if err != nil {
		return fail(err)
	}
	defer cl.Close()
	if err := pipeline.EnsureTopics(ctx, kadm.NewClient(cl), pipeline.Topics{Operational: topics.Operational}, pipeline.TopicLayout{
		ReplicationFactor: cfg.Replication, MinInsyncReplicas: cfg.MinISR,
	}); err != nil {
		return fail(err)
	}
	d.EndpointID = e.ID
	ev, err := operational.New(typ, e.TenantID, time.Now(), d)
	if err != nil {
		return fail(err)
	}
	r, err := pipeline.OperationalRecord(topics, ev)
	if err != nil {
		return fail(err)
	}
	if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		return fail(err)
	}
	return nil
}
