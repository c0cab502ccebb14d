package renderingrollout

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/scheme"
)

func agentOn(name, target string, rendering agentsv1.AgentRendering) *agentsv1.Agent {
	return &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: name},
		Status: agentsv1.AgentStatus{RenderingTarget: target, Rendering: rendering}}
}

// TestReconcile: the manager's RenderingRollout is computed as the EngineUpgrade it stands
// for, plus how many of its agents are on the manager's rendering; agents whose status does not
// tell yet count pending and are not taken in a wave; another manager's rollout is left alone.
func TestReconcile(t *testing.T) {
	for _, tc := range []struct {
		name           string
		rendering      string
		agents         []client.Object
		writes         int
		phase          agentsv1.EngineUpgradePhase
		current, total int32
		wave           []string
	}{
		{name: "another rendering's rollout", rendering: "p0", agents: []client.Object{agentOn("a", "p1.x", agentsv1.RenderingOutdated)}},
		{name: "every agent on the rendering", rendering: "p1", writes: 1, phase: agentsv1.UpgradeSucceeded, current: 1, total: 1,
			agents: []client.Object{agentOn("a", "p1.x", agentsv1.RenderingCurrent)}},
		{name: "an outdated agent starts a wave", rendering: "p1", writes: 1, phase: agentsv1.UpgradeProgressing, current: 1, total: 3, wave: []string{"ws/b"},
			agents: []client.Object{agentOn("a", "p1.x", agentsv1.RenderingCurrent), agentOn("b", "p1.y", agentsv1.RenderingOutdated), agentOn("c", "p0.z", agentsv1.RenderingOutdated)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rr := &agentsv1.RenderingRollout{ObjectMeta: metav1.ObjectMeta{Name: RenderingRolloutName(tc.rendering), Generation: 1},
				Spec: agentsv1.RenderingRolloutSpec{Rendering: tc.rendering, WavePercent: 100}}
			writes := 0
			c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(append(tc.agents, rr)...).
				WithStatusSubresource(rr).Build(), interceptor.Funcs{
				SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
					writes++
					return c.SubResource(sub).Patch(ctx, obj, p, opts...)
				}})
			r := &Reconciler{Client: c, Platform: "p1", Clock: clocktesting.NewFakePassiveClock(time.Now())}
			if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(rr)}); err != nil {
				t.Fatal(err)
			}
			got := &agentsv1.RenderingRollout{}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(rr), got); err != nil {
				t.Fatal(err)
			}
			if writes != tc.writes || got.Status.Phase != tc.phase || got.Status.Current != tc.current || got.Status.Total != tc.total {
				t.Fatalf("%d writes, phase %q, %d of %d on the rendering; want %d, %q, %d of %d",
					writes, got.Status.Phase, got.Status.Current, got.Status.Total, tc.writes, tc.phase, tc.current, tc.total)
			}
			if tc.writes == 0 {
				return
			}
			if c := meta.FindStatusCondition(got.Status.Conditions, agentsv1.ConditionReady); c == nil || got.Status.ObservedGeneration != 1 {
				t.Fatalf("Ready %+v, generation %d", c, got.Status.ObservedGeneration)
			}
			var wave []string
			if n := len(got.Status.Waves); n > 0 {
				wave = got.Status.Waves[n-1].Agents
			}
			if len(wave) != len(tc.wave) || len(wave) > 0 && wave[0] != tc.wave[0] {
				t.Errorf("wave %v, want %v (an agent whose status does not tell is not taken)", wave, tc.wave)
			}
		})
	}
}
