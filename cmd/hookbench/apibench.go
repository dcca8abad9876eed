package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/audit/chstore"
)

// APIResult is scenario api: the management API's read paths on
// -api-rows synthetic attempt rows over -api-endpoints endpoints and 7 days.
// Times are HTTP round trips over loopback (server time plus a loopback
// hop and JSON decoding by nobody: the body is read and dropped).
type APIResult struct {
	Rows         int     `json:"rows"`
	Endpoints    int     `json:"endpoints"`
	InsertPerSec float64 `json:"insert_rows_per_s"` // chstore batch inserts, views attached
	Requests     int     `json:"requests_per_query"`
	// The queries (GET paths), each Requests times on random endpoints.
	LogFirstPage  Dist `json:"log_first_page"`     // /v1/endpoints/{id}/attempts
	LogByEventID  Dist `json:"log_by_event_id"`    // …/attempts?event_id=
	ChartHour     Dist `json:"chart_24h_hour"`     // …/stats?granularity=hour (24 h)
	ChartMinute   Dist `json:"chart_24h_minute"`   // …/stats?granularity=minute (24 h)
	EndpointsPage Dist `json:"endpoints_stats"`    // /v1/endpoints?include=stats
	EndpointsSeen int  `json:"endpoints_listed"`   // endpoints in that answer
	LogFound      bool `json:"log_by_event_found"` // every event_id page held its attempt
}

