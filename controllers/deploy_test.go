package controllers_test

import (
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentplane/agentplane/config/crd"
	"github.com/agentplane/agentplane/config/policy"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
)

// The in-cluster deployments (config/default, and config/local for the local cluster) must
// render and be accepted by a real API server: every object is applied server-side with dry
// run.
var _ = DescribeTable("the in-cluster deployment",
	func(dir string) {
		kinds := dryRunApply(kustomize(dir))
		Expect(kinds).To(HaveKeyWithValue("CustomResourceDefinition", len(crd.MustCRDs())))
		Expect(kinds).To(HaveKey("Deployment"))
		Expect(kinds).To(HaveKey("ClusterRole"))
		Expect(kinds).To(HaveKey("NetworkPolicy"))
		Expect(kinds).To(HaveKey("Service"))
		Expect(kinds).To(HaveKeyWithValue("FlowSchema", 1))
		Expect(kinds).To(HaveKeyWithValue("MutatingAdmissionPolicy", 1))
		Expect(kinds).To(HaveKeyWithValue("MutatingAdmissionPolicyBinding", 1))
	},
	Entry("config/default renders and passes a server-side dry run", "default"),
	Entry("config/local renders and passes a server-side dry run", "local"),
)

// The FlowSchema config/default ships sends the manager ServiceAccount's Lease requests in the
// system namespace to the built-in priority level leader-election (and nothing else it sends):
// the API server's Priority and Fairness filter names the schema and level that classified a
// request in the response headers X-Kubernetes-PF-FlowSchema-UID and -PriorityLevel-UID.
var _ = It("config/default's FlowSchema classifies the manager's leader-election requests as leader-election", func() {
	objs, err := testenv.DecodeManifests(kustomize("default"))
	Expect(err).NotTo(HaveOccurred())

	// The FlowSchema, the ServiceAccount and its RBAC for real (so the requests are
	// authorized; Priority and Fairness classifies them before authorization either way),
	// removed afterwards: the chart's install test creates the same cluster-scoped objects.
	var fsName, saName, ns string
	for _, o := range objs {
		switch o.GetKind() {
		case "Namespace":
			Expect(client.IgnoreAlreadyExists(k8sClient.Create(ctx, o.DeepCopy()))).To(Succeed())
		case "FlowSchema", "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding":
			switch o.GetKind() {
			case "FlowSchema":
				fsName = o.GetName()
			case "ServiceAccount":
				saName, ns = o.GetName(), o.GetNamespace()
			}
			Expect(k8sClient.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("deploy-test"), client.ForceOwnership)).To(Succeed(), "%s %s", o.GetKind(), o.GetName())
			DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, o))).To(Succeed()) })
		}
	}
	Expect(fsName).NotTo(BeEmpty(), "config/default renders a FlowSchema")
	Expect(saName).NotTo(BeEmpty(), "config/default renders the manager's ServiceAccount")

	fs := &flowcontrolv1.FlowSchema{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Name: fsName}, fs)).To(Succeed())
	Expect(fs.Spec.PriorityLevelConfiguration.Name).To(Equal("leader-election"))
	// The API server creates the suggested configuration after it starts.
	level, fallback := &flowcontrolv1.PriorityLevelConfiguration{}, &flowcontrolv1.FlowSchema{}
	Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: "leader-election"}, level)).To(Succeed())
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: "service-accounts"}, fallback)).To(Succeed())
	}).Should(Succeed())
	Expect(fs.Spec.MatchingPrecedence).To(BeNumerically("<", fallback.Spec.MatchingPrecedence))

	// Requests as the manager's ServiceAccount, as a pod's token authenticates it.
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + ns + ":" + saName,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}
	hc, err := rest.HTTPClientFor(cfg)
	Expect(err).NotTo(HaveOccurred())
	classified := func(g Gomega, method, path string, body string) (flowSchema, priorityLevel string) {
		req, err := http.NewRequestWithContext(ctx, method, cfg.Host+path, strings.NewReader(body))
		g.Expect(err).NotTo(HaveOccurred())
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		g.Expect(resp.StatusCode).To(BeElementOf(http.StatusOK, http.StatusCreated, http.StatusNotFound, http.StatusConflict), "%s %s", method, path)
		return resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID), resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedPriorityLevelConfigurationUID)
	}
	leases := "/apis/coordination.k8s.io/v1/namespaces/" + ns + "/leases"
	lease := fmt.Sprintf(`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"agentplane.io"},"spec":{"holderIdentity":%q}}`, "deploy-test")
	// The filter takes a moment to see a new FlowSchema.
	Eventually(func(g Gomega) {
		for _, r := range []struct{ method, path, body string }{
			{http.MethodGet, leases + "/agentplane.io", ""},
			{http.MethodPost, leases, lease},
			{http.MethodPut, leases + "/agentplane.io", lease},
			{http.MethodGet, leases, ""},
		} {
			f, l := classified(g, r.method, r.path, r.body)
			g.Expect(f).To(Equal(string(fs.UID)), "%s %s: FlowSchema", r.method, r.path)
			g.Expect(l).To(Equal(string(level.UID)), "%s %s: priority level", r.method, r.path)
		}
	}).Should(Succeed())
	DeferCleanup(func() {
		Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agentplane.io"}}))).To(Succeed())
	})
	// Its other requests, and Leases elsewhere, stay with service-accounts.
	for _, path := range []string{"/api/v1/namespaces/" + ns + "/configmaps", "/apis/coordination.k8s.io/v1/namespaces/default/leases/agentplane.io"} {
		f, _ := classified(Default, http.MethodGet, path, "")
		Expect(f).To(Equal(string(fallback.UID)), "GET %s: FlowSchema", path)
	}
})

