package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/pipeline/delivery"
	"github.com/hookrelay/hookrelay/pipeline/endpoints"
	"github.com/hookrelay/hookrelay/pipeline/operational"
)

func TestHealthSignalOf(t *testing.T) {
	pause := time.Unix(100, 0)
	for _, tt := range []struct {
		name string
		r    AttemptResult
		want healthSignal
	}{
		{"2xx", AttemptResult{Outcome: audit.Delivered, StatusCode: 204}, signalSuccess},
		{"500", AttemptResult{Outcome: audit.RetryScheduled, StatusCode: 500, ErrorClass: "http_500"}, signalFailure},
		{"timeout", AttemptResult{Outcome: audit.RetryScheduled, ErrorClass: "timeout"}, signalFailure},
		{"404 permanent", AttemptResult{Outcome: audit.Failed, StatusCode: 404}, signalFailure},
		{"410", AttemptResult{Outcome: audit.Gone, StatusCode: 410}, signalFailure},
		{"blocked", AttemptResult{Outcome: audit.Blocked, ErrorClass: "ssrf_blocked"}, signalFailure},
		{"429 never counts", AttemptResult{Outcome: audit.RetryScheduled, StatusCode: 429, PauseUntil: pause}, signalNone},
		{"a pause without a status (throttled)", AttemptResult{Outcome: audit.RetryScheduled, PauseUntil: pause}, signalNone},
		{"cancelled by hookrelay", AttemptResult{Outcome: audit.RetryScheduled, ErrorClass: "canceled"}, signalNone},
	} {
		if got := healthSignalOf(&tt.r); got != tt.want {
			t.Errorf("%s: signal %d, want %d", tt.name, got, tt.want)
		}
	}
}

// TestHealthStep walks the failing-since clock over fixed instants: first
// failure → failing; repeated failures write nothing until a fraction of
// the window; the window → disabled (reason failing, the attempt's config
// version); a 429 in between changes nothing; a success clears the clock
// (recovered); a 410 disables at once; nothing moves a disabled endpoint.
func TestHealthStep(t *testing.T) {
	o := HealthOptions{DisableAfter: 100 * time.Second, FailingNotifyAt: []float64{0.5, 0.9}}
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	fail := attemptFacts{version: 7, errorClass: "http_500", detail: "500 from x"}
	type want struct {
		status string // "" none, else state/reason
		event  string // "" none, else type
		frac   float64
	}
	steps := []struct {
		at   int
		sig  healthSignal
		f    attemptFacts
		want want
	}{
		{0, signalSuccess, fail, want{}}, // healthy stays healthy
		{1, signalFailure, fail, want{"active/failing", operational.TypeEndpointFailing, 0}}, // clock starts at 1
		{2, signalFailure, fail, want{}},  // no write per attempt
		{30, signalNone, fail, want{}},    // 429: nothing
		{50, signalFailure, fail, want{}}, // 49 s < 50 s
		{51, signalFailure, fail, want{"active/failing", operational.TypeEndpointFailing, 0.5}}, // half the window
		{60, signalFailure, fail, want{}}, // announced already
		{95, signalFailure, fail, want{"active/failing", operational.TypeEndpointFailing, 0.9}},   // 94 s ≥ 90 s
		{101, signalFailure, fail, want{"disabled/failing", operational.TypeEndpointDisabled, 0}}, // 100 s: disabled
		{102, signalSuccess, fail, want{}}, // an attempt in flight: ignored
	}
	var h endpointHealth
	for i, s := range steps {
		var ch healthChange
		h, ch = o.step(h, s.sig, s.f, at(s.at))
		got := want{}
		if ch.status != nil {
			got.status = string(ch.status.State) + "/" + ch.status.Reason
			if err := ch.status.Validate(); err != nil {
				t.Fatalf("step %d: invalid status: %v", i, err)
			}
			if ch.status.FailingSince == nil || !ch.status.FailingSince.Equal(at(1)) {
				t.Fatalf("step %d: failing_since %v, want %v", i, ch.status.FailingSince, at(1))
			}
		}
		if len(ch.events) == 1 {
			got.event, got.frac = ch.events[0].typ, ch.events[0].data.WindowFraction
		}
		if got != s.want {
			t.Fatalf("step %d (t+%ds): got %+v, want %+v", i, s.at, got, s.want)
		}
	}
	if !h.disabled || h.version != 7 {
		t.Fatalf("end state %+v; want disabled at version 7", h)
	}

	// Recovery and a 410.
	h = endpointHealth{}
	h, _ = o.step(h, signalFailure, fail, at(0))
	h, ch := o.step(h, signalSuccess, fail, at(10))
	if ch.status == nil || ch.status.State != endpoints.Active || ch.status.FailingSince != nil ||
		len(ch.events) != 1 || ch.events[0].typ != operational.TypeEndpointRecovered || !ch.events[0].data.FailingSince.Equal(at(0)) {
		t.Fatalf("recovery: %+v %+v", ch.status, ch.events)
	}
	if h != (endpointHealth{}) {
		t.Fatalf("after recovery: %+v; want healthy", h)
	}
	_, ch = o.step(h, signalFailure, attemptFacts{version: 3, gone: true, detail: "410 from x"}, at(20))
	if ch.status == nil || ch.status.State != endpoints.Disabled || ch.status.Reason != endpoints.ReasonGone || ch.status.ConfigVersion != 3 {
		t.Fatalf("410: %+v", ch.status)
	}
}

