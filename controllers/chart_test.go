package controllers_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/agentplane/agentplane/config/crd"
	"github.com/agentplane/agentplane/hack/genchart/gen"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
	"github.com/agentplane/agentplane/internal/devtools/testenv/kubeenv"
)

// Third-party CRDs the chart's optional objects need, from the Go module proxy (pinned; the
// module cache keeps them): Gateway API for the facade's HTTPRoute, the Prometheus Operator
// for the ServiceMonitor and PrometheusRule.
var thirdPartyCRDs = []struct{ module, dir string }{
	{"sigs.k8s.io/gateway-api@v1.6.3", "config/crd/standard"},
	{"github.com/prometheus-operator/prometheus-operator@v0.85.0", "example/prometheus-operator-crd"},
}

// installThirdPartyCRDs installs these files of the thirdPartyCRDs modules and removes the
// CRDs it created when the container ends (one the suite installed, the HTTPRoute's, stays for
// the specs that run later).
func installThirdPartyCRDs(files ...string) {
	for _, m := range thirdPartyCRDs {
		out, err := exec.Command("go", "mod", "download", "-json", m.module).Output()
		Expect(err).NotTo(HaveOccurred(), "go mod download %s", m.module)
		var mod struct{ Dir string }
		Expect(json.Unmarshal(out, &mod)).To(Succeed())
		for _, f := range files {
			raw, err := os.ReadFile(filepath.Join(mod.Dir, m.dir, f))
			if os.IsNotExist(err) {
				continue
			}
			Expect(err).NotTo(HaveOccurred())
			objs, err := testenv.DecodeManifests(raw)
			Expect(err).NotTo(HaveOccurred())
			for _, crd := range objs {
				switch err := k8sClient.Create(ctx, crd); {
				case err == nil:
					DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, crd))).To(Succeed()) })
				case !apierrors.IsAlreadyExists(err):
					Expect(err).NotTo(HaveOccurred())
				}
				Eventually(func(g Gomega) {
					got := &unstructured.Unstructured{}
					got.SetGroupVersionKind(crd.GroupVersionKind())
					g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(crd), got)).To(Succeed())
					conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
					g.Expect(conds).To(ContainElement(And(HaveKeyWithValue("type", "Established"), HaveKeyWithValue("status", "True"))))
				}).Should(Succeed())
			}
		}
	}
}

