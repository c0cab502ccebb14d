package realnode

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentplane/agentplane/internal/adapters/engine/openclaw"
	"github.com/agentplane/agentplane/internal/adapters/runtime/kube"
	"github.com/agentplane/agentplane/internal/adapters/runtime/kube/kubetest"
	"github.com/agentplane/agentplane/internal/adapters/runtime/runtimetest"
	"github.com/agentplane/agentplane/internal/devtools/images"
	"github.com/agentplane/agentplane/test/e2e"
)

// checkRuntimeContract runs the runtime contract (runtimetest: every promise, the home's
// too) against the kube runtime on this cluster's real StatefulSet controller, kubelet and
// containerd, with the real gateway images of engine versions version and other. The
// deployed manager is scaled to zero first: its Agent controller would reconcile the suite's
// agents and fight it.
func checkRuntimeContract(ctx context.Context, t *testing.T, d *deployment, version, other string) {
	d.scaleManager(ctx, t, 0)
	eng := openclaw.New()
	rt := kube.New(kube.Options{
		Client: d.k8s, APIReader: d.k8s, RESTConfig: d.cl.Config, Scheme: d.k8s.Scheme(), Engine: eng,
		Image: images.GatewayTemplate(), Init: []string{images.Init, "--"}, Probe: []string{images.Probe},
	})
	runtimetest.Run(t, func(t *testing.T) *runtimetest.Fixture {
		return kubetest.Fixture(t, kubetest.Cluster{
			Runtime: rt, Client: d.k8s, Layout: eng.Layout(), Version: version, OtherVersion: other,
			Timeout: 4 * time.Minute,
		})
	})
}

// scaleManager sets the manager Deployment's replicas and waits until that many pods run.
func (d *deployment) scaleManager(ctx context.Context, t *testing.T, replicas int32) {
	t.Helper()
	deploy := &appsv1.Deployment{}
	key := client.ObjectKey{Namespace: deployNamespace, Name: "agentplane-controller-manager"}
	if err := d.k8s.Get(ctx, key, deploy); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(deploy.DeepCopy())
	deploy.Spec.Replicas = ptr.To(replicas)
	if err := d.k8s.Patch(ctx, deploy, patch); err != nil {
		t.Fatal(err)
	}
	e2e.Eventually(t, 2*time.Minute, "the manager to run on the replicas asked", func() bool {
		return len(d.allManagerPods(ctx)) == int(replicas)
	})
}
