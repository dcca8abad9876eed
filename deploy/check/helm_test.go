package check

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// kubeVersion is passed to helm: a helm built with `go install` has no
// cluster version stamped in and would assume v1.20, below the chart's
// kubeVersion.
const kubeVersion = "1.31.0"

// helmBin is the pinned helm that `make deploy-check` installs ($HELM).
func helmBin(t *testing.T) string {
	t.Helper()
	h := os.Getenv("HELM")
	if h == "" {
		h = repo(t, ".local", "bin", "helm")
	}
	if _, err := os.Stat(h); err != nil {
		t.Fatalf("helm not found at %s (run `make deploy-check`, which installs it, or set HELM): %v", h, err)
	}
	return h
}

func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helmBin(t), args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

var chartDir = filepath.Join("..", "helm", "hookrelay")

// render runs helm lint --strict and helm template with one values file and
// returns the rendered documents.
func render(t *testing.T, values string, set ...string) [][]byte {
	t.Helper()
	args := []string{"--kube-version", kubeVersion, "-f", values}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	if out, err := helm(t, append([]string{"lint", "--strict", chartDir}, args...)...); err != nil {
		t.Fatalf("helm lint --strict -f %s: %v\n%s", values, err, out)
	}
	out, err := helm(t, append([]string{"template", "rel", chartDir, "--namespace", "hooks"}, args...)...)
	if err != nil {
		t.Fatalf("helm template -f %s: %v\n%s", values, err, out)
	}
	var docs [][]byte
	r := utilyaml.NewYAMLReader(bufioReader(out))
	for {
		d, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("split rendered YAML: %v", err)
		}
		if len(bytes.TrimSpace(stripComments(d))) > 0 {
			docs = append(docs, d)
		}
	}
	return docs
}

// manifests is a render decoded: typed objects by kind/name, and the
// Prometheus Operator objects as unstructured.
type manifests struct {
	sts      map[string]*appsv1.StatefulSet
	deploy   map[string]*appsv1.Deployment
	svc      map[string]*corev1.Service
	secret   map[string]*corev1.Secret
	cm       map[string]*corev1.ConfigMap
	pdb      map[string]*policyv1.PodDisruptionBudget
	netpol   map[string]*networkingv1.NetworkPolicy
	sa       map[string]*corev1.ServiceAccount
	monitors []*unstructured.Unstructured
	rules    []*unstructured.Unstructured
}

// decode decodes every document strictly: an unknown or duplicate field, a
// wrong type, or a kind the chart is not expected to render fails the test.
func decode(t *testing.T, docs [][]byte) *manifests {
	t.Helper()
	m := &manifests{sts: map[string]*appsv1.StatefulSet{}, deploy: map[string]*appsv1.Deployment{},
		svc: map[string]*corev1.Service{}, secret: map[string]*corev1.Secret{}, cm: map[string]*corev1.ConfigMap{},
		pdb: map[string]*policyv1.PodDisruptionBudget{}, netpol: map[string]*networkingv1.NetworkPolicy{},
		sa: map[string]*corev1.ServiceAccount{}}
	for _, d := range docs {
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(d, &meta); err != nil {
			t.Fatalf("document does not parse: %v\n%s", err, d)
		}
		if meta.Metadata.Namespace != "hooks" {
			t.Errorf("%s %s: namespace %q, want the release namespace", meta.Kind, meta.Metadata.Name, meta.Metadata.Namespace)
		}
		strict := func(into any) {
			if err := yaml.UnmarshalStrict(d, into); err != nil {
				t.Errorf("%s %s does not decode strictly as %s: %v", meta.Kind, meta.Metadata.Name, meta.APIVersion, err)
			}
		}
		key := meta.APIVersion + "/" + meta.Kind
		switch key {
		case "apps/v1/StatefulSet":
			o := &appsv1.StatefulSet{}
			strict(o)
			m.sts[meta.Metadata.Name] = o
		case "apps/v1/Deployment":
			o := &appsv1.Deployment{}
			strict(o)
			m.deploy[meta.Metadata.Name] = o
		case "v1/Service":
			o := &corev1.Service{}
			strict(o)
			m.svc[meta.Metadata.Name] = o
		case "v1/Secret":
			o := &corev1.Secret{}
			strict(o)
			m.secret[meta.Metadata.Name] = o
		case "v1/ConfigMap":
			o := &corev1.ConfigMap{}
			strict(o)
			m.cm[meta.Metadata.Name] = o
		case "v1/ServiceAccount":
			o := &corev1.ServiceAccount{}
			strict(o)
			m.sa[meta.Metadata.Name] = o
		case "policy/v1/PodDisruptionBudget":
			o := &policyv1.PodDisruptionBudget{}
			strict(o)
			m.pdb[meta.Metadata.Name] = o
		case "networking.k8s.io/v1/NetworkPolicy":
			o := &networkingv1.NetworkPolicy{}
			strict(o)
			m.netpol[meta.Metadata.Name] = o
		case "monitoring.coreos.com/v1/ServiceMonitor", "monitoring.coreos.com/v1/PrometheusRule":
			o := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(d, &o.Object); err != nil {
				t.Fatalf("%s: %v", key, err)
			}
			if meta.Kind == "ServiceMonitor" {
				m.monitors = append(m.monitors, o)
			} else {
				m.rules = append(m.rules, o)
			}
		default:
			t.Errorf("unexpected kind %s (%s): add it to the strict decoder", key, meta.Metadata.Name)
		}
	}
	return m
}