// TestHealthFrom rebuilds the clock from a status record: a restart or a
// new owner continues where the last writer was, and an operator write
// after a pipeline disable (an enable) clears it.
func TestHealthFrom(t *testing.T) {
	o := HealthOptions{DisableAfter: 100 * time.Second}
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	since := t0
	if h := o.healthFrom(nil, 5); h != (endpointHealth{}) {
		t.Fatalf("no record: %+v", h)
	}
	h := o.healthFrom(&endpoints.Status{State: endpoints.Active, At: t0.Add(60 * time.Second), FailingSince: &since}, 5)
	if !h.failingSince.Equal(since) || h.notified != 1 || h.disabled {
		t.Fatalf("failing record written at 60%%: %+v; want failing since t0, 1 fraction announced", h)
	}
	dis := &endpoints.Status{State: endpoints.Disabled, Reason: endpoints.ReasonFailing, At: t0.Add(100 * time.Second), ConfigVersion: 5, FailingSince: &since}
	if h := o.healthFrom(dis, 5); !h.disabled {
		t.Fatalf("disabled record, same version: %+v; want disabled", h)
	}
	if h := o.healthFrom(dis, 6); h != (endpointHealth{}) {
		t.Fatalf("disabled record superseded by a later config write (enable): %+v; want a cleared clock", h)
	}
	// Restarted owner: the next failure past the window disables, using
	// the persisted start of the clock.
	h = o.healthFrom(&endpoints.Status{State: endpoints.Active, At: t0, FailingSince: &since}, 5)
	_, ch := o.step(h, signalFailure, attemptFacts{version: 5}, t0.Add(101*time.Second))
	if ch.status == nil || ch.status.State != endpoints.Disabled {
		t.Fatalf("failure after the window on a rebuilt clock: %+v; want disabled", ch.status)
	}
}

