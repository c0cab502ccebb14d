package gen_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/agentplane/agentplane/hack/genchart/gen"
	"github.com/agentplane/agentplane/internal/adapters/modelproxy"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
)

const ns = "platform"

var (
	root     = testenv.RepoRoot()
	chartDir = filepath.Join(root, "dist", "chart")
)

func helm(t *testing.T) string {
	t.Helper()
	h, err := gen.Helm(root)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func fixture(name string) string {
	return filepath.Join(root, "hack", "genchart", "testdata", "values", name+".yaml")
}

// render renders dir with a values fixture (and --set flags) and indexes the objects by
// kind/name.
func render(t *testing.T, dir, values string, set ...string) map[string]*unstructured.Unstructured {
	t.Helper()
	args := []string{"-f", fixture(values)}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := gen.Template(helm(t), dir, ns, args...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := testenv.DecodeManifests(out)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		if o.GetNamespace() != "" && o.GetNamespace() != ns {
			t.Errorf("%s %s in namespace %q, want the release namespace", o.GetKind(), o.GetName(), o.GetNamespace())
		}
		m[o.GetKind()+"/"+o.GetName()] = o
	}
	return m
}

// bySource renders the chart with args and cuts the output into its templates' texts, by
// the "---\n# Source: agentplane/<template>\n" line helm puts before each.
func bySource(t *testing.T, args ...string) map[string]string {
	t.Helper()
	out, err := gen.Template(helm(t), chartDir, ns, args...)
	if err != nil {
		t.Fatal(err)
	}
	texts := map[string]string{}
	for _, doc := range strings.Split(string(out), "---\n# Source: agentplane/")[1:] {
		name, text, _ := strings.Cut(doc, "\n")
		texts[name] += text
	}
	return texts
}

func fixtures(t *testing.T) []string {
	files, err := filepath.Glob(fixture("*"))
	if err != nil || len(files) < 8 {
		t.Fatalf("values fixtures: %v %v", files, err)
	}
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".yaml"))
	}
	return names
}

// Every values fixture passes helm's strict lint (warnings fail it too, so the plain lint
// passes as well).
func TestLint(t *testing.T) {
	for _, v := range fixtures(t) {
		args := []string{"lint", chartDir, "-f", fixture(v), "--strict"}
		if out, err := exec.Command(helm(t), args...).CombinedOutput(); err != nil {
			t.Errorf("helm %v: %v\n%s", args, err, out)
		}
	}
}

func manager(t *testing.T, objs map[string]*unstructured.Unstructured) (dep *unstructured.Unstructured, container map[string]any, args []string) {
	t.Helper()
	dep = objs["Deployment/agentplane-controller-manager"]
	if dep == nil {
		t.Fatal("no manager Deployment")
	}
	cs, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	container = cs[0].(map[string]any)
	for _, a := range container["args"].([]any) {
		args = append(args, a.(string))
	}
	return dep, container, args
}

func wantArgs(t *testing.T, args []string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !slices.Contains(args, w) {
			t.Errorf("manager args lack %q: %q", w, args)
		}
	}
}

func noArgPrefix(t *testing.T, args []string, prefixes ...string) {
	t.Helper()
	for _, a := range args {
		for _, p := range prefixes {
			if strings.HasPrefix(a, p) {
				t.Errorf("manager arg %q: want no %s", a, p)
			}
		}
	}
}

