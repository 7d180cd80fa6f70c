package deploytest

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

const chart = "deploy/helm/postbox"

// valueSets are the values files the chart is linted and rendered with.
var valueSets = []string{"testdata/values-existing-secret.yaml", "testdata/values-everything.yaml", "testdata/values-job-roles.yaml"}

func valuesPath(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestChartLints(t *testing.T) {
	helm := tool(t, "POSTBOX_HELM")
	for _, v := range valueSets {
		run(t, helm, "lint", "--strict", chart, "--values", valuesPath(t, v))
	}
}

// rendered is what helm template produced, decoded into the Kubernetes API types.
type rendered struct {
	secrets        []*corev1.Secret
	services       []*corev1.Service
	deployments    []*appsv1.Deployment
	pdbs           []*policyv1.PodDisruptionBudget
	jobs           []*batchv1.Job
	cronJobs       []*batchv1.CronJob
	serviceMonitor []*monitoringv1.ServiceMonitor
	netPolicies    []*networkingv1.NetworkPolicy
}

// decode decodes one rendered object strictly into its API type: a field the type does not have (a misspelt
// or misplaced key) or a value of the wrong type is an error. A kind the chart is not known to render is an error
// too, so every object is checked.
func (r *rendered) decode(doc []byte) error {
	var meta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(doc, &meta); err != nil {
		return err
	}
	strict := func(v any) error { return yaml.UnmarshalStrict(doc, v) }
	var err error
	switch meta.APIVersion + " " + meta.Kind {
	case "v1 Secret":
		r.secrets, err = appendDecoded(r.secrets, strict)
	case "v1 Service":
		r.services, err = appendDecoded(r.services, strict)
	case "apps/v1 Deployment":
		r.deployments, err = appendDecoded(r.deployments, strict)
	case "policy/v1 PodDisruptionBudget":
		r.pdbs, err = appendDecoded(r.pdbs, strict)
	case "batch/v1 Job":
		r.jobs, err = appendDecoded(r.jobs, strict)
	case "batch/v1 CronJob":
		r.cronJobs, err = appendDecoded(r.cronJobs, strict)
	case "monitoring.coreos.com/v1 ServiceMonitor":
		r.serviceMonitor, err = appendDecoded(r.serviceMonitor, strict)
	case "networking.k8s.io/v1 NetworkPolicy":
		r.netPolicies, err = appendDecoded(r.netPolicies, strict)
	default:
		return fmt.Errorf("kind %s of apiVersion %s: no API type to check it against; add it to rendered.decode", meta.Kind, meta.APIVersion)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", meta.Kind, err)
	}
	return nil
}

func appendDecoded[T any](s []*T, strict func(any) error) ([]*T, error) {
	v := new(T)
	if err := strict(v); err != nil {
		return s, err
	}
	return append(s, v), nil
}

// render runs helm template with a values file and decodes every object it prints.
func render(t *testing.T, values string) *rendered {
	t.Helper()
	out := run(t, tool(t, "POSTBOX_HELM"), "template", "relay", chart, "--namespace", "shop", "--values", valuesPath(t, values))
	return decodeAll(t, values, out)
}

// decodeAll decodes every object of helm template's output; what names the output in errors.
func decodeAll(t *testing.T, what, out string) *rendered {
	t.Helper()
	r := &rendered{}
	for i, doc := range bytes.Split([]byte(out), []byte("\n---")) {
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		if err := r.decode(doc); err != nil {
			t.Errorf("%s, object %d: %v\n%s", what, i, err, doc)
		}
	}
	return r
}

func stripComments(doc []byte) []byte {
	var b bytes.Buffer
	for l := range bytes.Lines(doc) {
		if !bytes.HasPrefix(bytes.TrimSpace(l), []byte("#")) {
			b.Write(l)
		}
	}
	return b.Bytes()
}

func TestChartStrictDecodingRefusesMisspeltField(t *testing.T) {
	doc := []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: relay\nspec:\n  replica: 2\n")
	err := (&rendered{}).decode(doc)
	if err == nil || !strings.Contains(err.Error(), "replica") {
		t.Fatalf("decoding a Deployment with spec.replica: got %v, want an error naming the unknown field", err)
	}
}

func TestChartWithExistingSecret(t *testing.T) {
	r := render(t, "testdata/values-existing-secret.yaml")
	if len(r.secrets)+len(r.cronJobs)+len(r.serviceMonitor) != 0 {
		t.Errorf("rendered %d Secrets, %d CronJobs, %d ServiceMonitors; want none with an existing Secret and the options off",
			len(r.secrets), len(r.cronJobs), len(r.serviceMonitor))
	}
	checkRelay(t, r, "postbox-urls", 9090, 2)
	checkMigration(t, r, "postbox-urls", []string{"migrate", "up"})
}

func TestChartWithEverything(t *testing.T) {
	r := render(t, "testdata/values-everything.yaml")
	if len(r.secrets) != 1 {
		t.Fatalf("rendered %d Secrets, want the one holding secret.dbURL and secret.brokerURL", len(r.secrets))
	}
	s := r.secrets[0]
	for key, want := range map[string]string{"db-url": "postgres://relay:secret@db:5432/app", "broker-url": "nats://nats:4222",
		"migrator-db-url": "postgres://migrator:secret@db:5432/app", "maintainer-db-url": "postgres://maintainer:secret@db:5432/app",
		"webhook-secret": "whsec-chart-test-secret-of-32-bytes", "wal-secret": "chart-test-wal-secret-of-32-bytes-or-more"} {
		if s.StringData[key] != want {
			t.Errorf("Secret holds %q under %s, want %q from the values", s.StringData[key], key, want)
		}
	}
	if len(r.deployments) == 1 {
		relay := r.deployments[0].Spec.Template.Spec.Containers[0]
		for name, key := range map[string]string{"POSTBOX_DB": "db-url", "POSTBOX_WEBHOOK_SECRET": "webhook-secret", "POSTBOX_WAL_SECRET": "wal-secret"} {
			if got := secretKey(relay, name, s.Name); got != key {
				t.Errorf("relay: %s from key %q of the chart's Secret, want %q", name, got, key)
			}
		}
	}
	if len(r.jobs) == 1 {
		if got := secretKey(r.jobs[0].Spec.Template.Spec.Containers[0], "POSTBOX_DB", s.Name); got != "migrator-db-url" {
			t.Errorf("migration Job: POSTBOX_DB from key %q, want migrator-db-url", got)
		}
	}
	checkRelay(t, r, s.Name, 9191, 3)
	job := checkMigration(t, r, s.Name, []string{"migrate", "up", "--partitioned", "--table", "postbox_outbox"})
	// The Secret is a hook too, made before the migration Job that reads it.
	if sw, jw := s.Annotations["helm.sh/hook-weight"], job.Annotations["helm.sh/hook-weight"]; s.Annotations["helm.sh/hook"] == "" || !(atoi(t, sw) < atoi(t, jw)) {
		t.Errorf("Secret hook %q weight %q, migration weight %q: the Secret must be created before the migration Job",
			s.Annotations["helm.sh/hook"], sw, jw)
	}

	want := map[string][]string{
		"relay-postbox-cleanup":    {"cleanup", "--once", "--retention", "168h", "--dead-retention", "720h", "--inbox-retention", "168h"},
		"relay-postbox-partitions": {"partitions", "--once", "--period", "daily", "--retention", "168h"},
	}
	if len(r.cronJobs) != len(want) {
		t.Errorf("rendered %d CronJobs, want cleanup and partitions", len(r.cronJobs))
	}
	for _, cj := range r.cronJobs {
		c := cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0]
		if !slices.Equal(c.Args, want[cj.Name]) {
			t.Errorf("CronJob %s runs %q, want %q", cj.Name, c.Args, want[cj.Name])
		}
		checkDBFromSecret(t, "CronJob "+cj.Name, c, s.Name)
		checkAccepted(t, c.Args)
		wantKey := map[string]string{"relay-postbox-cleanup": "maintainer-db-url", "relay-postbox-partitions": "migrator-db-url"}[cj.Name]
		if got := secretKey(c, "POSTBOX_DB", s.Name); got != wantKey {
			t.Errorf("CronJob %s: POSTBOX_DB from key %q, want %q", cj.Name, got, wantKey)
		}
	}

	if len(r.serviceMonitor) != 1 || len(r.services) != 1 {
		t.Fatalf("rendered %d ServiceMonitors and %d Services, want one of each", len(r.serviceMonitor), len(r.services))
	}
	sm, svc := r.serviceMonitor[0], r.services[0]
	// The rules and the dashboard select job="postbox": the job label comes from this Service label.
	if job := svc.Labels[sm.Spec.JobLabel]; job != "postbox" {
		t.Errorf("ServiceMonitor jobLabel %q gives job %q, want postbox, the job the alert rules select", sm.Spec.JobLabel, job)
	}
	for k, v := range sm.Spec.Selector.MatchLabels {
		if svc.Labels[k] != v {
			t.Errorf("ServiceMonitor selects %s=%s, which the Service's labels %v lack", k, v, svc.Labels)
		}
	}
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Path != "/metrics" ||
		sm.Spec.Endpoints[0].Port != svc.Spec.Ports[0].Name {
		t.Errorf("ServiceMonitor endpoints %+v, want /metrics on the Service's port %q", sm.Spec.Endpoints, svc.Spec.Ports[0].Name)
	}
	if sm.Labels["release"] != "prometheus" {
		t.Errorf("ServiceMonitor labels %v lack serviceMonitor.labels", sm.Labels)
	}
}

