package controllers_test

import (
	"bytes"
	"errors"
	"io"
	"os/exec"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentplane/agentplane/internal/testenv"
)

// The in-cluster deployment (config/default) must render and be accepted by a real API
// server: every object is applied server-side with dry run.
var _ = Describe("config/default", func() {
	It("renders with kustomize and passes a server-side dry run", func() {
		kubectl, err := exec.LookPath("kubectl")
		Expect(err).NotTo(HaveOccurred(), "kubectl renders config/default (kubectl kustomize)")
		out, err := exec.Command(kubectl, "kustomize", filepath.Join(testenv.RepoRoot(), "config", "default")).Output()
		Expect(err).NotTo(HaveOccurred())

		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
		var objs []*unstructured.Unstructured
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				Expect(err).NotTo(HaveOccurred())
			}
			if len(u.Object) > 0 {
				objs = append(objs, u)
			}
		}
		kinds := map[string]int{}
		for _, o := range objs {
			kinds[o.GetKind()]++
		}
		Expect(kinds).To(HaveKeyWithValue("CustomResourceDefinition", 10))
		Expect(kinds).To(HaveKey("Deployment"))
		Expect(kinds).To(HaveKey("ClusterRole"))
		Expect(kinds).To(HaveKey("NetworkPolicy"))
		Expect(kinds).To(HaveKey("Service"))

		// The namespace itself is created for real: dry-run objects cannot live in a
		// namespace that only exists in the same dry run.
		for _, o := range objs {
			if o.GetKind() == "Namespace" {
				Expect(client.IgnoreAlreadyExists(k8sClient.Create(ctx, o.DeepCopy()))).To(Succeed())
			}
		}
		for _, o := range objs {
			err := k8sClient.Patch(ctx, o, client.Apply, client.DryRunAll, client.FieldOwner("deploy-test"), client.ForceOwnership)
			Expect(err).NotTo(HaveOccurred(), "%s %s: %v", o.GetKind(), o.GetName(), apierrors.ReasonForError(err))
		}
	})
})
