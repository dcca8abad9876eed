package e2e

// Acceptance tests of the delivery log's completeness (issue 8 item 5,
// issue 10 item 4): every request that may have reached a receiver has its
// attempt row, whatever moment the process dies. Kills are injected at each
// point of the attempt path (HOOKRELAY_FAULT, a binary built with
// -tags faultinject) and, like the field report, by a timed SIGKILL ~20 ms
// after the request reached the receiver.

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Outcomes of rows written for decisions taken without a request.
var noRequestOutcomes = map[string]bool{"abandoned": true, "expired": true, "skipped": true, "config_error": true}

// attemptLogEnv is the environment of every process of these tests: a short
// interruption grace, so an unresolved "sending" row is resolved quickly.
var attemptLogEnv = []string{"HOOKRELAY_AUDIT_INTERRUPT_GRACE=5s"}

// checkAttemptLog waits until the delivery log of ep agrees with what rc saw:
// no "sending" row left, exactly one delivered row, and as many rows that
// made (or may have made) a request as rc saw requests plus unsent, the
// number of attempts known to have died after their "sending" row but before
// their request. Every request's webhook-id has rows.
func checkAttemptLog(t *testing.T, h *harness, rc *receiver, ep string, unsent int) {
	t.Helper()
	var last string
	rows := h.waitAttempts(90*time.Second, "the attempt log to match the requests", func(rows []attemptRow) (bool, string) {
		var sending, delivered, requested int
		var desc []string
		for _, r := range rows {
			if r.EndpointID != ep {
				continue
			}
			desc = append(desc, fmt.Sprintf("#%d %s %d", r.AttemptNumber, r.Outcome, r.HTTPStatus))
			switch {
			case r.Outcome == "sending":
				sending++
			case noRequestOutcomes[r.Outcome]:
				continue
			}
			if r.Outcome == "delivered" {
				delivered++
			}
			if r.Outcome != "sending" {
				requested++
			}
		}
		last = fmt.Sprintf("requests %d (+%d unsent); rows [%s]", rc.Count(), unsent, strings.Join(desc, ", "))
		return sending == 0 && delivered == 1 && requested == rc.Count()+unsent, last
	})
	t.Logf("attempt log: %s", last)
	ids := map[string]bool{}
	for _, r := range rows {
		if r.EndpointID == ep {
			ids[r.WebhookID] = true
		}
	}
	for _, r := range rc.Requests() {
		if !ids[r.WebhookID] {
			t.Errorf("request %d with webhook-id %s has no attempt row", r.Nth, r.WebhookID)
		}
	}
}

// TestAttemptLogFaultPoints kills the process at each point of the attempt
// path in turn (before the "sending" row, after it, after the response,
// before the commit), restarting the same instance each time: the receiver's
// requests and the attempt rows agree, and the delivery ends delivered once.
func TestAttemptLogFaultPoints(t *testing.T) {
	h := newHarness(t, config{RetrySchedule: "1s,2s,4s", FaultInject: true, Env: attemptLogEnv})
	rc := newReceiver(t, "alog", func(r *request) answer {
		if r.Nth <= 3 {
			return answer{Status: http.StatusInternalServerError}
		}
		return answer{Status: http.StatusOK}
	})
	h.addEndpoint(endpoint{ID: "alog", URL: rc.URL, Secret: rc.Secret, Events: []string{"alog.*"}})

	// Each fault kills the first attempt of its process: the delivery's
	// attempt 1 is made again by each new incarnation.
	faults := []string{"crash-before-started", "crash-after-started", "crash-after-response", "crash-before-commit"}
	for i, f := range faults {
		p := h.spawn("alog-1", "HOOKRELAY_FAULT="+f+":1")
		if i == 0 {
			p.waitReady(readyTimeout)
			h.produce(h.events([]cloudEvent{{ID: "alog-ev", Source: "urn:e2e:alog", Type: "alog.thing", Time: time.Now(), Data: eventData{Event: "alog-ev"}}})...)
		}
		select {
		case <-p.done:
			t.Logf("%s: process exited (%v) after %d requests", f, p.waitErr, rc.Count())
		case <-time.After(120 * time.Second): // hang guard
			t.Fatalf("%s: the process did not reach its fault point", f)
		}
		if !strings.Contains(tail(p.logPath, 5), "faultinject: "+f) {
			t.Fatalf("%s: the process died elsewhere; log:\n%s", f, tail(p.logPath, 30))
		}
	}
	if n := rc.Count(); n != 2 {
		t.Fatalf("after the faults the receiver saw %d requests, want 2 (after-response, before-commit)", n)
	}
	h.start("alog-1")
	// One attempt died after its "sending" row and before its request.
	checkAttemptLog(t, h, rc, "alog", 1)
}

// TestAttemptLogTimedKill is the field report: SIGKILL ~20 ms after each of
// the first four requests reaches the receiver (500, 500, 500, 200), restart
// the same instance each time: every request has its row.
func TestAttemptLogTimedKill(t *testing.T) {
	h := newHarness(t, config{RetrySchedule: "1s,2s,4s", Env: attemptLogEnv})
	var mu sync.Mutex
	var cur *process // the process running now, set before it can send
	kills := make(chan struct{}, 8)
	rc := newReceiver(t, "alogk", func(r *request) answer {
		if r.Nth <= 4 {
			time.AfterFunc(20*time.Millisecond, func() {
				mu.Lock()
				p := cur
				mu.Unlock()
				_ = p.cmd.Process.Signal(syscall.SIGKILL)
				kills <- struct{}{}
			})
		}
		if r.Nth <= 3 {
			return answer{Status: http.StatusInternalServerError}
		}
		return answer{Status: http.StatusOK}
	})
	h.addEndpoint(endpoint{ID: "alogk", URL: rc.URL, Secret: rc.Secret, Events: []string{"alogk.*"}})
	// A restarted process may be killed again before it reports ready, so
	// only the first start waits for /readyz.
	start := func() *process {
		p := h.spawn("alogk-1")
		mu.Lock()
		cur = p
		mu.Unlock()
		return p
	}
	p := start()
	p.waitReady(readyTimeout)
	h.produce(h.events([]cloudEvent{{ID: "alogk-ev", Source: "urn:e2e:alogk", Type: "alogk.thing", Time: time.Now(), Data: eventData{Event: "alogk-ev"}}})...)
	for i := range 4 {
		select {
		case <-kills:
		case <-time.After(120 * time.Second): // hang guard
			t.Fatalf("kill %d: no request arrived (%d so far)", i+1, rc.Count())
		}
		<-p.done
		t.Logf("kill %d after request %d", i+1, rc.Count())
		p = start()
	}
	checkAttemptLog(t, h, rc, "alogk", 0)
}
