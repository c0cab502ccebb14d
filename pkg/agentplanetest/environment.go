package agentplanetest

import (
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/agentplane/agentplane/pkg/agentplanetest/controlplane"
)

// AssetsDir is where the control-plane binaries (kube-apiserver, etcd) are: $KUBEBUILDER_ASSETS
// when set, else the directory `agentplane envtest-assets` builds them into for this binary's Go
// version, when it holds them; "" otherwise (envtest then looks in its default places).
func AssetsDir() string { return controlplane.AssetsDir() }

// NewEnvironment returns an envtest environment with agentplane's CRDs and the binaries of
// AssetsDir; set more fields before its Start.
func NewEnvironment() *envtest.Environment { return controlplane.NewEnvironment() }
