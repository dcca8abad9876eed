package check

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestChartREADMEDocumentsEveryValue: every leaf of values.yaml is named in
// the chart's README, as `a.b.c`, or as `a.b.c`'s sibling shorthand
// "`a.b.x`, `.c`" in one row. Role-group settings are documented once, by
// their leaf name.
func TestChartREADMEDocumentsEveryValue(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := strings.Split(string(readme), "\n")
	var paths []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			p := prefix + k
			if sub, ok := v.(map[string]any); ok && len(sub) > 0 && !freeForm[p] && !strings.HasSuffix(p, ".resources") {
				walk(p+".", sub)
				continue
			}
			paths = append(paths, p)
		}
	}
	walk("", values)
	sort.Strings(paths)
	for _, p := range paths {
		if strings.HasPrefix(p, "roleGroups.") {
			leaf := p[strings.LastIndex(p, ".")+1:]
			if !strings.Contains(string(readme), "| `"+leaf+"` |") {
				t.Errorf("README.md does not document the role-group setting %q (%s)", leaf, p)
			}
			continue
		}
		if !documented(rows, p) {
			t.Errorf("README.md does not document the value %s", p)
		}
	}
}

// freeForm values are maps passed through as they are (documented as one).
var freeForm = map[string]bool{
	"podSecurityContext": true, "securityContext": true, "otelCollector.exporters": true,
	"otelCollector.resources": true, "grafana.dashboards.labels": true, "grafana.dashboards.annotations": true,
	"podAnnotations": true, "podLabels": true, "nodeSelector": true, "affinity": true,
	"probes.liveness": true, "probes.readiness": true, "probes.startup": true,
}

func documented(rows []string, p string) bool {
	dot := strings.LastIndex(p, ".")
	parent, leaf := "", p
	if dot >= 0 {
		parent, leaf = p[:dot+1], p[dot+1:]
	}
	for _, r := range rows {
		if !strings.HasPrefix(r, "| ") {
			continue
		}
		if strings.Contains(r, "`"+p+"`") {
			return true
		}
		// "`serviceAccount.create`, `.name`" and "`nameOverride`, `fullnameOverride`".
		if parent != "" && strings.Contains(r, "`"+parent) && strings.Contains(r, "`."+leaf+"`") {
			return true
		}
	}
	return false
}
