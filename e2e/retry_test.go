package e2e

// Acceptance tests of the retry tiers (issue 4): the receiver's word
// (Retry-After, a 429 pausing the whole endpoint), permanent failures, and
// exhaustion into the DLQ, with the schedule shortened to seconds.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// byEvent groups a receiver's requests by the event named in their body, in
// arrival order.
func byEvent(t *testing.T, reqs []request) map[string][]request {
	t.Helper()
	out := map[string][]request{}
	for _, r := range reqs {
		var b webhookBody
		var d eventData
		if json.Unmarshal(r.Body, &b) != nil || json.Unmarshal(b.Data, &d) != nil {
			t.Errorf("%s: bad body %q", r.Receiver, r.Body)
			continue
		}
		out[d.Event] = append(out[d.Event], r)
	}
	return out
}

// rowsByEvent groups attempt rows of one endpoint by event ID, ordered by
// attempt number.
func rowsByEvent(rows []attemptRow, endpointID string) map[string][]attemptRow {
	out := map[string][]attemptRow{}
	for _, r := range rows {
		if r.EndpointID == endpointID {
			out[r.EventID] = append(out[r.EventID], r)
		}
	}
	for _, rs := range out {
		slices.SortFunc(rs, func(a, b attemptRow) int { return a.AttemptNumber - b.AttemptNumber })
	}
	return out
}

// checkSameDelivery checks that the attempts of one event carry the same
// webhook-id and body bytes, a fresh webhook-timestamp each (strictly
// increasing, signed after the previous attempt's answer and before its own
// arrival: an order, not a delay bound) and a signature that verifies.
func checkSameDelivery(t *testing.T, ev string, reqs []request) {
	t.Helper()
	var prevTS int64
	for i, r := range reqs {
		if r.VerifyErr != nil {
			t.Errorf("%s attempt %d: signature does not verify: %v", ev, i+1, r.VerifyErr)
		}
		if r.WebhookID != reqs[0].WebhookID {
			t.Errorf("%s attempt %d: webhook-id %s, attempt 1 had %s", ev, i+1, r.WebhookID, reqs[0].WebhookID)
		}
		if !bytes.Equal(r.Body, reqs[0].Body) {
			t.Errorf("%s attempt %d: body differs from attempt 1:\n %q\n %q", ev, i+1, r.Body, reqs[0].Body)
		}
		ts, err := strconv.ParseInt(r.Timestamp, 10, 64)
		switch {
		case err != nil:
			t.Errorf("%s attempt %d: webhook-timestamp %q: %v", ev, i+1, r.Timestamp, err)
		case ts > r.Arrived.Unix():
			t.Errorf("%s attempt %d: webhook-timestamp %d is after its arrival %v", ev, i+1, ts, r.Arrived.Format(time.RFC3339Nano))
		case i > 0 && ts < reqs[i-1].Answered.Unix():
			t.Errorf("%s attempt %d: webhook-timestamp %d is before attempt %d's answer %v (not re-signed)", ev, i+1, ts, i, reqs[i-1].Answered.Format(time.RFC3339Nano))
		case i > 0 && ts <= prevTS:
			t.Errorf("%s attempt %d: webhook-timestamp %d not after attempt %d's %d (not re-signed)", ev, i+1, ts, i, prevTS)
		}
		prevTS = ts
	}
}

