// Package controlplane is the test control plane half of the agentplane test kit: an envtest
// environment with agentplane's CRDs and the kube-apiserver and etcd that
// `agentplane envtest-assets` builds. It depends on nothing of the platform itself, so code that
// only needs an API server with the CRDs (agentplane's own internal test helpers, say) can use
// it without linking the controllers and the REST facade. agentplanetest.NewEnvironment and
// agentplanetest.AssetsDir are the same functions.
package controlplane

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
