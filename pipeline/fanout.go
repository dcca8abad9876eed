package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/pipeline/delivery"
	"github.com/hookrelay/hookrelay/pipeline/endpoints"
	"github.com/hookrelay/hookrelay/pipeline/events"
	"github.com/hookrelay/hookrelay/pipeline/webhook"
)

// Matcher returns every endpoint subscribed to an event type for a tenant
// ("" for events without one), whatever its status: fan-out sends to the
// active ones and records why it does not send to the others. The rule is
// endpoints.Endpoint.Matches: the tenants are equal, so an event without a
// tenantid goes only to endpoints without a tenant, and an event with one
// only to that tenant's endpoints. The endpoints view implements it
// (View.Subscribed); it must be safe for concurrent use.
type Matcher interface {
	Subscribed(eventType, tenant string) []*endpoints.Endpoint
}

// maxInvalidValue is the largest value copied to events.invalid.
const maxInvalidValue = 512 << 10

// HeaderValueDropped is set on an events.invalid record whose value was too
// large to copy; its value is the original size in bytes. The original is
// at hookrelay-original-topic/partition/offset.
const HeaderValueDropped = "hookrelay-value-dropped"

// Syncer is implemented by a Matcher that can wait until it has applied
// every endpoint write acknowledged before the call (the endpoints view).
// Fan-out calls it once per polled batch, so an endpoint written before an
// event was produced always receives that event.
type Syncer interface {
	Sync(ctx context.Context) error
}

// FanoutOptions configures a [Fanout].
type FanoutOptions struct {
	// Brokers are the Kafka seed brokers, "host:port". Required.
	Brokers []string
	// KafkaOptions are extra franz-go client options: TLS, SASL, client
	// ID, static member ID (kgo.InstanceID). Optional. They are applied
	// after fan-out's own, so they must not change what fan-out relies on
	// (consumer group, transactional ID, read_committed).
	KafkaOptions []kgo.Opt
	// Topics names every topic. Required.
	Topics Topics
	// DeliveriesTopic, when set, names the deliveries topic per record
	// instead of Topics.Deliveries: the newest deliveries generation
	// ([Generations.DeliveriesTopic]). Optional.
	DeliveriesTopic func() string
	// Group is the fan-out consumer group. Optional. Default "hookrelay-fanout".
	Group string
	// TransactionalID of this process's fan-out producer: stable per
	// instance, unique among live ones. Required.
	TransactionalID string
	// Endpoints matches events to endpoints. Required.
	Endpoints Matcher
	// TransactionTimeout is the Kafka transaction timeout. Optional.
	// Default DefaultTransactionTimeout (10s): how long this process's
	// open transaction, if it dies, can block other instances' deliveries.
	TransactionTimeout time.Duration
	// MaxEventBytes is the largest record accepted on the events topic.
	// Optional. Default events.DefaultMaxBytes (256 KiB).
	MaxEventBytes int
	// Linger is how long fan-out keeps polling after a poll returned
	// events (fewer than a full poll of 2000), so that one transaction
	// carries them all: fewer, larger transactions at moderate load (each
	// costs the broker a marker per partition it wrote), for at most Linger
	// of extra latency. Optional. Default DefaultFanoutLinger (10ms);
	// negative: none (one transaction per poll).
	Linger time.Duration
	// AttemptFormat encodes the attempt rows of matches fan-out does not
	// send (endpoint disabled or invalid). Optional. Default AttemptJSON,
	// the form every release reads (see [AttemptFormat] for the rollout).
	AttemptFormat AttemptFormat
	// Meter. Optional. Default no-op.
	Meter metric.Meter
	// Logger. Optional. Default slog.Default().
	Logger *slog.Logger
}

// DefaultFanoutLinger is FanoutOptions.Linger's default: 10 ms.
const DefaultFanoutLinger = 10 * time.Millisecond

// maxFanoutPoll is the most events fan-out takes into one transaction.
const maxFanoutPoll = 2000

