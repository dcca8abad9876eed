package api

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/pipeline/endpoints"
)

// TestResendWaitsForGenerations: until the generations view is ready, a
// resend and recovery's look at the queues produce and read nothing (the
// newest generation is not known: generation 1 may be retired) and are
// answered not ready; once it is, they go on.
func TestResendWaitsForGenerations(t *testing.T) {
	s, err := NewResender(ResenderOptions{ClientOpts: []kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}, DLQ: "x.dlq", Deliveries: "x.deliveries", DispatchGroup: "x.dispatch"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ready := make(chan struct{})
	var asked []string
	s.SetDeliveriesTopic(func() string { asked = append(asked, "newest"); return "x.deliveries.g2" },
		func() []Queue { asked = append(asked, "queues"); return nil }, ready)
	e := &endpoints.Endpoint{ID: "ep_1"}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := s.queued(ctx, e); !errors.Is(err, errGenerationsNotReady) {
		t.Fatalf("queued before ready: err %v, want errGenerationsNotReady", err)
	}
	if len(asked) != 0 {
		t.Fatalf("the generations were asked before ready: %v", asked)
	}
	close(ready)
	if _, err := s.queued(context.Background(), e); err != nil || len(asked) != 1 || asked[0] != "queues" {
		t.Fatalf("queued after ready: err %v, asked %v", err, asked)
	}
}
