package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/pipeline"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// TestEnsureTopicsWaitsOutAnUnreachableCluster: while no broker answers,
// ensureTopics keeps trying (it returns only when ctx ends) and /readyz
// names Kafka as not ready with the reason; with TLS and SASL configured
// too (a refused connection is not a credential problem).
func TestEnsureTopicsWaitsOutAnUnreachableCluster(t *testing.T) {
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.RetryTimeout(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ready := newReadiness()
	ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
	defer cancel()
	if err := ensureTopics(ctx, kadm.NewClient(cl), pipeline.NewTopics("u."), pipeline.TopicLayout{Partitions: 2}, ready,
		(&config{TLS: true, SASLMechanism: "SCRAM-SHA-512", SASLUser: "u"}).kafkaConfigError, quiet); err != nil {
		t.Fatalf("ensureTopics on an unreachable cluster = %v; want nil once ctx ended (no exit)", err)
	}
	ok, body := ready.check()
	if ok || !strings.Contains(body, "kafka: not ready: topics not set up yet") {
		t.Errorf("readiness while unreachable = %v %q; want not ready naming kafka", ok, body)
	}
}

// TestEnsureTopicsWaitsOutBrokersClosingConnections: a listener that closes
// every new connection at once (a load balancer in front of restarting
// brokers, a connection quota) is retried for seconds, not taken for a
// TLS/SASL mismatch after three tries (F12: that took about 3 s).
func TestEnsureTopicsWaitsOutBrokersClosingConnections(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	defer func() { ln.Close(); <-done }()
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	cl, err := kgo.NewClient(kgo.SeedBrokers(ln.Addr().String()), kgo.RetryTimeout(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ready := newReadiness()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	if err := ensureTopics(ctx, kadm.NewClient(cl), pipeline.NewTopics("u."), pipeline.TopicLayout{Partitions: 2}, ready,
		(&config{}).kafkaConfigError, quiet); err != nil {
		t.Fatalf("ensureTopics against a listener closing connections for 8s = %v; want nil once ctx ended (retried, no exit)", err)
	}
	if ok, body := ready.check(); ok || !strings.Contains(body, "topics not set up yet") {
		t.Errorf("readiness = %v %q; want not ready naming the retry", ok, body)
	}
}

// TestEnsureTopicsFatalExitsAtOnce: a deliveries topic with another
// partition count is returned at once, naming the topic, not retried.
func TestEnsureTopicsFatalExitsAtOnce(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "x.deliveries"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ready := newReadiness()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // hang guard
	defer cancel()
	err = ensureTopics(ctx, kadm.NewClient(cl), pipeline.NewTopics("x."), pipeline.TopicLayout{Partitions: 4}, ready, (&config{}).kafkaConfigError, quiet)
	if err == nil || !pipeline.IsFatal(err) || !strings.Contains(err.Error(), "x.deliveries has 3 partitions") {
		t.Fatalf("ensureTopics = %v; want the fatal partition-count error", err)
	}
	if ctx.Err() != nil {
		t.Fatal("ensureTopics retried a fatal error until the hang guard")
	}
}

// TestReadinessReportsEveryPart: one line per part, stages by name.
func TestReadinessReportsEveryPart(t *testing.T) {
	r := newReadiness()
	r.stage("fanout")
	ok, body := r.check()
	if ok || !strings.Contains(body, "kafka: not ready: connecting") || !strings.Contains(body, "fanout stage: not ready: not started") {
		t.Fatalf("fresh readiness = %v %q", ok, body)
	}
	r.setKafka(nil)
	r.pipeline.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	running := make(chan struct{})
	done := make(chan error, 1)
	go func() { // owner: this test; awaited below
		done <- pipeline.Supervise(ctx, "fanout", func(ctx context.Context) error {
			close(running)
			<-ctx.Done()
			return nil
		}, pipeline.SuperviseOptions{State: r.stage("fanout"), Logger: quiet})
	}()
	<-running
	ok, body = r.check()
	cancel()
	<-done
	if !ok || !strings.Contains(body, "kafka: ready") || !strings.Contains(body, "fanout stage: ready") {
		t.Fatalf("readiness with everything up = %v %q", ok, body)
	}
}