func ciValues(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chartDir, "ci", "*.yaml"))
	if err != nil || len(files) < 3 {
		t.Fatalf("ci value sets: %v %v, want at least 3", files, err)
	}
	return files
}

// TestChartValueSets renders every ci/*.yaml and checks what must hold for
// any values: identity, probes, security, PDBs, Services, secrets.
func TestChartValueSets(t *testing.T) {
	for _, values := range ciValues(t) {
		t.Run(filepath.Base(values), func(t *testing.T) {
			m := decode(t, render(t, values))
			if len(m.sts) == 0 {
				t.Fatal("no StatefulSet rendered")
			}
			for name, s := range m.sts {
				checkStatefulSet(t, m, name, s)
			}
			for _, mon := range m.monitors {
				checkServiceMonitor(t, m, mon)
			}
			for _, r := range m.rules {
				checkPrometheusRule(t, m, r)
			}
		})
	}
}

func checkStatefulSet(t *testing.T, m *manifests, name string, s *appsv1.StatefulSet) {
	t.Helper()
	pod := s.Spec.Template
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("%s: %d containers", name, len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		if _, dup := env[e.Name]; dup && e.Name != "HOOKRELAY_ENDPOINT_BACKLOG" {
			t.Errorf("%s: env %s set twice", name, e.Name)
		}
		env[e.Name] = e
	}
	// Static membership: the instance ID is the pod name (stable, unique).
	if id := env["HOOKRELAY_INSTANCE_ID"]; id.ValueFrom == nil || id.ValueFrom.FieldRef == nil || id.ValueFrom.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("%s: HOOKRELAY_INSTANCE_ID is not the pod name via the downward API: %+v", name, id)
	}
	for _, want := range []string{"HOOKRELAY_ROLES", "HOOKRELAY_BROKERS", "HOOKRELAY_HTTP_ADDR", "HOOKRELAY_TOPIC_PREFIX",
		"HOOKRELAY_PARTITIONS", "HOOKRELAY_REPLICATION_FACTOR", "HOOKRELAY_MIN_INSYNC_REPLICAS"} {
		if _, ok := env[want]; !ok {
			t.Errorf("%s: env %s missing", name, want)
		}
	}
	if env["HOOKRELAY_HTTP_ADDR"].Value != "0.0.0.0:8080" {
		t.Errorf("%s: HOOKRELAY_HTTP_ADDR = %q: probes and scrapes need a non-loopback address", name, env["HOOKRELAY_HTTP_ADDR"].Value)
	}
	roles := strings.Split(env["HOOKRELAY_ROLES"].Value, ",")
	_, hasCH := env["HOOKRELAY_CLICKHOUSE"]
	needCH := contains(roles, "audit") || contains(roles, "api")
	if hasCH != needCH {
		t.Errorf("%s (roles %v): HOOKRELAY_CLICKHOUSE set = %v, want %v (only groups that use ClickHouse get its credentials)", name, roles, hasCH, needCH)
	}
	// Credentials come from Secrets, never as literal values. API keys are
	// not credentials of the pods at all: they are created with `hookrelay
	// apikeys create` and kept hashed in Kafka.
	for k := range env {
		if strings.Contains(k, "API_KEY") || strings.Contains(k, "ADMIN_KEY") {
			t.Errorf("%s: env %s: no API key is passed to the pods", name, k)
		}
	}
	if _, ok := env["HOOKRELAY_CLICKHOUSE_PASSWORD"]; ok && !hasCH {
		t.Errorf("%s: HOOKRELAY_CLICKHOUSE_PASSWORD without HOOKRELAY_CLICKHOUSE", name)
	}
	for _, k := range []string{"HOOKRELAY_CLICKHOUSE", "HOOKRELAY_CLICKHOUSE_PASSWORD", "HOOKRELAY_KAFKA_SASL_PASSWORD"} {
		e, ok := env[k]
		if !ok {
			continue
		}
		if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			t.Errorf("%s: %s is not a secretKeyRef", name, k)
			continue
		}
		ref := e.ValueFrom.SecretKeyRef
		if sec, ok := m.secret[ref.Name]; ok {
			if _, ok := sec.Data[ref.Key]; !ok {
				t.Errorf("%s: %s refers to key %q missing from Secret %s", name, k, ref.Key, ref.Name)
			}
		} else if ref.Name == "rel-hookrelay" {
			t.Errorf("%s: %s refers to the chart's Secret, which was not rendered", name, k)
		}
	}
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" || p.HTTPGet.Port.String() != "http" {
		t.Errorf("%s: readiness probe is not GET /readyz on http: %+v", name, p)
	}
	if p := c.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" {
		t.Errorf("%s: liveness probe is not GET /healthz: %+v", name, p)
	}
	if !imagePinned(c.Image) {
		t.Errorf("%s: image %s is not pinned", name, c.Image)
	}
	if sc := pod.Spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Errorf("%s: pod does not require runAsNonRoot", name)
	}
	if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("%s: container may escalate or write its root filesystem", name)
	}
	if c.Resources.Requests.Cpu().IsZero() && c.Resources.Requests.Memory().IsZero() {
		t.Errorf("%s: no resource requests", name)
	}
	// The governing Service exists, is headless and selects these pods.
	svc, ok := m.svc[s.Spec.ServiceName]
	if !ok {
		t.Errorf("%s: governing Service %s not rendered", name, s.Spec.ServiceName)
	} else {
		if svc.Spec.ClusterIP != corev1.ClusterIPNone {
			t.Errorf("%s: Service %s is not headless", name, svc.Name)
		}
		if !selects(svc.Spec.Selector, pod.Labels) {
			t.Errorf("%s: Service %s selector %v does not select pod labels %v", name, svc.Name, svc.Spec.Selector, pod.Labels)
		}
	}
	if !selects(s.Spec.Selector.MatchLabels, pod.Labels) {
		t.Errorf("%s: selector does not match its own pod template", name)
	}
	// A PDB for every group with more than one pod, selecting exactly it.
	pdb, ok := m.pdb[name]
	if replicas := *s.Spec.Replicas; replicas > 1 && !ok {
		t.Errorf("%s: %d replicas and no PodDisruptionBudget", name, replicas)
	} else if ok && !selects(pdb.Spec.Selector.MatchLabels, pod.Labels) {
		t.Errorf("%s: PDB selector %v does not select the pods", name, pdb.Spec.Selector.MatchLabels)
	}
	if contains(roles, "api") {
		api, ok := m.svc[name+"-api"]
		if !ok || len(api.Spec.Ports) != 1 || api.Spec.Ports[0].TargetPort.String() != "api" || !selects(api.Spec.Selector, pod.Labels) {
			t.Errorf("%s runs the api role without a Service for it: %+v", name, api)
		}
		// The Service's target port is the container's API port, which is
		// where HOOKRELAY_API_ADDR listens, off loopback.
		var port int32
		for _, p := range c.Ports {
			if p.Name == "api" {
				port = p.ContainerPort
			}
		}
		if port == 0 || env["HOOKRELAY_API_ADDR"].Value != fmt.Sprintf("0.0.0.0:%d", port) {
			t.Errorf("%s: HOOKRELAY_API_ADDR = %q, container port api = %d: the API must listen on 0.0.0.0 at the api port",
				name, env["HOOKRELAY_API_ADDR"].Value, port)
		}
		// Ready once Kafka and the endpoints view are (/readyz of the ops
		// port, checked above), not when ClickHouse is: the API answers
		// 503 on delivery-log reads meanwhile and serves everything else.
		if p := c.ReadinessProbe; p != nil && p.HTTPGet != nil && p.HTTPGet.Port.String() == "api" {
			t.Errorf("%s: readiness probe on the API port, want /readyz on the ops port", name)
		}
		// With a network policy, the API port is open to its clients.
		for _, np := range m.netpol {
			var open bool
			for _, in := range np.Spec.Ingress {
				for _, p := range in.Ports {
					open = open || p.Port != nil && p.Port.String() == "api"
				}
			}
			if !open {
				t.Errorf("%s runs the api role but NetworkPolicy %s opens no ingress to its api port", name, np.Name)
			}
		}
	} else if _, ok := env["HOOKRELAY_API_ADDR"]; ok {
		t.Errorf("%s (roles %v): HOOKRELAY_API_ADDR set without the api role", name, roles)
	}
}

