// Package publish produces CloudEvents to hookrelay's events topic the way
// hookrelay expects them, for upstream services written in Go.
//
// It builds the Kafka record of an event in structured or binary content
// mode (CloudEvents Kafka protocol binding v1.0.2, §3.3 and §3.2), adds the
// `tenantid` extension and the W3C `traceparent`/`tracestate` of the
// caller's context, checks the record with the same code hookrelay's
// fan-out runs (pipeline/events.Check), and produces it with an idempotent
// producer (acks from all in-sync replicas), or inside the caller's Kafka
// transaction. A record fan-out would send to `<prefix>events.invalid` is
// refused with the same [*events.InvalidError] before it reaches Kafka, so
// a mistake fails the producer's own tests instead of vanishing into the
// invalid topic.
//
// It depends on franz-go, the CloudEvents Go SDK, the OpenTelemetry API
// (propagation only, no SDK) and hookrelay's pipeline/events; nothing else
// of hookrelay. docs/PRODUCING.md is the event contract it implements.
//
//	cl, _ := kgo.NewClient(kgo.SeedBrokers("kafka:9092"))
//	p, _ := publish.New(cl, publish.Options{})
//	ev, _ := publish.NewEvent("/billing", "invoice.paid", map[string]any{"invoice": "in_1"})
//	publish.SetTenant(&ev, "acme")
//	err := p.Publish(ctx, ev, publish.Key("in_1"))
package publish

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/propagation"

	"github.com/hookrelay/hookrelay/pipeline/events"
)

// DefaultTopic is the events topic of hookrelay's default topic prefix
// (`hookrelay.`); a deployment with HOOKRELAY_TOPIC_PREFIX=p reads `p` +
// "events".
const DefaultTopic = "hookrelay.events"

// Mode is the CloudEvents Kafka content mode of the records a Publisher
// produces.
type Mode int

const (
	// Structured puts the whole event in the record value as JSON
	// (`content-type: application/cloudevents+json`; binding §3.3). The
	// default.
	Structured Mode = iota
	// Binary puts the attributes in `ce_<name>` headers, the
	// datacontenttype in `content-type`, and the data, as is, in the value
	// (binding §3.2).
	Binary
)

