package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// opBody is the webhook body of an operational event.
type opBody struct {
	Type string `json:"type"`
	Data struct {
		EndpointID     string     `json:"endpoint_id"`
		FailingSince   *time.Time `json:"failing_since"`
		Reason         string     `json:"reason"`
		WindowFraction float64    `json:"window_fraction"`
		OldExpireAt    *time.Time `json:"old_secrets_expire_at"`
	} `json:"data"`
}

func opEvents(t *testing.T, rc *receiver) []opBody {
	t.Helper()
	var out []opBody
	seen := map[string]bool{}
	for _, r := range rc.Requests() {
		var head struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(r.Body, &head); err != nil {
			t.Fatalf("%s: body %q: %v", rc.Name, r.Body, err)
		}
		if !strings.HasPrefix(head.Type, "hookrelay.") || seen[r.WebhookID] {
			continue
		}
		var b opBody
		if err := json.Unmarshal(r.Body, &b); err != nil {
			t.Fatalf("%s: body %q: %v", rc.Name, r.Body, err)
		}
		seen[r.WebhookID] = true
		out = append(out, b)
	}
	return out
}

func opTypes(evs []opBody) string {
	var ts []string
	for _, e := range evs {
		ts = append(ts, fmt.Sprintf("%s(%s,%g)", strings.TrimPrefix(e.Type, "hookrelay.endpoint."), e.Data.EndpointID, e.Data.WindowFraction))
	}
	return strings.Join(ts, " ")
}