func checkServiceMonitor(t *testing.T, m *manifests, mon *unstructured.Unstructured) {
	t.Helper()
	sel, found, err := unstructured.NestedStringMap(mon.Object, "spec", "selector", "matchLabels")
	if err != nil || !found || len(sel) == 0 {
		t.Fatalf("ServiceMonitor %s: spec.selector.matchLabels missing: %v", mon.GetName(), err)
	}
	eps, found, err := unstructured.NestedSlice(mon.Object, "spec", "endpoints")
	if err != nil || !found || len(eps) == 0 {
		t.Fatalf("ServiceMonitor %s: spec.endpoints missing: %v", mon.GetName(), err)
	}
	for _, e := range eps {
		e := e.(map[string]any)
		if e["port"] != "http" || e["path"] != "/metrics" {
			t.Errorf("ServiceMonitor %s: endpoint %v, want port http path /metrics", mon.GetName(), e)
		}
		for _, k := range []string{"interval", "scrapeTimeout"} {
			if _, err := model.ParseDuration(fmt.Sprint(e[k])); err != nil {
				t.Errorf("ServiceMonitor %s: %s %v: %v", mon.GetName(), k, e[k], err)
			}
		}
	}
	// It selects the governing Service of every group and nothing else.
	for name, s := range m.sts {
		if svc := m.svc[s.Spec.ServiceName]; svc == nil || !selects(sel, svc.Labels) {
			t.Errorf("ServiceMonitor %s does not select the Service of %s", mon.GetName(), name)
		}
	}
	for name, svc := range m.svc {
		var http bool
		for _, p := range svc.Spec.Ports {
			http = http || p.Name == "http" && p.TargetPort.String() == "http"
		}
		if selects(sel, svc.Labels) && !http {
			t.Errorf("ServiceMonitor %s selects Service %s, which has no http (/metrics) port", mon.GetName(), name)
		}
	}
}

