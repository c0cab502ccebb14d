// Package kit is the test control plane as the public test kit hands it out
// (pkg/agentplanetest/controlplane delegates here): an envtest environment with agentplane's
// CRDs and the kube-apiserver and etcd that `agentplane envtest-assets` builds. The project's
// own suites start it from here (internal/devtools/testenv/kubeenv), so they start the way a
// consumer's do while internal packages never import pkg/. Apart from its parent so that
// what links the parent (`agentplane envtest-assets`) does not link envtest.
package kit

import (
	"os"
	goruntime "runtime"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/agentplane/agentplane/config/crd"
	"github.com/agentplane/agentplane/internal/devtools/controlplane"
)

// AssetsDir is where the control-plane binaries (kube-apiserver, etcd) are: $KUBEBUILDER_ASSETS
// when set, else the directory `agentplane envtest-assets` builds them into for this binary's Go
// version, when it holds them; "" otherwise (envtest then looks in its default places).
func AssetsDir() string {
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		return d
	}
	if d, err := controlplane.Dir(goruntime.Version()); err == nil && controlplane.Complete(d) {
		return d
	}
	return ""
}

// NewEnvironment returns an envtest environment with agentplane's CRDs and the binaries of
// AssetsDir; set more fields before its Start.
func NewEnvironment() *envtest.Environment {
	return &envtest.Environment{CRDs: crd.MustCRDs(), BinaryAssetsDirectory: AssetsDir(), ErrorIfCRDPathMissing: true}
}
