package faults

// The four assertions every scenario makes, and its result line.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/e2e/stack"
)

// Bounds of the checks. The gap bound is a hang guard, not a speed target
// (issue 10 wants 5 s after a restart and 15 s after a peer's death; a
// stall on an open transaction is 38–49 s, a session timeout 45 s).
const (
	gapBound        = 30 * time.Second // + any time the scenario holds the brokers down
	drainTimeout    = 5 * time.Minute  // load stop to every expected delivery
	drainStall      = 90 * time.Second // no new request for this long ends the drain early
	rowsTimeout     = 90 * time.Second // to a stable attempts table
	rowsStableReads = 4                // equal row counts in a row, 1 s apart
	invalidQuiet    = 15 * time.Second // no new events.invalid record for this long ends that read
)

// check is what a scenario says about its checks.
type check struct {
	Scenario string
	// ExtraGap is added to gapBound: the time the scenario itself holds the
	// only brokers down, when no delivery is possible.
	ExtraGap time.Duration
	// RowsAtLeast relaxes "exactly one attempt row per request" to "at
	// least one": for network faults, where an attempt can fail after the
	// receiver got the request or before it got any.
	RowsAtLeast bool
	// Exits are unexpected exits of hookrelay (broker trouble must not
	// make it exit).
	Exits []string
	Notes []string
}

// result is one scenario's numbers: the row of docs/RELIABILITY.md.
type result struct {
	Scenario      string   `json:"scenario"`
	Size          string   `json:"size"`
	Rate          int      `json:"rate"`
	Events        int      `json:"events"`
	Expected      int      `json:"expected"`
	ProduceErrors int      `json:"produce_errors"`
	Lost          int      `json:"lost"`
	Duplicates    int      `json:"duplicates"`
	BadDuplicates int      `json:"bad_duplicates"`
	Unexpected    int      `json:"unexpected"`
	BadSignatures int      `json:"bad_signatures"`
	Requests      int      `json:"requests"`
	Rows          int      `json:"rows"`
	NoRow         int      `json:"requests_without_row"`
	ExtraRows     int      `json:"extra_rows"`
	MaxGapSec     float64  `json:"max_gap_s"`
	GapEndpoint   string   `json:"gap_endpoint"`
	GapBoundSec   float64  `json:"gap_bound_s"`
	Exits         int      `json:"exits"`
	Malformed     int      `json:"malformed"`
	InvalidMissed int      `json:"invalid_missing"`
	Pass          bool     `json:"pass"`
	Failures      []string `json:"failures,omitempty"`
}