// wantAlerts are the alerts issue 13 asks for; docs/OPERATIONS.md has a
// runbook section for each.
var wantAlerts = []string{"HookrelayConsumerLagGrowing", "HookrelayDLQRate", "HookrelayEndpointDisabled",
	"HookrelaySinkLag", "HookrelayNoReadyReplicas", "HookrelayErrorBudgetBurn"}

func checkPrometheusRule(t *testing.T, m *manifests, r *unstructured.Unstructured) {
	t.Helper()
	groups, found, err := unstructured.NestedSlice(r.Object, "spec", "groups")
	if err != nil || !found || len(groups) == 0 {
		t.Fatalf("PrometheusRule %s: spec.groups missing: %v", r.GetName(), err)
	}
	records := map[string]bool{}
	var rules []map[string]any
	for _, g := range groups {
		g := g.(map[string]any)
		if name, _ := g["name"].(string); name == "" {
			t.Errorf("PrometheusRule %s: a group has no name", r.GetName())
		}
		rs, _ := g["rules"].([]any)
		if len(rs) == 0 {
			t.Errorf("PrometheusRule %s: group %v has no rules", r.GetName(), g["name"])
		}
		for _, rule := range rs {
			rule := rule.(map[string]any)
			if rec, ok := rule["record"].(string); ok {
				records[rec] = true
			}
			rules = append(rules, rule)
		}
	}
	ops := readFile(t, "docs", "OPERATIONS.md")
	seen := map[string]bool{}
	for _, rule := range rules {
		alert, _ := rule["alert"].(string)
		rec, _ := rule["record"].(string)
		where := alert + rec
		if (alert == "") == (rec == "") {
			t.Errorf("rule %v: exactly one of alert and record is required", rule)
			continue
		}
		expr, _ := rule["expr"].(string)
		if expr == "" {
			t.Errorf("%s: no expr", where)
			continue
		}
		names := checkPromQL(t, where, expr, records)
		for _, n := range names {
			if strings.HasPrefix(n, "hookrelay_") && !strings.Contains(expr, `namespace="hooks"`) {
				t.Errorf("%s: selects %s without the release namespace", where, n)
			}
		}
		if alert == "" {
			continue
		}
		seen[alert] = true
		if f, ok := rule["for"].(string); ok {
			if _, err := model.ParseDuration(f); err != nil {
				t.Errorf("%s: for %q: %v", alert, f, err)
			}
		}
		labels, _ := rule["labels"].(map[string]any)
		switch labels["severity"] {
		case "critical", "warning", "info":
		default:
			t.Errorf("%s: severity %v, want critical, warning or info", alert, labels["severity"])
		}
		ann, _ := rule["annotations"].(map[string]any)
		for _, k := range []string{"summary", "description", "runbook_url"} {
			if s, _ := ann[k].(string); s == "" {
				t.Errorf("%s: annotation %s missing", alert, k)
			}
		}
		anchor := strings.ToLower(alert)
		if url, _ := ann["runbook_url"].(string); !strings.HasSuffix(url, "#"+anchor) {
			t.Errorf("%s: runbook_url %q does not end in #%s", alert, url, anchor)
		}
		if !strings.Contains(ops, "\n### "+alert+"\n") {
			t.Errorf("%s: docs/OPERATIONS.md has no runbook section \"### %s\"", alert, alert)
		}
	}
	for _, a := range wantAlerts {
		if !seen[a] {
			t.Errorf("PrometheusRule %s: alert %s missing", r.GetName(), a)
		}
	}
}

