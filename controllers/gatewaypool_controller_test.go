package controllers_test

import (
	"context"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/go-logr/logr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	gatewaypoolctrl "github.com/agentplane/agentplane/controllers/gatewaypool"
	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/adapters/engine/openclaw"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/runtime/kube"
	"github.com/agentplane/agentplane/internal/adapters/runtime/local"
	"github.com/agentplane/agentplane/internal/devtools/fakeclaw"
	"github.com/agentplane/agentplane/internal/rules/admission"
)

var poolVersions = admission.Versions{Default: engine.PinnedVersion, Available: []string{engine.PinnedVersion}}

// startPoolManager runs the GatewayPool controller over rt and returns it with its metrics.
func startPoolManager(rt runtime.Runtime) (*gatewaypoolctrl.Reconciler, *prometheus.Registry) {
	mgr := newManager()
	reg := prometheus.NewRegistry()
	r := &gatewaypoolctrl.Reconciler{
		Client: mgr.GetClient(), Runtime: rt, Versions: poolVersions,
		Recorder: mgr.GetEventRecorder("gatewaypool-test"), Metrics: reg,
	}
	Expect(r.SetupWithManager(mgr)).To(Succeed())
	DeferCleanup(startManager(mgr))
	return r, reg
}

// localPoolRuntime is a local runtime over the engine double with fast polls.
func localPoolRuntime() *local.Runtime {
	engineDir, err := fakeclaw.EngineDir()
	Expect(err).NotTo(HaveOccurred())
	rt, err := local.New(local.Options{
		StateDir: GinkgoT().TempDir(), Engine: openclaw.New(),
		EngineDirs:     map[string]string{engine.PinnedVersion: engineDir},
		HealthInterval: 30 * time.Millisecond, RunningHealthInterval: 100 * time.Millisecond,
		RestartBackoff: local.Backoff{Initial: 200 * time.Millisecond, Max: 800 * time.Millisecond},
		Log:            logr.Discard(),
	})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { _ = rt.Shutdown(context.Background()) })
	return rt
}

func getPool(name string) *agentsv1.GatewayPool {
	gp := &agentsv1.GatewayPool{}
	Expect(k8sClient.Get(ctx, types.NamespacedName{Name: name}, gp)).To(Succeed())
	return gp
}

// poolState is what the tests compare of a pool's status.
func poolState(name string) func() []any {
	return func() []any {
		gp := getPool(name)
		c := metav1.Condition{}
		for _, x := range gp.Status.Conditions {
			if x.Type == agentsv1.ConditionReady {
				c = x
			}
		}
		return []any{gp.Status.Ready, gp.Status.Booting, gp.Status.Replicas, gp.Status.Claimed, string(c.Status), c.Reason, gp.Status.ObservedGeneration == gp.Generation}
	}
}

