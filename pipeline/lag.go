package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// DefaultLagInterval is how often a [LagCollector] asks Kafka for the lag of
// its consumer groups when LagOptions.Interval is zero.
const DefaultLagInterval = 30 * time.Second

// LagOptions configure a [LagCollector].
type LagOptions struct {
	// Admin is the client the lag is read with (DescribeGroups, OffsetFetch,
	// ListOffsets). Required; the caller closes it after Run returns.
	Admin *kadm.Client
	// Groups are the consumer groups to report, e.g. Prefix+"fanout".
	// Required unless MoreGroups is set.
	Groups []string
	// MoreGroups, if set, is called at each read for more groups to report
	// (e.g. the dispatcher group of each live deliveries generation,
	// Prefix+"dispatch.g<n>", which change while the process runs). It
	// must be safe for concurrent use. Optional.
	MoreGroups func() []string
	// Interval between two reads; 0 means DefaultLagInterval. Each read is
	// bounded by the interval too.
	Interval time.Duration
	// Meter registers hookrelay.consumer.lag. Required.
	Meter metric.Meter
	// Logger gets read failures (warn). Optional. Default slog.Default().
	Logger *slog.Logger
}

// LagCollector exports the consumer-group lag per topic as the observable
// gauge hookrelay.consumer.lag{group, topic} (Prometheus:
// hookrelay_consumer_lag): the records between each partition's committed
// offset and its end offset (high watermark), summed over the topic's
// partitions. A partition without a commit counts from its log start; a
// group that does not exist yet is absent. The
// end offset includes transaction markers, so a caught-up transactional
// group can show up to one record per partition.
//
// Every process that runs one reports the same groups; aggregate with max,
// not sum. The gauge shows the last successful read of each group; a group
// whose read fails is left out until a read succeeds again, so a stale value
// is never reported. Methods are safe for concurrent use.
type LagCollector struct {
	o LagOptions

	mu   sync.Mutex
	lags map[string]kadm.GroupTopicsLag // by group
}

// NewLagCollector validates o and registers the gauge; it does not contact
// Kafka. Errors name the missing field.
func NewLagCollector(o LagOptions) (*LagCollector, error) {
	switch {
	case o.Admin == nil:
		return nil, errors.New("pipeline: LagOptions.Admin is required")
	case len(o.Groups) == 0 && o.MoreGroups == nil:
		return nil, errors.New("pipeline: LagOptions.Groups is empty")
	case o.Meter == nil:
		return nil, errors.New("pipeline: LagOptions.Meter is required")
	case o.Interval < 0:
		return nil, errors.New("pipeline: LagOptions.Interval is negative")
	}
	if o.Interval == 0 {
		o.Interval = DefaultLagInterval
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	c := &LagCollector{o: o, lags: map[string]kadm.GroupTopicsLag{}}
	g, err := o.Meter.Int64ObservableGauge("hookrelay.consumer.lag", metric.WithUnit("{record}"),
		metric.WithDescription("Records of a topic not yet committed by a consumer group, summed over partitions."))
	if err != nil {
		return nil, err
	}
	if _, err := o.Meter.RegisterCallback(func(_ context.Context, obs metric.Observer) error {
		for group, topics := range c.Lag() {
			for topic, tl := range topics {
				obs.ObserveInt64(g, tl.Lag, metric.WithAttributes(
					attribute.String("group", group), attribute.String("topic", topic)))
			}
		}
		return nil
	}, g); err != nil {
		return nil, err
	}
	return c, nil
}

// Run reads the lag at once and then every Interval until ctx ends; it
// returns nil then. Read failures are logged, never returned: lag is
// observability, not a reason to stop the pipeline.
func (c *LagCollector) Run(ctx context.Context) error {
	t := time.NewTicker(c.o.Interval)
	defer t.Stop()
	for {
		rctx, cancel := context.WithTimeout(ctx, c.o.Interval)
		if err := c.Poll(rctx); err != nil && ctx.Err() == nil {
			c.o.Logger.Warn("consumer lag: read failed", "err", err)
		}
		cancel()
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Poll reads the lag of every group once and updates the gauge. It returns
// the joined errors of the groups it could not read (those are dropped from
// the gauge); the others are updated.
func (c *LagCollector) Poll(ctx context.Context) error {
	groups := c.o.Groups
	if c.o.MoreGroups != nil {
		groups = append(slices.Clip(groups), c.o.MoreGroups()...)
		slices.Sort(groups)
		groups = slices.Compact(groups)
	}
	lags, err := c.o.Admin.Lag(ctx, groups...)
	if err != nil {
		c.mu.Lock()
		c.lags = map[string]kadm.GroupTopicsLag{} // replaced, never mutated: Lag's callers may hold the old one
		c.mu.Unlock()
		return err
	}
	var errs []error
	next := make(map[string]kadm.GroupTopicsLag, len(lags))
	for _, l := range lags.Sorted() {
		if e := l.Error(); e != nil {
			// A group that never committed does not exist yet (e.g. its
			// role runs nowhere so far): no lag to report, not a failure.
			if !errors.Is(e, kerr.GroupIDNotFound) {
				errs = append(errs, fmt.Errorf("group %s: %w", l.Group, e))
			}
			continue
		}
		next[l.Group] = l.Lag.TotalByTopic()
	}
	c.mu.Lock()
	c.lags = next
	c.mu.Unlock()
	return errors.Join(errs...)
}

// Lag returns the last lag read, by group and then topic. The caller must
// not modify it.
func (c *LagCollector) Lag() map[string]kadm.GroupTopicsLag {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lags
}