func TestHealthOptionsValidate(t *testing.T) {
	for _, o := range []HealthOptions{
		{DisableAfter: -1},
		{FailingNotifyAt: []float64{0}},
		{FailingNotifyAt: []float64{1}},
		{FailingNotifyAt: []float64{0.5, 0.4}},
	} {
		if err := o.validate(); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
	o := HealthOptions{}
	if err := o.validate(); err != nil || o.DisableAfter != DefaultDisableAfter || len(o.FailingNotifyAt) != 2 {
		t.Fatalf("defaults: %+v %v", o, err)
	}
}

// scriptAttempter answers per endpoint with a fixed status code.
type scriptAttempter struct {
	codes map[string]int
	calls sync.Map // endpoint -> *atomic.Int64
}

func (s *scriptAttempter) Attempt(_ context.Context, ep *endpoints.Endpoint, _ []byte, _ *delivery.Meta, now time.Time) AttemptResult {
	n, _ := s.calls.LoadOrStore(ep.ID, new(atomic.Int64))
	n.(*atomic.Int64).Add(1)
	code := s.codes[ep.ID]
	r := AttemptResult{StartedAt: now, StatusCode: code, ErrorClass: fmt.Sprintf("http_%d", code)}
	switch {
	case code < 300:
		r.Outcome, r.ErrorClass = audit.Delivered, ""
	case code == 429:
		r.Outcome, r.PauseUntil = audit.RetryScheduled, now.Add(time.Second)
	default:
		r.Outcome = audit.RetryScheduled
	}
	return r
}

func (s *scriptAttempter) count(id string) int64 {
	n, ok := s.calls.Load(id)
	if !ok {
		return 0
	}
	return n.(*atomic.Int64).Load()
}

// TestDispatcherAutoDisable runs the dispatcher on kfake with a 1 s window:
// an always-500 endpoint gets a failing status and event at its first
// failure, then a disabled status (reason failing, its config version) and
// event once the window has passed, each committed (read_committed) in the
// dispatcher's transaction, status before event; its later deliveries are
// abandoned (endpoint_failing) at once, although the endpoint table never
// shows the status (the dispatcher's own disable applies before any view
// has it). An always-429 endpoint attempted over the same time writes no
// status at all.
func TestDispatcherAutoDisable(t *testing.T) {
	c, seeds, topics, policy := reviewCluster(t, "h.", 1)
	failing := testEndpoint("failing", 1)
	failing.TenantID, failing.Version = "acme", 42
	slow := testEndpoint("slow", 1)
	slow.Version = 9
	att := &scriptAttempter{codes: map[string]int{"failing": 500, "slow": 429}}
	startDispatcher(t, DispatcherOptions{
		Brokers: c.ListenAddrs(), KafkaOptions: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())},
		Topics:          topics,
		Group:           "h.dispatch",
		TransactionalID: "h.dispatch-test",
		Endpoints:       fakeEndpoints{"failing": failing, "slow": slow},
		Attempter:       att,
		Policy:          policy,
		Health:          HealthOptions{DisableAfter: time.Second, FailingNotifyAt: []float64{}},
	})
	prod, err := kgo.NewClient(seeds)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	produce := func(ep string, i int) {
		m := delivery.Meta{DeliveryID: fmt.Sprintf("%s-%d", ep, i), WebhookID: fmt.Sprintf("msg_%d", i), EndpointID: ep,
			EventType: "invoice.paid", Tenant: map[string]string{"failing": "acme"}[ep], Attempt: 1}
		if err := prod.ProduceSync(context.Background(), &kgo.Record{Topic: topics.Deliveries, Key: []byte(ep), Value: []byte(`{}`), Headers: m.Headers()}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// One delivery per endpoint every 100 ms until the failing endpoint
	// has been disabled: its attempts stop (abandoned) while 429s go on.
	rd, err := kgo.NewClient(seeds, kgo.ConsumeTopics(topics.EndpointStatus, topics.Operational, topics.Attempts),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var statuses []endpoints.Status
	var statusKeys, events []string
	abandoned := 0
	var disabledAt time.Time
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		if time.Now().After(deadline) {
			t.Fatalf("no disable within 30 s: statuses %v, events %v", statuses, events)
		}
		produce("failing", i)
		produce("slow", i)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		fs := rd.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			switch r.Topic {
			case topics.EndpointStatus:
				var s endpoints.Status
				if err := json.Unmarshal(r.Value, &s); err != nil {
					t.Fatal(err)
				}
				statuses, statusKeys = append(statuses, s), append(statusKeys, string(r.Key))
				if s.State == endpoints.Disabled && disabledAt.IsZero() {
					disabledAt = time.Now()
				}
			case topics.Operational:
				var ev operational.Event
				if err := json.Unmarshal(r.Value, &ev); err != nil {
					t.Fatal(err)
				}
				if ev.TenantID != "acme" || ev.Subject != "failing" || string(r.Key) != "failing" {
					t.Fatalf("event %+v: want tenant acme, subject failing", ev)
				}
				events = append(events, ev.Type)
			case topics.Attempts:
				var a audit.Attempt
				if err := a.Unmarshal(r.Value); err == nil && a.EndpointID == "failing" && a.Outcome == audit.Abandoned {
					if a.ErrorClass != classFailing {
						t.Fatalf("abandoned with class %q, want %q", a.ErrorClass, classFailing)
					}
					abandoned++
				}
			}
		})
		if !disabledAt.IsZero() && abandoned >= 3 && time.Since(disabledAt) > 1500*time.Millisecond {
			break
		}
	}
	if len(statuses) != 2 || statuses[0].State != endpoints.Active || statuses[0].FailingSince == nil ||
		statuses[1].State != endpoints.Disabled || statuses[1].Reason != endpoints.ReasonFailing || statuses[1].ConfigVersion != 42 ||
		!statuses[1].FailingSince.Equal(*statuses[0].FailingSince) {
		t.Fatalf("statuses %+v (keys %v); want failing, then disabled/failing at version 42 with the same failing_since", statuses, statusKeys)
	}
	if statusKeys[0] != "failing" || statusKeys[1] != "failing" {
		t.Fatalf("status keys %v; want only the failing endpoint (429s never count)", statusKeys)
	}
	if fmt.Sprint(events) != fmt.Sprint([]string{operational.TypeEndpointFailing, operational.TypeEndpointDisabled}) {
		t.Fatalf("events %v; want failing, disabled", events)
	}
	if got := statuses[1].At.Sub(*statuses[1].FailingSince); got < time.Second {
		t.Fatalf("disabled after %v of failure; want >= the 1 s window", got)
	}
	// Attempts stopped: a count taken now does not grow while deliveries
	// keep coming (they are abandoned before any attempt).
	before := att.count("failing")
	for i := 0; i < 5; i++ {
		produce("failing", 1000+i)
	}
	waitFor(t, "five more abandoned rows", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		rd.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			var a audit.Attempt
			if err := a.Unmarshal(r.Value); err == nil && r.Topic == topics.Attempts && a.EndpointID == "failing" && a.Outcome == audit.Abandoned {
				abandoned++
			}
		})
		return abandoned >= 8
	})
	if after := att.count("failing"); after != before {
		t.Fatalf("attempts of the disabled endpoint went on: %d → %d", before, after)
	}
	if att.count("slow") == 0 {
		t.Fatal("the 429 endpoint was never attempted")
	}
}