// TestEndpointHealthAutoDisable is issue 11's auto-disable acceptance on
// the real stack, with a 5 s window (HOOKRELAY_DISABLE_AFTER) and a 1 s
// retry schedule: an always-500 endpoint gets failing (at its first failure
// and at half the window) and is disabled with reason failing; its pending
// deliveries end abandoned and events published while it is disabled
// skipped (class endpoint_failing), every event with a final row; the
// operational events reach the subscribed endpoint of the same tenant as
// signed webhooks, never the failing endpoint itself (although it
// subscribes to them), another tenant's subscriber or a catch-all
// endpoint. An endpoint answering 429 for longer than the window is never
// disabled. Then an operator enable (announced as enabled) clears the
// clock: the next failure starts a new one (failing again, not an instant
// disable), and the first success after it is announced as recovered; a
// secret rotation is announced as secret_rotated.
func TestEndpointHealthAutoDisable(t *testing.T) {
	h := newHarness(t, config{
		RetrySchedule: "1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s",
		Env:           []string{"HOOKRELAY_DISABLE_AFTER=5s", "HOOKRELAY_FAILING_NOTIFY_AT=0.5"},
	})
	var healthy atomic.Bool
	dead := newReceiver(t, "dead", func(*request) answer {
		if healthy.Load() {
			return answer{Status: http.StatusOK}
		}
		return answer{Status: http.StatusInternalServerError}
	})
	throttled := newReceiver(t, "throttled", func(*request) answer {
		return answer{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"1"}}}
	})
	owner := newReceiver(t, "owner", always(http.StatusOK))
	catchAll := newReceiver(t, "catchall", always(http.StatusOK))
	spy := newReceiver(t, "spy", always(http.StatusOK))
	h.addEndpoint(endpoint{ID: "dead", URL: dead.URL, Secret: dead.Secret, Events: []string{"h11.*", "hookrelay.endpoint.*"}, Tenant: "acme"})
	h.addEndpoint(endpoint{ID: "throttled", URL: throttled.URL, Secret: throttled.Secret, Events: []string{"h11.*"}, Tenant: "acme"})
	h.addEndpoint(endpoint{ID: "owner", URL: owner.URL, Secret: owner.Secret, Events: []string{"hookrelay.endpoint.*"}, Tenant: "acme"})
	h.addEndpoint(endpoint{ID: "catchall", URL: catchAll.URL, Secret: catchAll.Secret, Events: []string{"*"}, Tenant: "acme"})
	h.addEndpoint(endpoint{ID: "spy", URL: spy.URL, Secret: spy.Secret, Events: []string{"hookrelay.*"}, Tenant: "other"})
	h.start("health-1")

	n := 0
	publish := func() string {
		id := fmt.Sprintf("h11-%d", n)
		n++
		h.produce(cloudEvent{ID: id, Source: "/qa", Type: "h11.paid", Tenant: "acme", Time: time.Now(), Data: n}.structured(h.topic("events"), nil))
		return id
	}
	status := func(id string) string { return h.cli("endpoints", "get", id) }

	// Events every 300 ms until the pipeline disables dead.
	start := time.Now()
	var disabledAt time.Time
	for disabledAt.IsZero() {
		if time.Since(start) > 90*time.Second {
			t.Fatalf("dead not disabled after 90 s; status:\n%s", status("dead"))
		}
		publish()
		time.Sleep(300 * time.Millisecond) // the publishing pace, not a synchronisation
		if n%3 == 0 {
			if out := status("dead"); strings.Contains(out, `"effective_status": "disabled"`) {
				if !strings.Contains(out, `"effective_reason": "failing"`) || !strings.Contains(out, `"failing_since"`) {
					t.Fatalf("dead disabled, but not for failing:\n%s", out)
				}
				disabledAt = time.Now()
			}
		}
	}
	if d := disabledAt.Sub(start); d < 5*time.Second {
		t.Fatalf("disabled %v after the first event; the window is 5 s", d)
	}
	beforeDisable := n
	var after []string
	for i := 0; i < 3; i++ {
		after = append(after, publish())
	}

	// Every event has a final row for dead: abandoned (pending at the
	// disable) or skipped (published after), none lost.
	rows := h.waitAttempts(90*time.Second, "a final row for every event to dead", func(rows []attemptRow) (bool, string) {
		final := map[string]string{}
		for _, r := range rows {
			if r.EndpointID == "dead" && r.Outcome != "retry_scheduled" && strings.HasPrefix(r.EventID, "h11-") {
				final[r.EventID] = r.Outcome + "/" + r.ErrorClass
			}
		}
		return len(final) == n, fmt.Sprintf("%d of %d events final", len(final), n)
	})
	final := map[string]string{}
	for _, r := range rows {
		if r.EndpointID == "dead" && r.Outcome != "retry_scheduled" && strings.HasPrefix(r.EventID, "h11-") {
			final[r.EventID] = r.Outcome + "/" + r.ErrorClass
		}
	}
	abandoned := 0
	for _, o := range final {
		if o == "abandoned/endpoint_failing" {
			abandoned++
		}
	}
	if abandoned == 0 {
		t.Errorf("no pending delivery of dead abandoned (class endpoint_failing); final outcomes %v", final)
	}
	for _, id := range after {
		if final[id] != "skipped/endpoint_failing" {
			t.Errorf("%s, published while dead was disabled: %q, want skipped/endpoint_failing", id, final[id])
		}
	}
	for id, o := range final {
		if o != "abandoned/endpoint_failing" && o != "skipped/endpoint_failing" && o != "exhausted/http_500" {
			t.Errorf("%s: final %q for dead", id, o)
		}
	}
	t.Logf("dead: %d events before the disable, %d abandoned, %d skipped after", beforeDisable, abandoned, len(after))

	// The operational events reached owner, signed and verified.
	eventually(t, 60*time.Second, "failing, failing at 0.5 and disabled at owner", func() (bool, string) {
		evs := opEvents(t, owner)
		return len(evs) >= 3, opTypes(evs)
	})
	evs := opEvents(t, owner)
	if got, want := opTypes(evs), "failing(dead,0) failing(dead,0.5) disabled(dead,0)"; got != want {
		t.Errorf("owner got %s, want %s", got, want)
	}
	for _, e := range evs {
		if e.Data.FailingSince == nil {
			t.Errorf("%s without failing_since", e.Type)
		}
	}
	for _, r := range owner.Requests() {
		if r.VerifyErr != nil {
			t.Errorf("owner: request %s does not verify: %v", r.WebhookID, r.VerifyErr)
		}
	}
	if evs := opEvents(t, dead); len(evs) != 0 {
		t.Errorf("the failing endpoint got its own operational events: %s", opTypes(evs))
	}
	if spy.Count() != 0 {
		t.Errorf("another tenant's subscriber got %d requests", spy.Count())
	}
	if evs := opEvents(t, catchAll); len(evs) != 0 {
		t.Errorf(`the "*" endpoint got operational events: %s`, opTypes(evs))
	}

	// 429 for longer than the window: never disabled, never failing.
	// (Its deliveries retry every second: 15 attempts each.)
	eventually(t, 60*time.Second, "429s for longer than the 5 s window", func() (bool, string) {
		reqs := throttled.Requests()
		if len(reqs) < 2 {
			return false, fmt.Sprintf("%d requests", len(reqs))
		}
		span := reqs[len(reqs)-1].Arrived.Sub(reqs[0].Arrived)
		return span > 7*time.Second, fmt.Sprintf("%d requests over %v", len(reqs), span)
	})
	for _, r := range throttled.Requests() {
		if r.Status != http.StatusTooManyRequests {
			t.Fatalf("throttled answered %d", r.Status)
		}
	}
	if out := status("throttled"); !strings.Contains(out, `"effective_status": "active"`) || strings.Contains(out, "failing_since") {
		t.Errorf("an endpoint answering only 429 was disabled or marked failing:\n%s", out)
	}

	// Enable: the clock restarts. The next failure is a new failing event
	// (the old failing_since would disable at once); then a success is
	// announced as recovered.
	h.cli("endpoints", "enable", "dead")
	publish()
	eventually(t, 60*time.Second, "enabled, and a new failing event after the enable", func() (bool, string) {
		evs := opEvents(t, owner)
		enabled, refailed := false, false
		for _, e := range evs[3:] {
			switch e.Type {
			case "hookrelay.endpoint.enabled":
				enabled = e.Data.EndpointID == "dead"
			case "hookrelay.endpoint.failing":
				refailed = refailed || e.Data.FailingSince != nil && e.Data.FailingSince.After(disabledAt)
			case "hookrelay.endpoint.disabled":
				if !refailed { // a disable before a new clock started: the old failing_since was kept
					t.Fatalf("disabled again at once after the enable: %s", opTypes(evs))
				}
			}
		}
		if enabled && refailed {
			healthy.Store(true) // at once, well inside the new window, however slow this poll was
		}
		return enabled && refailed, opTypes(evs)
	})
	eventually(t, 60*time.Second, "recovered", func() (bool, string) {
		evs := opEvents(t, owner)
		return evs[len(evs)-1].Type == "hookrelay.endpoint.recovered", opTypes(evs)
	})
	if out := status("dead"); !strings.Contains(out, `"effective_status": "active"`) {
		t.Errorf("dead after recovery:\n%s", out)
	}

	// A rotation (`endpoints update --secret`) is announced too.
	h.cli("endpoints", "update", "--id", "dead", "--secret", newSecret(), "--secret-overlap", "1h")
	eventually(t, 60*time.Second, "secret_rotated", func() (bool, string) {
		evs := opEvents(t, owner)
		e := evs[len(evs)-1]
		return e.Type == "hookrelay.endpoint.secret_rotated" && e.Data.EndpointID == "dead" && e.Data.OldExpireAt != nil &&
			e.Data.OldExpireAt.After(time.Now().Add(50*time.Minute)), opTypes(evs)
	})
	if evs := opEvents(t, dead); len(evs) != 0 {
		t.Errorf("the endpoint got operational events about itself: %s", opTypes(evs))
	}
}