// Fanout consumes the events topic and produces one delivery record per
// (event, matching active endpoint) to the deliveries topic, keyed by
// endpoint ID. A match with an endpoint that is not active becomes an
// attempt row (skipped; config_error for an invalid endpoint) on the
// attempts topic and a DLQ record instead. Each poll's records are produced and their offsets committed
// in one Kafka transaction, so a crash neither loses nor forks a delivery;
// a record that is not a valid CloudEvent goes to events.invalid with its
// reason in the same transaction.
//
// A Fanout is a stage (docs/ARCHITECTURE.md, "Stages"): [NewFanout] only
// validates; each [Fanout.Run] creates its own Kafka session and closes it
// before it returns, so Run may be called again after it returned (not
// concurrently), e.g. by [Supervise].
type Fanout struct {
	o FanoutOptions
	m *metrics
}

// NewFanout validates o (errors name the field) and fills in the
// defaults. It does not connect.
func NewFanout(o FanoutOptions) (*Fanout, error) {
	switch {
	case len(o.Brokers) == 0:
		return nil, errors.New("pipeline: FanoutOptions.Brokers is required")
	case o.Topics.Events == "":
		return nil, errors.New("pipeline: FanoutOptions.Topics is required")
	case o.TransactionalID == "":
		return nil, errors.New("pipeline: FanoutOptions.TransactionalID is required")
	case o.Endpoints == nil:
		return nil, errors.New("pipeline: FanoutOptions.Endpoints is required")
	case o.AttemptFormat != "" && o.AttemptFormat != AttemptJSON && o.AttemptFormat != AttemptBinary:
		return nil, fmt.Errorf("pipeline: FanoutOptions.AttemptFormat %q: want json or binary", string(o.AttemptFormat))
	case o.MaxEventBytes < 0:
		return nil, fmt.Errorf("pipeline: FanoutOptions.MaxEventBytes must be >= 0, got %d", o.MaxEventBytes)
	case o.TransactionTimeout < 0:
		return nil, fmt.Errorf("pipeline: FanoutOptions.TransactionTimeout must be >= 0, got %v", o.TransactionTimeout)
	}
	if o.TransactionTimeout == 0 {
		o.TransactionTimeout = DefaultTransactionTimeout
	}
	if o.Group == "" {
		o.Group = "hookrelay-fanout"
	}
	if o.MaxEventBytes == 0 {
		o.MaxEventBytes = events.DefaultMaxBytes
	}
	if o.Linger == 0 {
		o.Linger = DefaultFanoutLinger
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	f := &Fanout{o: o}
	if err := kgo.ValidateOpts(f.clientOpts()...); err != nil {
		return nil, fmt.Errorf("pipeline: FanoutOptions.KafkaOptions: %w", err)
	}
	f.m = newMetrics(o.Meter)
	return f, nil
}

// clientOpts are the options of Run's session: fan-out's own, then
// KafkaOptions.
func (f *Fanout) clientOpts() []kgo.Opt {
	return append([]kgo.Opt{
		kgo.SeedBrokers(f.o.Brokers...),
		kgo.ConsumerGroup(f.o.Group),
		kgo.ConsumeTopics(fanoutTopics(f.o.Topics)...), // events and operational
		kgo.TransactionalID(f.o.TransactionalID),
		kgo.TransactionTimeout(f.o.TransactionTimeout),
		offsetsAfterAddOffsets(), // no abort when a transaction follows the last at once (see there)
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.FetchMaxWait(250 * time.Millisecond),
	}, f.o.KafkaOptions...)
}

// Run fans out until ctx ends. The caller starts it only once the endpoints
// view has caught up, so an endpoint written before an event always gets it.
// It returns nil when ctx ends, or the error that stopped it: the session
// is then unusable (a transaction could not be ended, e.g. the brokers were
// unreachable past franz-go's retries) and closed; running it again starts
// a new one, whose transactional ID fences what this one left open.
func (f *Fanout) Run(ctx context.Context) error {
	sess, err := newStageSession("fan-out", f.clientOpts())
	if err != nil {
		return err
	}
	defer sess.Close()
	txn := &transactor{sess: sess, stage: "fanout", timeout: txnBound(f.o.TransactionTimeout), log: f.o.Logger, aborts: f.m.txnAborts}
	if err := Fence(ctx, sess.Client()); err != nil && ctx.Err() == nil {
		f.o.Logger.Warn("fanout: not fenced at start; fenced at the first transaction instead", "err", err)
	}
	for {
		fs := f.linger(ctx, sess, sess.PollRecords(ctx, maxFanoutPoll))
		if ctx.Err() != nil || fs.IsClientClosed() {
			return nil
		}
		fs.EachError(func(t string, p int32, err error) {
			f.o.Logger.Warn("fanout: fetch error", "topic", t, "partition", p, "err", err)
		})
		if fs.NumRecords() == 0 {
			continue
		}
		if sy, ok := f.o.Endpoints.(Syncer); ok {
			// An endpoint acknowledged before these events were produced
			// must be in the view before they are matched: retry until the
			// view has caught up (the events wait; none is skipped).
			for try := 0; ; try++ {
				err := sy.Sync(ctx)
				if err == nil {
					break
				}
				if ctx.Err() != nil {
					return nil
				}
				f.o.Logger.Warn("fanout: endpoints view sync failed; retrying", "err", err, "try", try)
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(min(100*time.Millisecond<<min(try, 6), 5*time.Second)):
				}
			}
		}
		var out []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) { out = f.expand(ctx, r, out) })
		res, err := txn.transact(ctx, out, nil)
		if err != nil {
			return err
		}
		if !res.Committed {
			// The session rewound to the committed offsets: the same
			// events are read and expanded again after the back-off, so a
			// record that cannot be produced costs a slow, visible loop.
			// Fan-out pauses no partition, so there is nothing to resume.
			if !sleepCtx(ctx, txn.backoff()) {
				return nil
			}
		}
	}
}

