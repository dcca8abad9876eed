package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/hookrelay/hookrelay/audit"
)

type statsJSON struct {
	EndpointID  string    `json:"endpoint_id"`
	Granularity string    `json:"granularity"`
	From        time.Time `json:"from"`
	To          time.Time `json:"to"`
	Buckets     []struct {
		Start                                  time.Time `json:"start"`
		Attempts, Delivered, Failed, Throttled int64
		SuccessRate                            *float64 `json:"success_rate"`
		LatencyP50Ms                           *int64   `json:"latency_p50_ms"`
		LatencyP99Ms                           *int64   `json:"latency_p99_ms"`
	} `json:"buckets"`
}

// TestEndpointStats: GET …/stats buckets per minute and hour, ascending,
// only non-empty ones; parameters are validated; another tenant's endpoint
// is 404; include=stats adds stats_24h to every listed endpoint.
func TestEndpointStats(t *testing.T) {
	e := newEnv(t)
	acme, globex := e.newKey(t, false, "acme"), e.newKey(t, false, "globex")
	ep := e.create(t, acme, `{"url":"https://a.example/hook"}`)
	quiet := e.create(t, acme, `{"url":"https://b.example/hook"}`)
	other := e.create(t, globex, `{"url":"https://c.example/hook"}`)
	now := time.Now().UTC()
	h0 := now.Truncate(time.Hour).Add(-2 * time.Hour)
	rows := []audit.Attempt{
		{AttemptID: "s1", EndpointID: ep.ID, Tenant: "acme", Outcome: audit.Delivered, HTTPStatus: 200, LatencyMs: 10, AttemptedAt: h0.Add(time.Second)},
		{AttemptID: "s2", EndpointID: ep.ID, Tenant: "acme", Outcome: audit.RetryScheduled, HTTPStatus: 429, LatencyMs: 30, AttemptedAt: h0.Add(2 * time.Second), NextAttemptAt: h0.Add(time.Hour)},
		{AttemptID: "s3", EndpointID: ep.ID, Tenant: "acme", Outcome: audit.Abandoned, AttemptedAt: h0.Add(90 * time.Minute)},
		{AttemptID: "s4", EndpointID: other.ID, Tenant: "globex", Outcome: audit.Delivered, HTTPStatus: 200, AttemptedAt: h0},
	}
	if err := e.attempts.Insert(context.Background(), rows); err != nil {
		t.Fatal(err)
	}
	p := "/v1/endpoints/" + ep.ID + "/stats"
	s := decodeBody[statsJSON](t, e.call(t, "GET", p, acme, ""))
	if s.Granularity != "hour" || s.EndpointID != ep.ID || s.To.Sub(s.From) != 24*time.Hour || len(s.Buckets) != 2 {
		t.Fatalf("default stats %+v", s)
	}
	b := s.Buckets[0]
	if !b.Start.Equal(h0) || b.Attempts != 2 || b.Delivered != 1 || b.Failed != 1 || b.Throttled != 1 ||
		b.SuccessRate == nil || *b.SuccessRate != 0.5 || b.LatencyP50Ms == nil || *b.LatencyP50Ms != 30 || *b.LatencyP99Ms != 30 {
		t.Errorf("first hour %+v", b)
	}
	if b := s.Buckets[1]; !b.Start.Equal(h0.Add(time.Hour)) || b.Attempts != 1 || b.SuccessRate != nil || b.LatencyP99Ms != nil {
		t.Errorf("second hour %+v", b)
	}
	q := fmt.Sprintf("%s?granularity=minute&from=%s&to=%s", p, url.QueryEscape(h0.Format(time.RFC3339)), url.QueryEscape(h0.Add(time.Hour).Format(time.RFC3339)))
	m := decodeBody[statsJSON](t, e.call(t, "GET", q, acme, ""))
	if m.Granularity != "minute" || len(m.Buckets) != 1 || !m.Buckets[0].Start.Equal(h0) || m.Buckets[0].Attempts != 2 {
		t.Errorf("minute stats %+v", m)
	}
	for _, bad := range []string{"?granularity=second", "?from=yesterday"} {
		want(t, e.callInvalid(t, "GET", p+bad, acme, ""), http.StatusBadRequest)
	}
	want(t, e.call(t, "GET", p+"?from="+url.QueryEscape(now.Add(time.Hour).Format(time.RFC3339)), acme, ""), http.StatusBadRequest)
	r := e.call(t, "GET", p+"?granularity=minute&from="+url.QueryEscape(now.Add(-48*time.Hour).Format(time.RFC3339)), acme, "")
	if pb := decodeBody[struct {
		Errors []struct{ Field string }
	}](t, r); len(pb.Errors) != 1 || pb.Errors[0].Field != "granularity" {
		t.Errorf("minute over 48 h: %s, want a problem naming granularity", r.Body)
	}
	want(t, e.call(t, "GET", "/v1/endpoints/"+other.ID+"/stats", acme, ""), http.StatusNotFound)

	list := decodeBody[struct {
		Data []struct {
			ID       string `json:"id"`
			Stats24h *struct {
				Attempts, Delivered int64
				SuccessRate         *float64   `json:"success_rate"`
				LatencyP99Ms        *int64     `json:"latency_p99_ms"`
				LastAttemptAt       *time.Time `json:"last_attempt_at"`
			} `json:"stats_24h"`
		}
	}](t, e.call(t, "GET", "/v1/endpoints?include=stats", acme, ""))
	if len(list.Data) != 2 {
		t.Fatalf("acme lists %d endpoints, want 2", len(list.Data))
	}
	for _, d := range list.Data {
		st := d.Stats24h
		switch {
		case st == nil:
			t.Errorf("%s: no stats_24h", d.ID)
		case d.ID == ep.ID && (st.Attempts != 3 || st.Delivered != 1 || st.SuccessRate == nil || *st.SuccessRate != 0.5 ||
			st.LatencyP99Ms == nil || *st.LatencyP99Ms != 30 || st.LastAttemptAt == nil || !st.LastAttemptAt.Equal(h0.Add(90*time.Minute))):
			t.Errorf("%s: stats_24h %+v", d.ID, *st)
		case d.ID == quiet.ID && (st.Attempts != 0 || st.SuccessRate != nil || st.LastAttemptAt != nil):
			t.Errorf("quiet endpoint: stats_24h %+v", *st)
		}
	}
	plain := decodeBody[struct {
		Data []map[string]any
	}](t, e.call(t, "GET", "/v1/endpoints", acme, ""))
	for _, d := range plain.Data {
		if _, ok := d["stats_24h"]; ok {
			t.Errorf("stats_24h without include=stats: %v", d)
		}
	}
	want(t, e.callInvalid(t, "GET", "/v1/endpoints?include=secrets", acme, ""), http.StatusBadRequest)
}
