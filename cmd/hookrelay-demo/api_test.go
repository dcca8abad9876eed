package main

import (
	"context"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/pipeline/api"
	"github.com/hookrelay/hookrelay/pipeline/api/apitest"
	"github.com/hookrelay/hookrelay/pipeline/endpoints"
)

// TestCreateEndpointsThroughAPI: the demo registers its endpoints with
// POST /v1/endpoints as an admin (the real API handler, over kfake): each
// ends up exactly as the demo's table says, with the receiver's secret, and
// a repeat (the demo's Idempotency-Key) creates nothing twice.
func TestCreateEndpointsThroughAPI(t *testing.T) {
	seeds := apitest.FakeKafka(t, nil, []string{"d.endpoints", "d.endpoint-status", "d.apikeys", "d.idempotency"})
	opts := []kgo.Opt{kgo.SeedBrokers(seeds...)}
	view, err := endpoints.NewView(endpoints.Config{Brokers: seeds, EndpointsTopic: "d.endpoints", StatusTopic: "d.endpoint-status"})
	if err != nil {
		t.Fatal(err)
	}
	keys := api.NewKeys("d.apikeys", opts, nil)
	idem := api.NewIdempotency("d.idempotency", opts, 0, nil)
	apitest.RunAll(t, view.Run, keys.Run, idem.Run)
	store := endpoints.NewStore(view)
	srv, err := api.New(api.Options{Endpoints: store, Keys: keys, Attempts: audit.NewMemory(), Idempotency: idem})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	kctx, kcancel := context.WithTimeout(context.Background(), 10*time.Second)
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
