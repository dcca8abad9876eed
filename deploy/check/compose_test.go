package check

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

// loadCompose loads deploy/compose/compose.yaml the way `docker compose`
// does (interpolation, normalization, consistency checks, the schema), with
// the given profiles active.
func loadCompose(t *testing.T, profiles ...string) *types.Project {
	t.Helper()
	opts, err := cli.NewProjectOptions([]string{repo(t, "deploy", "compose", "compose.yaml")},
		cli.WithWorkingDirectory(repo(t, "deploy", "compose")),
		cli.WithEnv([]string{}), // the defaults in the file, not this machine's environment
		cli.WithProfiles(profiles),
		cli.WithConsistency(true),
		cli.WithResolvedPaths(true),
	)
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("compose.yaml does not load: %v", err)
	}
	return p
}

func TestCompose(t *testing.T) {
	p := loadCompose(t)
	want := []string{"kafka-1", "kafka-2", "kafka-3", "clickhouse", "hookrelay-ingest", "hookrelay-sink",
		"hookrelay-api", "receiver", "otel-collector", "prometheus", "grafana"}
	if got := p.ServiceNames(); !sameSet(got, want) {
		t.Fatalf("services without a profile = %v, want %v", got, want)
	}
	if len(p.DisabledServices) != 0 {
		t.Errorf("services behind a profile: %v; every role group runs by default", keys(p.DisabledServices))
	}
	// Every service with a shell-capable image has a health check; the two
	// without say why in compose.yaml.
	noHealth := map[string]bool{"hookrelay-ingest": true, "hookrelay-sink": true, "hookrelay-api": true, "otel-collector": true}
	for name, s := range p.Services {
		if s.Image == "" || !imagePinned(s.Image) {
			t.Errorf("%s: image %q is not pinned", name, s.Image)
		}
		hasHealth := s.HealthCheck != nil && !s.HealthCheck.Disable && len(s.HealthCheck.Test) > 0
		if hasHealth == noHealth[name] {
			t.Errorf("%s: healthcheck present = %v, want %v", name, hasHealth, !noHealth[name])
		}
		for dep, d := range s.DependsOn {
			target, ok := p.Services[dep]
			if !ok {
				t.Errorf("%s depends on unknown service %s", name, dep)
				continue
			}
			want := types.ServiceConditionHealthy
			if target.HealthCheck == nil {
				want = types.ServiceConditionStarted
			}
			if d.Condition != want {
				t.Errorf("%s depends on %s with condition %q, want %q", name, dep, d.Condition, want)
			}
		}
	}

	// Kafka: three KRaft nodes, one quorum, replication 3, min ISR 2.
	for _, n := range []string{"kafka-1", "kafka-2", "kafka-3"} {
		s := p.Services[n]
		if !strings.HasPrefix(s.Image, "apache/kafka:4.") {
			t.Errorf("%s: image %s, want apache/kafka 4.x", n, s.Image)
		}
		env := s.Environment
		for k, v := range map[string]string{
			"KAFKA_PROCESS_ROLES": "broker,controller", "KAFKA_DEFAULT_REPLICATION_FACTOR": "3",
			"KAFKA_MIN_INSYNC_REPLICAS": "2", "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "2",
			"KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "3", "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "3",
			"KAFKA_CONTROLLER_QUORUM_VOTERS": "1@kafka-1:9093,2@kafka-2:9093,3@kafka-3:9093",
			"KAFKA_NODE_ID":                  n[len(n)-1:],
		} {
			if got := env[k]; got == nil || *got != v {
				t.Errorf("%s: %s = %v, want %s", n, k, deref(got), v)
			}
		}
		if len(s.DependsOn) > 0 {
			t.Errorf("%s depends on %v: the quorum nodes must start together", n, s.DependsOn)
		}
	}
	if img := p.Services["clickhouse"].Image; !strings.HasPrefix(img, "clickhouse/clickhouse-server:25.") {
		t.Errorf("clickhouse image %s, want clickhouse/clickhouse-server 25.x", img)
	}

	// hookrelay role groups: the roles, the replicated topic layout, and
	// start-up after every broker is healthy.
	roles := map[string]string{"hookrelay-ingest": "fanout,dispatch,retry", "hookrelay-sink": "audit", "hookrelay-api": "api"}
	for name, r := range roles {
		s := p.Services[name]
		env := s.Environment
		for k, v := range map[string]string{
			"HOOKRELAY_ROLES": r, "HOOKRELAY_REPLICATION_FACTOR": "3", "HOOKRELAY_MIN_INSYNC_REPLICAS": "2",
			"HOOKRELAY_BROKERS": "kafka-1:9092,kafka-2:9092,kafka-3:9092", "HOOKRELAY_HTTP_ADDR": "0.0.0.0:8080",
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel-collector:4318",
			// The settings users tune, at hookrelay's defaults (README.md's table).
			"HOOKRELAY_GROUP_SESSION_TIMEOUT": readmeDefault(t, "HOOKRELAY_GROUP_SESSION_TIMEOUT"),
			"HOOKRELAY_DISABLE_AFTER":         readmeDefault(t, "HOOKRELAY_DISABLE_AFTER"),
			"HOOKRELAY_FAILING_NOTIFY_AT":     readmeDefault(t, "HOOKRELAY_FAILING_NOTIFY_AT"),
			"HOOKRELAY_AUDIT_INTERRUPT_GRACE": readmeDefault(t, "HOOKRELAY_AUDIT_INTERRUPT_GRACE"),
		} {
			if got := env[k]; got == nil || *got != v {
				t.Errorf("%s: %s = %v, want %s", name, k, deref(got), v)
			}
		}
		for _, b := range []string{"kafka-1", "kafka-2", "kafka-3"} {
			if s.DependsOn[b].Condition != types.ServiceConditionHealthy {
				t.Errorf("%s does not wait for %s to be healthy", name, b)
			}
		}
		if s.Build == nil || s.Build.Dockerfile != "deploy/docker/Dockerfile" {
			t.Errorf("%s is not built from deploy/docker/Dockerfile: %+v", name, s.Build)
		}
	}
	if p.Services["hookrelay-sink"].DependsOn["clickhouse"].Condition != types.ServiceConditionHealthy {
		t.Error("hookrelay-sink does not wait for ClickHouse to be healthy (it applies the migrations)")
	}
	// The SSRF allow-list opens the receivers network only, and the backend
	// (Kafka, ClickHouse) is not on it.
	if got := deref(p.Services["hookrelay-ingest"].Environment["HOOKRELAY_ALLOW_NETWORKS"]); got != "172.29.0.0/24" {
		t.Errorf("HOOKRELAY_ALLOW_NETWORKS = %q, want the receivers subnet 172.29.0.0/24", got)
	}
	for _, n := range []string{"kafka-1", "clickhouse"} {
		if _, ok := p.Services[n].Networks["receivers"]; ok {
			t.Errorf("%s is on the receivers network, which the SSRF allow-list opens", n)
		}
	}
	// Grafana provisions the dashboards of deploy/grafana.
	var mounted bool
	for _, v := range p.Services["grafana"].Volumes {
		mounted = mounted || v.Source == repo(t, "deploy", "grafana", "dashboards")
	}
	if !mounted {
		t.Error("grafana does not mount deploy/grafana/dashboards")
	}
}

