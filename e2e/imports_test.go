package e2e

import (
	"os/exec"
	"strings"
	"testing"
)

// TestVocabularyImportsNoMachinery pins the package graph of
// docs/ARCHITECTURE.md: the vocabulary packages import no franz-go,
// ClickHouse or OpenTelemetry package (so naming an outcome or a tier never
// pulls in a client), and the HTTP edge imports no ClickHouse package.
func TestVocabularyImportsNoMachinery(t *testing.T) {
	machinery := []string{"github.com/twmb/franz-go", "github.com/ClickHouse/", "go.opentelemetry.io/"}
	cases := []struct {
		pkg       string
		forbidden []string
	}{
		{"github.com/hookrelay/hookrelay/audit", machinery},
		{"github.com/hookrelay/hookrelay/retrytiers", machinery},
		{"github.com/hookrelay/hookrelay/ratelimit", machinery},
		{"github.com/hookrelay/hookrelay/pipeline/operational", machinery},
		{"github.com/hookrelay/hookrelay/pipeline/webhook", []string{"github.com/ClickHouse/"}},
	}
	for _, c := range cases {
		out, err := exec.Command("go", "list", "-deps", c.pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", c.pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, f := range c.forbidden {
				if strings.HasPrefix(dep, f) {
					t.Errorf("%s imports %s (through its dependencies)", c.pkg, dep)
				}
			}
		}
	}
}
