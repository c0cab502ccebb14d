package stress

import (
	"context"
	"fmt"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/platform"
	"github.com/agentplane/agentplane/internal/scheme"
)

// runBareManager is the failover benchmark's baseline: controller-runtime alone, holding the
// lease the platform would (the same durations, name, namespace and release on a clean stop),
// with one reconciler that acknowledges each Agent's generation and nothing else (no facade,
// no runtime, no other kind's informers). A handover of the platform measured against it is
// what the platform adds to what the lease itself costs. It prints childListening once the
// manager is built, as a platform child does once its facade listens.
func runBareManager(ctx context.Context, cfg *rest.Config, lease platform.LeaderElectionOptions) error {
	o := ctrl.Options{Scheme: scheme.New(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"}
	if err := lease.Apply(&o, platform.DefaultSystemNamespace); err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, o)
	if err != nil {
		return err
	}
	ack := &generationAck{c: mgr.GetClient()}
	if err := ctrl.NewControllerManagedBy(mgr).For(&agentsv1.Agent{}).Named("bare-agent").Complete(ack); err != nil {
		return err
	}
	fmt.Println(childListening + "bare")
	return mgr.Start(ctx)
}

// generationAck writes each Agent's generation into its status, as the platform's Agent
// controller does when it has reconciled it.
type generationAck struct{ c client.Client }

func (r *generationAck) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var a agentsv1.Agent
	if err := r.c.Get(ctx, req.NamespacedName, &a); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if a.Status.ObservedGeneration == a.Generation {
		return ctrl.Result{}, nil
	}
	patch := client.MergeFrom(a.DeepCopy())
	a.Status.ObservedGeneration = a.Generation
	return ctrl.Result{}, r.c.Status().Patch(ctx, &a, patch)
}
