package controllers_test

import (
	"os/exec"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentplane/agentplane/config/crd"
	"github.com/agentplane/agentplane/internal/testenv"
)

// The in-cluster deployments (config/default, and config/local for the local cluster) must
// render and be accepted by a real API server: every object is applied server-side with dry
// run.
var _ = DescribeTable("the in-cluster deployment",
	func(dir string) {
		kubectl, err := exec.LookPath("kubectl")
		Expect(err).NotTo(HaveOccurred(), "kubectl renders config/"+dir+" (kubectl kustomize)")
		out, err := exec.Command(kubectl, "kustomize", filepath.Join(testenv.RepoRoot(), "config", dir)).Output()
		Expect(err).NotTo(HaveOccurred())

		kinds := dryRunApply(out)
		Expect(kinds).To(HaveKeyWithValue("CustomResourceDefinition", len(crd.MustCRDs())))
		Expect(kinds).To(HaveKey("Deployment"))
		Expect(kinds).To(HaveKey("ClusterRole"))
		Expect(kinds).To(HaveKey("NetworkPolicy"))
		Expect(kinds).To(HaveKey("Service"))
	},
	Entry("config/default renders and passes a server-side dry run", "default"),
	Entry("config/local renders and passes a server-side dry run", "local"),
)

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
		err := k8sClient.Patch(ctx, o, client.Apply, client.DryRunAll, client.FieldOwner("deploy-test"), client.ForceOwnership)
		Expect(err).NotTo(HaveOccurred(), "%s %s: %v", o.GetKind(), o.GetName(), apierrors.ReasonForError(err))
	}
	return kinds
}