func TestChartRefusesMissingURLs(t *testing.T) {
	_, err := runErr(tool(t, "POSTBOX_HELM"), "template", "relay", chart)
	if err == nil || !strings.Contains(err.Error(), "set secret.existingSecret") {
		t.Fatalf("helm template without a Secret or URLs: got %v, want the error saying which values to set", err)
	}
}

// checkRelay checks the relay's Deployment: probes on the relay's health endpoints, URLs from the Secret, a
// command line postbox accepts, a non-root read-only container, and a PodDisruptionBudget selecting its pods.
func checkRelay(t *testing.T, r *rendered, secret string, port int32, replicas int32) {
	t.Helper()
	if len(r.deployments) != 1 {
		t.Fatalf("rendered %d Deployments, want the relay's", len(r.deployments))
	}
	d := r.deployments[0]
	if d.Spec.Replicas == nil || *d.Spec.Replicas != replicas {
		t.Errorf("Deployment replicas %v, want %d", d.Spec.Replicas, replicas)
	}
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	if len(c.Args) < 3 || c.Args[0] != "relay" || c.Args[1] != "--http" || c.Args[2] != fmt.Sprintf(":%d", port) {
		t.Errorf("relay container args %q, want relay --http :%d first", c.Args, port)
	}
	checkAccepted(t, c.Args)
	if len(c.Ports) != 1 || c.Ports[0].Name != "http" || c.Ports[0].ContainerPort != port {
		t.Errorf("relay container ports %+v, want http on %d, where --http serves", c.Ports, port)
	}
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"readiness", c.ReadinessProbe, "/readyz"}, {"liveness", c.LivenessProbe, "/healthz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port.String() != "http" {
			t.Errorf("%s probe %+v, want GET %s on port http", p.name, p.probe, p.path)
		}
	}
	checkDBFromSecret(t, "relay", c, secret)
	if !hasSecretEnv(c, "POSTBOX_BROKER", secret) {
		t.Errorf("relay env %+v: want POSTBOX_BROKER from Secret %s", c.Env, secret)
	}
	if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot ||
		c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
		t.Errorf("relay pod must run as non-root with a read-only root file system")
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("relay resources %+v: want a CPU request and a memory limit", c.Resources)
	}
	if len(r.pdbs) != 1 {
		t.Fatalf("rendered %d PodDisruptionBudgets, want the relay's", len(r.pdbs))
	}
	for k, v := range r.pdbs[0].Spec.Selector.MatchLabels {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("PodDisruptionBudget selects %s=%s, which the relay's pods lack", k, v)
		}
	}
}