var _ = Describe("GatewayPool controller", func() {
	It("keeps the local runtime's pool as the spec and the scale subresource say, and reports it", func() {
		rt := localPoolRuntime()
		r, reg := startPoolManager(rt)
		gp := &agentsv1.GatewayPool{ObjectMeta: metav1.ObjectMeta{Name: "pool-local"}, Spec: agentsv1.GatewayPoolSpec{Replicas: 2}}
		Expect(k8sClient.Create(ctx, gp)).To(Succeed())
		DeferCleanup(func() { _ = k8sClient.Delete(context.Background(), gp) })
		Eventually(poolState(gp.Name)).Should(Equal([]any{int32(2), int32(0), int32(2), int64(0), "True", agentsv1.ReasonPoolReady, true}))
		Expect(getPool(gp.Name).Status.EngineVersion).To(Equal(engine.PinnedVersion))

		// kubectl scale: the scale subresource reads and writes spec.replicas / status.replicas.
		scale := &autoscalingv1.Scale{}
		Expect(k8sClient.SubResource("scale").Get(ctx, gp, scale)).To(Succeed())
		Expect(scale.Spec.Replicas).To(Equal(int32(2)))
		Expect(scale.Status.Replicas).To(Equal(int32(2)))
		scale.Spec.Replicas = 3
		Expect(k8sClient.SubResource("scale").Update(ctx, gp, client.WithSubResourceBody(scale))).To(Succeed())
		Eventually(poolState(gp.Name)).Should(Equal([]any{int32(3), int32(0), int32(3), int64(0), "True", agentsv1.ReasonPoolReady, true}))
		scale.Spec.Replicas, scale.ResourceVersion = -1, ""
		err := k8sClient.SubResource("scale").Update(ctx, gp, client.WithSubResourceBody(scale))
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "negative replicas: %v", err)

		// A claim: counted in status, an event of the pool, the metrics.
		agent := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "pool-test", Name: "claimer"}}
		o, err := rt.Ensure(ctx, agent, runtime.Desired{EngineVersion: engine.PinnedVersion, GatewayToken: "tok-claimer-0123456789"})
		Expect(err).NotTo(HaveOccurred())
		Expect(o.ClaimedFrom).To(HavePrefix("pool-local/"))
		DeferCleanup(func() { _ = rt.Delete(context.Background(), agent) })
		Eventually(poolState(gp.Name)).Should(Equal([]any{int32(3), int32(0), int32(3), int64(1), "True", agentsv1.ReasonPoolReady, true}))
		Eventually(func() []float64 {
			return []float64{
				metricValue(reg, "agentplane_gateway_pool_claims_total", gp.Name, ""),
				metricValue(reg, "agentplane_gateway_pool_claim_duration_seconds", gp.Name, ""),
				metricValue(reg, "agentplane_gateway_pool_members", gp.Name, "ready"),
			}
		}).Should(Equal([]float64{1, 1, 3}))
		Eventually(func() []string {
			list := &eventsv1.EventList{}
			Expect(k8sClient.List(ctx, list)).To(Succeed())
			var reasons []string
			for _, e := range list.Items {
				if e.Regarding.Name == gp.Name && e.Regarding.Kind == "GatewayPool" {
					reasons = append(reasons, e.Reason+": "+e.Note)
				}
			}
			return reasons
		}).Should(ContainElement(And(HavePrefix(agentsv1.EventPoolClaimed+": gateway pool-local-"), ContainSubstring("bound to agent pool-test/claimer"))))

		// Quiet passes write nothing: each pass has ended (and written whatever it writes) when
		// Reconcile returns.
		rv := getPool(gp.Name).ResourceVersion
		for range 3 {
			_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: gp.Name}})
			Expect(err).NotTo(HaveOccurred())
		}
		Expect(getPool(gp.Name).ResourceVersion).To(Equal(rv), "a pass rewrote the pool's unchanged status")

		// An engine version that is not offered drains the pool; the claims are kept.
		patch := client.MergeFrom(getPool(gp.Name))
		bad := getPool(gp.Name)
		bad.Spec.EngineVersion = "1999.1.1"
		Expect(k8sClient.Patch(ctx, bad, patch)).To(Succeed())
		Eventually(poolState(gp.Name)).Should(Equal([]any{int32(0), int32(0), int32(0), int64(1), "False", agentsv1.ReasonInvalidVersion, true}))
		Expect(rt.PoolStatus(gp.Name).Size).To(Equal(0))

		// Back to the default version, scaled to 0: ready with nothing to keep.
		patch = client.MergeFrom(getPool(gp.Name))
		zero := getPool(gp.Name)
		zero.Spec.EngineVersion, zero.Spec.Replicas = "", 0
		Expect(k8sClient.Patch(ctx, zero, patch)).To(Succeed())
		Eventually(poolState(gp.Name)).Should(Equal([]any{int32(0), int32(0), int32(0), int64(1), "True", agentsv1.ReasonPoolReady, true}))

		// Deleted: the runtime forgets the pool.
		patch = client.MergeFrom(getPool(gp.Name))
		one := getPool(gp.Name)
		one.Spec.Replicas = 1
		Expect(k8sClient.Patch(ctx, one, patch)).To(Succeed())
		Eventually(func() int { return rt.PoolStatus(gp.Name).Ready }).Should(Equal(1))
		Expect(k8sClient.Delete(ctx, gp)).To(Succeed())
		Eventually(func() int { return rt.PoolStatus(gp.Name).Size + rt.PoolStatus(gp.Name).Ready }).Should(Equal(0))
	})

	It("keeps the kube runtime's members in the pool's workspaces, none without", func() {
		rt := kube.New(kube.Options{
			Client: k8sClient, APIReader: k8sClient, RESTConfig: env.Config, Scheme: k8sClient.Scheme(), Engine: openclaw.New(),
		})
		startPoolManager(rt)
		gp := &agentsv1.GatewayPool{ObjectMeta: metav1.ObjectMeta{Name: "pool-kube"}, Spec: agentsv1.GatewayPoolSpec{Replicas: 2}}
		Expect(k8sClient.Create(ctx, gp)).To(Succeed())
		DeferCleanup(func() { _ = k8sClient.Delete(context.Background(), gp) })
		Eventually(poolState(gp.Name)).Should(Equal([]any{int32(0), int32(0), int32(0), int64(0), "False", agentsv1.ReasonPoolNoWorkspaces, true}))
		Expect(getPool(gp.Name).Status.Conditions[0].Message).To(ContainSubstring("spec.workspaces names none"))

		Expect(k8sClient.Create(ctx, namespace("pool-kube-ws"))).To(Succeed())
		patch := client.MergeFrom(getPool(gp.Name))
		ws := getPool(gp.Name)
		ws.Spec.Workspaces = []string{"pool-kube-ws"}
		Expect(k8sClient.Patch(ctx, ws, patch)).To(Succeed())
		Eventually(poolState(gp.Name)).Should(Equal([]any{int32(0), int32(2), int32(2), int64(0), "False", agentsv1.ReasonPoolFilling, true}))
		var members appsv1.StatefulSetList
		Expect(k8sClient.List(ctx, &members, client.InNamespace("pool-kube-ws"), client.MatchingLabels{kube.LabelPool: gp.Name})).To(Succeed())
		Expect(members.Items).To(HaveLen(2))
	})

	It("defaults replicas to 1 and refuses a negative count", func() {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": agentsv1.GroupVersion.String(), "kind": "GatewayPool",
			"metadata": map[string]any{"name": "pool-defaults"}, "spec": map[string]any{},
		}}
		Expect(k8sClient.Create(ctx, u)).To(Succeed())
		DeferCleanup(func() { _ = k8sClient.Delete(context.Background(), u) })
		Expect(getPool("pool-defaults").Spec.Replicas).To(Equal(int32(1)))
		bad := &agentsv1.GatewayPool{ObjectMeta: metav1.ObjectMeta{Name: "pool-negative"}, Spec: agentsv1.GatewayPoolSpec{Replicas: -2}}
		Expect(apierrors.IsInvalid(k8sClient.Create(ctx, bad))).To(BeTrue())
	})
})

// metricValue is the value of the metric family name for pool (and state, when set): a
// counter's or gauge's value, a histogram's sample count; -1 when absent.
func metricValue(reg *prometheus.Registry, name, pool, state string) float64 {
	families, err := reg.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["pool"] != pool || labels["state"] != state {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return -1
}
