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
)

// publishOperational publishes the operational event an operator's change
// causes (enabled, disabled, secret rotated) through
// pipeline.OperatorEvents, as the REST API does, for the endpoint's owner to
// be notified like the pipeline's own health events. The change is already
// written when it runs: a failure says so and is returned, so the command
// exits non-zero.
func publishOperational(cmd *cobra.Command, e *endpoints.Endpoint, publish func(context.Context, *pipeline.OperatorEvents) error) error {
	fail := func(err error) error {
		return fmt.Errorf("endpoint %s was changed, but its operational event was not published: %w", e.ID, err)
	}
	cfg, err := loadConfig(cmd.Flags())
	if err != nil {
		return fail(err)
	}
	kopts, err := cfg.clientOpts() // with the seed brokers
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
	o, err := pipeline.NewOperatorEvents(cl, topics, nil)
	if err != nil {
		return fail(err)
	}
	if err := publish(ctx, o); err != nil {
		return fail(err)
	}
	return nil
}
