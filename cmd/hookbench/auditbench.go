package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"net/url"
	"strconv"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/audit/chstore"
)

// AuditResult is scenario 7.
type AuditResult struct {
	SinkAttempts       int     `json:"sink_attempts"`
	SinkRowsPerSec     float64 `json:"sink_rows_per_s"` // audit sink alone: attempts topic -> ClickHouse
	SinkSeconds        float64 `json:"sink_drain_s"`
	SinkHookrelayCores float64 `json:"sink_hookrelay_cores"`
	SinkCheck          Check   `json:"sink_check"`

	Rows            int64   `json:"query_table_rows"`
	Endpoints       int     `json:"query_table_endpoints"`
	InsertPerSec    float64 `json:"direct_insert_rows_per_s"`
	Parts           int64   `json:"active_parts"`
	QueryColdMs     float64 `json:"last100_cold_ms"`
	QueryWarm       Dist    `json:"last100_warm"`
	QueryRowsOK     bool    `json:"last100_returned_100"`
	QueryEndpointID string  `json:"query_endpoint"`
}

// syntheticAttempt is a plausible delivered attempt of endpoint ep at t.
func syntheticAttempt(ep string, t time.Time) audit.Attempt {
	var b [16]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	return audit.Attempt{
		AttemptID: id, DeliveryID: "dlv_" + id[:26], EventID: "evt-" + id[:12], WebhookID: "msg_" + id[:26],
		EventType: "invoice.paid", EndpointID: ep, URLHost: "hooks.example.com", AttemptNumber: 1,
		AttemptedAt: t, LatencyMs: int64(20 + mrand.IntN(200)), HTTPStatus: 200, Outcome: audit.Delivered,
		ResponseBody: `{"ok":true}`,
	}
}

// runAudit is scenario 7: (a) the audit sink's insert rate alone — attempt
// records preloaded on the attempts topic, then `hookrelay run --roles
// audit` drains them into ClickHouse; (b) the delivery-log query (one
// endpoint's last 100 attempts, chstore.Store.Log) on a table of
// -s7-rows synthetic rows bulk-inserted with the audit package's store.
func (b *bench) runAudit(ctx context.Context) (*AuditResult, error) {
	o := b.o
	res := &AuditResult{SinkAttempts: o.s7Attempts, Endpoints: 1000}
	b.logf("scenario 7 (audit): sink drain of %d attempt records; last-100 query on %d rows", o.s7Attempts, o.s7Rows)
	e, err := b.newEnv(ctx, "s7")
	if err != nil {
		return nil, err
	}
	defer e.cleanup(ctx)
	if err := e.ensureTopics(ctx); err != nil {
		return nil, err
	}
	p := &producer{cl: b.kcl}
	now := time.Now().UTC()
	for i := range o.s7Attempts {
		ep := "ep-" + strconv.Itoa(i%100)
		a := syntheticAttempt(ep, now.Add(-time.Duration(o.s7Attempts-i)*time.Millisecond))
		v, err := a.Marshal()
		if err != nil {
			return nil, err
		}
		p.produce(ctx, recordOf(e.prefix+"attempts", ep, v))
	}
	if err := p.wait(); err != nil {
		return nil, err
	}
	b.logf("  %d attempt records on %sattempts; starting hookrelay --roles audit", o.s7Attempts, e.prefix)
	if err := e.start(ctx, "HOOKRELAY_ROLES=audit"); err != nil {
		return nil, err
	}
	defer e.Stop()
	deadline := time.Now().Add(o.drainTimeout)
	for e.metric("hookrelay_audit_sink_records_total") < float64(o.s7Attempts) && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	at, vals := e.metricSeries("hookrelay_audit_sink_records_total")
	t10, ok1 := crossing(at, vals, 0.1*float64(o.s7Attempts))
	t90, ok2 := crossing(at, vals, 0.9*float64(o.s7Attempts))
	if ok1 && ok2 && t90.After(t10) {
		res.SinkRowsPerSec = round1(0.8 * float64(o.s7Attempts) / t90.Sub(t10).Seconds())
		res.SinkHookrelayCores = e.cpuReport(t10, t90)["hookrelay"].Cores
	}
	if t100, ok := crossing(at, vals, float64(o.s7Attempts)); ok && len(at) > 0 {
		res.SinkSeconds = round1(t100.Sub(at[0]).Seconds())
	}
	// The check: every record is one row.
	var c Check
	c.Requests = int64(o.s7Attempts)
	start := time.Now()
	for {
		got, err := e.rowsPerEndpoint(ctx)
		c.Rows = 0
		for _, n := range got {
			c.Rows += n
		}
		if err == nil && c.Rows == c.Requests || time.Since(start) > o.checkTimeout {
			break
		}
		time.Sleep(time.Second)
	}
	c.OK = c.Rows == c.Requests
	if !c.OK {
		c.Mismatches = []string{fmt.Sprintf("%d attempt records, %d rows", c.Requests, c.Rows)}
	}
	c.Waited = round1(time.Since(start).Seconds())
	if err := e.Stop(); err != nil {
		c.OK = false
		c.Mismatches = append(c.Mismatches, err.Error())
	}
	res.SinkCheck = c
	b.logf("  => sink: %.0f rows/s (hookrelay %.2f cores), %d records in %.1fs; check %s",
		res.SinkRowsPerSec, res.SinkHookrelayCores, o.s7Attempts, res.SinkSeconds, checkWord(c))

	if err := b.queryBench(ctx, e, res); err != nil {
		return res, err
	}
	return res, nil
}

