package main

import (
	"context"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/pipeline/api"
	"github.com/hookrelay/hookrelay/pipeline/endpoints"
)

// TestCreateEndpointsThroughAPI: the demo registers its endpoints with
// POST /v1/endpoints as an admin (the real API handler, over kfake): each
// ends up exactly as the demo's table says, with the receiver's secret, and
// a repeat (the demo's Idempotency-Key) creates nothing twice.
func TestCreateEndpointsThroughAPI(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	for _, topic := range []string{"d.endpoints", "d.endpoint-status", "d.apikeys", "d.idempotency"} {
		if err := c.CreateTopic(topic, 1, map[string]string{"cleanup.policy": "compact"}); err != nil {
			t.Fatal(err)
		}
	}
	opts := []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}
	view, err := endpoints.NewView(endpoints.Config{Brokers: c.ListenAddrs(), EndpointsTopic: "d.endpoints", StatusTopic: "d.endpoint-status"})
	if err != nil {
		t.Fatal(err)
	}
	keys := api.NewKeys("d.apikeys", opts, nil)
	idem := api.NewIdempotency("d.idempotency", opts, 0, nil)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, run := range []func(context.Context) error{view.Run, keys.Run, idem.Run} {
		wg.Add(1)
		go func() { defer wg.Done(); _ = run(ctx) }()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	store := endpoints.NewStore(view)
	srv, err := api.New(api.Options{Endpoints: store, Keys: keys, Attempts: audit.NewMemory(), Idempotency: idem})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	kctx, kcancel := context.WithTimeout(ctx, 10*time.Second)
	defer kcancel()
	_, admin, err := keys.Create(kctx, true, "", "demo")
	if err != nil {
		t.Fatal(err)
	}

	cl := &apiClient{base: hs.URL, key: admin}
	for _, ep := range demoEndpoints {
		r := &receiver{url: "http://127.0.0.1:1234", secret: newSecret()}
		for range 2 { // the second is a replay of the first
			if err := cl.createEndpoint(kctx, ep, r); err != nil {
				t.Fatalf("%s: %v", ep.ID, err)
			}
		}
		got, err := store.Get(kctx, ep.ID)
		if err != nil {
			t.Fatalf("%s: %v", ep.ID, err)
		}
		if got.URL != r.url+"/"+ep.ID || !slices.Equal(got.EventTypes, ep.Events) || got.RatePerSec != float64(ep.Rate) ||
			got.MaxInFlight != ep.MaxInFlight || len(got.Secrets) != 1 || got.Secrets[0].Value != r.secret || got.TenantID != "" {
			t.Errorf("%s stored as %+v, want %+v with the receiver's secret", ep.ID, got, ep)
		}
	}
	if bad := (&apiClient{base: hs.URL, key: "hrk_0000000000000000_x"}).createEndpoint(kctx, demoEndpoints[0], &receiver{url: "http://x", secret: newSecret()}); bad == nil {
		t.Error("an unknown key created an endpoint")
	}
}
