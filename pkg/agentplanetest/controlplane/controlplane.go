// Package controlplane is the test control plane half of the agentplane test kit: an envtest
// environment with agentplane's CRDs and the kube-apiserver and etcd that
// `agentplane envtest-assets` builds. It depends on nothing of the platform itself, so code that
// only needs an API server with the CRDs can use it without linking the controllers and the
// REST facade. agentplanetest.NewEnvironment and agentplanetest.AssetsDir are the same
// functions, and agentplane's own suites start theirs from the same code
// (internal/devtools/controlplane/kit).
package controlplane

import (
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/agentplane/agentplane/internal/devtools/controlplane/kit"
)

// AssetsDir is where the control-plane binaries (kube-apiserver, etcd) are: $KUBEBUILDER_ASSETS
// when set, else the directory `agentplane envtest-assets` builds them into for this binary's Go
// version, when it holds them; "" otherwise (envtest then looks in its default places).
func AssetsDir() string { return kit.AssetsDir() }

// NewEnvironment returns an envtest environment with agentplane's CRDs and the binaries of
// AssetsDir; set more fields before its Start.
func NewEnvironment() *envtest.Environment { return kit.NewEnvironment() }
