package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/hookrelay/hookrelay/audit/chstore"
	"github.com/hookrelay/hookrelay/pipeline"
	"github.com/hookrelay/hookrelay/pipeline/api"
	"github.com/hookrelay/hookrelay/pipeline/endpoints"
)

// startAPI starts the api role in g: the API key and idempotency tables and
// the management API's HTTP server on cfg.APIAddr, all stopped when gctx
// ends. store is the audit store when the process already has one (audit
// role), else startAPI opens its own (no I/O until a request needs it). The
// returned func closes what startAPI opened; call it after g.Wait.
func startAPI(gctx context.Context, g *errgroup.Group, cfg *config, kopts []kgo.Opt, topics pipeline.Topics,
	view *endpoints.View, store *chstore.Store, gens *pipeline.Generations, log *slog.Logger) (func(), error) {
	closeStore := func() {}
	if store == nil {
		var err error
		sopts, err := cfg.storeOptions()
		if err != nil {
			return nil, err
		}
		if store, err = chstore.Open(sopts); err != nil {
			return nil, fmt.Errorf("invalid --clickhouse (HOOKRELAY_CLICKHOUSE): %w", err)
		}
		closeStore = func() { store.Close() }
		own := store
		g.Go(func() error { return checkClickHouse(gctx, own, cfg, log) })
	}
	keys := api.NewKeys(topics.APIKeys, kopts, log)
	idem := api.NewIdempotency(topics.Idempotency, kopts, api.DefaultIdempotencyWindow, log)
	recoveries := api.NewRecoveries(topics.Recoveries, kopts, log)
	resender, err := api.NewResender(api.ResenderOptions{ClientOpts: kopts, DLQ: topics.DLQ, Deliveries: topics.Deliveries,
		Events: topics.Events, MaxEventBytes: cfg.MaxEventBytes,
		FanoutGroup: topics.Prefix + "fanout", DispatchGroup: topics.Prefix + "dispatch"}) // the groups run.go names
	if err != nil {
		closeStore()
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	resender.SetDeliveriesTopic(gens.DeliveriesTopic, func() []api.Queue {
		var qs []api.Queue
		for _, gen := range gens.All() {
			if gen.RetiredAt.IsZero() {
				qs = append(qs, api.Queue{Topic: gen.Topic, Group: pipeline.GenerationGroup(topics.Prefix+"dispatch", gen.N)})
			}
		}
		return qs
	}, gens.Ready())
	// The operational events of enable, disable and rotation (the pipeline's
	// topics, Operational included, are ensured at start).
	opsClient, err := kgo.NewClient(kopts...)
	if err != nil {
		resender.Close()
		closeStore()
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	closeAll := func() { opsClient.Close(); resender.Close(); closeStore() }
	ops, err := pipeline.NewOperatorEvents(opsClient, topics, nil)
	if err != nil {
		closeAll()
		return nil, err
	}
	srv, err := api.New(api.Options{
		Endpoints:      endpoints.NewStore(view, endpoints.CheckAddresses(cfg.AllowNetworks)),
		Keys:           keys,
		Attempts:       store,
		Idempotency:    idem,
		Resender:       resender,
		Recoveries:     recoveries,
		OperatorEvents: ops,
		Logger:         log,
	})
	if err != nil {
		closeAll()
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.APIAddr)
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("invalid --api-addr (HOOKRELAY_API_ADDR): %w", err)
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 60 * time.Second, IdleTimeout: 2 * time.Minute}
	// The tables wait out Kafka trouble themselves (they retry until ctx
	// ends), so they need no supervisor.
	g.Go(func() error { return keys.Run(gctx) })
	g.Go(func() error { return idem.Run(gctx) })
	g.Go(func() error { return recoveries.Run(gctx) })
	g.Go(func() error {
		if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("api server: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return hs.Shutdown(sctx)
	})
	log.Info("hookrelay api listening", "addr", ln.Addr().String())
	return closeAll, nil
}