// The CRD templates are config/crd/bases byte for byte (keep annotation off), and with the
// default keep annotation the same objects plus helm.sh/resource-policy: keep.
func TestCRDsAreTheBases(t *testing.T) {
	bases, _ := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
	if len(bases) == 0 {
		t.Fatal("no CRDs in config/crd/bases")
	}
	// Each render once, cut into its templates by helm's "# Source:" lines.
	plain, kept := bySource(t, "--set", "crds.keep=false"), bySource(t)
	for _, b := range bases {
		base, err := os.ReadFile(b)
		if err != nil {
			t.Fatal(err)
		}
		show := "templates/crds/" + filepath.Base(b)
		if got, want := plain[show], strings.TrimPrefix(string(base), "---\n"); got != want {
			t.Errorf("%s differs from %s", show, b)
		}
		got, _ := testenv.DecodeManifests([]byte(kept[show]))
		wantObj, _ := testenv.DecodeManifests(base)
		if len(got) != 1 || len(wantObj) != 1 {
			t.Fatalf("%s renders %d objects, %s holds %d; want one each", show, len(got), b, len(wantObj))
		}
		if got[0].GetAnnotations()["helm.sh/resource-policy"] != "keep" {
			t.Errorf("%s: no keep annotation by default", show)
		}
		unstructured.RemoveNestedField(got[0].Object, "metadata", "annotations", "helm.sh/resource-policy")
		if !reflect.DeepEqual(got[0].Object, wantObj[0].Object) {
			t.Errorf("%s with the keep annotation differs from %s in more than it", show, b)
		}
	}
	objs := render(t, chartDir, "defaults", "crds.install=false")
	for k := range objs {
		if strings.HasPrefix(k, "CustomResourceDefinition/") || strings.HasPrefix(k, "MutatingAdmissionPolicy") {
			t.Errorf("crds.install=false renders %s", k)
		}
	}
	// By default the Agent finalizer's admission policy comes with the CRDs: cluster-scoped,
	// its binding naming it.
	objs = render(t, chartDir, "defaults")
	p, b := objs["MutatingAdmissionPolicy/agentplane-agent-finalizer"], objs["MutatingAdmissionPolicyBinding/agentplane-agent-finalizer"]
	if p == nil || b == nil {
		t.Fatalf("no MutatingAdmissionPolicy and binding agentplane-agent-finalizer in %v", keys(objs))
	}
	if p.GetNamespace() != "" || b.GetNamespace() != "" {
		t.Errorf("admission policy in namespace %q, binding in %q; want none (cluster-scoped)", p.GetNamespace(), b.GetNamespace())
	}
	if name, _, _ := unstructured.NestedString(b.Object, "spec", "policyName"); name != p.GetName() {
		t.Errorf("the binding names policy %q, want %q", name, p.GetName())
	}
}

