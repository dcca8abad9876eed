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
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// DefaultRetireQuiet is how long a drained generation must have had no
// record written to it before `hookrelay deliveries retire` retires it
// ([RetireGeneration]'s quiet).
const DefaultRetireQuiet = 5 * time.Minute

// Quiet returns the partitions of topic that had a record (data or
// transaction marker) written within d before now, by record timestamp:
// those whose first offset at or after now-d is before their end offset.
// None means quiet. Timestamps are the producers' (CreateTime), so a
// writer whose clock is behind by more than d is not seen here; the
// running processes' [StrayWatcher] sees it by end offsets.
func Quiet(ctx context.Context, adm *kadm.Client, topic string, d time.Duration, now time.Time) ([]int32, error) {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	after, err := adm.ListOffsetsAfterMilli(ctx, now.Add(-d).UnixMilli(), topic)
	if err == nil {
		err = after.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("offsets of %s after %v: %w", topic, now.Add(-d), err)
	}
	var busy []int32
	ends.Each(func(e kadm.ListedOffset) {
		if a, ok := after.Lookup(topic, e.Partition); ok && a.Offset >= 0 && a.Offset < e.Offset {
			busy = append(busy, e.Partition)
		}
	})
	slices.Sort(busy)
	return busy, nil
}

// StrayWatcher watches the topics of retired deliveries generations: a
// record written to one after its retirement is consumed by nobody (a
// stale process, e.g. an older build, or one cut off from the
// generations topic, still produces to it). It logs a warning and counts
// the records in the counter hookrelay.generation.stray_records
// {generation} (Prometheus: hookrelay_generation_stray_records_total).
// The first read of a generation is its baseline. Every process runs one;
// methods are safe for concurrent use, Run once.
type StrayWatcher struct {
	Admin *kadm.Client // required
	Gens  *Generations // required
	// Interval between two reads. Optional. Default 1 min.
	Interval time.Duration
	Logger   *slog.Logger // optional; default slog.Default()

	stray metric.Int64Counter
	mu    sync.Mutex
	seen  map[int]map[int32]int64 // generation → partition → end offset
}

// NewStrayWatcher validates the watcher's fields and registers its counter.
func NewStrayWatcher(w *StrayWatcher, m metric.Meter) (*StrayWatcher, error) {
	if w.Admin == nil || w.Gens == nil || m == nil {
		return nil, errors.New("pipeline: StrayWatcher: Admin, Gens and the meter are required")
	}
	if w.Interval == 0 {
		w.Interval = time.Minute
	}
	if w.Logger == nil {
		w.Logger = slog.Default()
	}
	c, err := m.Int64Counter("hookrelay.generation.stray_records",
		metric.WithDescription("Records written to a retired deliveries generation's topic after this process first read it: nothing consumes them (a stale writer)."))
	if err != nil {
		return nil, err
	}
	w.stray, w.seen = c, map[int]map[int32]int64{}
	return w, nil
}

// Run polls every Interval until ctx ends; it returns nil.
func (w *StrayWatcher) Run(ctx context.Context) error {
	for {
		if err := w.Poll(ctx); err != nil && ctx.Err() == nil {
			w.Logger.Warn("retired deliveries generations: end offsets not read", "err", err)
		}
		if !sleepCtx(ctx, w.Interval) {
			return nil
		}
	}
}

// Poll reads the end offsets of every retired generation once and
// reports the records added since the last read.
func (w *StrayWatcher) Poll(ctx context.Context) error {
	var errs []error
	for _, gen := range w.Gens.All() {
		if gen.RetiredAt.IsZero() {
			continue
		}
		ends, err := w.Admin.ListEndOffsets(ctx, gen.Topic)
		if err == nil {
			err = ends.Error()
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", gen.Topic, err))
			continue
		}
		w.mu.Lock()
		prev, known := w.seen[gen.N]
		now := map[int32]int64{}
		var grew int64
		ends.Each(func(e kadm.ListedOffset) {
			now[e.Partition] = e.Offset
			if p, ok := prev[e.Partition]; known && ok && e.Offset > p {
				grew += e.Offset - p
			}
		})
		w.seen[gen.N] = now
		w.mu.Unlock()
		if grew > 0 {
			w.Logger.Warn("a retired deliveries generation's topic grew: nothing consumes those records; stop the stale process producing to it (an older build, or one not reading the generations topic) and recover the endpoints' messages (POST …/recover)",
				"generation", gen.N, "topic", gen.Topic, "records", grew)
			w.stray.Add(ctx, grew, metric.WithAttributes(attribute.Int("generation", gen.N)))
		}
	}
	return errors.Join(errs...)
}
