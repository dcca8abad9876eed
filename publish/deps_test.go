package publish_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependsOnlyOnClientLibraries pins the promise of the package doc: an
// upstream service importing publish gets franz-go, the CloudEvents SDK,
// the OpenTelemetry API and hookrelay's pipeline/events (with its header
// vocabulary), and nothing else of hookrelay: no ClickHouse, no OTel SDK
// or exporter, no HTTP sender, no pipeline machinery.
func TestDependsOnlyOnClientLibraries(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/hookrelay/hookrelay/publish").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	allowed := []string{
		"github.com/twmb/franz-go/", "github.com/klauspost/compress", "github.com/pierrec/lz4/", // franz-go
		"github.com/cloudevents/sdk-go/v2", "github.com/json-iterator/go", "github.com/modern-go/", // CloudEvents SDK
		"go.opentelemetry.io/otel/propagation", "go.opentelemetry.io/otel/trace", "go.opentelemetry.io/otel/baggage",
		"go.opentelemetry.io/otel/attribute", "go.opentelemetry.io/otel/codes", "go.opentelemetry.io/otel/semconv/",
		"go.opentelemetry.io/otel/internal/", "github.com/cespare/xxhash/v2", // OTel API
		"github.com/hookrelay/hookrelay/publish", "github.com/hookrelay/hookrelay/pipeline/events",
		"github.com/hookrelay/hookrelay/pipeline/delivery",
	}
	n := 0
	for _, dep := range strings.Fields(string(out)) {
		first, _, _ := strings.Cut(dep, "/")
		if !strings.Contains(first, ".") {
			continue // the standard library
		}
		n++
		ok := false
		for _, a := range allowed {
			ok = ok || strings.HasPrefix(dep, a)
		}
		if !ok {
			t.Errorf("publish depends on %s", dep)
		}
	}
	t.Logf("%d non-standard packages", n)
}