// The ClusterRole grants what config/rbac/role.yaml grants, bound to the release's
// ServiceAccount in the release namespace.
func TestRBAC(t *testing.T) {
	objs := render(t, chartDir, "defaults")
	raw, err := os.ReadFile(filepath.Join(root, "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	role, _ := testenv.DecodeManifests(raw)
	cr := objs["ClusterRole/agentplane-manager-role"]
	if cr == nil {
		t.Fatalf("no ClusterRole agentplane-manager-role in %v", keys(objs))
	}
	if !reflect.DeepEqual(cr.Object["rules"], role[0].Object["rules"]) {
		t.Errorf("ClusterRole rules differ from config/rbac/role.yaml")
	}
	dep, _, _ := manager(t, objs)
	sa, _, _ := unstructured.NestedString(dep.Object, "spec", "template", "spec", "serviceAccountName")
	if objs["ServiceAccount/"+sa] == nil {
		t.Errorf("the Deployment's ServiceAccount %q is not rendered", sa)
	}
	for _, b := range []string{"ClusterRoleBinding/agentplane-manager-rolebinding", "RoleBinding/agentplane-leader-election-rolebinding"} {
		o := objs[b]
		if o == nil {
			t.Fatalf("no %s", b)
		}
		subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
		s := subjects[0].(map[string]any)
		if s["name"] != sa || s["namespace"] != ns {
			t.Errorf("%s binds %v, want ServiceAccount %s/%s", b, s, ns, sa)
		}
	}
	// The leader-election FlowSchema matches the release's ServiceAccount and its Leases in
	// the release namespace, and is cluster-scoped.
	fs := objs["FlowSchema/agentplane-leader-election"]
	if fs == nil {
		t.Fatalf("no FlowSchema agentplane-leader-election in %v", keys(objs))
	}
	if fs.GetNamespace() != "" {
		t.Errorf("FlowSchema in namespace %q, want none (cluster-scoped)", fs.GetNamespace())
	}
	rules, _, _ := unstructured.NestedSlice(fs.Object, "spec", "rules")
	rule := rules[0].(map[string]any)
	subject := rule["subjects"].([]any)[0].(map[string]any)["serviceAccount"].(map[string]any)
	namespaces := rule["resourceRules"].([]any)[0].(map[string]any)["namespaces"]
	if subject["name"] != sa || subject["namespace"] != ns || !reflect.DeepEqual(namespaces, []any{ns}) {
		t.Errorf("FlowSchema matches ServiceAccount %v in namespaces %v, want %s/%s in [%s]", subject, namespaces, ns, sa, ns)
	}
	if objs["Role/agentplane-leader-election-role"] == nil || objs["NetworkPolicy/agentplane-controller-manager"] == nil || objs["Service/agentplane-api"] == nil {
		t.Errorf("leader-election Role, manager NetworkPolicy or facade Service missing: %v", keys(objs))
	}
}

// num is a number of a decoded manifest (JSON numbers decode as int64 or float64).
func num(obj map[string]any, path ...string) int64 {
	v, _, _ := unstructured.NestedFieldNoCopy(obj, path...)
	switch n := v.(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	}
	return -1
}

func keys(m map[string]*unstructured.Unstructured) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	slices.Sort(k)
	return k
}

// The defaults: two replicas of config/manager's image, files on a claim, a random 32-byte
// secrets key created once (lookup) and kept, nothing exposed, nothing monitored.
func TestDefaults(t *testing.T) {
	objs := render(t, chartDir, "defaults")
	dep, c, args := manager(t, objs)
	if r := num(dep.Object, "spec", "replicas"); r != 2 {
		t.Errorf("replicas %d, want 2", r)
	}
	if c["image"] != "ghcr.io/agentplane/agentplane:latest" {
		t.Errorf("image %v", c["image"])
	}
	wantArgs(t, args, "--leader-elect", "--runtime=kube", "--storage-dir=/var/lib/agentplane/storage")
	noArgPrefix(t, args, "--s3-", "--agent-network-policy", "--secrets-key-file", "--agent-egress")
	if objs["PersistentVolumeClaim/agentplane-storage"] == nil {
		t.Error("no PersistentVolumeClaim agentplane-storage")
	}
	key := objs["Secret/agentplane-secrets-key"]
	if key == nil {
		t.Fatal("no Secret agentplane-secrets-key")
	}
	if key.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
		t.Error("the secrets key Secret is not kept on uninstall")
	}
	k, _, _ := unstructured.NestedString(key.Object, "data", "key")
	if raw, err := base64.StdEncoding.DecodeString(k); err != nil || len(raw) != 32 {
		t.Errorf("secrets key %q: want 32 bytes (%v)", k, err)
	}
	other := render(t, chartDir, "defaults")["Secret/agentplane-secrets-key"]
	if k2, _, _ := unstructured.NestedString(other.Object, "data", "key"); k2 == k {
		t.Error("two fresh renders share a secrets key: not random")
	}
	// A key already in the cluster is kept on upgrade: helm template cannot look it up, the
	// envtest suite's helm upgrade test (controllers/chart_test.go) does.
	tpl, _ := os.ReadFile(filepath.Join(chartDir, "templates", "secrets-key.yaml"))
	if !bytes.Contains(tpl, []byte(`lookup "v1" "Secret" .Release.Namespace "agentplane-secrets-key"`)) {
		t.Error("secrets-key.yaml does not look up the existing key")
	}
	for _, k := range keys(objs) {
		if strings.HasPrefix(k, "Ingress/") || strings.HasPrefix(k, "HTTPRoute/") || strings.HasPrefix(k, "ServiceMonitor/") ||
			strings.HasPrefix(k, "PrometheusRule/") || strings.HasPrefix(k, "ConfigMap/") || k == "Secret/agentplane-s3-credentials" {
			t.Errorf("defaults render %s", k)
		}
	}
	noSecretInDeployment(t, objs)
}

// noSecretInDeployment: no value of a rendered Secret appears in the Deployment.
func noSecretInDeployment(t *testing.T, objs map[string]*unstructured.Unstructured) {
	t.Helper()
	dep, _, _ := manager(t, objs)
	text, _ := yaml.Marshal(dep.Object)
	for _, o := range objs {
		if o.GetKind() != "Secret" {
			continue
		}
		data, _, _ := unstructured.NestedStringMap(o.Object, "data")
		for k, v := range data {
			plain, _ := base64.StdEncoding.DecodeString(v)
			if bytes.Contains(text, []byte(v)) || bytes.Contains(text, plain) {
				t.Errorf("Secret %s key %s appears in the Deployment", o.GetName(), k)
			}
		}
	}
}

