package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// RetryResult is scenario 5: how late retries arrive against their due time.
type RetryResult struct {
	Schedule      string          `json:"schedule"`
	Endpoints     int             `json:"endpoints"`
	FailFirst     int             `json:"fail_first"`
	OfferedPerSec float64         `json:"offered_events_per_s"`
	Events        int             `json:"events"`
	Retries       int             `json:"retries_measured"`
	Unmatched     int             `json:"retries_unmatched"` // rows without a matching arrival (must be 0)
	Lateness      Dist            `json:"lateness"`          // arrival at the receiver minus next_attempt_at of the previous attempt
	ByAttempt     map[string]Dist `json:"lateness_by_attempt"`
	KafkaProbe    ProbeResult     `json:"kafka_probe"`
	Check         Check           `json:"check"`
}

// runRetry is scenario 5: endpoints that answer 503 to the first
// -s5-fail-first requests of every event, a retry schedule of seconds, and
// for every retry the lateness: the instant the receiver got attempt n+1
// minus attempt n's next_attempt_at in ClickHouse (the due time hookrelay
// computed, jitter included, truncated to the millisecond, so the figure
// errs late by < 1 ms, never early).
func (b *bench) runRetry(ctx context.Context) (*RetryResult, error) {
	o := b.o
	res := &RetryResult{Schedule: o.s5Schedule, Endpoints: o.s5Endpoints, FailFirst: o.s5FailFirst, OfferedPerSec: o.s5Rate}
	b.logf("scenario 5 (retry precision): schedule %s, %d endpoints failing the first %d attempts, %g events/s for %s",
		o.s5Schedule, o.s5Endpoints, o.s5FailFirst, o.s5Rate, o.s5Duration)
	e, err := b.newEnv(ctx, "s5", "HOOKRELAY_RETRY_SCHEDULE="+o.s5Schedule)
	if err != nil {
		return nil, err
	}
	defer e.cleanup(ctx)
	rs, specs, err := startFleet(o.s5Endpoints, "retry-", "bench.s5.", Behaviour{FailFirst: o.s5FailFirst, TrackIDs: true}, o.verifyEvery, 1000, 32)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	if err := e.addEndpoints(ctx, specs); err != nil {
		return nil, err
	}
	if err := e.start(ctx); err != nil {
		return nil, err
	}
	defer e.Stop()
	gen := newEventGen(b.runID+"-s5-", o.payloadBytes)
	stop := make(chan struct{})
	go func() { b.progressUntil(ctx, e, rs, time.Now().Add(o.s5Duration), stop); close(stop) }()
	produced, err := b.paced(ctx, gen, e.prefix+"events", o.s5Rate, stop, func(i int) string {
		return "bench.s5." + strconv.Itoa(i%o.s5Endpoints)
	})
	if err != nil {
		return nil, err
	}
	n := len(produced)
	res.Events = n
	probeFrom := time.Now().Add(-o.s5Duration)
	if err := b.waitDelivered(ctx, e, rs, int64(n), 3*time.Minute); err != nil {
		return nil, err
	}
	res.KafkaProbe = e.probe.Result(probeFrom, time.Now())
	quiesce(ctx, rs, time.Second, 30*time.Second)
	res.Check = e.checkAttempts(ctx, rs, o.checkTimeout)

	arrivals := map[string]map[string][]int64{}
	for _, r := range rs {
		arrivals[r.id] = r.snapshot().Arrivals
	}
	rows, err := b.ch.Query(ctx, fmt.Sprintf(
		"SELECT endpoint_id, webhook_id, attempt_number, toUInt32(next_attempt_at), next_attempt_ms FROM %s.attempts FINAL WHERE outcome = 'retry_scheduled'", e.db))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var all []int64
	by := map[int][]int64{}
	for rows.Next() {
		var ep, wid string
		var num, nextMs uint16
		var nextAt uint32
		if err := rows.Scan(&ep, &wid, &num, &nextAt, &nextMs); err != nil {
			return nil, err
		}
		due := (int64(nextAt)*1000 + int64(nextMs)) * int64(time.Millisecond)
		arr := arrivals[ep][wid]
		if int(num) >= len(arr) || num < 1 {
			res.Unmatched++
			continue
		}
		late := arr[num] - due // arr[num] is attempt num+1 (arr[0] is attempt 1)
		all = append(all, late)
		by[int(num)] = append(by[int(num)], late)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	res.Retries = len(all)
	res.Lateness = summarize(all)
	res.ByAttempt = map[string]Dist{}
	delays := strings.Split(o.s5Schedule, ",")
	for num, l := range by {
		label := fmt.Sprintf("attempt_%d", num+1)
		if num-1 < len(delays) {
			label += "_after_" + strings.TrimSpace(delays[num-1])
		}
		res.ByAttempt[label] = summarize(l)
	}
	if err := e.Stop(); err != nil {
		res.Check.OK = false
		res.Check.Mismatches = append(res.Check.Mismatches, err.Error())
	}
	b.logf("  => %d retries: lateness min %.1f ms, p50 %.1f ms, p99 %.1f ms, max %.1f ms, %d early (negative); %d unmatched; check %s",
		res.Retries, res.Lateness.Min, res.Lateness.P50, res.Lateness.P99, res.Lateness.Max, res.Lateness.Below, res.Unmatched, checkWord(res.Check))
	b.logf("     %s", res.KafkaProbe)
	labels := slices.Sorted(maps.Keys(res.ByAttempt))
	for _, label := range labels {
		d := res.ByAttempt[label]
		b.logf("     %-24s n=%d p50 %.1f ms p99 %.1f ms max %.1f ms", label, d.N, d.P50, d.P99, d.Max)
	}
	return res, nil
}
