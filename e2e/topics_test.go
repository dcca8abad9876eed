package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/hookrelay/hookrelay/e2e/stack"
	"github.com/hookrelay/hookrelay/pipeline"
)

// TestTopicsReplicationFollowsClusterSize creates hookrelay's topics with
// the default layout on the real cluster and reads them back: with three or
// more brokers every topic has 3 replicas and min.insync.replicas=2 set on
// it; with fewer, the broker's defaults (nothing set on the topic). Run it
// on a three-node stack (make up KAFKA_NODES=3) to see the first case.
func TestTopicsReplicationFollowsClusterSize(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	adm := stack.Admin(t)
	brokers, err := adm.ListBrokers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	topics := pipeline.NewTopics(stack.TopicPrefix(t))
	if err := pipeline.EnsureTopics(ctx, adm, topics, pipeline.TopicLayout{Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	wantReplicas, wantISR := 1, ""
	if len(brokers) >= 3 {
		wantReplicas, wantISR = 3, "2"
	}
	names := []string{topics.Events, topics.Invalid, topics.Endpoints, topics.EndpointStatus, topics.Deliveries, topics.DLQ, topics.Attempts}
	// Topics created a moment ago may not be in every broker's metadata yet.
	md, err := adm.ListTopics(ctx, names...)
	for err == nil && md.Error() != nil && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond) // polling the metadata, not synchronising
		md, err = adm.ListTopics(ctx, names...)
	}
	if err != nil {
		t.Fatal(err)
	}
	cfgs, err := adm.DescribeTopicConfigs(context.Background(), names...)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		td := md[n]
		if td.Err != nil || len(td.Partitions) == 0 {
			t.Fatalf("topic %s: %v", n, td.Err)
		}
		for _, p := range td.Partitions {
			if len(brokers) != 2 && len(p.Replicas) != wantReplicas {
				t.Errorf("%d brokers: topic %s partition %d has %d replicas, want %d", len(brokers), n, p.Partition, len(p.Replicas), wantReplicas)
			}
		}
		rc, err := cfgs.On(n, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		for _, kv := range rc.Configs {
			if kv.Key == "min.insync.replicas" && kv.Source == 1 { // set on the topic
				got = kv.MaybeValue()
			}
		}
		if got != wantISR {
			t.Errorf("%d brokers: topic %s has min.insync.replicas %q set, want %q", len(brokers), n, got, wantISR)
		}
	}
}