func TestS3InlineCredentials(t *testing.T) {
	objs := render(t, chartDir, "s3-inline")
	_, _, args := manager(t, objs)
	wantArgs(t, args, "--s3-endpoint=s3.eu-central-1.amazonaws.com", "--s3-bucket=agentplane-files",
		"--s3-credentials-secret=agentplane-s3-credentials")
	noArgPrefix(t, args, "--storage-dir", "--s3-insecure", "--s3-prefix")
	sec := objs["Secret/agentplane-s3-credentials"]
	if sec == nil {
		t.Fatal("no Secret agentplane-s3-credentials")
	}
	data, _, _ := unstructured.NestedStringMap(sec.Object, "data")
	for k, want := range map[string]string{"accessKey": "AKIAFIXTUREACCESSKEY", "secretKey": "fixture-secret-key-never-in-the-deployment"} {
		if got, _ := base64.StdEncoding.DecodeString(data[k]); string(got) != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if objs["PersistentVolumeClaim/agentplane-storage"] != nil {
		t.Error("s3 storage renders a claim")
	}
	noSecretInDeployment(t, objs)
	dep, _, _ := manager(t, objs)
	text, _ := yaml.Marshal(dep.Object)
	if bytes.Contains(text, []byte("fixture-secret-key")) || bytes.Contains(text, []byte("AKIAFIXTURE")) {
		t.Error("an S3 key appears in the Deployment")
	}
}

func TestS3ExistingSecrets(t *testing.T) {
	objs := render(t, chartDir, "s3-existing-secret")
	dep, c, args := manager(t, objs)
	wantArgs(t, args, "--s3-endpoint=minio.storage.svc:9000", "--s3-bucket=agentplane", "--s3-region=eu-west-1",
		"--s3-prefix=prod", "--s3-insecure", "--s3-credentials-secret=my-s3-credentials",
		"--secrets-key-file=/etc/agentplane/secrets-key/sealing-key")
	for _, k := range []string{"Secret/agentplane-s3-credentials", "Secret/agentplane-secrets-key", "PersistentVolumeClaim/agentplane-storage"} {
		if objs[k] != nil {
			t.Errorf("existing Secrets render %s", k)
		}
	}
	vols, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "volumes")
	found := false
	for _, v := range vols {
		if s, ok := v.(map[string]any)["secret"].(map[string]any); ok && s["secretName"] == "my-secrets-key" {
			found = true
		}
	}
	if !found {
		t.Errorf("the secrets key Secret is not a volume: %v", vols)
	}
	mounts, _ := c["volumeMounts"].([]any)
	if !slices.ContainsFunc(mounts, func(m any) bool { return m.(map[string]any)["mountPath"] == "/etc/agentplane/secrets-key" }) {
		t.Errorf("the secrets key is not mounted: %v", mounts)
	}
}

func TestPVCAndScheduling(t *testing.T) {
	objs := render(t, chartDir, "pvc")
	dep, c, args := manager(t, objs)
	wantArgs(t, args, "--storage-dir=/data/agentplane")
	pvc := objs["PersistentVolumeClaim/agentplane-storage"]
	if pvc == nil {
		t.Fatal("no claim")
	}
	size, _, _ := unstructured.NestedString(pvc.Object, "spec", "resources", "requests", "storage")
	class, _, _ := unstructured.NestedString(pvc.Object, "spec", "storageClassName")
	modes, _, _ := unstructured.NestedStringSlice(pvc.Object, "spec", "accessModes")
	if size != "50Gi" || class != "shared-nfs" || !reflect.DeepEqual(modes, []string{"ReadWriteMany"}) {
		t.Errorf("claim %s %s %v", size, class, modes)
	}
	mounts, _ := c["volumeMounts"].([]any)
	if !slices.ContainsFunc(mounts, func(m any) bool { return m.(map[string]any)["mountPath"] == "/data/agentplane" }) {
		t.Errorf("the claim is not mounted at --storage-dir: %v", mounts)
	}
	pod, _, _ := unstructured.NestedMap(dep.Object, "spec", "template")
	spec := pod["spec"].(map[string]any)
	if r := num(dep.Object, "spec", "replicas"); r != 3 {
		t.Errorf("replicas %d", r)
	}
	if spec["nodeSelector"] == nil || spec["tolerations"] == nil || spec["affinity"] == nil {
		t.Errorf("scheduling values missing from the pod: %v", spec)
	}
	if a, _, _ := unstructured.NestedString(pod, "metadata", "annotations", "example.com/team"); a != "platform" {
		t.Error("pod annotation missing")
	}
	if m, _, _ := unstructured.NestedString(c, "resources", "limits", "memory"); m != "2Gi" {
		t.Errorf("resources %v", c["resources"])
	}
	if g := num(spec, "securityContext", "fsGroup"); g != 65532 {
		t.Errorf("fsGroup %d, want 65532 for the claim", g)
	}
}

