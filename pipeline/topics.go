package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/hookrelay/hookrelay/retrytiers"
)

// DefaultTopicPrefix prefixes every topic name unless configured otherwise.
const DefaultTopicPrefix = "hookrelay."

// Topics names every topic hookrelay uses. Build it with [NewTopics].
type Topics struct {
	Prefix         string // e.g. "hookrelay."
	Events         string // <prefix>events: CloudEvents from upstream
	Invalid        string // <prefix>events.invalid: records that are not valid CloudEvents
	Endpoints      string // <prefix>endpoints: endpoint config, compacted
	EndpointStatus string // <prefix>endpoint-status: status set by the pipeline, compacted
	Deliveries     string // <prefix>deliveries: one record per (event, endpoint), keyed by endpoint ID
	DLQ            string // <prefix>dlq: deliveries that ended without success
	Attempts       string // <prefix>attempts: audit.Attempt rows keyed by endpoint (a sending row, then the outcome), for the audit sink
	APIKeys        string // <prefix>apikeys: API key records (hashes only), compacted
	Idempotency    string // <prefix>idempotency: API responses by Idempotency-Key, compacted, 24 h
	Recoveries     string // <prefix>recoveries: API recovery records, compacted
	Operational    string // <prefix>operational: hookrelay's own CloudEvents about endpoint health (pipeline/operational), read by fan-out
	Generations    string // <prefix>generations: the deliveries generations after the first (generation.go), compacted
}

// NewTopics returns the topic names under prefix ("" means
// DefaultTopicPrefix).
func NewTopics(prefix string) Topics {
	if prefix == "" {
		prefix = DefaultTopicPrefix
	}
	return Topics{
		Prefix:         prefix,
		Events:         prefix + "events",
		Invalid:        prefix + "events.invalid",
		Endpoints:      prefix + "endpoints",
		EndpointStatus: prefix + "endpoint-status",
		Deliveries:     prefix + "deliveries",
		DLQ:            prefix + "dlq",
		Attempts:       prefix + "attempts",
		APIKeys:        prefix + "apikeys",
		Idempotency:    prefix + "idempotency",
		Recoveries:     prefix + "recoveries",
		Operational:    prefix + "operational",
		Generations:    prefix + "generations",
	}
}

// TopicLayout is how topics are created when missing.
type TopicLayout struct {
	// Partitions of the events, deliveries, tier, attempts and DLQ topics
	// (endpoints and endpoint-status have 1, events.invalid 3). Default 12. The
	// deliveries topic's count may never change: it would move endpoints
	// between partitions (and their pacing between consumers).
	Partitions int32
	// ReplicationFactor of every topic: > 0 as given, -1 the broker's
	// default. Default 0: 3 when the cluster has three or more brokers
	// ([ReplicationFor]), else the broker's default.
	ReplicationFactor int16
	// MinInsyncReplicas, set on every topic when > 0; -1 leaves the
	// broker's default. Default 0: 2 when the cluster has three or more
	// brokers and the replication factor is at least 3 (one broker may be
	// lost while acks=all writes go on), else the broker's default.
	MinInsyncReplicas int
	// TierTopics are the delay-tier topic names (see retrytiers).
	TierTopics []string
}

func ptr(s string) *string { return &s }

// ReplicationFor resolves the defaults of l for a cluster of brokers
// brokers: a ReplicationFactor of 0 becomes 3 with three or more brokers
// and -1 (the broker's default) with fewer; a MinInsyncReplicas of 0
// becomes 2 with three or more brokers and a replication factor of at least
// 3, and -1 (the broker's default) otherwise. Explicit values are kept.
func ReplicationFor(l TopicLayout, brokers int) (replicationFactor int16, minInsyncReplicas int) {
	rf, isr := l.ReplicationFactor, l.MinInsyncReplicas
	if rf == 0 {
		rf = -1
		if brokers >= 3 {
			rf = 3
		}
	}
	if isr == 0 {
		isr = -1
		if brokers >= 3 && rf >= 3 {
			isr = 2
		}
	}
	return rf, isr
}

// EnsureEndpointTopics creates the endpoints and endpoint-status topics when
// missing: what the endpoint CLI needs before its first write. Only
// ReplicationFactor and MinInsyncReplicas of l are used.
func EnsureEndpointTopics(ctx context.Context, adm *kadm.Client, t Topics, l TopicLayout) error {
	return EnsureTopics(ctx, adm, Topics{Endpoints: t.Endpoints, EndpointStatus: t.EndpointStatus}, l)
}