// finish stops the load, waits for the deliveries and the attempt rows,
// and asserts. It reports the result line in the test log (and in the
// file named by HOOKRELAY_FAULTS_REPORT).
func (r *rig) finish(c check) result {
	t := r.t
	t.Helper()
	r.load.stop(t)
	valid, bad, perrs, firstErr := r.load.snapshot()
	res := result{Scenario: c.Scenario, Size: r.s.Name, Rate: r.s.Rate, Events: len(valid), Expected: 2 * len(valid),
		ProduceErrors: perrs, Malformed: len(bad), Exits: len(c.Exits)}
	fail := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		res.Failures = append(res.Failures, msg)
		t.Error(msg)
	}
	if perrs > 0 {
		t.Logf("faults: %d produce errors (not expected to arrive), first: %v", perrs, firstErr)
	}
	byID := make(map[string]event, len(valid))
	for _, ev := range valid {
		byID[ev.ID] = ev
	}

	// Wait for every expected (event, endpoint): 0 lost.
	missing := func() []string {
		got := map[[2]string]bool{}
		for id, rc := range r.recv {
			for _, q := range rc.Requests() {
				if q.VerifyErr == nil {
					got[[2]string{id, q.Event}] = true
				}
			}
		}
		var out []string
		for _, ev := range valid {
			for _, ep := range ev.Targets {
				if !got[[2]string{ep, ev.ID}] {
					out = append(out, ep+"/"+ev.ID)
				}
			}
		}
		return out
	}
	start, lastN, lastChange := time.Now(), -1, time.Now()
	for {
		m := missing()
		if len(m) == 0 {
			break
		}
		if n := r.delivered(); n != lastN {
			lastN, lastChange = n, time.Now()
		}
		if time.Since(start) > drainTimeout || time.Since(lastChange) > drainStall {
			res.Lost = len(m)
			r.dumpStall() // while every instance and the brokers still run
			sort.Strings(m)
			fail("%d of %d expected deliveries lost (none arrived for %v): %s", len(m), res.Expected,
				time.Since(lastChange).Round(time.Second), firstN(m, 8))
			break
		}
		time.Sleep(200 * time.Millisecond) // polling interval
	}
	drained := time.Now()

	// Requests: signatures, duplicates, unexpected deliveries.
	type key = [2]string // endpoint, webhook-id
	reqs := map[key]int{}
	first := map[[2]string]request{} // (endpoint, event) -> first request
	var unexpected, badSig, badDup []string
	for _, id := range endpointIDs {
		for _, q := range r.recv[id].Requests() {
			res.Requests++
			reqs[key{id, q.WebhookID}]++
			if q.VerifyErr != nil {
				badSig = append(badSig, fmt.Sprintf("%s/%s: %v", id, q.WebhookID, q.VerifyErr))
				continue
			}
			ev, ok := byID[q.Event]
			if !ok || (ev.Targets[0] != id && ev.Targets[1] != id) {
				unexpected = append(unexpected, fmt.Sprintf("%s got %q (%.60q)", id, q.Event, q.Body))
				continue
			}
			k := [2]string{id, q.Event}
			if f, ok := first[k]; ok {
				res.Duplicates++
				if f.WebhookID != q.WebhookID || !bytes.Equal(f.Body, q.Body) {
					badDup = append(badDup, fmt.Sprintf("%s/%s: webhook-id %s then %s, bodies equal %v", id, q.Event,
						f.WebhookID, q.WebhookID, bytes.Equal(f.Body, q.Body)))
				}
			} else {
				first[k] = q
			}
		}
	}
	res.Unexpected, res.BadSignatures, res.BadDuplicates = len(unexpected), len(badSig), len(badDup)
	if len(badSig) > 0 {
		fail("%d requests whose signature does not verify: %s", len(badSig), firstN(badSig, 5))
	}
	if len(unexpected) > 0 {
		fail("%d requests of events the endpoint does not subscribe to, or not ours: %s", len(unexpected), firstN(unexpected, 5))
	}
	if len(badDup) > 0 {
		fail("%d duplicates with another webhook-id or body: %s", len(badDup), firstN(badDup, 5))
	}

	// Attempt rows: poll until stable, then one per request.
	var rows, uncertain map[key]int
	stable, prev := 0, -1
	deadline := time.Now().Add(rowsTimeout)
	for {
		var err error
		rows, uncertain, err = r.attemptRows()
		n := sumValues(rows)
		if err != nil {
			t.Logf("faults: reading attempts: %v", err)
		} else if n == prev && n >= res.Requests {
			stable++
		} else {
			stable = 0
		}
		prev = n
		if stable >= rowsStableReads || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second) // polling interval
	}
	res.Rows = sumValues(rows)
	var noRow, extra []string
	for k, n := range reqs {
		if got := rows[k]; got < n {
			res.NoRow += n - got
			noRow = append(noRow, fmt.Sprintf("%s/%s: %d requests, %d rows", k[0], k[1], n, got))
		}
	}
	for k, got := range rows {
		// A row of an attempt that may not have reached the receiver
		// (interrupted, canceled) may stand for no request.
		if n := reqs[k]; got-uncertain[k] > n {
			res.ExtraRows += got - uncertain[k] - n
			extra = append(extra, fmt.Sprintf("%s/%s: %d requests, %d rows", k[0], k[1], n, got))
		}
	}
	sort.Strings(noRow)
	sort.Strings(extra)
	if res.NoRow > 0 {
		fail("%d requests the receivers saw have no attempt row (%d rows FINAL, %d requests): %s", res.NoRow, res.Rows, res.Requests, firstN(noRow, 5))
	}
	if res.ExtraRows > 0 && !c.RowsAtLeast {
		fail("%d attempt rows more than requests the receivers saw: %s", res.ExtraRows, firstN(extra, 5))
	}

	// The delivery gap: per endpoint, the longest time without a request
	// from the first fault to the end of the load.
	from := r.faultAt
	if from.IsZero() {
		from = r.load.started.Add(r.s.Settle)
	}
	to := r.load.stopped
	bound := gapBound + c.ExtraGap
	res.GapBoundSec = bound.Seconds()
	var maxGap time.Duration
	for _, id := range endpointIDs {
		if g := gapOf(r.recv[id].Requests(), from, to, drained); g > maxGap {
			maxGap, res.GapEndpoint = g, id
		}
	}
	res.MaxGapSec = maxGap.Round(10 * time.Millisecond).Seconds()
	if maxGap > bound {
		fail("delivery gap %v at %s after the first fault, bound %v", maxGap.Round(10*time.Millisecond), res.GapEndpoint, bound)
	}
	if len(c.Exits) > 0 {
		fail("hookrelay exited %d times on its own (must wait out broker trouble): %s", len(c.Exits), firstN(c.Exits, 3))
	}
	if r.opts.Malformed {
		res.InvalidMissed = r.checkInvalid(bad, fail)
	}
	res.Pass = len(res.Failures) == 0
	report(r, res)
	return res
}

// gapOf is the longest interval without a request arrival at one
// endpoint, over intervals that start in [from, to). An interval still open
// when the drain ended ends there.
func gapOf(reqs []request, from, to, end time.Time) time.Duration {
	times := []time.Time{from}
	for _, q := range reqs {
		if q.Arrived.After(from) {
			times = append(times, q.Arrived)
		}
	}
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	times = append(times, end)
	var g time.Duration
	for i := 0; i+1 < len(times); i++ {
		if times[i].Before(to) {
			g = max(g, times[i+1].Sub(times[i]))
		}
	}
	return g
}