func TestIsolationFlags(t *testing.T) {
	_, _, args := manager(t, render(t, chartDir, "isolation"))
	wantArgs(t, args, "--engine-versions=2026.9.6,2026.8.1", "--default-engine-version=2026.9.6",
		"--engine-image=registry.example.com/openclaw:%s", "--agent-runtime-class=gvisor",
		"--agent-node-selector=pool=agents", "--agent-toleration=dedicated=agents:NoSchedule",
		"--agent-egress=anthropic=160.79.104.0/23:443", "--agent-egress=telegram=149.154.160.0/20:443",
		"--agent-egress=telegram=91.108.4.0/22:443", "--agent-egress=*=10.0.0.10/32:53",
		"--agent-ingress-namespace=ingress-nginx", "--model-proxy-upstream=openai=https://openai-mirror.example.com",
		"--agent-workers=8")
	noArgPrefix(t, args, "--agent-network-policy")
	_, _, args = manager(t, render(t, chartDir, "no-network-policy"))
	wantArgs(t, args, "--agent-network-policy=false")
	noArgPrefix(t, args, "--storage-dir", "--s3-")
}

func TestGatewayRouting(t *testing.T) {
	objs := render(t, chartDir, "gateway")
	_, _, args := manager(t, objs)
	wantArgs(t, args, "--domain-gateway=gateways/public/https", "--apps-domain=agents.example.com",
		"--brand=example", "--cluster-issuer=letsencrypt", "--agent-ingress-namespace=gateways")
	route := objs["HTTPRoute/agentplane-api"]
	if route == nil {
		t.Fatal("no HTTPRoute for the facade")
	}
	parents, _, _ := unstructured.NestedSlice(route.Object, "spec", "parentRefs")
	p := parents[0].(map[string]any)
	if p["name"] != "public" || p["namespace"] != "gateways" || p["sectionName"] != "https" {
		t.Errorf("parentRef %v", p)
	}
	rules, _, _ := unstructured.NestedSlice(route.Object, "spec", "rules")
	if b := rules[0].(map[string]any)["backendRefs"].([]any)[0].(map[string]any); b["name"] != "agentplane-api" {
		t.Errorf("backend %v", b)
	}
	objs = render(t, chartDir, "ingress")
	_, _, args = manager(t, objs)
	wantArgs(t, args, "--ingress-class=nginx")
	noArgPrefix(t, args, "--domain-gateway")
	ing := objs["Ingress/agentplane-api"]
	if ing == nil {
		t.Fatal("no Ingress for the facade")
	}
	if h, _, _ := unstructured.NestedSlice(ing.Object, "spec", "rules"); h[0].(map[string]any)["host"] != "api.agents.example.com" {
		t.Errorf("Ingress rules %v", h)
	}
}

// config/local as chart values: the same image, pull policy and engine flags.
func TestLocalValues(t *testing.T) {
	_, c, args := manager(t, render(t, chartDir, "local"))
	if c["image"] != "agentplane.local/agentplane:dev" || c["imagePullPolicy"] != "Never" {
		t.Errorf("image %v %v", c["image"], c["imagePullPolicy"])
	}
	wantArgs(t, args, "--engine-image=agentplane.local/openclaw:%s", "--engine-init=/sbin/tini,--",
		"--engine-probe=/usr/local/bin/agentplane-probe", "--storage-dir=/var/lib/agentplane/storage")
}

