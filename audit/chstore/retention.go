package chstore

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"
)

// DefaultRetention is how long attempts are kept by default
// (HOOKRELAY_LOG_RETENTION; issue 12: 30 days).
const DefaultRetention = 30 * 24 * time.Hour

// Retainer applies the delivery log's retention (Store.ApplyRetention)
// every Interval until its context ends: the audit role runs one. On a
// server with TTL it sets the TTL once and returns; on one without (18.16)
// it drops the day partitions that aged out, each Interval. A failure
// (ClickHouse down, tables not migrated yet) is logged and retried after
// RetryAfter. Run may be called once.
type Retainer struct {
	// Store is the migrated store. Required.
	Store *Store
	// Retention is how long attempts are kept. Default DefaultRetention; at
	// least 24 h.
	Retention time.Duration
	// Interval is the time between runs on a server without TTL. Default 1 h.
	Interval time.Duration
	// RetryAfter is the wait after a failed run. Default 1 min.
	RetryAfter time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger receives what was dropped and failures. Default slog.Default().
	Logger *slog.Logger
}

// Run applies retention until ctx ends (nil then) or the TTL is set (nil).
// It fails at once, naming the field, on a Retention under 24 h.
func (r *Retainer) Run(ctx context.Context) error {
	retention := cmp.Or(r.Retention, DefaultRetention)
	if retention < 24*time.Hour {
		return fmt.Errorf("audit: Retainer.Retention %s: want at least 24h", retention)
	}
	interval, retry := cmp.Or(r.Interval, time.Hour), cmp.Or(r.RetryAfter, time.Minute)
	now, log := r.Now, cmp.Or(r.Logger, slog.Default())
	if now == nil {
		now = time.Now
	}
	for {
		wait := interval
		res, err := r.Store.ApplyRetention(ctx, retention, now())
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			log.Warn("audit: retention failed; retrying", "retention", retention.String(), "retry_in", retry.String(), "err", err)
			wait = retry
		case res.TTL:
			log.Info("audit: retention set as table TTL", "retention", retention.String())
			return nil
		case len(res.Dropped) > 0:
			log.Info("audit: retention dropped day partitions", "retention", retention.String(), "partitions", res.Dropped)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}
