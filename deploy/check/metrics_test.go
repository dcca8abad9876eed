package check

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
)

var (
	instrumentsOnce sync.Once
	instruments     map[string]bool
)

// sourceMetrics returns the Prometheus base names of hookrelay's OTel
// instruments, read from the main module's Go source ("hookrelay.attempts"
// → "hookrelay_attempts"), so an alert or panel that names a metric the code
// does not export fails here.
func sourceMetrics(t *testing.T) map[string]bool {
	t.Helper()
	instrumentsOnce.Do(func() {
		instruments = map[string]bool{}
		re := regexp.MustCompile(`(?:Counter|Gauge|Histogram)\(\s*"(hookrelay\.[a-z0-9_.]+)"`)
		for _, dir := range []string{"pipeline", "retrytiers", "audit"} {
			filepath.WalkDir(repo(t, dir), func(path string, d os.DirEntry, err error) error {
				if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
					return err
				}
				b, err := os.ReadFile(path)
				if err != nil {
					return err
				}
				for _, m := range re.FindAllStringSubmatch(string(b), -1) {
					instruments[strings.ReplaceAll(m[1], ".", "_")] = true
				}
				return nil
			})
		}
	})
	if len(instruments) < 10 {
		t.Fatalf("found %d instruments in the source; the pattern no longer matches how they are created", len(instruments))
	}
	return instruments
}

// exporterSuffixes are what the OTel Prometheus exporter appends: _total to
// counters, the unit (_seconds), and the histogram series.
var exporterSuffixes = []string{"", "_total", "_seconds", "_seconds_bucket", "_seconds_sum", "_seconds_count", "_bucket", "_sum", "_count"}

// externalMetrics are series hookrelay does not export but alerts use.
var externalMetrics = map[string]string{
	"kube_statefulset_status_replicas_ready": "kube-state-metrics",
	"kube_statefulset_replicas":              "kube-state-metrics",
}

// checkPromQL parses expr and reports every metric it selects that neither
// hookrelay's source, a recording rule in records, nor externalMetrics
// provides. It returns the metric names selected.
func checkPromQL(t *testing.T, where, expr string, records map[string]bool) []string {
	t.Helper()
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		t.Errorf("%s: PromQL does not parse: %v\n%s", where, err, expr)
		return nil
	}
	known := sourceMetrics(t)
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		names = append(names, name)
		if records[name] || externalMetrics[name] != "" {
			return nil
		}
		for _, s := range exporterSuffixes {
			if base, ok := strings.CutSuffix(name, s); ok && known[base] {
				return nil
			}
		}
		t.Errorf("%s: metric %q is not exported by hookrelay (instruments: pipeline/, retrytiers/, audit/)", where, name)
		return nil
	})
	return names
}

func TestSourceMetricsFound(t *testing.T) {
	for _, want := range []string{"hookrelay_attempts", "hookrelay_consumer_lag", "hookrelay_audit_sink_lag", "hookrelay_retry_relay_records"} {
		if !sourceMetrics(t)[want] {
			t.Errorf("instrument %s not found in the source", want)
		}
	}
}

// grafanaVars replaces Grafana's template variables with values PromQL
// accepts, so dashboard expressions can be parsed.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")