// The generator turns a config/monitoring directory into templates behind the monitoring
// values; alert templates and dashboards keep their own {{ }}.
func TestMonitoring(t *testing.T) {
	out := t.TempDir()
	mon := filepath.Join(root, "hack", "genchart", "testdata", "monitoring")
	err := gen.Run(gen.Options{Config: filepath.Join(root, "config"), Monitoring: mon, Out: out, Version: "0.1.0", Kubectl: "kubectl"})
	if err != nil {
		t.Fatal(err)
	}
	if o, err := exec.Command(helm(t), "lint", "--strict", out, "-f", fixture("monitoring")).CombinedOutput(); err != nil {
		t.Fatalf("helm lint: %v\n%s", err, o)
	}
	off := render(t, out, "defaults")
	for _, k := range keys(off) {
		if strings.HasPrefix(k, "ServiceMonitor/") || strings.HasPrefix(k, "PrometheusRule/") || strings.HasPrefix(k, "ConfigMap/") {
			t.Errorf("monitoring off renders %s", k)
		}
	}
	objs := render(t, out, "monitoring")
	sm := objs["ServiceMonitor/agentplane-controller-manager"]
	if sm == nil {
		t.Fatalf("no ServiceMonitor: %v", keys(objs))
	}
	if p, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints"); p[0].(map[string]any)["port"] != "metrics" {
		t.Errorf("ServiceMonitor endpoints %v", p)
	}
	rule := objs["PrometheusRule/agentplane"]
	if rule == nil {
		t.Fatal("no PrometheusRule")
	}
	text, _ := yaml.Marshal(rule.Object)
	if !bytes.Contains(text, []byte("{{ $labels.route }}")) {
		t.Errorf("the alert's own template is lost:\n%s", text)
	}
	cm := objs["ConfigMap/agentplane-dashboard-agentplane"]
	if cm == nil {
		t.Fatal("no dashboard ConfigMap")
	}
	if cm.GetLabels()["grafana_dashboard"] != "1" {
		t.Errorf("dashboard labels %v", cm.GetLabels())
	}
	want, _ := os.ReadFile(filepath.Join(mon, "dashboards", "agentplane.json"))
	if got, _, _ := unstructured.NestedString(cm.Object, "data", "agentplane.json"); got != strings.TrimRight(string(want), "\n") {
		t.Errorf("dashboard JSON differs:\n%s", got)
	}
}

// modelPrices is what the chart renders for modelProxy.prices: the ConfigMap, the volume and
// its mount, the flag and the checksum annotation (nil: absent).
type modelPrices struct {
	table, volume, mount, flag, checksum string
}

func renderedModelPrices(t *testing.T, objs map[string]*unstructured.Unstructured) (got modelPrices, podAnnotations map[string]string) {
	t.Helper()
	const flag = "--model-prices="
	if cm := objs["ConfigMap/agentplane-model-prices"]; cm != nil {
		if cm.GetLabels()["app.kubernetes.io/instance"] != "agentplane" {
			t.Errorf("ConfigMap labels %v: want the chart's", cm.GetLabels())
		}
		got.table, _, _ = unstructured.NestedString(cm.Object, "data", "model-prices.yaml")
	}
	dep, c, args := manager(t, objs)
	for _, a := range args {
		if strings.HasPrefix(a, flag) {
			got.flag = strings.TrimPrefix(a, flag)
		}
	}
	vols, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "volumes")
	for _, v := range vols {
		if v.(map[string]any)["name"] == "model-prices" {
			got.volume, _, _ = unstructured.NestedString(v.(map[string]any), "configMap", "name")
		}
	}
	mounts, _ := c["volumeMounts"].([]any)
	for _, m := range mounts {
		if m := m.(map[string]any); m["name"] == "model-prices" {
			if m["readOnly"] != true {
				t.Errorf("the model prices are mounted writable: %v", m)
			}
			got.mount, _ = m["mountPath"].(string)
		}
	}
	podAnnotations, _, _ = unstructured.NestedStringMap(dep.Object, "spec", "template", "metadata", "annotations")
	got.checksum = podAnnotations["checksum/model-prices"]
	return got, podAnnotations
}

