package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kafkaProbe measures the broker independently of hookrelay while a scenario
// runs: every interval it runs one tiny Kafka transaction (begin, produce
// one record to its own topic, commit), the same kind of work hookrelay's
// fan-out and dispatcher do per poll. When hookrelay stalls and the probe's
// transactions stalled at the same moment, the broker (or the machine) was
// the cause. Start with startProbe; Stop ends it and waits.
type kafkaProbe struct {
	mu      sync.Mutex
	samples []probeSample
	errs    int
	lastErr string
	stop    chan struct{}
	done    chan struct{}
}

type probeSample struct {
	at  time.Time // when the transaction started
	dur time.Duration
}

// ProbeResult summarises the probe's transactions in a window.
type ProbeResult struct {
	Transactions int     `json:"transactions"`
	P50          float64 `json:"p50_ms"`
	P99          float64 `json:"p99_ms"`
	Max          float64 `json:"max_ms"`
	Over500ms    int     `json:"over_500ms"`
	Errors       int     `json:"errors,omitempty"`
	LastError    string  `json:"last_error,omitempty"`
}

// startProbe creates <prefix>probe (one partition) and starts the loop.
func (e *env) startProbe(ctx context.Context, interval time.Duration) (*kafkaProbe, error) {
	topic := e.prefix + "probe"
	resp, err := e.b.adm.CreateTopic(ctx, 1, -1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return nil, fmt.Errorf("probe topic: %w", err)
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(splitBrokers(e.b.o.brokers)...),
		kgo.TransactionalID(e.prefix+"probe-"+e.b.runID),
		kgo.DefaultProduceTopic(topic),
	)
	if err != nil {
		return nil, err
	}
	p := &kafkaProbe{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		defer cl.Close()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
			}
			start := time.Now()
			err := probeOnce(ctx, cl)
			p.mu.Lock()
			if err != nil {
				p.errs++
				p.lastErr = err.Error()
			} else {
				p.samples = append(p.samples, probeSample{at: start, dur: time.Since(start)})
			}
			p.mu.Unlock()
		}
	}()
	return p, nil
}

func probeOnce(ctx context.Context, cl *kgo.Client) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		return err
	}
	perr := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("probe")}).FirstErr()
	commit := kgo.TryCommit
	if perr != nil {
		commit = kgo.TryAbort
	}
	return errors.Join(perr, cl.EndTransaction(ctx, commit))
}

// Stop ends the probe and waits for it.
func (p *kafkaProbe) Stop() {
	if p == nil {
		return
	}
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
}

// Result summarises the transactions started in [from, to]; a zero bound is
// open.
func (p *kafkaProbe) Result(from, to time.Time) ProbeResult {
	if p == nil {
		return ProbeResult{}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var durs []int64
	r := ProbeResult{Errors: p.errs, LastError: p.lastErr}
	for _, s := range p.samples {
		if (!from.IsZero() && s.at.Before(from)) || (!to.IsZero() && s.at.After(to)) {
			continue
		}
		durs = append(durs, s.dur.Nanoseconds())
		if s.dur > 500*time.Millisecond {
			r.Over500ms++
		}
	}
	d := summarize(durs)
	r.Transactions, r.P50, r.P99, r.Max = d.N, d.P50, d.P99, d.Max
	return r
}

func (r ProbeResult) String() string {
	return fmt.Sprintf("Kafka probe txn p50 %.1f ms, p99 %.1f ms, max %.0f ms, %d over 500 ms", r.P50, r.P99, r.Max, r.Over500ms)
}