// TestDispatcherHealthResumesFromStatus: a dispatcher that starts (a
// restart, a new owner after a rebalance) continues the clock of the
// endpoint's status record: an endpoint failing for longer than the window
// is disabled at its first failure here, with the recorded failing_since
// and no new failing event; one whose disable an operator write superseded
// (an enable: Version above the record's ConfigVersion) starts a new
// clock instead.
func TestDispatcherHealthResumesFromStatus(t *testing.T) {
	c, seeds, topics, policy := reviewCluster(t, "hr.", 1)
	since := time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond)
	old := testEndpoint("old", 1)
	old.Version = 3
	old.PipelineStatus = &endpoints.Status{State: endpoints.Active, Reason: "failing", At: since, FailingSince: &since}
	enabled := testEndpoint("enabled", 1)
	enabled.Version = 8
	enabled.PipelineStatus = &endpoints.Status{State: endpoints.Disabled, Reason: endpoints.ReasonFailing, At: since, ConfigVersion: 7, FailingSince: &since}
	startDispatcher(t, DispatcherOptions{
		Brokers: c.ListenAddrs(), KafkaOptions: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())},
		Topics:          topics,
		Group:           "hr.dispatch",
		TransactionalID: "hr.dispatch-test",
		Endpoints:       fakeEndpoints{"old": old, "enabled": enabled},
		Attempter:       &scriptAttempter{codes: map[string]int{"old": 503, "enabled": 503}},
		Policy:          policy,
		Health:          HealthOptions{DisableAfter: time.Minute},
	})
	prod, err := kgo.NewClient(seeds)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for _, ep := range []string{"old", "enabled"} {
		m := delivery.Meta{DeliveryID: ep + "-1", WebhookID: "msg_1", EndpointID: ep, EventType: "x", Attempt: 1}
		if err := prod.ProduceSync(context.Background(), &kgo.Record{Topic: topics.Deliveries, Key: []byte(ep), Value: []byte(`{}`), Headers: m.Headers()}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	rd, err := kgo.NewClient(seeds, kgo.ConsumeTopics(topics.EndpointStatus, topics.Operational),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	status := map[string]endpoints.Status{}
	events := map[string][]string{}
	waitFor(t, "a status and an event for both", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		rd.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			if r.Topic == topics.EndpointStatus {
				var s endpoints.Status
				if err := json.Unmarshal(r.Value, &s); err != nil {
					t.Fatal(err)
				}
				status[string(r.Key)] = s
				return
			}
			var ev operational.Event
			if err := json.Unmarshal(r.Value, &ev); err != nil {
				t.Fatal(err)
			}
			events[ev.Subject] = append(events[ev.Subject], ev.Type)
		})
		return len(status) == 2 && len(events["old"]) > 0 && len(events["enabled"]) > 0
	})
	if s := status["old"]; s.State != endpoints.Disabled || s.ConfigVersion != 3 || s.FailingSince == nil || !s.FailingSince.Equal(since) {
		t.Errorf("old: %+v; want disabled at version 3, failing since %v (the recorded clock)", s, since)
	}
	if fmt.Sprint(events["old"]) != "[hookrelay.endpoint.disabled]" {
		t.Errorf("old: events %v; want only disabled", events["old"])
	}
	if s := status["enabled"]; s.State != endpoints.Active || s.FailingSince == nil || !s.FailingSince.After(since) {
		t.Errorf("enabled: %+v; want a new clock (active, failing since now)", s)
	}
	if fmt.Sprint(events["enabled"]) != "[hookrelay.endpoint.failing]" {
		t.Errorf("enabled: events %v; want failing", events["enabled"])
	}
}