// linger returns fs with what further polls return within Linger of it,
// while fs holds some events and fewer than maxFanoutPoll.
func (f *Fanout) linger(ctx context.Context, sess *kgo.GroupTransactSession, fs kgo.Fetches) kgo.Fetches {
	n := fs.NumRecords()
	if f.o.Linger <= 0 || n == 0 || n >= maxFanoutPoll || fs.IsClientClosed() {
		return fs
	}
	lctx, cancel := context.WithTimeout(ctx, f.o.Linger)
	defer cancel()
	for n < maxFanoutPoll {
		more := sess.PollRecords(lctx, maxFanoutPoll-n)
		if more.NumRecords() == 0 && lctx.Err() != nil && !more.IsClientClosed() {
			// The linger ended: a poll cut short returns only the context
			// error (records fetched meanwhile wait for the next poll).
			break
		}
		fs = append(fs, more...)
		n += more.NumRecords()
		if more.IsClientClosed() || lctx.Err() != nil {
			break
		}
	}
	return fs
}

// expand appends the records one event produces: a delivery per matching
// endpoint, or one events.invalid record.
func (f *Fanout) expand(ctx context.Context, r *kgo.Record, out []*kgo.Record) []*kgo.Record {
	ev, body, m, err := decodeEvent(r, f.o.MaxEventBytes)
	if err != nil {
		f.m.events.Add(ctx, 1, resultInvalid)
		f.o.Logger.Info("fanout: invalid event", "partition", r.Partition, "offset", r.Offset, "err", err)
		inv := events.InvalidRecord(r, f.o.Topics.Invalid, err)
		if len(inv.Value) > maxInvalidValue {
			// Too large to copy (it may exceed the producer's or topic's
			// limit): the headers point at the original, which stays in
			// the events topic for its retention.
			inv.Headers = append(inv.Headers, kgo.RecordHeader{Key: HeaderValueDropped, Value: strconv.AppendInt(nil, int64(len(inv.Value)), 10)})
			inv.Value = nil
		}
		return append(out, inv)
	}
	f.m.events.Add(ctx, 1, resultValid)
	eps := f.o.Endpoints.Subscribed(ev.Type(), m.Tenant)
	eps = f.operationalTargets(r, &ev, eps) // never to the endpoint an operational event is about
	if len(eps) == 0 {
		f.m.unmatched.Add(ctx, 1)
		return out
	}
	now := time.Now()
	sent := 0
	for _, ep := range eps {
		m := forEndpoint(m, ep)
		if v := statusVerdict(ep, audit.Skipped); v.outcome != "" {
			out = append(out, f.notSent(ctx, ep, m, body, v, now)...)
			continue
		}
		out = append(out, &kgo.Record{
			Topic:   f.deliveriesTopic(),
			Key:     []byte(ep.ID),
			Value:   body,
			Headers: m.Headers(),
		})
		sent++
	}
	f.m.fannedOut.Add(ctx, int64(sent))
	return out
}

