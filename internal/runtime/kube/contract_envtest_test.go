package kube_test

import (
	"testing"

	"github.com/agentplane/agentplane/internal/runtime/kube"
	"github.com/agentplane/agentplane/internal/runtime/kube/kubetest"
	"github.com/agentplane/agentplane/internal/runtime/runtimetest"
)

// TestContract runs the runtime contract under envtest: the lifecycle promises, with the
// fixture playing the StatefulSet controller and the kubelet. The promises about the home
// need a gateway that runs: test/e2e/realnode can run them (kubetest.Cluster.Kubelet).
func TestContract(t *testing.T) {
	rt := newRuntime(kube.Options{})
	runtimetest.Run(t, func(t *testing.T) *runtimetest.Fixture {
		return kubetest.Fixture(t, kubetest.Cluster{
			Runtime: rt, Client: env.Client, Layout: kube.NewStubEngine().Layout(),
			Version: "2026.9.6", OtherVersion: "2026.9.7",
		})
	})
}
