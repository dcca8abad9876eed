package pipeline

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestReplicationFor(t *testing.T) {
	for _, c := range []struct {
		rf      int16
		isr     int
		brokers int
		wantRF  int16
		wantISR int
	}{
		{0, 0, 1, -1, -1},
		{0, 0, 2, -1, -1},
		{0, 0, 3, 3, 2},
		{0, 0, 5, 3, 2},
		{-1, 0, 3, -1, -1}, // broker default asked for: its replication is unknown
		{1, 0, 3, 1, -1},   // min ISR 2 would make RF 1 topics unwritable
		{5, 0, 5, 5, 2},
		{0, 3, 3, 3, 3},
		{0, -1, 3, 3, -1},
		{2, 1, 1, 2, 1}, // explicit values are kept (the broker refuses RF 2 on one node)
	} {
		rf, isr := ReplicationFor(TopicLayout{ReplicationFactor: c.rf, MinInsyncReplicas: c.isr}, c.brokers)
		if rf != c.wantRF || isr != c.wantISR {
			t.Errorf("ReplicationFor(rf %d, min ISR %d, %d brokers) = %d, %d; want %d, %d", c.rf, c.isr, c.brokers, rf, isr, c.wantRF, c.wantISR)
		}
	}
}

// TestEnsureTopicsReplicationByClusterSize creates the topics on kfake
// clusters of one and three brokers and reads back each topic's replica
// count and min.insync.replicas.
func TestEnsureTopicsReplicationByClusterSize(t *testing.T) {
	for _, c := range []struct {
		name     string
		brokers  int
		layout   TopicLayout
		replicas int
		minISR   string // "" : not set on the topic
	}{
		{"one broker", 1, TopicLayout{Partitions: 2}, 1, ""},
		{"three brokers", 3, TopicLayout{Partitions: 2}, 3, "2"},
		{"three brokers, explicit", 3, TopicLayout{Partitions: 2, ReplicationFactor: 1, MinInsyncReplicas: 1}, 1, "1"},
		{"three brokers, broker default", 3, TopicLayout{Partitions: 2, ReplicationFactor: -1, MinInsyncReplicas: -1}, -1, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl, err := kfake.NewCluster(kfake.NumBrokers(c.brokers))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			kc, err := kgo.NewClient(kgo.SeedBrokers(cl.ListenAddrs()...))
			if err != nil {
				t.Fatal(err)
			}
			defer kc.Close()
			adm := kadm.NewClient(kc)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			topics := NewTopics("r.")
			if err := EnsureTopics(ctx, adm, topics, c.layout); err != nil {
				t.Fatal(err)
			}
			names := []string{topics.Events, topics.Deliveries, topics.Endpoints, topics.Attempts}
			md, err := adm.ListTopics(ctx, names...)
			if err != nil {
				t.Fatal(err)
			}
			cfgs, err := adm.DescribeTopicConfigs(ctx, names...)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range names {
				td := md[n]
				if td.Err != nil || len(td.Partitions) == 0 {
					t.Fatalf("topic %s: %v (%d partitions)", n, td.Err, len(td.Partitions))
				}
				if got := len(td.Partitions[0].Replicas); c.replicas > 0 && got != c.replicas {
					t.Errorf("topic %s: %d replicas, want %d", n, got, c.replicas)
				}
				rc, err := cfgs.On(n, nil)
				if err != nil {
					t.Fatal(err)
				}
				got := ""
				for _, kv := range rc.Configs {
					if kv.Key == "min.insync.replicas" && kv.Source == 1 { // DYNAMIC_TOPIC_CONFIG: set on the topic
						got = kv.MaybeValue()
					}
				}
				if got != c.minISR {
					t.Errorf("topic %s: min.insync.replicas set on the topic = %q, want %q", n, got, c.minISR)
				}
			}
		})
	}
}

// TestEnsureTopicsFatalOrRetry: a deliveries topic with another partition
// count is a fatal config error; an unreachable cluster is not (the caller
// waits it out).
func TestEnsureTopicsFatalOrRetry(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "f.deliveries"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = EnsureTopics(ctx, kadm.NewClient(cl), NewTopics("f."), TopicLayout{Partitions: 4})
	if err == nil || !IsFatal(err) {
		t.Fatalf("EnsureTopics with 3 deliveries partitions, 4 configured = %v; want a Fatal error", err)
	}

	down, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.RetryTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	dctx, dcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer dcancel()
	err = EnsureTopics(dctx, kadm.NewClient(down), NewTopics("f."), TopicLayout{Partitions: 4})
	if err == nil || IsFatal(err) {
		t.Fatalf("EnsureTopics on an unreachable cluster = %v; want a non-fatal error", err)
	}
}