// runAPI is scenario api.
func (b *bench) runAPI(ctx context.Context) (*APIResult, error) {
	o := b.o
	res := &APIResult{Rows: o.apiRows, Endpoints: o.apiEndpoints, Requests: o.apiRequests}
	b.logf("scenario api: %d attempt rows over %d endpoints and 7 days, then the API's read paths", o.apiRows, o.apiEndpoints)
	e, err := b.newEnv(ctx, "api")
	if err != nil {
		return nil, err
	}
	defer e.cleanup(ctx)
	if err := e.ensureTopics(ctx); err != nil {
		return nil, err
	}
	out, err := e.hookrelayCmd(ctx, "apikeys", "create", "--admin", "--name", "hookbench")
	if err != nil {
		return nil, err
	}
	key := strings.TrimSpace(strings.SplitN(out, "\n", 2)[0])
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	_ = l.Close()
	if err := e.start(ctx, "HOOKRELAY_ROLES=api", "HOOKRELAY_API_ADDR="+addr); err != nil {
		return nil, err
	}
	defer e.Stop()
	base := "http://" + addr
	hc := &http.Client{Timeout: 60 * time.Second}
	call := func(ctx context.Context, method, path string, body any) (int, []byte, time.Duration, error) {
		var rd io.Reader
		if body != nil {
			j, _ := json.Marshal(body)
			rd = bytes.NewReader(j)
		}
		req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
		if err != nil {
			return 0, nil, 0, err
		}
		req.Header.Set("Authorization", "Bearer "+key)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		t := time.Now()
		resp, err := hc.Do(req)
		if err != nil {
			return 0, nil, 0, err
		}
		data, err := io.ReadAll(resp.Body)
		took := time.Since(t)
		resp.Body.Close()
		return resp.StatusCode, data, took, err
	}

	// Endpoints, through the API (ten tenants).
	epID := func(i int) string { return fmt.Sprintf("ep-%04d", i) }
	tenantOf := func(i int) string { return "t-" + strconv.Itoa(i%10) }
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i := range o.apiEndpoints {
		g.Go(func() error {
			st, data, _, err := call(gctx, "POST", "/v1/endpoints", map[string]any{
				"id": epID(i), "url": "http://127.0.0.1:9/hook", "tenantid": tenantOf(i)})
			if err == nil && st != http.StatusCreated && st != http.StatusConflict {
				err = fmt.Errorf("POST /v1/endpoints: %d %s", st, data)
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	b.logf("  %d endpoints created; inserting %d rows", o.apiEndpoints, o.apiRows)

	// Rows, through chstore's batch insert into the database hookrelay reads.
	store, err := chstore.New(ctx, chstore.Options{DSN: e.dsn, MaxOpenConns: 4})
	if err != nil {
		return nil, err
	}
	defer store.Close()
	if _, err := store.Migrate(ctx); err != nil {
		return nil, err
	}
	const batch = 100_000
	now := time.Now().UTC()
	span := 7 * 24 * time.Hour
	events := make(map[string]string) // endpoint -> an event ID of the last day
	start := time.Now()
	g, gctx = errgroup.WithContext(ctx)
	g.SetLimit(2)
	report := time.Now()
	for off := 0; off < o.apiRows; off += batch {
		n := min(batch, o.apiRows-off)
		rows := make([]audit.Attempt, n)
		for i := range rows {
			k := off + i
			t := now.Add(-span + time.Duration(float64(span)*float64(k)/float64(o.apiRows))).Truncate(time.Millisecond)
			ep := k % o.apiEndpoints
			a := syntheticAttempt(epID(ep), t)
			a.Tenant = tenantOf(ep)
			switch k % 20 {
			case 0:
				a.Outcome, a.HTTPStatus, a.NextAttemptAt = audit.RetryScheduled, 503, t.Add(time.Minute)
			case 1:
				a.Outcome, a.HTTPStatus, a.NextAttemptAt = audit.RetryScheduled, 429, t.Add(time.Minute)
			}
			if now.Sub(t) < 12*time.Hour {
				events[a.EndpointID] = a.EventID
			}
			rows[i] = a
		}
		g.Go(func() error { return store.Insert(gctx, rows) })
		if time.Since(report) >= o.progress {
			b.logf("  inserted %d/%d rows (%.0f/s)", off+n, o.apiRows, float64(off+n)/time.Since(start).Seconds())
			report = time.Now()
		}
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	res.InsertPerSec = round1(float64(o.apiRows) / time.Since(start).Seconds())
	b.logf("  inserted %d rows at %.0f rows/s (views attached)", o.apiRows, res.InsertPerSec)

	measure := func(name string, path func(ep string) string, check func(ep string, data []byte) error) (Dist, error) {
		var samples []int64
		for range o.apiRequests {
			ep := epID(mrand.IntN(o.apiEndpoints))
			st, data, took, err := call(ctx, "GET", path(ep), nil)
			if err != nil {
				return Dist{}, fmt.Errorf("%s: %w", name, err)
			}
			if st != http.StatusOK {
				return Dist{}, fmt.Errorf("%s: GET %s: %d %s", name, path(ep), st, data)
			}
			if check != nil {
				if err := check(ep, data); err != nil {
					return Dist{}, fmt.Errorf("%s: %w", name, err)
				}
			}
			samples = append(samples, took.Nanoseconds())
		}
		d := summarize(samples)
		b.logf("  => %s: p50 %.1f ms, p99 %.1f ms (%d requests)", name, d.P50, d.P99, d.N)
		return d, nil
	}
	res.LogFound = true
	day := "from=" + url.QueryEscape(now.Add(-24*time.Hour).Format(time.RFC3339)) + "&to=" + url.QueryEscape(now.Format(time.RFC3339))
	steps := []struct {
		into  *Dist
		name  string
		path  func(string) string
		check func(string, []byte) error
	}{
		{&res.LogFirstPage, "delivery log, first page", func(ep string) string { return "/v1/endpoints/" + ep + "/attempts" }, nil},
		{&res.LogByEventID, "delivery log by event_id", func(ep string) string {
			return "/v1/endpoints/" + ep + "/attempts?event_id=" + url.QueryEscape(events[ep])
		}, func(ep string, data []byte) error {
			if !bytes.Contains(data, []byte(events[ep])) {
				res.LogFound = false
			}
			return nil
		}},
		{&res.ChartHour, "24 h chart per hour", func(ep string) string { return "/v1/endpoints/" + ep + "/stats?granularity=hour&" + day }, nil},
		{&res.ChartMinute, "24 h chart per minute", func(ep string) string { return "/v1/endpoints/" + ep + "/stats?granularity=minute&" + day }, nil},
		{&res.EndpointsPage, "endpoints page with stats", func(string) string { return "/v1/endpoints?include=stats" }, func(_ string, data []byte) error {
			res.EndpointsSeen = bytes.Count(data, []byte(`"stats_24h"`))
			return nil
		}},
	}
	for _, s := range steps {
		d, err := measure(s.name, s.path, s.check)
		if err != nil {
			return res, err
		}
		*s.into = d
	}
	return res, nil
}