// checkMigration checks the migration Job: a pre-install and pre-upgrade hook running args.
func checkMigration(t *testing.T, r *rendered, secret string, args []string) *batchv1.Job {
	t.Helper()
	if len(r.jobs) != 1 {
		t.Fatalf("rendered %d Jobs, want the migration's", len(r.jobs))
	}
	j := r.jobs[0]
	hooks := strings.Split(j.Annotations["helm.sh/hook"], ",")
	if !slices.Contains(hooks, "pre-install") || !slices.Contains(hooks, "pre-upgrade") {
		t.Errorf("migration Job hook %q, want pre-install and pre-upgrade", j.Annotations["helm.sh/hook"])
	}
	c := j.Spec.Template.Spec.Containers[0]
	if !slices.Equal(c.Args, args) {
		t.Errorf("migration Job runs %q, want %q", c.Args, args)
	}
	if j.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("migration Job restartPolicy %q, want Never", j.Spec.Template.Spec.RestartPolicy)
	}
	checkDBFromSecret(t, "migration Job", c, secret)
	checkAccepted(t, c.Args)
	return j
}

func checkDBFromSecret(t *testing.T, what string, c corev1.Container, secret string) {
	t.Helper()
	if !hasSecretEnv(c, "POSTBOX_DB", secret) {
		t.Errorf("%s env %+v: want POSTBOX_DB from Secret %s", what, c.Env, secret)
	}
}