// attemptRows counts the rows of the attempts table (FINAL) per
// (endpoint, webhook-id), and among them the rows of attempts that may or
// may not have reached the receiver: `interrupted` (the process died during
// the attempt) and class `canceled` (a revoke or shutdown cut the request
// short). The log over-reports those by design; it never misses a request.
func (r *rig) attemptRows() (all, uncertain map[[2]string]int, err error) {
	conn := stack.ClickHouse(r.t)
	all, uncertain = map[[2]string]int{}, map[[2]string]int{}
	err = withCtx(30*time.Second, func(ctx context.Context) error {
		rows, err := conn.Query(ctx, `SELECT endpoint_id, webhook_id, count(), countIf(outcome = 'interrupted' OR error_class IN ('canceled', 'not_sent')) FROM `+r.db+`.attempts FINAL GROUP BY endpoint_id, webhook_id`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var ep, wh string
			var n, u uint64
			if err := rows.Scan(&ep, &wh, &n, &u); err != nil {
				return err
			}
			all[[2]string{ep, wh}] = int(n)
			uncertain[[2]string{ep, wh}] = int(u)
		}
		return rows.Err()
	})
	return all, uncertain, err
}

// checkInvalid asserts that every malformed record acked reached
// events.invalid with a reason, and reports how many did not.
func (r *rig) checkInvalid(bad []malformed, fail func(string, ...any)) int {
	cl := newClient(r.t, r.brokers,
		kgo.ConsumeTopics(r.prefix+"events.invalid"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(200*time.Millisecond))
	want := map[[2]int64]string{}
	for _, b := range bad {
		want[[2]int64{int64(b.Partition), b.Offset}] = b.Kind
	}
	reasons := map[string]map[string]int{} // kind -> reason -> count
	found := map[[2]int64]bool{}
	var noReason []string
	// Until all are found, or nothing new came for invalidQuiet (the
	// valid events have all been delivered by now, so the stage is idle).
	lastNew := time.Now()
	for len(found) < len(want) && time.Since(lastNew) < invalidQuiet {
		before := len(found)
		var fs kgo.Fetches
		_ = withCtx(time.Second, func(ctx context.Context) error { fs = cl.PollFetches(ctx); return nil })
		fs.EachRecord(func(rec *kgo.Record) {
			p, _ := strconv.ParseInt(headerOf(rec, "hookrelay-original-partition"), 10, 32)
			o, _ := strconv.ParseInt(headerOf(rec, "hookrelay-original-offset"), 10, 64)
			k := [2]int64{p, o}
			kind, ok := want[k]
			if !ok {
				return
			}
			found[k] = true
			reason := headerOf(rec, "hookrelay-reason")
			if reason == "" {
				noReason = append(noReason, kind)
			}
			if reasons[kind] == nil {
				reasons[kind] = map[string]int{}
			}
			reasons[kind][reason]++
		})
		if err := fs.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			r.t.Logf("faults: reading events.invalid: %v", err)
		}
		if len(found) > before {
			lastNew = time.Now()
		}
	}
	var missed []string
	perKind := map[string]int{}
	for k, kind := range want {
		if !found[k] {
			perKind[kind]++
		}
	}
	for kind, n := range perKind {
		missed = append(missed, fmt.Sprintf("%s×%d", kind, n))
	}
	sort.Strings(missed)
	b, _ := json.Marshal(reasons)
	r.t.Logf("faults: malformed kind -> reason in events.invalid: %s", b)
	if len(missed) > 0 {
		fail("%d of %d malformed records not in events.invalid: %s", len(want)-len(found), len(want), strings.Join(missed, ", "))
	}
	if len(noReason) > 0 {
		fail("%d invalid records without a hookrelay-reason header: %s", len(noReason), firstN(noReason, 5))
	}
	return len(want) - len(found)
}

func headerOf(rec *kgo.Record, k string) string {
	v := ""
	for _, h := range rec.Headers {
		if h.Key == k {
			v = string(h.Value)
		}
	}
	return v
}

// report logs the result line and appends it to HOOKRELAY_FAULTS_REPORT.
func report(r *rig, res result) {
	b, _ := json.Marshal(res)
	r.t.Logf("FAULTS-RESULT %s", b)
	if path := os.Getenv(EnvReport); path != "" {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			_, _ = f.Write(append(b, '\n'))
			_ = f.Close()
		}
	}
}

func sumValues[K comparable](m map[K]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// firstN joins at most n items of ss for a failure message.
func firstN(ss []string, n int) string {
	if len(ss) <= n {
		return strings.Join(ss, ", ")
	}
	return strings.Join(ss[:n], ", ") + fmt.Sprintf(", … (%d more)", len(ss)-n)
}
