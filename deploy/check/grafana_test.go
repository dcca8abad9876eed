package check

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query string `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	Type       string  `json:"type"`
	Title      string  `json:"title"`
	Datasource *dsRef  `json:"datasource"`
	Panels     []panel `json:"panels"` // a collapsed row's panels
	Targets    []struct {
		Datasource *dsRef `json:"datasource"`
		Expr       string `json:"expr"`
		RawSQL     string `json:"rawSql"`
		RefID      string `json:"refId"`
	} `json:"targets"`
}

// clickhouseDS is the Grafana ClickHouse data source plugin's type.
const clickhouseDS = "grafana-clickhouse-datasource"

type dsRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// TestDashboards parses every dashboard of deploy/grafana/dashboards, checks
// that every panel and target uses the dashboard's data source variable
// (Prometheus or ClickHouse), that every PromQL expression parses and names
// exported metrics, and that every ClickHouse target has SQL (which
// audit/chstore's TestGrafanaClickHouseQueries runs against the real
// server); and that the chart's copy is identical.
func TestDashboards(t *testing.T) {
	files, _ := filepath.Glob(repo(t, "deploy", "grafana", "dashboards", "*.json"))
	if len(files) == 0 {
		t.Fatal("no dashboards in deploy/grafana/dashboards")
	}
	uids := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		var d dashboard
		if err := dec.Decode(&d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if d.UID == "" || d.Title == "" || uids[d.UID] {
			t.Errorf("%s: uid %q title %q: both required, uid unique", f, d.UID, d.Title)
		}
		uids[d.UID] = true
		dsType := ""
		for _, v := range d.Templating.List {
			if v.Name == "datasource" && v.Type == "datasource" && (v.Query == "prometheus" || v.Query == clickhouseDS) {
				dsType = v.Query
			}
		}
		if dsType == "" {
			t.Errorf("%s: no datasource variable of type prometheus or %s", f, clickhouseDS)
		}
		var exprs int
		var walk func(ps []panel)
		walk = func(ps []panel) {
			for _, p := range ps {
				if p.Type == "row" {
					walk(p.Panels)
					continue
				}
				where := filepath.Base(f) + ": " + p.Title
				if p.Datasource == nil || p.Datasource.Type != dsType || p.Datasource.UID != "${datasource}" {
					t.Errorf("%s: datasource %+v, want %s ${datasource}", where, p.Datasource, dsType)
				}
				if len(p.Targets) == 0 {
					t.Errorf("%s: no targets", where)
				}
				for _, tg := range p.Targets {
					if tg.Datasource != nil && (tg.Datasource.Type != dsType || tg.Datasource.UID != "${datasource}") {
						t.Errorf("%s %s: datasource %+v", where, tg.RefID, tg.Datasource)
					}
					exprs++
					if dsType == clickhouseDS {
						if tg.RawSQL == "" {
							t.Errorf("%s %s: no rawSql", where, tg.RefID)
						}
						continue
					}
					checkPromQL(t, where+" "+tg.RefID, grafanaVars.Replace(tg.Expr), nil)
				}
			}
		}
		walk(d.Panels)
		if exprs == 0 {
			t.Errorf("%s: no expressions", f)
		}
		copyB, err := os.ReadFile(repo(t, "deploy", "helm", "hookrelay", "dashboards", filepath.Base(f)))
		if err != nil || !bytes.Equal(b, copyB) {
			t.Errorf("deploy/helm/hookrelay/dashboards/%s differs from deploy/grafana/dashboards (copy it): %v", filepath.Base(f), err)
		}
	}
	chartCopies, _ := filepath.Glob(repo(t, "deploy", "helm", "hookrelay", "dashboards", "*.json"))
	if len(chartCopies) != len(files) {
		t.Errorf("the chart has %d dashboards, deploy/grafana %d", len(chartCopies), len(files))
	}
}