func (m Mode) String() string {
	switch m {
	case Structured:
		return "structured"
	case Binary:
		return "binary"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Options configure a Publisher. The zero value is usable.
type Options struct {
	// Topic is the events topic. Optional. Default [DefaultTopic].
	Topic string
	// Mode is the content mode. Optional. Default [Structured].
	Mode Mode
	// MaxBytes is the size limit the record is checked against: key,
	// value, header keys and values. Optional. Default
	// events.DefaultMaxBytes (256 KiB), which is also hookrelay's default
	// (HOOKRELAY_MAX_EVENT_BYTES); set it only to match a deployment that
	// changed it.
	MaxBytes int
}

// Publisher turns CloudEvents into records of the events topic and
// produces them. It is safe for concurrent use; it does not own the client
// (the caller closes it).
type Publisher struct {
	cl *kgo.Client
	o  Options
}

// ErrNotIdempotent is returned by [New] for a client whose producer could
// write a record twice or lose it on a leader change: idempotent writes
// disabled (kgo.DisableIdempotentWrite) or acks other than all in-sync
// replicas (kgo.RequiredAcks). franz-go's defaults are right; keep them.
var ErrNotIdempotent = errors.New("publish: the client must be an idempotent producer with acks=all (franz-go's defaults)")

// New returns a Publisher producing with cl. cl may also be transactional
// (kgo.TransactionalID); then every Publish must happen between its
// BeginTransaction and EndTransaction (else franz-go refuses the record:
// "cannot produce record transactionally if not in a transaction"). It fails with [ErrNotIdempotent] for an unsafe
// producer and with an error naming the field for invalid options.
func New(cl *kgo.Client, o Options) (*Publisher, error) {
	if cl == nil {
		return nil, errors.New("publish: nil client")
	}
	if o.Topic == "" {
		o.Topic = DefaultTopic
	}
	if o.Mode != Structured && o.Mode != Binary {
		return nil, fmt.Errorf("publish: Options.Mode: unknown %v", o.Mode)
	}
	if o.MaxBytes < 0 {
		return nil, fmt.Errorf("publish: Options.MaxBytes must be >= 0, got %d", o.MaxBytes)
	}
	if o.MaxBytes == 0 {
		o.MaxBytes = events.DefaultMaxBytes
	}
	if !idempotent(cl) {
		return nil, ErrNotIdempotent
	}
	return &Publisher{cl: cl, o: o}, nil
}

func idempotent(cl *kgo.Client) bool {
	if off, _ := cl.OptValue(kgo.DisableIdempotentWrite).(bool); off {
		return false
	}
	acks, ok := cl.OptValue(kgo.RequiredAcks).(kgo.Acks)
	return ok && acks == kgo.AllISRAcks()
}

// Option changes one publish call.
type Option func(*call)

type call struct {
	key    []byte
	hasKey bool
}

// Key sets the record key. The key decides the partition of the events
// topic, so events with the same key are fanned out in the order they were
// produced; hookrelay does not promise their arrival order at an endpoint
// (retries reorder). Use the entity the events are about (an invoice ID).
// Default: the event's subject when it has one, else its id.
func Key(k string) Option { return func(c *call) { c.key, c.hasKey = []byte(k), true } }

// Producer is what [Publisher.PublishTx] produces with: a *kgo.Client with
// a TransactionalID inside BeginTransaction … EndTransaction, or a
// *kgo.GroupTransactSession between its Begin and End.
type Producer interface {
	ProduceSync(ctx context.Context, rs ...*kgo.Record) kgo.ProduceResults
}

// Publish checks ev and produces it, waiting for the broker's
// acknowledgement (or ctx). An invalid event is an [*events.InvalidError]
// and nothing is produced; any other error is Kafka's, and the event may
// or may not have been written (publish it again: the same source and id
// make the same webhook-id, which receivers deduplicate on).
func (p *Publisher) Publish(ctx context.Context, ev event.Event, opts ...Option) error {
	return p.produce(ctx, p.cl, ev, opts)
}

// PublishTx is Publish inside the caller's open Kafka transaction tx: the
// event reaches hookrelay only if the transaction commits (hookrelay reads
// the events topic read_committed), and never if it aborts. Errors are as
// for Publish; the caller decides to abort.
func (p *Publisher) PublishTx(ctx context.Context, tx Producer, ev event.Event, opts ...Option) error {
	if tx == nil {
		return errors.New("publish: nil transaction")
	}
	return p.produce(ctx, tx, ev, opts)
}

func (p *Publisher) produce(ctx context.Context, to Producer, ev event.Event, opts []Option) error {
	r, err := p.Record(ctx, ev, opts...)
	if err != nil {
		return err
	}
	if err := to.ProduceSync(ctx, r).FirstErr(); err != nil {
		return fmt.Errorf("publish: produce event %s to %s: %w", ev.ID(), r.Topic, err)
	}
	return nil
}

// Record returns the record Publish would produce for ev, checked with
// pipeline/events.Check: a nil error means hookrelay's fan-out accepts it.
// Use it to write the record yourself (an outbox row, a test). ctx supplies
// the trace context: when ev has no traceparent and ctx carries a valid
// OpenTelemetry span context, its W3C traceparent (and tracestate) become
// the CloudEvents distributed-tracing extension. ev itself is not modified.
func (p *Publisher) Record(ctx context.Context, ev event.Event, opts ...Option) (*kgo.Record, error) {
	var c call
	for _, o := range opts {
		o(&c)
	}
	ev = ev.Clone()
	injectTrace(ctx, &ev)
	r := &kgo.Record{Topic: p.o.Topic}
	var err error
	switch p.o.Mode {
	case Binary:
		err = writeBinary(ctx, &ev, r)
	default:
		r.Value, err = json.Marshal(ev)
		r.Headers = []kgo.RecordHeader{{Key: "content-type", Value: []byte(event.ApplicationCloudEventsJSON)}}
	}
	if err != nil {
		return nil, fmt.Errorf("publish: encode event %s: %w", ev.ID(), err)
	}
	switch {
	case c.hasKey:
		r.Key = c.key
	case ev.Subject() != "":
		r.Key = []byte(ev.Subject())
	default:
		r.Key = []byte(ev.ID())
	}
	if err := events.Check(r, p.o.MaxBytes); err != nil {
		return nil, err
	}
	return r, nil
}

// injectTrace sets the distributed-tracing extension from ctx, unless the
// event already carries a traceparent.
func injectTrace(ctx context.Context, ev *event.Event) {
	if _, ok := ev.Extensions()[events.ExtensionTraceParent]; ok {
		return
	}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	if tp := carrier.Get("traceparent"); tp != "" {
		ev.SetExtension(events.ExtensionTraceParent, tp)
		if ts := carrier.Get("tracestate"); ts != "" {
			ev.SetExtension(events.ExtensionTraceState, ts)
		}
	}
}

// NewEvent returns a CloudEvent 1.0 with the given source and type, a
// random id ("evt_" and 24 hex digits), the current time (UTC), and data
// as JSON (`datacontenttype: application/json`): a json.RawMessage or
// []byte is taken as JSON text as is, anything else is marshalled with
// encoding/json; nil data means no data. Set other attributes on the result
// with the SDK's setters (SetID to use your own idempotent id, SetSubject,
// …) and the tenant with [SetTenant].
func NewEvent(source, typ string, data any) (event.Event, error) {
	ev := event.New()
	ev.SetID(NewID())
	ev.SetSource(source)
	ev.SetType(typ)
	ev.SetTime(time.Now().UTC())
	if data != nil {
		var raw []byte
		switch d := data.(type) {
		case json.RawMessage:
			raw = d
		case []byte:
			raw = d
		default:
			var err error
			if raw, err = json.Marshal(d); err != nil {
				return event.Event{}, fmt.Errorf("publish: data: %w", err)
			}
		}
		if !json.Valid(raw) {
			return event.Event{}, errors.New("publish: data: not valid JSON")
		}
		if err := ev.SetData(event.ApplicationJSON, json.RawMessage(raw)); err != nil {
			return event.Event{}, fmt.Errorf("publish: data: %w", err)
		}
	}
	return ev, nil
}

// NewID returns a random event id: "evt_" and 24 lower-case hex digits
// (96 bits from crypto/rand).
func NewID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return "evt_" + hex.EncodeToString(b[:])
}

// SetTenant sets the `tenantid` extension: hookrelay delivers the event
// only to endpoints of that tenant. An empty tenant removes it (the event
// then goes only to endpoints without a tenant).
func SetTenant(ev *event.Event, tenant string) {
	if tenant == "" {
		if ev.Context != nil {
			_ = ev.Context.SetExtension(events.ExtensionTenant, nil)
		}
		return
	}
	ev.SetExtension(events.ExtensionTenant, tenant)
}