// modelProxy.prices becomes the ConfigMap agentplane-model-prices, mounted into the manager
// and passed as --model-prices, with the table's checksum on the pod template; unset (or
// null), none of it.
func TestModelPrices(t *testing.T) {
	const dir, file = "/etc/agentplane/model-prices", "/etc/agentplane/model-prices/model-prices.yaml"
	checksums := map[string]string{}
	for _, tc := range []struct {
		name, values string
		set          []string
		// currency of the rendered table ("": no table); models, its number of entries.
		currency string
		models   int
		// podAnnotations the pods keep besides the checksum.
		podAnnotations map[string]string
		// wantErr is in helm's error (the chart refuses the values).
		wantErr string
	}{
		{name: "unset", values: "defaults"},
		{name: "null", values: "model-prices", set: []string{"modelProxy.prices=null"},
			podAnnotations: map[string]string{"example.com/team": "platform"}},
		{name: "set", values: "model-prices", currency: "USD", models: 2,
			podAnnotations: map[string]string{"example.com/team": "platform"}},
		{name: "changed", values: "model-prices", set: []string{"modelProxy.prices.currency=EUR"}, currency: "EUR", models: 2,
			podAnnotations: map[string]string{"example.com/team": "platform"}},
		{name: "no pod annotations", values: "model-prices", set: []string{"podAnnotations=null"}, currency: "USD", models: 2},
		{name: "no currency", values: "model-prices", set: []string{"modelProxy.prices.currency="},
			wantErr: "modelProxy.prices.currency is required with modelProxy.prices"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.wantErr != "" {
				args := []string{"-f", fixture(tc.values)}
				for _, s := range tc.set {
					args = append(args, "--set", s)
				}
				if _, err := gen.Template(helm(t), chartDir, ns, args...); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("helm template: %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			got, annotations := renderedModelPrices(t, render(t, chartDir, tc.values, tc.set...))
			delete(annotations, "checksum/model-prices")
			if len(annotations) == 0 {
				annotations = nil
			}
			if !reflect.DeepEqual(annotations, tc.podAnnotations) {
				t.Errorf("pod annotations %v, want %v besides the checksum", annotations, tc.podAnnotations)
			}
			if tc.currency == "" {
				if got != (modelPrices{}) {
					t.Errorf("without modelProxy.prices the chart renders %+v, want none of it", got)
				}
				return
			}
			if got.volume != "agentplane-model-prices" || got.mount != dir || got.flag != file {
				t.Errorf("volume of ConfigMap %q mounted at %q, --model-prices=%q; want agentplane-model-prices at %s, %s",
					got.volume, got.mount, got.flag, dir, file)
			}
			// The table is the value as the manager reads it.
			var table modelproxy.PriceFile
			if err := yaml.UnmarshalStrict([]byte(got.table), &table); err != nil {
				t.Fatalf("the ConfigMap's table: %v\n%s", err, got.table)
			}
			if table.Currency != tc.currency || len(table.Models) != tc.models {
				t.Errorf("table in %s with %d models, want %s with %d:\n%s", table.Currency, len(table.Models), tc.currency, tc.models, got.table)
			}
			if tc.models > 0 && table.Models[0] != (modelproxy.PriceEntry{Provider: "anthropic", Model: "claude-sonnet-4*", Input: "3.00", Output: "15.00"}) {
				t.Errorf("first model %+v", table.Models[0])
			}
			if _, err := modelproxy.ParsePrices([]byte(got.table)); err != nil {
				t.Errorf("the manager refuses the table: %v", err)
			}
			// The checksum is the ConfigMap content's (helm's sha256sum of the table).
			if sum := sha256.Sum256([]byte(strings.TrimSuffix(got.table, "\n"))); got.checksum != hex.EncodeToString(sum[:]) {
				t.Errorf("checksum/model-prices %q, want the sha256 of the table %x", got.checksum, sum)
			}
			checksums[tc.name] = got.checksum
		})
	}
	if checksums["set"] == "" || checksums["set"] != checksums["no pod annotations"] || checksums["set"] == checksums["changed"] {
		t.Errorf("checksums %v: want one per table, another for a changed table", checksums)
	}
}