// TestComposeAPI: the api group runs by default, listens off loopback on
// the published port, waits for the brokers and ClickHouse, and has no API
// key in its environment (keys are created with `hookrelay apikeys create`).
func TestComposeAPI(t *testing.T) {
	p := loadCompose(t)
	s, ok := p.Services["hookrelay-api"]
	if !ok {
		t.Fatal("hookrelay-api is not a default service")
	}
	if got := deref(s.Environment["HOOKRELAY_API_ADDR"]); got != "0.0.0.0:8088" {
		t.Errorf("hookrelay-api: HOOKRELAY_API_ADDR = %q, want 0.0.0.0:8088 (the default is loopback, unreachable from outside the container)", got)
	}
	var published bool
	for _, port := range s.Ports {
		published = published || port.Target == 8088 && port.Published != ""
	}
	if !published {
		t.Errorf("hookrelay-api does not publish the API port 8088: %+v", s.Ports)
	}
	if s.DependsOn["clickhouse"].Condition != types.ServiceConditionHealthy {
		t.Error("hookrelay-api does not wait for ClickHouse to be healthy (it reads the delivery log)")
	}
	for name, svc := range p.Services {
		for k := range svc.Environment {
			if strings.Contains(k, "API_KEY") || strings.Contains(k, "ADMIN_KEY") {
				t.Errorf("%s: %s: API keys are created with `hookrelay apikeys create`, not passed in the environment", name, k)
			}
		}
	}
	// The first key is created with a one-off container of this service
	// (the command documented in compose.yaml): it needs the image's
	// entrypoint to be hookrelay.
	if !strings.Contains(readFile(t, "deploy", "compose", "compose.yaml"), "run --rm hookrelay-api apikeys create --admin") {
		t.Error("compose.yaml does not document creating the first admin key (run --rm hookrelay-api apikeys create --admin)")
	}
	if ep := readFile(t, "deploy", "docker", "Dockerfile"); !strings.Contains(ep, `ENTRYPOINT ["/hookrelay"]`) {
		t.Error(`the image's entrypoint is not ["/hookrelay"]: the documented "run --rm hookrelay-api apikeys …" would not run hookrelay`)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<unset>"
	}
	return *s
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