// The attribute options of hookrelay.events, built once: the per-event
// path allocates no attribute set.
var (
	resultValid   = metric.WithAttributeSet(attribute.NewSet(attribute.String("result", "valid")))
	resultInvalid = metric.WithAttributeSet(attribute.NewSet(attribute.String("result", "invalid")))
)

// decodeEvent is fan-out's reading of one events record: the CloudEvent,
// the Standard Webhooks body built once per event (every endpoint and
// every attempt gets these exact bytes) and the delivery metadata common
// to every endpoint (webhook-id, event attributes, tenant, time, trace
// context, attempt 1). An error is the reason the record is invalid.
func decodeEvent(r *kgo.Record, maxEventBytes int) (event.Event, []byte, delivery.Meta, error) {
	ev, err := events.Decode(r, maxEventBytes)
	if err != nil {
		return ev, nil, delivery.Meta{}, err
	}
	data, err := events.DecodedDataJSON(ev) // Decode checked it: no second pass
	if err != nil {
		return ev, nil, delivery.Meta{}, err
	}
	eventTime := ev.Time()
	if eventTime.IsZero() {
		eventTime = r.Timestamp
	}
	// DataJSON's result is valid, compact JSON: no second pass over it.
	body, err := webhook.BodyOfCompact(ev.Type(), eventTime, data)
	if err != nil {
		return ev, nil, delivery.Meta{}, &events.InvalidError{Reason: events.ReasonBadJSON, Detail: err.Error()}
	}
	tp, ts := events.Trace(ev)
	return ev, body, delivery.Meta{
		WebhookID:   webhook.WebhookID(ev.Source(), ev.ID()),
		EventID:     ev.ID(),
		EventSource: ev.Source(),
		EventType:   ev.Type(),
		Tenant:      events.Tenant(ev),
		EventTime:   eventTime,
		Attempt:     1,
		TraceParent: tp,
		TraceState:  ts,
	}, nil
}

// forEndpoint is m for endpoint ep: its ID, incarnation and delivery ID.
func forEndpoint(m delivery.Meta, ep *endpoints.Endpoint) delivery.Meta {
	m.EndpointID = ep.ID
	m.Incarnation = ep.Incarnation
	m.DeliveryID = DeliveryID(m.WebhookID, ep.ID)
	return m
}

// Rematch is fan-out's decision for one record of the events topic and one
// endpoint, for recovery (the management API's recover): if the record is a
// valid CloudEvent that ep's filter selects (endpoints.Endpoint.Matches:
// the same tenant, a matching type pattern; never another tenant's event),
// it returns the delivery fan-out makes of it for ep, with the same body,
// webhook-id (webhook.WebhookID of source and id), delivery ID and headers
// (delivery.Meta), and true. An invalid record or one ep does not match
// returns false. ep's status is not consulted: the caller decides whether
// to send. maxEventBytes is fan-out's limit (events.DefaultMaxBytes when
// 0). Records of the operational topic are not for it (their subject rule
// is fan-out's alone).
func Rematch(r *kgo.Record, ep *endpoints.Endpoint, maxEventBytes int) (delivery.Meta, []byte, bool) {
	if maxEventBytes <= 0 {
		maxEventBytes = events.DefaultMaxBytes
	}
	ev, body, m, err := decodeEvent(r, maxEventBytes)
	if err != nil || !ep.Matches(ev.Type(), m.Tenant) {
		return delivery.Meta{}, nil, false
	}
	return forEndpoint(m, ep), body, true
}

// deliveriesTopic is where a new delivery goes.
func (f *Fanout) deliveriesTopic() string {
	if f.o.DeliveriesTopic != nil {
		return f.o.DeliveriesTopic()
	}
	return f.o.Topics.Deliveries
}

// DeliveryID is the ID of the delivery of one event to one endpoint: 32 hex
// characters of SHA-256 over the webhook-id and the endpoint ID, so a
// duplicate produced after a crash has the same ID.
func DeliveryID(webhookID, endpointID string) string {
	h := sha256.New()
	h.Write([]byte(webhookID))
	h.Write([]byte{0})
	h.Write([]byte(endpointID))
	return hex.EncodeToString(h.Sum(nil)[:16])
}
