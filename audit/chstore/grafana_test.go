package chstore_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// grafanaTimeFilter is the ClickHouse data source's $__timeFilter(column).
var grafanaTimeFilter = regexp.MustCompile(`\$__timeFilter\((\w+)\)`)

// TestGrafanaClickHouseQueries runs every ClickHouse query of the Grafana
// dashboards (deploy/grafana/dashboards: panel targets' rawSql and query
// variables) against the real server on analyticsFixture, with the
// plugin's macros and the dashboard variables substituted (the time range
// is 1 March 2025, every tenant and endpoint selected), and checks that
// each returns rows. deploy/check checks the dashboards' shape.
func TestGrafanaClickHouseQueries(t *testing.T) {
	files, _ := filepath.Glob("../../deploy/grafana/dashboards/*.json")
	s := newClickHouse(t)
	ctx := context.Background()
	if err := s.Insert(ctx, analyticsFixture()); err != nil {
		t.Fatal(err)
	}
	vars := strings.NewReplacer("${database}", s.Database(), "$__interval_s", "60",
		"${tenant:singlequote}", "'acme', 'globex'", "${endpoint:singlequote}", "'ep-a', 'ep-b', 'ep-c'")
	var n int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			Panels []struct {
				Title   string `json:"title"`
				Targets []struct {
					RawSQL string `json:"rawSql"`
				} `json:"targets"`
			} `json:"panels"`
			Templating struct {
				List []struct {
					Name, Type string
					Query      any `json:"query"`
					Datasource *struct{ Type string }
				} `json:"list"`
			} `json:"templating"`
		}
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		type q struct{ where, sql string }
		var qs []q
		for _, p := range d.Panels {
			for _, tg := range p.Targets {
				if tg.RawSQL != "" {
					qs = append(qs, q{filepath.Base(f) + ": " + p.Title, tg.RawSQL})
				}
			}
		}
		for _, v := range d.Templating.List {
			if sql, ok := v.Query.(string); ok && v.Type == "query" && v.Datasource != nil && v.Datasource.Type == "grafana-clickhouse-datasource" {
				qs = append(qs, q{filepath.Base(f) + ": variable " + v.Name, sql})
			}
		}
		for _, q := range qs {
			n++
			sql := grafanaTimeFilter.ReplaceAllString(q.sql, "$1 >= toDateTime('2025-03-01 00:00:00', 'UTC') AND $1 <= toDateTime('2025-03-02 00:00:00', 'UTC')")
			sql = vars.Replace(sql)
			if strings.Contains(sql, "$") {
				t.Errorf("%s: a macro or variable this test does not substitute:\n%s", q.where, sql)
				continue
			}
			rows, err := s.QueryText(ctx, sql)
			switch {
			case err != nil:
				t.Errorf("%s: %v\n%s", q.where, err, sql)
			case len(rows) == 0:
				t.Errorf("%s: no rows on the fixture\n%s", q.where, sql)
			}
		}
	}
	if n == 0 {
		t.Fatal("no ClickHouse query in deploy/grafana/dashboards")
	}
	t.Logf("%d ClickHouse queries ran", n)
}
