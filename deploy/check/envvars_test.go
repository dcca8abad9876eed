package check

import (
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// configVars are the environment variables hookrelay reads: the settings
// table of cmd/hookrelay/config.go ({flag, env, default, help}).
func configVars(t *testing.T) []string {
	t.Helper()
	re := regexp.MustCompile(`\{"[a-z-]+", "(HOOKRELAY_[A-Z0-9_]+)"`)
	var vars []string
	for _, m := range re.FindAllStringSubmatch(readFile(t, "cmd", "hookrelay", "config.go"), -1) {
		vars = append(vars, m[1])
	}
	if len(vars) < 20 {
		t.Fatalf("found %d settings in cmd/hookrelay/config.go, want the whole table (did its shape change?)", len(vars))
	}
	sort.Strings(vars)
	return vars
}

// readmeDefault is the default README.md's configuration table gives name:
// the row "| `NAME` | `default` | …".
func readmeDefault(t *testing.T, name string) string {
	t.Helper()
	re := regexp.MustCompile("(?m)^\\| `" + regexp.QuoteMeta(name) + "` \\| `([^`]*)` \\|")
	m := re.FindStringSubmatch(readFile(t, "README.md"))
	if m == nil {
		t.Fatalf("README.md's configuration table has no row \"| `%s` | `default` |\"", name)
	}
	return m[1]
}

// TestChartSetsEveryVariable: every variable hookrelay reads is set by the
// chart when the value set asks for it (ci/full-values.yaml sets every
// value), so no setting is reachable only through extraEnv.
func TestChartSetsEveryVariable(t *testing.T) {
	m := decode(t, render(t, filepath.Join(chartDir, "ci", "full-values.yaml")))
	set := map[string]bool{}
	for _, s := range m.sts {
		for _, e := range s.Spec.Template.Spec.Containers[0].Env {
			set[e.Name] = true
		}
	}
	for _, v := range configVars(t) {
		if !set[v] {
			t.Errorf("no StatefulSet of ci/full-values.yaml sets %s (cmd/hookrelay/config.go): add a value for it", v)
		}
	}
	for v := range set {
		if strings.HasPrefix(v, "HOOKRELAY_") && !contains(configVars(t), v) {
			t.Errorf("the chart sets %s, which hookrelay does not read (cmd/hookrelay/config.go)", v)
		}
	}
}

// TestReadmeDocumentsEveryVariable: README.md's configuration table, the
// defaults the chart and Compose documentation point to, names every
// variable (the SASL trio as "…_USER", "…_PASSWORD").
func TestReadmeDocumentsEveryVariable(t *testing.T) {
	readme := readFile(t, "README.md")
	for _, v := range configVars(t) {
		short := "`…" + strings.TrimPrefix(v, "HOOKRELAY_KAFKA_SASL") + "`"
		if !strings.Contains(readme, "`"+v+"`") && !(strings.HasPrefix(v, "HOOKRELAY_KAFKA_SASL_") && strings.Contains(readme, short)) {
			t.Errorf("README.md does not document %s", v)
		}
	}
}
