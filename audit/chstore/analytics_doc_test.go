package chstore_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hookrelay/hookrelay/audit"
)

var updateAnalytics = flag.Bool("update-analytics", false, "rewrite testdata/analytics_expected.txt")

// docQuery is one ready query of docs/ANALYTICS.md.
type docQuery struct{ name, sql string }

var sqlBlock = regexp.MustCompile("(?s)```sql\n(.*?)```")

// analyticsQueries returns every ```sql block of path; each must start
// with "-- query: <name>".
func analyticsQueries(t *testing.T, path string) []docQuery {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []docQuery
	for _, m := range sqlBlock.FindAllStringSubmatch(string(b), -1) {
		first, rest, _ := strings.Cut(m[1], "\n")
		name, ok := strings.CutPrefix(first, "-- query: ")
		if !ok {
			t.Fatalf("%s: a sql block starts with %q, want \"-- query: <name>\"", path, first)
		}
		out = append(out, docQuery{name: strings.TrimSpace(name), sql: rest})
	}
	return out
}

// analyticsFixture is the known data of docs/ANALYTICS.md's queries (1
// March 2025, UTC): tenant acme's ep-a delivers, once after a 503 and once
// after two 429s (Retry-After 60 s, then 120 s); its ep-b fails and
// exhausts a delivery and fails another for good; tenant globex's ep-c
// delivers one and has one expire.
func analyticsFixture() []audit.Attempt {
	t0 := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	var rows []audit.Attempt
	add := func(tenant, ep, dlv string, n int, at time.Duration, o audit.Outcome, status int, latency int64, class string, next time.Duration, first time.Duration) {
		a := audit.Attempt{AttemptID: fmt.Sprintf("att-%s-%d", dlv, n), DeliveryID: dlv, EventID: "evt-" + dlv, WebhookID: "msg_" + dlv,
			EventType: "invoice.paid", Tenant: tenant, EndpointID: ep, URLHost: ep + ".example.com", AttemptNumber: n,
			AttemptedAt: t0.Add(at), LatencyMs: latency, HTTPStatus: status, Outcome: o, ErrorClass: class, FirstAttemptAt: t0.Add(first)}
		if next > 0 {
			a.NextAttemptAt = t0.Add(next)
		}
		rows = append(rows, a)
	}
	s := time.Second
	add("acme", "ep-a", "d1", 1, 5*s, audit.Delivered, 200, 20, "", 0, 5*s)
	add("acme", "ep-a", "d2", 1, 60*s, audit.RetryScheduled, 503, 100, "http_503", 90*s, 60*s)
	add("acme", "ep-a", "d2", 2, 90*s, audit.Delivered, 200, 40, "", 0, 60*s)
	add("acme", "ep-a", "d3", 1, 120*s, audit.RetryScheduled, 429, 5, "http_429", 180*s, 120*s)
	add("acme", "ep-a", "d3", 2, 180*s, audit.RetryScheduled, 429, 5, "http_429", 300*s, 120*s)
	add("acme", "ep-a", "d3", 3, 300*s, audit.Delivered, 200, 30, "", 0, 120*s)
	add("acme", "ep-a", "d4", 1, 70*time.Minute, audit.Delivered, 200, 60, "", 0, 70*time.Minute)
	add("acme", "ep-b", "d5", 1, 0, audit.RetryScheduled, 503, 200, "http_503", 30*s, 0)
	add("acme", "ep-b", "d5", 2, 30*s, audit.RetryScheduled, 0, 1000, "timeout", 150*s, 0)
	add("acme", "ep-b", "d5", 3, 150*s, audit.Exhausted, 503, 300, "http_503", 0, 0)
	add("acme", "ep-b", "d6", 1, 30*time.Minute, audit.Failed, 400, 10, "http_400", 0, 30*time.Minute)
	add("globex", "ep-c", "d7", 1, 0, audit.Delivered, 200, 15, "", 0, 0)
	add("globex", "ep-c", "d8", 1, 10*time.Minute, audit.Expired, 0, 0, "expired", 0, 10*time.Minute)
	return rows
}

// TestAnalyticsDocQueries runs every query of docs/ANALYTICS.md against the
// real ClickHouse on analyticsFixture, inserted twice (the second time as
// the sink retries a batch: audit.InsertUnstored),
// and compares each result with testdata/analytics_expected.txt (rewrite
// it with -update-analytics, then read the diff).
func TestAnalyticsDocQueries(t *testing.T) {
	queries := analyticsQueries(t, "../../docs/ANALYTICS.md")
	if len(queries) < 10 {
		t.Fatalf("docs/ANALYTICS.md has %d queries, want at least 10", len(queries))
	}
	s := newClickHouse(t)
	ctx := context.Background()
	if err := s.Insert(ctx, analyticsFixture()); err != nil {
		t.Fatal(err)
	}
	if err := audit.InsertUnstored(ctx, s, analyticsFixture()); err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	seen := map[string]bool{}
	for _, q := range queries {
		if seen[q.name] {
			t.Fatalf("query name %q used twice", q.name)
		}
		seen[q.name] = true
		sql := strings.ReplaceAll(q.sql, "hookrelay.", s.Database()+".")
		rows, err := s.QueryText(ctx, sql)
		if err != nil {
			t.Errorf("query %s: %v\n%s", q.name, err, sql)
			continue
		}
		fmt.Fprintf(&got, "## %s\n", q.name)
		for _, r := range rows {
			got.WriteString(strings.Join(r, "\t") + "\n")
		}
		got.WriteString("\n")
	}
	checkExpected(t, "testdata/analytics_expected.txt", got.String(), *updateAnalytics)
}

// checkExpected compares got with the file's text per "## name" section,
// or rewrites the file when update is set.
func checkExpected(t *testing.T, file, got string, update bool) {
	t.Helper()
	if update {
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run with -update-analytics to create it)", err)
	}
	sections := func(s string) map[string]string {
		m := map[string]string{}
		for _, sec := range strings.Split(s, "## ")[1:] {
			name, body, _ := strings.Cut(sec, "\n")
			m[name] = body
		}
		return m
	}
	g, w := sections(got), sections(string(want))
	for name, body := range w {
		if g[name] != body {
			t.Errorf("%s: query %s returned\n%s\nwant\n%s", file, name, g[name], body)
		}
	}
	for name := range g {
		if _, ok := w[name]; !ok {
			t.Errorf("%s: no expected result for query %s (run with -update-analytics)", file, name)
		}
	}
}