// EnsureTopics creates the missing topics of t with layout l and verifies the
// existing deliveries topic has exactly l.Partitions partitions. It fails,
// naming the topic, on any creation error other than "already exists", and
// refuses a deliveries topic with a different partition count. Unset
// replication settings are resolved by [ReplicationFor] for the number of
// brokers in the cluster's metadata; existing topics are left as they are.
//
// Errors that no retry can cure are marked [Fatal]: a deliveries topic with
// another partition count, and a creation the broker refuses with a code
// that is not retriable (an invalid config, a policy violation, no
// authorisation). Anything else, e.g. an unreachable cluster ("unable to
// dial"), is not: the caller waits and calls again (cmd/hookrelay does,
// with capped back-off).
//
// Retention: events, deliveries, tiers and attempts keep 7 days; the DLQ and
// events.invalid 30 days; endpoints and endpoint-status are compacted;
// operational (3 partitions) keeps 7 days. apikeys and recoveries are
// compacted; idempotency is compacted and deleted after 24 h (the API's
// Idempotency-Key window). Tier topics use LogAppendTime so a tier is FIFO
// in due time.
func EnsureTopics(ctx context.Context, adm *kadm.Client, t Topics, l TopicLayout) error {
	if l.Partitions <= 0 {
		l.Partitions = 12
	}
	if l.ReplicationFactor == 0 || l.MinInsyncReplicas == 0 {
		brokers, err := adm.ListBrokers(ctx)
		if err != nil {
			return fmt.Errorf("list brokers (to choose the replication factor): %w", err)
		}
		l.ReplicationFactor, l.MinInsyncReplicas = ReplicationFor(l, len(brokers))
	}
	week, month := "604800000", "2592000000"
	type spec struct {
		name       string
		partitions int32
		cfg        map[string]*string
	}
	base := func(extra map[string]*string) map[string]*string {
		c := map[string]*string{}
		if l.MinInsyncReplicas > 0 {
			c["min.insync.replicas"] = ptr(fmt.Sprint(l.MinInsyncReplicas))
		}
		for k, v := range extra {
			c[k] = v
		}
		return c
	}
	specs := []spec{
		{t.Events, l.Partitions, base(map[string]*string{"retention.ms": &week})},
		{t.Invalid, 3, base(map[string]*string{"retention.ms": &month})},
		{t.Endpoints, 1, base(map[string]*string{"cleanup.policy": ptr("compact")})},
		{t.EndpointStatus, 1, base(map[string]*string{"cleanup.policy": ptr("compact")})},
		{t.Deliveries, l.Partitions, base(map[string]*string{"retention.ms": &week})},
		{t.DLQ, l.Partitions, base(map[string]*string{"retention.ms": &month})},
		{t.Attempts, l.Partitions, base(map[string]*string{"retention.ms": &week})},
		{t.APIKeys, 1, base(map[string]*string{"cleanup.policy": ptr("compact")})},
		{t.Recoveries, 1, base(map[string]*string{"cleanup.policy": ptr("compact")})},
		{t.Idempotency, 1, base(map[string]*string{"cleanup.policy": ptr("compact,delete"), "retention.ms": ptr("86400000")})},
		{t.Operational, 3, base(map[string]*string{"retention.ms": &week})},
		{t.Generations, 1, base(map[string]*string{"cleanup.policy": ptr("compact")})},
	}
	for _, tt := range l.TierTopics {
		specs = append(specs, spec{tt, l.Partitions, base(retrytiers.TierTopicConfig())})
	}
	var errs []error
	for _, s := range specs {
		if s.name == "" {
			continue // not asked for
		}
		resp, err := adm.CreateTopic(ctx, s.partitions, l.ReplicationFactor, s.cfg, s.name)
		if err == nil {
			err = resp.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			err = fmt.Errorf("create topic %s: %w", s.name, err)
			if refusedForGood(err) {
				err = Fatal(err)
			}
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	// A topic created a moment ago may not be in the broker's metadata yet
	// (or be listed with no partitions): poll until it is.
	for t.Deliveries != "" {
		md, err := adm.ListTopics(ctx, t.Deliveries)
		if err != nil {
			return fmt.Errorf("describe topic %s: %w", t.Deliveries, err)
		}
		if td, ok := md[t.Deliveries]; ok && td.Err == nil && len(td.Partitions) > 0 {
			if n := int32(len(td.Partitions)); n != l.Partitions {
				return Fatal(fmt.Errorf("topic %s has %d partitions but %d are configured: changing it would move endpoints between partitions; set the partition count to %d", t.Deliveries, n, l.Partitions, n))
			}
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topic %s: not visible in the cluster metadata: %w", t.Deliveries, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// refusedForGood reports whether err carries a Kafka error code that no
// retry cures. INVALID_REPLICATION_FACTOR is not one: with an explicit
// replication factor it means "fewer brokers are up than that", which a
// broker's return cures.
func refusedForGood(err error) bool {
	var ke *kerr.Error
	return errors.As(err, &ke) && !ke.Retriable && !errors.Is(err, kerr.InvalidReplicationFactor)
}
