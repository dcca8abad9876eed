package publish_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookrelay/hookrelay/pipeline/events"
	"github.com/hookrelay/hookrelay/publish"
)

const topic = "t.events"

func cluster(t *testing.T) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func client(t *testing.T, c *kfake.Cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// endOffset is the last stable offset of the topic's partition 0: the
// offset after the last record a read_committed reader can see.
func endOffset(t *testing.T, c *kfake.Cluster) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := kmsgListOffsets(topic).RequestWith(ctx, client(t, c))
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0].Offset
}

// committedIDs reads the topic read_committed, as hookrelay's fan-out does,
// until it has the event want, and returns the ids of every event it saw.
func committedIDs(t *testing.T, c *kfake.Cluster, want string) []string {
	t.Helper()
	cl := client(t, c, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var ids []string
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %s: %v (have %v, want %s)", topic, err, ids, want)
		}
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			ev, err := events.Decode(r, 0)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, ev.ID())
			done = done || ev.ID() == want
		})
		if done {
			return ids
		}
	}
}

func newEvent(t *testing.T, data any) event.Event {
	t.Helper()
	ev, err := publish.NewEvent("/billing", "invoice.paid", data)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// TestRecordIsWhatFanoutDecodes: both modes give a record that
// pipeline/events decodes back to the same event, with the tenant, the
// trace context of ctx and the JSON data.
func TestRecordIsWhatFanoutDecodes(t *testing.T) {
	c := cluster(t)
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5}, TraceFlags: trace.FlagsSampled,
	})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	data := `{"text":"Grüße, 東京 <b>&amp;</b>","n":12345678901234567890}`
	for _, mode := range []publish.Mode{publish.Structured, publish.Binary} {
		t.Run(mode.String(), func(t *testing.T) {
			p, err := publish.New(client(t, c), publish.Options{Topic: topic, Mode: mode})
			if err != nil {
				t.Fatal(err)
			}
			ev := newEvent(t, json.RawMessage(data))
			publish.SetTenant(&ev, "acme")
			ev.SetSubject("in_1")
			r, err := p.Record(ctx, ev)
			if err != nil {
				t.Fatal(err)
			}
			if ct, _ := header(r, "content-type"); (mode == publish.Structured) != (ct == event.ApplicationCloudEventsJSON) {
				t.Errorf("content-type %q in %v mode", ct, mode)
			}
			if mode == publish.Binary {
				if v, _ := header(r, "ce_id"); v != ev.ID() {
					t.Errorf("ce_id = %q, want %q", v, ev.ID())
				}
			}
			if string(r.Key) != "in_1" {
				t.Errorf("key = %q, want the subject in_1", r.Key)
			}
			got, err := events.Decode(r, 0)
			if err != nil {
				t.Fatal(err)
			}
			if got.ID() != ev.ID() || got.Source() != "/billing" || got.Type() != "invoice.paid" || events.Tenant(got) != "acme" {
				t.Errorf("decoded %s %s %s tenant %q", got.ID(), got.Source(), got.Type(), events.Tenant(got))
			}
			if tp, _ := events.Trace(got); tp != "00-"+sc.TraceID().String()+"-"+sc.SpanID().String()+"-01" {
				t.Errorf("traceparent = %q", tp)
			}
			body, err := events.DataJSON(got)
			if err != nil || !strings.Contains(string(body), "12345678901234567890") || !strings.Contains(string(body), "東京") {
				t.Errorf("data = %s, %v", body, err)
			}
			if _, ok := ev.Extensions()[events.ExtensionTraceParent]; ok {
				t.Error("Record modified the caller's event")
			}
		})
	}
}

