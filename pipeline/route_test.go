package pipeline

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/pipeline/delivery"
	"github.com/hookrelay/hookrelay/retrytiers"
)

func testPolicy(t *testing.T) *RetryPolicy {
	t.Helper()
	p, err := NewRetryPolicy(retrytiers.DefaultSchedule(), NewTopics("t."), 48*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDecide(t *testing.T) {
	p := testPolicy(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	m := delivery.Meta{DeliveryID: "d", WebhookID: "w", EndpointID: "e", Attempt: 1}
	for _, tc := range []struct {
		name      string
		attempt   int
		res       AttemptResult
		u         float64
		outcome   audit.Outcome
		topic     string
		nextAfter time.Duration // NextAttemptAt - now, when retrying
	}{
		{name: "delivered", attempt: 1, res: AttemptResult{Outcome: audit.Delivered, StatusCode: 200}, outcome: audit.Delivered},
		{name: "503 first: 30s tier", attempt: 1, res: AttemptResult{Outcome: audit.RetryScheduled, StatusCode: 503, ErrorClass: "http_503"},
			outcome: audit.RetryScheduled, topic: "t.retry-30s", nextAfter: 30 * time.Second},
		{name: "jitter upward only", attempt: 1, u: 0.5, res: AttemptResult{Outcome: audit.RetryScheduled, ErrorClass: "timeout"},
			outcome: audit.RetryScheduled, topic: "t.retry-30s", nextAfter: 33 * time.Second},
		{name: "retry-after longer than the schedule", attempt: 1,
			res:     AttemptResult{Outcome: audit.RetryScheduled, StatusCode: 429, RetryAfter: 5 * time.Minute, PauseUntil: now.Add(5 * time.Minute)},
			outcome: audit.RetryScheduled, topic: "t.retry-2m", nextAfter: 5 * time.Minute},
		{name: "retry-after capped at the longest tier", attempt: 1,
			res:     AttemptResult{Outcome: audit.RetryScheduled, StatusCode: 503, RetryAfter: 100 * time.Hour},
			outcome: audit.RetryScheduled, topic: "t.retry-6h", nextAfter: 6 * time.Hour},
		{name: "last attempt exhausts", attempt: 11, res: AttemptResult{Outcome: audit.RetryScheduled, StatusCode: 500},
			outcome: audit.Exhausted, topic: "t.dlq"},
		{name: "400 permanent", attempt: 1, res: AttemptResult{Outcome: audit.Failed, StatusCode: 400}, outcome: audit.Failed, topic: "t.dlq"},
		{name: "410 disables", attempt: 2, res: AttemptResult{Outcome: audit.Gone, StatusCode: 410}, outcome: audit.Gone, topic: "t.dlq"},
		{name: "ssrf blocked", attempt: 1, res: AttemptResult{Outcome: audit.Blocked}, outcome: audit.Blocked, topic: "t.dlq"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := m
			in.Attempt = tc.attempt
			tc.res.StartedAt = now
			d := p.Decide(in, &tc.res, now, tc.u)
			if d.Outcome != tc.outcome || d.Topic != tc.topic {
				t.Fatalf("Decide = %s to %q; want %s to %q", d.Outcome, d.Topic, tc.outcome, tc.topic)
			}
			if tc.outcome == audit.RetryScheduled {
				if got := d.NextAttemptAt.Sub(now); got != tc.nextAfter {
					t.Fatalf("next attempt after %v; want %v", got, tc.nextAfter)
				}
				if d.Meta.Attempt != tc.attempt+1 || !d.Meta.DueAt.Equal(d.NextAttemptAt) {
					t.Fatalf("meta attempt %d due %v; want %d due %v", d.Meta.Attempt, d.Meta.DueAt, tc.attempt+1, d.NextAttemptAt)
				}
			}
			if d.Topic != "" && len(d.Meta.History) != 1 {
				t.Fatalf("history has %d entries; want 1", len(d.Meta.History))
			}
		})
	}
}

func TestDecideShortWaitStaysInDispatcher(t *testing.T) {
	s, _ := retrytiers.ParseSchedule("2s,5s")
	p, err := NewRetryPolicy(s, NewTopics("t."), 0)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	// Retry-After 3s on a schedule whose smallest tier is 2s: hop to the 2s
	// tier; 1s remains for the dispatcher.
	d := p.Decide(delivery.Meta{Attempt: 1}, &AttemptResult{Outcome: audit.RetryScheduled, RetryAfter: 3 * time.Second, StartedAt: now}, now, 0)
	if d.Topic != "t.retry-2s" {
		t.Fatalf("topic = %q; want t.retry-2s", d.Topic)
	}
	if got := p.hop(now.Add(1500*time.Millisecond), now); got != "t.deliveries" {
		t.Fatalf("hop of 1.5s = %q; want t.deliveries", got)
	}
}

func TestParkBacksOffAndHonoursPause(t *testing.T) {
	p := testPolicy(t)
	now := time.Unix(1000, 0)
	rec := &kgo.Record{Key: []byte("e"), Value: []byte("{}")}
	m := delivery.Meta{DeliveryID: "d", WebhookID: "w", EndpointID: "e", Attempt: 3}
	// Each park of the same delivery doubles its delay.
	for parks, want := range []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute} {
		m.Parks = parks
		out := p.Park(m, rec.Key, rec.Value, time.Time{}, now)
		got, err := delivery.ParseMeta(out.Headers)
		if err != nil {
			t.Fatal(err)
		}
		if d := got.DueAt.Sub(now); d != want || got.Attempt != 3 || got.Parks != parks+1 {
			t.Fatalf("parks %d: due +%v attempt %d parks %d; want +%v, attempt 3 (not consumed), parks %d", parks, d, got.Attempt, got.Parks, want, parks+1)
		}
	}
	m.Parks = 60
	if out := p.Park(m, rec.Key, rec.Value, time.Time{}, now); out.Topic != "t.retry-6h" {
		t.Fatalf("a delivery parked 60 times parks in %s; want the 6h tier", out.Topic)
	}
	m.Parks = 0
	until := now.Add(45 * time.Minute)
	out := p.Park(m, rec.Key, rec.Value, until, now)
	got, _ := delivery.ParseMeta(out.Headers)
	if !got.DueAt.Equal(until) || !got.PauseUntil.Equal(until) {
		t.Fatalf("paused park due %v pause %v; want both %v", got.DueAt, got.PauseUntil, until)
	}
	// A pause is capped at the longest tier.
	out = p.Park(m, rec.Key, rec.Value, now.Add(1000*time.Hour), now)
	got, _ = delivery.ParseMeta(out.Headers)
	if want := now.Add(6 * time.Hour); !got.DueAt.Equal(want) || !got.PauseUntil.Equal(want) {
		t.Fatalf("huge pause: due %v pause %v; want both capped at %v", got.DueAt, got.PauseUntil, want)
	}
}