// TestChartDefaults pins what the defaults render: the three groups (the
// api one with its Service), hookrelay's own defaults for the settings left
// empty, no optional objects.
func TestChartDefaults(t *testing.T) {
	m := decode(t, render(t, filepath.Join(chartDir, "ci", "default-values.yaml")))
	if got := keys(m.sts); !sameSet(got, []string{"rel-hookrelay-ingest", "rel-hookrelay-sink", "rel-hookrelay-api"}) {
		t.Errorf("StatefulSets = %v, want ingest, sink and api", got)
	}
	if len(m.monitors)+len(m.rules)+len(m.netpol)+len(m.deploy) != 0 {
		t.Error("optional objects (ServiceMonitor, PrometheusRule, NetworkPolicy, collector) rendered by default")
	}
	if svc, ok := m.svc["rel-hookrelay-api-api"]; !ok || svc.Spec.Type != corev1.ServiceTypeClusterIP || svc.Spec.Ports[0].Port != 8088 {
		t.Errorf("API Service rel-hookrelay-api-api: %+v, want ClusterIP on 8088", svc)
	}
	envOf := func(sts string) map[string]string {
		s, ok := m.sts[sts]
		if !ok {
			t.Fatalf("StatefulSet %s not rendered", sts)
		}
		env := map[string]string{}
		for _, e := range s.Spec.Template.Spec.Containers[0].Env {
			env[e.Name] = e.Value
		}
		return env
	}
	env := envOf("rel-hookrelay-ingest")
	if env["HOOKRELAY_ROLES"] != "fanout,dispatch,retry" || env["HOOKRELAY_REPLICATION_FACTOR"] != "3" || env["HOOKRELAY_MIN_INSYNC_REPLICAS"] != "2" {
		t.Errorf("ingest env = %v, want roles fanout,dispatch,retry on RF 3, min ISR 2", env)
	}
	// Empty settings are left to hookrelay; the notify fractions are always
	// set (an empty list means "only the first event") and default to
	// hookrelay's.
	for _, v := range []string{"HOOKRELAY_GROUP_SESSION_TIMEOUT", "HOOKRELAY_DISABLE_AFTER", "HOOKRELAY_AUDIT_INTERRUPT_GRACE"} {
		if got, ok := env[v]; ok {
			t.Errorf("ingest: %s = %q by default, want it unset (hookrelay's default, %s)", v, got, readmeDefault(t, v))
		}
	}
	if got, want := env["HOOKRELAY_FAILING_NOTIFY_AT"], readmeDefault(t, "HOOKRELAY_FAILING_NOTIFY_AT"); got != want {
		t.Errorf("ingest: HOOKRELAY_FAILING_NOTIFY_AT = %q, want hookrelay's default %q", got, want)
	}
	if api := envOf("rel-hookrelay-api"); api["HOOKRELAY_ROLES"] != "api" || api["HOOKRELAY_API_ADDR"] != "0.0.0.0:8088" {
		t.Errorf("api env = %v, want role api on 0.0.0.0:8088", api)
	}
	// The chart's Secret holds the ClickHouse DSN only: no API key.
	if sec, ok := m.secret["rel-hookrelay"]; !ok || len(sec.Data) != 1 || sec.Data["clickhouse-dsn"] == nil {
		t.Errorf("chart Secret = %v, want only clickhouse-dsn", sec)
	}
}

