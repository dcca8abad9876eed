package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// eventSource is "hookbench": every event's CloudEvents source.
const eventSource = "hookbench"

// eventGen builds CloudEvents 1.0 in structured mode (content-type
// application/cloudevents+json) whose data is about payloadBytes long:
//
//	{"seq":N,"produced_ns":T,"pad":"<random letters and digits>"}
//
// produced_ns is the instant the record was handed to the producer, so a
// receiver computes produce-to-receive latency from the body alone. The pad
// is random per event, so Kafka's batch compression gets no easier job than
// with real payloads. IDs are "<prefix><seq>", unique per run. Safe for
// concurrent use.
type eventGen struct {
	idPrefix string
	padLen   int
	seq      atomic.Int64
	github   []json.RawMessage // when set, data cycles through these payloads instead
}

func newEventGen(idPrefix string, payloadBytes int) *eventGen {
	// {"seq":<=10 digits,"produced_ns":19 digits,"pad":""} is about 60 bytes.
	return &eventGen{idPrefix: idPrefix, padLen: max(payloadBytes-60, 0)}
}

const padAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

// appendPad appends n random characters of padAlphabet.
func appendPad(v []byte, n int) []byte {
	for n > 0 {
		x := rand.Uint64()
		for k := 0; k < 10 && n > 0; k++ {
			v = append(v, padAlphabet[x&63])
			x >>= 6
			n--
		}
	}
	return v
}

// record returns the next event, of type typ, for topic, stamped now.
func (g *eventGen) record(topic, typ string, now time.Time) *kgo.Record {
	seq := g.seq.Add(1)
	id := g.idPrefix + strconv.FormatInt(seq, 10)
	v := make([]byte, 0, g.padLen+256)
	v = append(v, `{"specversion":"1.0","id":"`...)
	v = append(v, id...)
	v = append(v, `","source":"`+eventSource+`","type":"`...)
	v = append(v, typ...)
	v = append(v, `","time":"`...)
	v = now.UTC().AppendFormat(v, time.RFC3339Nano)
	v = append(v, `","datacontenttype":"application/json","data":`...)
	if g.github != nil {
		v = append(v, g.github[int(seq)%len(g.github)]...)
	} else {
		v = append(v, `{"seq":`...)
		v = strconv.AppendInt(v, seq, 10)
		v = append(v, `,"produced_ns":`...)
		v = strconv.AppendInt(v, now.UnixNano(), 10)
		v = append(v, `,"pad":"`...)
		v = appendPad(v, g.padLen)
		v = append(v, `"}`...)
	}
	v = append(v, '}')
	return &kgo.Record{
		Topic:   topic,
		Key:     []byte(id),
		Value:   v,
		Headers: []kgo.RecordHeader{{Key: "content-type", Value: []byte("application/cloudevents+json")}},
	}
}

// producer counts acknowledged records and keeps the first error.
type producer struct {
	cl    *kgo.Client
	wg    sync.WaitGroup
	acked atomic.Int64
	mu    sync.Mutex
	err   error
}

func (p *producer) produce(ctx context.Context, r *kgo.Record) {
	p.wg.Add(1)
	p.cl.Produce(ctx, r, func(r *kgo.Record, err error) {
		defer p.wg.Done()
		if err != nil {
			p.mu.Lock()
			if p.err == nil {
				p.err = fmt.Errorf("produce to %s: %w", r.Topic, err)
			}
			p.mu.Unlock()
			return
		}
		p.acked.Add(1)
	})
}

// wait waits for every outstanding record and returns the first error.
func (p *producer) wait() error {
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// preload produces n events as fast as Kafka takes them, event i of type
// typeOf(i), printing progress about every quarter.
func (b *bench) preload(ctx context.Context, g *eventGen, topic string, n int, typeOf func(int) string) error {
	p := &producer{cl: b.kcl}
	step := max(n/4, 1)
	start := time.Now()
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		p.produce(ctx, g.record(topic, typeOf(i), time.Now()))
		if (i+1)%step == 0 {
			b.logf("  produced %d/%d events (%.0f/s)", i+1, n, float64(i+1)/time.Since(start).Seconds())
		}
	}
	if err := p.wait(); err != nil {
		return err
	}
	return ctx.Err()
}

// paced produces events at rate per second (open loop: the schedule does not
// wait for hookrelay) until ctx ends or stop is closed; event i is of type
// typeOf(i). It returns the instant (unix ns) each event was produced, which
// is also the produced_ns in its payload.
func (b *bench) paced(ctx context.Context, g *eventGen, topic string, rate float64, stop <-chan struct{}, typeOf func(int) string) ([]int64, error) {
	return b.pacedN(ctx, g, topic, rate, 0, stop, typeOf)
}

// pacedN is paced that also stops after n events (n <= 0: no limit).
func (b *bench) pacedN(ctx context.Context, g *eventGen, topic string, rate float64, n int, stop <-chan struct{}, typeOf func(int) string) ([]int64, error) {
	p := &producer{cl: b.kcl}
	start := time.Now()
	var produced []int64
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-stop:
			break loop
		case tick := <-t.C:
			due := int(tick.Sub(start).Seconds() * rate)
			if n > 0 && due >= n {
				due = n
			}
			for len(produced) < due {
				now := time.Now()
				p.produce(ctx, g.record(topic, typeOf(len(produced)), now))
				produced = append(produced, now.UnixNano())
			}
			if n > 0 && len(produced) >= n {
				break loop
			}
		}
	}
	return produced, p.wait()
}

// loadGitHubPayloads reads the distinct payloads of @octokit/webhooks-examples
// (GitHub.com index) from dir, compacted; empty when the package is not
// installed (`make deps` installs it).
func loadGitHubPayloads(dir string) ([]json.RawMessage, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "api.github.com", "index.json"))
	if err != nil {
		return nil, err
	}
	var defs []struct {
		Examples []json.RawMessage `json:"examples"`
	}
	if err := json.Unmarshal(raw, &defs); err != nil {
		return nil, fmt.Errorf("decode GitHub examples: %w", err)
	}
	seen := map[string]bool{}
	var out []json.RawMessage
	for _, d := range defs {
		for _, ex := range d.Examples {
			var buf bytes.Buffer
			if err := json.Compact(&buf, ex); err != nil {
				continue
			}
			if seen[buf.String()] {
				continue
			}
			seen[buf.String()] = true
			out = append(out, buf.Bytes())
		}
	}
	return out, nil
}

// recordOf is a plain record.
func recordOf(topic, key string, value []byte) *kgo.Record {
	return &kgo.Record{Topic: topic, Key: []byte(key), Value: value}
}

// splitBrokers splits a comma-separated broker list.
func splitBrokers(s string) []string {
	var out []string
	for _, b := range strings.Split(s, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}