// config/default ships the admission policies of config/policy as the test and dev control
// planes install them (policy.Load: the same names and specs), the binding naming the
// prefixed policy. That they mutate as they should, the Agent controller's specs show on the
// policies testenv installs.
var _ = It("config/default ships config/policy's admission policies, named as the test control plane installs them", func() {
	objs, err := testenv.DecodeManifests(kustomize("default"))
	Expect(err).NotTo(HaveOccurred())
	want, err := policy.Load()
	Expect(err).NotTo(HaveOccurred())
	var policies []admissionregistrationv1.MutatingAdmissionPolicy
	var bindings []admissionregistrationv1.MutatingAdmissionPolicyBinding
	for _, o := range objs {
		switch o.GetKind() {
		case "MutatingAdmissionPolicy":
			var p admissionregistrationv1.MutatingAdmissionPolicy
			Expect(k8sruntime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &p)).To(Succeed())
			policies = append(policies, p)
		case "MutatingAdmissionPolicyBinding":
			var b admissionregistrationv1.MutatingAdmissionPolicyBinding
			Expect(k8sruntime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &b)).To(Succeed())
			bindings = append(bindings, b)
		}
	}
	Expect(policies).To(HaveLen(len(want.Mutating)))
	for i, p := range want.Mutating {
		Expect(policies[i].Name).To(Equal(p.Name))
		Expect(policies[i].Spec).To(Equal(p.Spec), "policy %s", p.Name)
	}
	Expect(bindings).To(HaveLen(len(want.Bindings)))
	for i, b := range want.Bindings {
		Expect(bindings[i].Name).To(Equal(b.Name))
		Expect(bindings[i].Spec).To(Equal(b.Spec), "binding %s", b.Name)
	}
	// What testenv installed is what config/default ships.
	for _, p := range want.Mutating {
		got := &admissionregistrationv1.MutatingAdmissionPolicy{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
	}
})

// kustomize renders config/dir (kubectl kustomize).
func kustomize(dir string) []byte {
	kubectl, err := exec.LookPath("kubectl")
	Expect(err).NotTo(HaveOccurred(), "kubectl renders config/"+dir+" (kubectl kustomize)")
	out, err := exec.Command(kubectl, "kustomize", filepath.Join(testenv.RepoRoot(), "config", dir)).Output()
	Expect(err).NotTo(HaveOccurred())
	return out
}

// dryRunApply applies every object of a rendered YAML stream server-side with dry run and
// counts them by kind. Namespaces are created for real: dry-run objects cannot live in a
// namespace that only exists in the same dry run.
func dryRunApply(rendered []byte) map[string]int {
	objs, err := testenv.DecodeManifests(rendered)
	Expect(err).NotTo(HaveOccurred())
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetKind()]++
		if o.GetKind() == "Namespace" {
			Expect(client.IgnoreAlreadyExists(k8sClient.Create(ctx, o.DeepCopy()))).To(Succeed())
		}
	}
	for _, o := range objs {
		err := k8sClient.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.DryRunAll, client.FieldOwner("deploy-test"), client.ForceOwnership)
		Expect(err).NotTo(HaveOccurred(), "%s %s: %v", o.GetKind(), o.GetName(), apierrors.ReasonForError(err))
	}
	return kinds
}
