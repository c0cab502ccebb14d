package realnode

import (
	"context"
	"os"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentplane/agentplane/internal/adapters/engine/openclaw"
	"github.com/agentplane/agentplane/internal/adapters/runtime/kube"
	"github.com/agentplane/agentplane/internal/adapters/runtime/kube/kubetest"
	"github.com/agentplane/agentplane/internal/adapters/runtime/runtimetest"
	"github.com/agentplane/agentplane/internal/devtools/fakeclaw"
	"github.com/agentplane/agentplane/internal/devtools/images"
	"github.com/agentplane/agentplane/test/e2e"
)

// Engine versions of the fake gateway images the runtime contract runs.
const contractVersion, contractOtherVersion = "2026.1.1", "2026.1.2"

// contractImages are the fake engine's gateway images of the runtime contract's two versions:
// this test binary carries the fake (package fakeclaw), so the images hold it.
func contractImages(t *testing.T, probe string) []images.Spec {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var specs []images.Spec
	for _, v := range []string{contractVersion, contractOtherVersion} {
		s, err := images.FakeGatewaySpec(self, fakeclaw.SwitchEnv, probe, v)
		if err != nil {
			t.Fatal(err)
		}
		specs = append(specs, s)
	}
	return specs
}

// checkRuntimeContract runs the runtime contract (runtimetest: every promise, the home's
// too) against the kube runtime on this cluster's real StatefulSet controller, kubelet and
// containerd. Its gateways are the fake engine's (contractImages): the contract is about the
// runtime, and the suite boots some twenty gateways, which the real engine takes a minute
// each for on this machine (TestRealNodeKubeRuntime runs the real engine's through the same
// runtime). The deployed manager is scaled to zero first: its Agent controller would
// reconcile the suite's agents and fight it.
func checkRuntimeContract(ctx context.Context, t *testing.T, d *deployment) {
	d.scaleManager(ctx, t, 0)
	eng := openclaw.New()
	rt := kube.New(kube.Options{
		Client: d.k8s, APIReader: d.k8s, RESTConfig: d.cl.Config, Scheme: d.k8s.Scheme(), Engine: eng,
		Image: images.FakeGatewayRepository + ":%s", EngineCommand: []string{"/usr/local/bin/openclaw"},
		Init: []string{images.Init, "--"}, Probe: []string{images.Probe},
	})
	runtimetest.Run(t, func(t *testing.T) *runtimetest.Fixture {
		return kubetest.Fixture(t, kubetest.Cluster{
			Runtime: rt, Client: d.k8s, Layout: eng.Layout(), Version: contractVersion, OtherVersion: contractOtherVersion,
			Timeout: 2 * time.Minute,
		})
	})
}

// scaleManager sets the manager Deployment's replicas, waits until that many pods run and
// returns the replicas it had.
func (d *deployment) scaleManager(ctx context.Context, t *testing.T, replicas int32) int32 {
	t.Helper()
	deploy := &appsv1.Deployment{}
	key := client.ObjectKey{Namespace: deployNamespace, Name: "agentplane-controller-manager"}
	if err := d.k8s.Get(ctx, key, deploy); err != nil {
		t.Fatal(err)
	}
	had := ptr.Deref(deploy.Spec.Replicas, 1)
	patch := client.MergeFrom(deploy.DeepCopy())
	deploy.Spec.Replicas = ptr.To(replicas)
	if err := d.k8s.Patch(ctx, deploy, patch); err != nil {
		t.Fatal(err)
	}
	e2e.Eventually(t, "the manager to run on the replicas asked", func() bool {
		return len(d.allManagerPods(ctx)) == int(replicas) && len(d.managerPods(ctx)) == int(replicas)
	})
	return had
}