func hasSecretEnv(c corev1.Container, name, secret string) bool {
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == secret {
			return true
		}
	}
	return false
}

// checkAccepted checks that postbox parses a rendered command line: postbox ARGS --help fails on an unknown
// command or flag, and prints the help otherwise.
func checkAccepted(t *testing.T, args []string) {
	t.Helper()
	if _, err := runErr(binary, append(slices.Clone(args), "--help")...); err != nil {
		t.Errorf("postbox refuses the chart's command line %q: %v", args, err)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatalf("hook weight %q: %v", s, err)
	}
	return n
}

// TestChartSecretsPerJobRole (issue 29, M7): every secret reaches the pods through a Secret (secretKeyRef or
// envFrom), never as a plain value; each job connects with its own role's URL, so that the long-running relay
// does not hold the migrator's DDL rights; and an optional NetworkPolicy limits who reaches the relay's port.
func TestChartSecretsPerJobRole(t *testing.T) {
	r := render(t, "testdata/values-job-roles.yaml")
	if len(r.deployments) != 1 || len(r.jobs) != 1 || len(r.cronJobs) != 2 {
		t.Fatalf("rendered %d Deployments, %d Jobs, %d CronJobs; want the relay, the migration, cleanup and partitions",
			len(r.deployments), len(r.jobs), len(r.cronJobs))
	}
	relay := r.deployments[0].Spec.Template.Spec.Containers[0]
	want := map[string]string{ // the database URL key each job's POSTBOX_DB must come from
		"relay": "relay-db-url", "migrate": "migrator-db-url", "partitions": "migrator-db-url", "cleanup": "maintainer-db-url",
	}
	containers := map[string]corev1.Container{"relay": relay, "migrate": r.jobs[0].Spec.Template.Spec.Containers[0]}
	for _, cj := range r.cronJobs {
		c := cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0]
		containers[c.Name] = c
	}
	for job, key := range want {
		c, ok := containers[job]
		if !ok {
			t.Errorf("no container named %s", job)
			continue
		}
		if got := secretKey(c, "POSTBOX_DB", "postbox-roles"); got != key {
			t.Errorf("%s: POSTBOX_DB from key %q of Secret postbox-roles, want %q", job, got, key)
		}
		for _, e := range c.Env {
			if e.ValueFrom == nil && secretName(e.Name) {
				t.Errorf("%s: %s is a plain value; secrets must come from a Secret", job, e.Name)
			}
		}
	}
	for name, ref := range map[string][2]string{
		"POSTBOX_BROKER":           {"postbox-roles", "broker-url"},
		"POSTBOX_WEBHOOK_SECRET":   {"postbox-roles", "webhook-secret"},
		"POSTBOX_WAL_SECRET":       {"postbox-roles", "wal-secret"},
		"POSTBOX_ROUTE":            {"postbox-roles", "routes"},
		"POSTBOX_CONSOLE_PASSWORD": {"postbox-console", "password"},
	} {
		if got := secretKey(relay, name, ref[0]); got != ref[1] {
			t.Errorf("relay: %s from key %q of Secret %s, want %q", name, got, ref[0], ref[1])
		}
	}
	if len(relay.EnvFrom) != 1 || relay.EnvFrom[0].SecretRef == nil || relay.EnvFrom[0].SecretRef.Name != "postbox-extra" {
		t.Errorf("relay envFrom %+v, want the Secret postbox-extra", relay.EnvFrom)
	}
	for _, c := range containers {
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Key == "migrator-db-url" && c.Name == "relay" {
				t.Errorf("the relay reads the migrator's database URL (%s)", e.Name)
			}
		}
	}
	checkAccepted(t, relay.Args)

	if len(r.netPolicies) != 1 {
		t.Fatalf("rendered %d NetworkPolicies, want the relay port's", len(r.netPolicies))
	}
	np := r.netPolicies[0]
	pods := r.deployments[0].Spec.Template.Labels
	for k, v := range np.Spec.PodSelector.MatchLabels {
		if pods[k] != v {
			t.Errorf("NetworkPolicy selects %s=%s, which the relay's pods lack", k, v)
		}
	}
	if len(np.Spec.PodSelector.MatchLabels) == 0 || !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
		t.Errorf("NetworkPolicy %+v: want it to select the relay's pods for ingress", np.Spec)
	}
	if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].Ports) != 1 || np.Spec.Ingress[0].Ports[0].Port.IntValue() != 9090 ||
		len(np.Spec.Ingress[0].From) != 1 || np.Spec.Ingress[0].From[0].NamespaceSelector == nil {
		t.Errorf("NetworkPolicy ingress %+v, want port 9090 from the monitoring namespace only", np.Spec.Ingress)
	}
}

// TestChartNetworkPolicyNeedsPeers: a NetworkPolicy with no peers would let everyone in; the chart says what to set.
func TestChartNetworkPolicyNeedsPeers(t *testing.T) {
	_, err := runErr(tool(t, "POSTBOX_HELM"), "template", "relay", chart, "--set", "secret.existingSecret=s", "--set", "networkPolicy.enabled=true")
	if err == nil || !strings.Contains(err.Error(), "networkPolicy.from") {
		t.Fatalf("helm template with networkPolicy.enabled and no peers: got %v, want the error naming networkPolicy.from", err)
	}
}

// secretKey returns the key of Secret secret that the container's variable name comes from; "" when it does not.
func secretKey(c corev1.Container, name, secret string) string {
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == secret {
			return e.ValueFrom.SecretKeyRef.Key
		}
	}
	return ""
}

// secretName reports the variables that hold credentials or signing keys.
func secretName(name string) bool {
	for _, s := range []string{"POSTBOX_DB", "POSTBOX_BROKER", "POSTBOX_ROUTE", "SECRET", "PASSWORD", "TOKEN", "POSTBOX_LISTEN_DB"} {
		if strings.Contains(name, s) {
			return true
		}
	}
	return false
}