// TestChartFull checks the objects only the full value set renders.
func TestChartFull(t *testing.T) {
	m := decode(t, render(t, filepath.Join(chartDir, "ci", "full-values.yaml")))
	if len(m.monitors) != 1 || len(m.rules) != 1 || len(m.netpol) != 1 {
		t.Fatalf("ServiceMonitor, PrometheusRule, NetworkPolicy rendered %d, %d, %d; want 1 each", len(m.monitors), len(m.rules), len(m.netpol))
	}
	if _, ok := m.sts["rel-hookrelay-api"]; !ok {
		t.Error("api group enabled but no StatefulSet")
	}
	if svc := m.svc["rel-hookrelay-api-api"]; svc == nil || svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.Spec.Ports[0].Port != 443 {
		t.Errorf("API Service = %+v, want api.service type LoadBalancer on 443", svc)
	}
	// Every setting reaches every pod as its variable.
	for name, s := range m.sts {
		env := map[string]string{}
		for _, e := range s.Spec.Template.Spec.Containers[0].Env {
			env[e.Name] = e.Value
		}
		for k, v := range map[string]string{"HOOKRELAY_GROUP_SESSION_TIMEOUT": "20s", "HOOKRELAY_DISABLE_AFTER": "24h",
			"HOOKRELAY_FAILING_NOTIFY_AT": "0.25,0.5,0.75", "HOOKRELAY_AUDIT_INTERRUPT_GRACE": "5m",
			"HOOKRELAY_QUEUE_TTL": "72h", "HOOKRELAY_RETRY_SCHEDULE": "30s,2m,10m,1h,6h"} {
			if env[k] != v {
				t.Errorf("%s: %s = %q, want %q (from config.*)", name, k, env[k], v)
			}
		}
	}
	if _, ok := m.deploy["rel-hookrelay-otel-collector"]; !ok {
		t.Error("otelCollector enabled but no collector Deployment")
	}
	// Every credential came from an existingSecret: the chart stores none.
	if len(m.secret) != 0 {
		t.Errorf("chart rendered Secrets %v although every credential has an existingSecret", keys(m.secret))
	}
	var dashboards int
	for _, cm := range m.cm {
		if cm.Labels["grafana_dashboard"] == "1" {
			dashboards++
		}
	}
	if dashboards == 0 {
		t.Error("grafana.dashboards.enabled but no dashboard ConfigMap")
	}
	np := m.netpol["rel-hookrelay"]
	var kafkaPort bool
	for _, e := range np.Spec.Egress {
		for _, p := range e.Ports {
			kafkaPort = kafkaPort || p.Port.IntValue() == 9096
		}
	}
	if !kafkaPort {
		t.Error("NetworkPolicy does not allow egress to the Kafka port 9096")
	}
	// It applies to hookrelay's pods, not the collector's (whose OTLP port
	// it would close), and lets config.allowNetworks through.
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil {
		t.Fatal(err)
	}
	if !sel.Matches(labels.Set(m.sts["rel-hookrelay-ingest"].Spec.Template.Labels)) {
		t.Error("NetworkPolicy does not select the ingest pods")
	}
	if sel.Matches(labels.Set(m.deploy["rel-hookrelay-otel-collector"].Spec.Template.Labels)) {
		t.Error("NetworkPolicy selects the collector pods")
	}
	var allowed bool
	for _, e := range np.Spec.Egress {
		for _, to := range e.To {
			allowed = allowed || to.IPBlock != nil && to.IPBlock.CIDR == "10.20.0.0/16" && len(to.IPBlock.Except) == 0
		}
	}
	if !allowed {
		t.Error("NetworkPolicy has no egress to config.allowNetworks 10.20.0.0/16")
	}
}

