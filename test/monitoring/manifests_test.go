package monitoring_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/agentplane/agentplane/internal/devtools/testenv"
	"github.com/agentplane/agentplane/internal/devtools/testenv/kubeenv"
)

// The Prometheus Operator's CRDs come from its Go module (a version the module proxy serves).
const promOperatorModule = "github.com/prometheus-operator/prometheus-operator@v0.85.0"

// promOperatorCRDs is the directory of the module's CRDs, downloaded into the module cache.
func promOperatorCRDs(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "mod", "download", "-json", promOperatorModule).Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v\n%s", promOperatorModule, err, out)
	}
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download %s: %v %s", promOperatorModule, err, mod.Error)
	}
	return filepath.Join(mod.Dir, "example", "prometheus-operator-crd")
}

// render runs kubectl kustomize on a directory of config/.
func render(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Fatal("kubectl renders config/ (kubectl kustomize): ", err)
	}
	out, err := exec.Command(kubectl, "kustomize", filepath.Join(testenv.RepoRoot(), "config", dir)).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize config/%s: %v", dir, err)
	}
	objs, err := testenv.DecodeManifests(out)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// config/monitoring renders, an API server with the Prometheus Operator's CRDs accepts each of
// its objects (server-side dry run: the CRDs' schemas validate them), and its ServiceMonitor
// selects the metrics Service config/default deploys, by a port of that Service.
func TestMonitoringManifests(t *testing.T) {
	e := sharedEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := envtest.InstallCRDs(e.Config, envtest.CRDInstallOptions{Paths: []string{promOperatorCRDs(t)}}); err != nil {
		t.Fatal(err)
	}
	objs := render(t, "monitoring")
	kinds := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		kinds[o.GetKind()] = o
		if o.GetNamespace() != "agentplane-system" {
			t.Errorf("%s %s in namespace %q, want agentplane-system", o.GetKind(), o.GetName(), o.GetNamespace())
		}
	}
	for _, k := range []string{"ServiceMonitor", "PrometheusRule", "ConfigMap"} {
		if kinds[k] == nil {
			t.Fatalf("config/monitoring renders no %s", k)
		}
	}
	if err := client.IgnoreAlreadyExists(e.Client.Create(ctx, kubeenv.Namespace("agentplane-system"))); err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		err := e.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.DryRunAll, client.FieldOwner("monitoring-test"), client.ForceOwnership)
		if err != nil {
			t.Errorf("%s %s: %v (%s)", o.GetKind(), o.GetName(), err, apierrors.ReasonForError(err))
		}
	}
	if cm := kinds["ConfigMap"]; cm.GetLabels()["grafana_dashboard"] != "1" {
		t.Errorf("the dashboards ConfigMap has labels %v, want grafana_dashboard=1", cm.GetLabels())
	} else if data, _, _ := unstructured.NestedStringMap(cm.Object, "data"); data["agentplane.json"] == "" {
		t.Errorf("the dashboards ConfigMap holds %d files, not agentplane.json", len(data))
	}

	// The ServiceMonitor selects config/default's metrics Service, in its namespace, by port name.
	sm := kinds["ServiceMonitor"]
	sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(sel) == 0 || len(eps) != 1 {
		t.Fatalf("ServiceMonitor: selector %v, %d endpoints", sel, len(eps))
	}
	port, _ := eps[0].(map[string]any)["port"].(string)
	var selected []string
	for _, o := range render(t, "default") {
		if o.GetKind() != "Service" || o.GetNamespace() != sm.GetNamespace() || !matches(o.GetLabels(), sel) {
			continue
		}
		ports, _, _ := unstructured.NestedSlice(o.Object, "spec", "ports")
		for _, p := range ports {
			if p.(map[string]any)["name"] == port {
				selected = append(selected, o.GetName())
			}
		}
	}
	if len(selected) != 1 || selected[0] != "agentplane-controller-manager-metrics" {
		t.Errorf("the ServiceMonitor (labels %v, port %q) selects %v of config/default, want the metrics Service", sel, port, selected)
	}
}

func matches(labels, sel map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}
