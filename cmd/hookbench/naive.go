package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/pipeline/delivery"
	"github.com/hookrelay/hookrelay/pipeline/webhook"
)

// naiveEndpoint is what the baseline knows of an endpoint.
type naiveEndpoint struct {
	URL     string
	Secret  webhook.Secret
	Timeout time.Duration // 0: the sender's default, 10s
}

// naivePool is the baseline of scenario 4: the design the seeds warn
// against. One shared pool of workers takes deliveries from the deliveries
// topic in offset order, with no per-endpoint pacing, queue or in-flight
// cap, and sends each with the same HTTP client and signing as hookrelay
// (webhook.Sender with hookrelay's options). When every worker is stuck on a
// slow endpoint, nothing else moves. It does not retry; it records one
// attempt row per request on the attempts topic (hookrelay's audit sink,
// running with --roles fanout,audit, inserts them), so the audit check
// holds for it too.
type naivePool struct {
	workers   int
	endpoints map[string]naiveEndpoint
	sender    *webhook.Sender
	prod      *producer
	attempts  string
	sent      atomic.Int64
}

func newNaivePool(b *bench, e *env, workers int, eps map[string]naiveEndpoint) (*naivePool, error) {
	allow, err := webhook.ParseAllowList("127.0.0.0/8")
	if err != nil {
		return nil, err
	}
	s, err := webhook.NewSender(webhook.Options{Version: "hookbench-naive", AllowNetworks: allow, MaxIdleConnsPerHost: 64})
	if err != nil {
		return nil, err
	}
	return &naivePool{workers: workers, endpoints: eps, sender: s, prod: &producer{cl: b.kcl}, attempts: e.prefix + "attempts"}, nil
}

// Run consumes prefix+"deliveries" (read_committed, group prefix+"naive")
// until stop is closed, then lets every worker finish its request (release
// hung receivers first, or this waits for their timeout), flushes the
// attempt rows and returns.
func (n *naivePool) Run(ctx context.Context, brokers []string, prefix string, stop <-chan struct{}) error {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(brokers...),
		kgo.ConsumerGroup(prefix+"naive"),
		kgo.ConsumeTopics(prefix+"deliveries"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
	if err != nil {
		return fmt.Errorf("naive pool: kafka client: %w", err)
	}
	defer cl.Close()
	jobs := make(chan *kgo.Record)
	var wg sync.WaitGroup
	for range n.workers {
		wg.Go(func() {
			for r := range jobs {
				n.deliver(r)
			}
		})
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-pctx.Done():
		}
	}()
	var runErr error
poll:
	for {
		fs := cl.PollRecords(pctx, 500)
		if pctx.Err() != nil {
			break
		}
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				runErr = fmt.Errorf("naive pool: fetch %s/%d: %w", t, p, err)
			}
		})
		if runErr != nil {
			break
		}
		for _, r := range fs.Records() {
			select {
			case jobs <- r:
			case <-pctx.Done():
				break poll
			}
		}
	}
	close(jobs)
	wg.Wait()
	return errors.Join(runErr, n.prod.wait())
}

// deliver makes one attempt and produces its row.
func (n *naivePool) deliver(r *kgo.Record) {
	meta, err := delivery.ParseMeta(r.Headers)
	if err != nil {
		return
	}
	ep, ok := n.endpoints[meta.EndpointID]
	if !ok {
		return
	}
	res := n.sender.Send(context.Background(), &webhook.Request{
		URL: ep.URL, Body: r.Value, WebhookID: meta.WebhookID, Secrets: []webhook.Secret{ep.Secret}, Timeout: ep.Timeout,
	})
	n.sent.Add(1)
	c := webhook.Classify(res)
	out := c.Outcome
	if out == audit.RetryScheduled {
		out = audit.Exhausted // the baseline does not retry
	}
	var id [16]byte
	_, _ = rand.Read(id[:])
	host := ""
	if u, err := url.Parse(ep.URL); err == nil {
		host = u.Host
	}
	a := audit.Attempt{
		AttemptID: hex.EncodeToString(id[:]), DeliveryID: meta.DeliveryID, EventID: meta.EventID,
		WebhookID: meta.WebhookID, EventType: meta.EventType, Tenant: meta.Tenant, EndpointID: meta.EndpointID,
		URLHost: host, AttemptNumber: 1, AttemptedAt: res.SentAt.UTC().Truncate(time.Millisecond),
		LatencyMs: res.Latency.Milliseconds(), HTTPStatus: res.StatusCode, Outcome: out,
		ErrorClass: c.ErrorClass, ErrorMessage: c.ErrorMessage, ResponseBody: string(res.Body),
	}
	v, err := a.Marshal()
	if err != nil {
		return
	}
	n.prod.produce(context.Background(), &kgo.Record{Topic: n.attempts, Key: []byte(meta.EndpointID), Value: v})
}