// The Helm chart (dist/chart) rendered with each values fixture, and the chart the generator
// writes for a config/monitoring fixture, pass a server-side dry run.
var _ = Describe("the Helm chart", Ordered, func() {
	var helm string
	fixtures := filepath.Join(testenv.RepoRoot(), "hack", "genchart", "testdata")
	BeforeAll(func() {
		var err error
		helm, err = gen.Helm(testenv.RepoRoot())
		Expect(err).NotTo(HaveOccurred())
		installThirdPartyCRDs("gateway.networking.k8s.io_httproutes.yaml",
			"monitoring.coreos.com_servicemonitors.yaml", "monitoring.coreos.com_prometheusrules.yaml")
		Expect(client.IgnoreAlreadyExists(k8sClient.Create(ctx, kubeenv.Namespace("agentplane-system")))).To(Succeed())
	})

	dryRun := func(chart, values string, wantKinds ...string) {
		out, err := gen.Template(helm, chart, "agentplane-system", "-f", filepath.Join(fixtures, "values", values+".yaml"))
		Expect(err).NotTo(HaveOccurred())
		kinds := dryRunApply(out)
		Expect(kinds).To(HaveKeyWithValue("CustomResourceDefinition", len(crd.MustCRDs())))
		for _, k := range append(wantKinds, "Deployment", "ClusterRole", "ClusterRoleBinding",
			"Role", "RoleBinding", "ServiceAccount", "Service", "NetworkPolicy") {
			Expect(kinds).To(HaveKey(k), "rendered kinds %v", kinds)
		}
	}

	for _, c := range []struct {
		values string
		kinds  []string
	}{
		{"defaults", []string{"Secret", "PersistentVolumeClaim"}},
		{"s3-existing-secret", nil},
		{"s3-inline", []string{"Secret"}},
		{"pvc", []string{"PersistentVolumeClaim"}},
		{"gateway", []string{"HTTPRoute"}},
		{"ingress", []string{"Ingress"}},
		{"isolation", nil},
		{"no-network-policy", nil},
		{"local", nil},
		{"monitoring", nil}, // dist/chart: whatever config/monitoring holds
	} {
		It("renders with values "+c.values+" and passes a server-side dry run", func() {
			dryRun(filepath.Join(testenv.RepoRoot(), "dist", "chart"), c.values, c.kinds...)
		})
	}

	It("renders the objects of a config/monitoring directory that pass a server-side dry run", func() {
		out := GinkgoT().TempDir()
		Expect(gen.Run(gen.Options{Config: filepath.Join(testenv.RepoRoot(), "config"), Monitoring: filepath.Join(fixtures, "monitoring"),
			Out: out, Version: "0.1.0", Kubectl: "kubectl"})).To(Succeed())
		dryRun(out, "monitoring", "ServiceMonitor", "PrometheusRule", "ConfigMap")
	})

	// helm install and upgrade against the test control plane: the secrets key is generated
	// once, kept by upgrades (lookup) and by uninstall.
	It("keeps the secrets key across helm upgrade and uninstall", func() {
		user, err := env.AddUser(envtest.User{Name: "chart-test-admin", Groups: []string{"system:masters"}}, nil)
		Expect(err).NotTo(HaveOccurred())
		kc, err := user.KubeConfig()
		Expect(err).NotTo(HaveOccurred())
		kubeconfig := filepath.Join(GinkgoT().TempDir(), "kubeconfig")
		Expect(os.WriteFile(kubeconfig, kc, 0o600)).To(Succeed())
		const ns = "chart-helm-install"
		Expect(k8sClient.Create(ctx, kubeenv.Namespace(ns))).To(Succeed())
		chart := filepath.Join(testenv.RepoRoot(), "dist", "chart")
		helmRun := func(args ...string) {
			cmd := exec.Command(helm, append(args, "--namespace", ns, "--kubeconfig", kubeconfig)...)
			cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+GinkgoT().TempDir(), "HELM_CONFIG_HOME="+GinkgoT().TempDir(), "HELM_DATA_HOME="+GinkgoT().TempDir())
			out, err := cmd.CombinedOutput()
			Expect(err).NotTo(HaveOccurred(), "helm %s: %s", strings.Join(args, " "), out)
		}
		// The suite's control plane has the CRDs already; no claim (no storage provisioner).
		base := []string{"--set", "crds.install=false", "--set", "storage.type=none"}
		helmRun(append([]string{"install", "agentplane", chart}, base...)...)
		DeferCleanup(func() {
			_ = exec.Command(helm, "uninstall", "agentplane", "--namespace", ns, "--kubeconfig", kubeconfig).Run()
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agentplane-secrets-key"}}))).To(Succeed())
		})
		key := func() []byte {
			s := &corev1.Secret{}
			Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "agentplane-secrets-key"}, s)).To(Succeed())
			Expect(s.Data["key"]).To(HaveLen(32))
			return s.Data["key"]
		}
		first := key()

		helmRun(append([]string{"upgrade", "agentplane", chart, "--set", "replicaCount=3"}, base...)...)
		Expect(key()).To(Equal(first), "helm upgrade re-rolled the secrets key")
		dep := &unstructured.Unstructured{}
		dep.SetAPIVersion("apps/v1")
		dep.SetKind("Deployment")
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "agentplane-controller-manager"}, dep)).To(Succeed())
		replicas, _, _ := unstructured.NestedFieldNoCopy(dep.Object, "spec", "replicas")
		Expect(replicas).To(BeNumerically("==", 3))

		helmRun("uninstall", "agentplane")
		Expect(key()).To(Equal(first), "helm uninstall removed the secrets key")
		err = k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "agentplane-controller-manager"}, dep)
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Deployment outlived uninstall: %v", err)
	})
})