func header(r *kgo.Record, key string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

// TestRefusesWhatFanoutRefuses: each event fan-out would send to
// events.invalid is refused with its reason, and nothing is produced.
func TestRefusesWhatFanoutRefuses(t *testing.T) {
	c := cluster(t)
	cases := []struct {
		name   string
		mode   publish.Mode
		edit   func(*event.Event)
		reason string
	}{
		{"no type", publish.Structured, func(e *event.Event) { e.SetType("") }, events.ReasonMissingAttribute},
		{"no source binary", publish.Binary, func(e *event.Event) { e.SetSource("") }, events.ReasonMissingAttribute},
		{"too large", publish.Structured, func(e *event.Event) {
			_ = e.SetData(event.ApplicationJSON, json.RawMessage(`"`+strings.Repeat("x", events.DefaultMaxBytes)+`"`))
		}, events.ReasonTooLarge},
		{"tenantid not a string", publish.Structured, func(e *event.Event) { e.SetExtension("tenantid", 7) }, events.ReasonInvalidAttribute},
		{"data not JSON", publish.Binary, func(e *event.Event) { _ = e.SetData(event.ApplicationJSON, []byte("{nope")) }, events.ReasonBadJSON},
		{"control character in type", publish.Structured, func(e *event.Event) { e.SetType("invoice\x01paid") }, events.ReasonInvalidAttribute},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := publish.New(client(t, c), publish.Options{Topic: topic, Mode: tc.mode})
			if err != nil {
				t.Fatal(err)
			}
			ev := newEvent(t, map[string]int{"n": 1})
			tc.edit(&ev)
			err = p.Publish(context.Background(), ev)
			var ie *events.InvalidError
			if !errors.As(err, &ie) || ie.Reason != tc.reason {
				t.Fatalf("Publish = %v, want an *events.InvalidError with reason %s", err, tc.reason)
			}
		})
	}
	if end := endOffset(t, c); end != 0 {
		t.Errorf("end offset %d after refused events, want 0 (nothing produced)", end)
	}
}

// TestNewRefusesUnsafeProducers: a producer that can duplicate or lose a
// record, and invalid options, are refused.
func TestNewRefusesUnsafeProducers(t *testing.T) {
	c := cluster(t)
	if _, err := publish.New(client(t, c, kgo.DisableIdempotentWrite()), publish.Options{}); !errors.Is(err, publish.ErrNotIdempotent) {
		t.Errorf("idempotence off: %v, want ErrNotIdempotent", err)
	}
	if _, err := publish.New(client(t, c, kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.LeaderAck())), publish.Options{}); !errors.Is(err, publish.ErrNotIdempotent) {
		t.Errorf("acks=1: %v, want ErrNotIdempotent", err)
	}
	if _, err := publish.New(client(t, c), publish.Options{Mode: 7}); err == nil || !strings.Contains(err.Error(), "Options.Mode") {
		t.Errorf("Mode 7: %v, want an error naming Options.Mode", err)
	}
	if _, err := publish.New(client(t, c), publish.Options{MaxBytes: -1}); err == nil || !strings.Contains(err.Error(), "Options.MaxBytes") {
		t.Errorf("MaxBytes -1: %v, want an error naming Options.MaxBytes", err)
	}
}

// TestPublishTxCommitsOrNothing: inside a committed transaction the event
// is there for a read_committed reader (hookrelay's fan-out); inside an
// aborted one it never is.
func TestPublishTxCommitsOrNothing(t *testing.T) {
	c := cluster(t)
	tx := client(t, c, kgo.TransactionalID("billing-1"))
	p, err := publish.New(tx, publish.Options{Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	aborted, kept := newEvent(t, nil), newEvent(t, nil)
	for _, step := range []struct {
		ev     event.Event
		commit kgo.TransactionEndTry
	}{{aborted, kgo.TryAbort}, {kept, kgo.TryCommit}} {
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := p.PublishTx(ctx, tx, step.ev, publish.Key("k")); err != nil {
			t.Fatal(err)
		}
		if err := tx.EndTransaction(ctx, step.commit); err != nil {
			t.Fatal(err)
		}
	}
	// The aborted event comes first in the log: a reader that reaches the
	// kept one has passed it.
	ids := committedIDs(t, c, kept.ID())
	if len(ids) != 1 || ids[0] != kept.ID() {
		t.Errorf("committed events %v, want only %s (not the aborted %s)", ids, kept.ID(), aborted.ID())
	}
	// Outside a transaction a transactional client refuses to produce.
	if err := p.Publish(ctx, newEvent(t, nil)); err == nil || !strings.Contains(err.Error(), "not in a transaction") {
		t.Errorf("Publish outside a transaction = %v, want franz-go's not-in-a-transaction error", err)
	}
}