// TestHostileReceiver: the seed's hostile receiver (per webhook-id: 500,
// then 429 with Retry-After: 5, then 200) with several events queued for it.
// Exactly three attempts per event with the same webhook-id and body bytes,
// re-signed each time; the third no earlier than 5 s after the 429; no
// request of any event during a pause; ClickHouse shows the outcomes.
func TestHostileReceiver(t *testing.T) {
	const (
		events     = 4
		retryAfter = 5 * time.Second
		// grace: a request hookrelay sent before it read the 429 may
		// still arrive just after the 429 was written.
		grace = 250 * time.Millisecond
	)
	start := time.Now()
	// Retry-After is honoured up to the longest tier (the documented cap),
	// so the schedule's longest tier is above the receiver's 5 s.
	h := newHarness(t, config{RetrySchedule: "1s,2s,8s"})
	rc := newReceiver(t, "hostile", hostile(int(retryAfter/time.Second)))
	h.addEndpoint(endpoint{ID: "hostile", URL: rc.URL, Secret: rc.Secret, Events: []string{"hostile.*"}, Rate: 1000, MaxInFlight: 4})
	h.start("hostile-1")

	var evs []cloudEvent
	for i := range events {
		id := fmt.Sprintf("hostile-%d", i)
		evs = append(evs, cloudEvent{ID: id, Source: "urn:e2e:hostile", Type: "hostile.thing", Time: time.Now(), Data: eventData{Event: id, N: i}})
	}
	h.produce(h.events(evs)...)

	eventually(t, 90*time.Second, "a 200 for every event", func() (bool, string) {
		ok := 0
		for _, r := range rc.Requests() {
			if r.Status == http.StatusOK {
				ok++
			}
		}
		return ok >= events, fmt.Sprintf("%d of %d events answered 200 after %d requests", ok, events, rc.Count())
	})
	deliveredIn := time.Since(start)
	rows := h.waitAttempts(60*time.Second, "three attempt rows per event", func(rows []attemptRow) (bool, string) {
		return len(rows) >= 3*events, fmt.Sprintf("%d of %d rows", len(rows), 3*events)
	})

	reqs := rc.Requests()
	per := byEvent(t, reqs)
	for _, ev := range evs {
		rs := per[ev.ID]
		var statuses []int
		for _, r := range rs {
			statuses = append(statuses, r.Status)
		}
		if !slices.Equal(statuses, []int{500, 429, 200}) {
			t.Errorf("%s: answers %v, want exactly three attempts answered [500 429 200]", ev.ID, statuses)
			continue
		}
		checkSameDelivery(t, ev.ID, rs)
		if gap := rs[2].Arrived.Sub(rs[1].Answered); gap < retryAfter {
			t.Errorf("%s: third attempt %v after the 429, want >= Retry-After %v", ev.ID, gap.Round(time.Millisecond), retryAfter)
		} else {
			t.Logf("%s: attempts at +%v, +%v, +%v; third %v after the 429", ev.ID,
				rs[0].Arrived.Sub(start).Round(time.Millisecond), rs[1].Arrived.Sub(start).Round(time.Millisecond),
				rs[2].Arrived.Sub(start).Round(time.Millisecond), gap.Round(time.Millisecond))
		}
	}
	// No request of any event reaches the endpoint while it is paused.
	for _, p := range reqs {
		if p.Status != http.StatusTooManyRequests {
			continue
		}
		from, until := p.Answered.Add(grace), p.Answered.Add(retryAfter)
		for _, r := range reqs {
			if r.Arrived.After(from) && r.Arrived.Before(until) {
				var b webhookBody
				var d eventData
				_ = json.Unmarshal(r.Body, &b)
				_ = json.Unmarshal(b.Data, &d)
				t.Errorf("request for %s (attempt %d) arrived %v after a 429, inside its %v pause",
					d.Event, r.Nth, r.Arrived.Sub(p.Answered).Round(time.Millisecond), retryAfter)
			}
		}
	}

	// ClickHouse: exactly retry_scheduled (500), retry_scheduled (429),
	// delivered (200) per event.
	if len(rows) != 3*events {
		t.Errorf("%d attempt rows, want %d", len(rows), 3*events)
	}
	want := []string{"1 retry_scheduled 500", "2 retry_scheduled 429", "3 delivered 200"}
	for ev, rs := range rowsByEvent(rows, "hostile") {
		var got []string
		for _, r := range rs {
			got = append(got, fmt.Sprintf("%d %s %d", r.AttemptNumber, r.Outcome, r.HTTPStatus))
			if len(per[ev]) > 0 && r.WebhookID != per[ev][0].WebhookID {
				t.Errorf("%s: attempt row webhook-id %s, requests carried %s", ev, r.WebhookID, per[ev][0].WebhookID)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: attempt rows %v, want %v", ev, got, want)
		}
	}
	t.Logf("TestHostileReceiver: %d events delivered in %v, %d requests (whole test %v)", events, deliveredIn.Round(time.Millisecond), len(reqs), time.Since(start).Round(time.Millisecond))
}

// TestPermanentAndExhausted: a 400 answer is one attempt, `failed`, never
// retried. A receiver that is down (always 503, or refusing connections)
// for longer than the whole schedule gets exactly len(schedule)+1 attempts,
// none early, then the delivery goes to the DLQ with its history and an
// `exhausted` row.
func TestPermanentAndExhausted(t *testing.T) {
	const events = 2
	schedule := []time.Duration{time.Second, time.Second, 2 * time.Second}
	attempts := len(schedule) + 1
	start := time.Now()
	h := newHarness(t, config{RetrySchedule: "1s,1s,2s"})

	bad := newReceiver(t, "bad-request", always(http.StatusBadRequest))
	down := newReceiver(t, "down-503", always(http.StatusServiceUnavailable))
	refusedURL := "http://" + freeAddr(t) + "/refused" // nothing listens there
	for _, ep := range []endpoint{
		{ID: "bad-request", URL: bad.URL, Secret: bad.Secret},
		{ID: "down-503", URL: down.URL, Secret: down.Secret},
		{ID: "down-refused", URL: refusedURL, Secret: newSecret()},
	} {
		ep.Events = []string{"retry.*"}
		h.addEndpoint(ep)
	}
	h.start("retry-1")
	var evs []cloudEvent
	for i := range events {
		id := fmt.Sprintf("retry-%d", i)
		evs = append(evs, cloudEvent{ID: id, Source: "urn:e2e:retry", Type: "retry.thing", Time: time.Now(), Data: eventData{Event: id, N: i}})
	}
	h.produce(h.events(evs)...)

	wantRows := events * (1 + 2*attempts)
	rows := h.waitAttempts(90*time.Second, "every final attempt row", func(rows []attemptRow) (bool, string) {
		final := 0
		for _, r := range rows {
			if r.Outcome != "retry_scheduled" {
				final++
			}
		}
		return final >= 3*events && len(rows) >= wantRows, fmt.Sprintf("%d rows (%d final), want %d (%d final)", len(rows), final, wantRows, 3*events)
	})
	dlq := h.readTopic(h.topic("dlq"), 30*time.Second, func(got []*kgo.Record) (bool, string) {
		return len(got) >= 3*events, fmt.Sprintf("%d of %d DLQ records", len(got), 3*events)
	})
	doneIn := time.Since(start)

	if len(rows) != wantRows {
		t.Errorf("%d attempt rows, want %d", len(rows), wantRows)
	}
	// 400: one attempt, failed, never retried (the exhausted rows above
	// came seconds after the first retry would have been due).
	for _, ev := range evs {
		rs := rowsByEvent(rows, "bad-request")[ev.ID]
		if len(rs) != 1 || rs[0].Outcome != "failed" || rs[0].HTTPStatus != 400 {
			t.Errorf("bad-request %s: rows %+v, want one failed row with status 400", ev.ID, rs)
		}
	}
	if per := byEvent(t, bad.Requests()); len(per) != events {
		t.Errorf("bad-request receiver saw %d events, want %d", len(per), events)
	} else {
		for ev, rs := range per {
			if len(rs) != 1 {
				t.Errorf("bad-request %s: %d requests, want 1 (a 400 is never retried)", ev, len(rs))
			}
		}
	}
	// Down: exactly len(schedule)+1 attempts, then exhausted.
	for _, id := range []string{"down-503", "down-refused"} {
		for _, ev := range evs {
			rs := rowsByEvent(rows, id)[ev.ID]
			var got []string
			for _, r := range rs {
				got = append(got, fmt.Sprintf("%d %s", r.AttemptNumber, r.Outcome))
			}
			want := []string{"1 retry_scheduled", "2 retry_scheduled", "3 retry_scheduled", "4 exhausted"}
			if !slices.Equal(got, want) {
				t.Errorf("%s %s: attempt rows %v, want %v", id, ev.ID, got, want)
			}
		}
	}
	per := byEvent(t, down.Requests())
	for _, ev := range evs {
		rs := per[ev.ID]
		if len(rs) != attempts {
			t.Errorf("down-503 %s: %d requests, want exactly %d", ev.ID, len(rs), attempts)
			continue
		}
		checkSameDelivery(t, ev.ID, rs)
		for i := 1; i < len(rs); i++ {
			if gap := rs[i].Arrived.Sub(rs[i-1].Answered); gap < schedule[i-1] {
				t.Errorf("down-503 %s: attempt %d came %v after attempt %d's answer, before its delay %v", ev.ID, i+1, gap, i, schedule[i-1])
			}
		}
	}
	// DLQ: one record per ended delivery, with its reason and history, the
	// exact body and the endpoint as key.
	reasons := map[string]int{}
	for _, r := range dlq {
		reason, _ := header(r, hdrReason)
		ep, _ := header(r, hdrEndpointID)
		wid, _ := header(r, hdrWebhookID)
		reasons[ep+" "+reason]++
		if string(r.Key) != ep {
			t.Errorf("DLQ record key %q, endpoint header %q", r.Key, ep)
		}
		if reason == "exhausted" {
			hist, _ := header(r, "hookrelay-history")
			var entries []json.RawMessage
			if err := json.Unmarshal([]byte(hist), &entries); err != nil || len(entries) != attempts {
				t.Errorf("DLQ record %s/%s: history %q, want %d entries", ep, wid, hist, attempts)
			}
		}
		if ep == "down-503" {
			found := false
			for _, rs := range per {
				if len(rs) > 0 && rs[0].WebhookID == wid {
					found = bytes.Equal(rs[0].Body, r.Value)
				}
			}
			if !found {
				t.Errorf("DLQ record for down-503 webhook-id %s: value is not the body that was sent", wid)
			}
		}
	}
	wantReasons := map[string]int{"bad-request failed": events, "down-503 exhausted": events, "down-refused exhausted": events}
	if fmt.Sprint(reasons) != fmt.Sprint(wantReasons) {
		t.Errorf("DLQ records by endpoint and reason %v, want %v", reasons, wantReasons)
	}
	var classes []string
	for _, r := range rowsByEvent(rows, "down-refused")[evs[0].ID] {
		classes = append(classes, r.ErrorClass)
	}
	t.Logf("down-refused error classes: %s", strings.Join(classes, ", "))
	t.Logf("TestPermanentAndExhausted: all deliveries ended in %v", doneIn.Round(time.Millisecond))
}