// queryBench fills a fresh attempts table and times the last-100 query.
func (b *bench) queryBench(ctx context.Context, e *env, res *AuditResult) error {
	o := b.o
	u, err := url.Parse(o.clickhouse)
	if err != nil {
		return err
	}
	db := e.db + "_q"
	e.dropAlso = append(e.dropAlso, db)
	u.Path = "/" + db
	store, err := chstore.New(ctx, chstore.Options{DSN: u.String(), MaxOpenConns: 4})
	if err != nil {
		return err
	}
	defer store.Close()
	if _, err := store.Migrate(ctx); err != nil {
		return err
	}
	const batch = 100_000
	now := time.Now().UTC()
	span := 7 * 24 * time.Hour
	start := time.Now()
	var inserted int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(2)
	report := time.Now()
	for off := 0; off < o.s7Rows; off += batch {
		n := min(batch, o.s7Rows-off)
		rows := make([]audit.Attempt, n)
		for i := range rows {
			k := off + i
			// Spread over a week (seven day partitions), endpoints round-robin.
			t := now.Add(-span + time.Duration(float64(span)*float64(k)/float64(o.s7Rows))).Truncate(time.Millisecond)
			rows[i] = syntheticAttempt("ep-"+strconv.Itoa(k%res.Endpoints), t)
		}
		g.Go(func() error { return store.Insert(gctx, rows) })
		inserted += int64(n)
		if time.Since(report) >= b.o.progress {
			b.logf("  inserted %d/%d rows (%.0f/s)", inserted, o.s7Rows, float64(inserted)/time.Since(start).Seconds())
			report = time.Now()
		}
	}
	if err := g.Wait(); err != nil {
		return err
	}
	res.InsertPerSec = round1(float64(o.s7Rows) / time.Since(start).Seconds())
	var rows, parts uint64
	if err := b.ch.QueryRow(ctx, "SELECT count() FROM "+db+".attempts").Scan(&rows); err != nil {
		return err
	}
	res.Rows = int64(rows)
	_ = b.ch.QueryRow(ctx, fmt.Sprintf("SELECT count() FROM system.parts WHERE database = '%s' AND table = 'attempts' AND active", db)).Scan(&parts)
	res.Parts = int64(parts)
	res.QueryEndpointID = "ep-" + strconv.Itoa(mrand.IntN(res.Endpoints))
	q := audit.Query{EndpointID: res.QueryEndpointID, Limit: 100}
	t := time.Now()
	got, err := store.Log(ctx, q)
	if err != nil {
		return err
	}
	res.QueryColdMs = round3(float64(time.Since(t).Microseconds()) / 1000)
	res.QueryRowsOK = len(got) == 100
	var warm []int64
	for range 20 {
		t := time.Now()
		if _, err := store.Log(ctx, q); err != nil {
			return err
		}
		warm = append(warm, time.Since(t).Nanoseconds())
	}
	res.QueryWarm = summarize(warm)
	b.logf("  => %d rows (%d active parts, direct insert %.0f rows/s): last 100 of %s cold %.1f ms, warm p50 %.1f ms p99 %.1f ms; returned 100: %v",
		res.Rows, res.Parts, res.InsertPerSec, res.QueryEndpointID, res.QueryColdMs, res.QueryWarm.P50, res.QueryWarm.P99, res.QueryRowsOK)
	return nil
}