// TestChartRejectsBrokenValues: every testdata/broken/*.yaml must fail both
// helm lint and helm template, with the message its first line names.
func TestChartRejectsBrokenValues(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "broken", "*.yaml"))
	if len(files) < 5 {
		t.Fatalf("%d broken value sets, want at least 5", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			first, _, _ := strings.Cut(string(b), "\n")
			want, ok := strings.CutPrefix(first, "# want: ")
			if !ok {
				t.Fatalf("first line %q is not \"# want: <message>\"", first)
			}
			// helm lint reports a template's fail() as INFO and passes
			// ("lint mode"); such sets say "# lint: info" on line 2, and
			// only helm template (and so install) must fail on them.
			lintInfo := strings.Contains(string(b), "\n# lint: info\n")
			for _, cmd := range [][]string{
				{"lint", "--strict", chartDir, "--kube-version", kubeVersion, "-f", f},
				{"template", "rel", chartDir, "--kube-version", kubeVersion, "-f", f},
			} {
				out, err := helm(t, cmd...)
				if err == nil && !(cmd[0] == "lint" && lintInfo) {
					t.Errorf("helm %s accepted %s:\n%s", cmd[0], f, out)
				}
				if !strings.Contains(out, want) {
					t.Errorf("helm %s output lacks %q:\n%s", cmd[0], want, out)
				}
			}
		})
	}
}

func selects(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func stripComments(d []byte) []byte {
	var out [][]byte
	for _, l := range bytes.Split(d, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(l), []byte("#")) {
			out = append(out, l)
		}
	}
	return bytes.Join(out, []byte("\n"))
}
