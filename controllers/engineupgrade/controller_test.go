package engineupgrade

import (
	"context"
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/controllers"
	"github.com/agentplane/agentplane/internal/rules/admission"
	"github.com/agentplane/agentplane/internal/scheme"
)

var versions = admission.Versions{Default: "1.0", Available: []string{"1.0", "2.0"}}

func agentOn(name, version string) *agentsv1.Agent {
	return &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: name, Labels: map[string]string{"tier": "a"}},
		Spec: agentsv1.AgentSpec{Engine: agentsv1.EngineSpec{Version: version}}}
}

// setup is a Reconciler over a fake API server holding objs, counting the status writes.
func setup(funcs interceptor.Funcs, objs ...client.Object) (*Reconciler, client.Client, *int) {
	writes := new(int)
	funcs.SubResourcePatch = func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
		*writes++
		return c.SubResource(sub).Patch(ctx, obj, p, opts...)
	}
	c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).
		WithStatusSubresource(&agentsv1.EngineUpgrade{}).Build(), funcs)
	return &Reconciler{Client: c, Versions: versions, Clock: clocktesting.NewFakePassiveClock(time.Now())}, c, writes
}

// TestReconcile: a pass computes the rollout's phase, counts and Ready condition in one place
// and acknowledges the generation: a version not offered or a selector that is not one says
// so; nothing to move is Succeeded; agents to move start a wave (recorded before any agent is
// touched) and the pass runs again at once to step it.
func TestReconcile(t *testing.T) {
	for _, tc := range []struct {
		name     string
		spec     agentsv1.EngineUpgradeSpec
		agents   []client.Object
		phase    agentsv1.EngineUpgradePhase
		reason   string
		wave     []string
		upgrades int32
		requeue  bool
	}{
		{name: "a version not offered", spec: agentsv1.EngineUpgradeSpec{Version: "9.9"}, reason: agentsv1.ReasonInvalidVersion},
		{name: "a selector that is not one", agents: []client.Object{agentOn("a", "1.0")},
			spec:   agentsv1.EngineUpgradeSpec{Version: "2.0", AgentSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "a b"}}},
			reason: agentsv1.ReasonInvalidSelector},
		{name: "nothing to move", spec: agentsv1.EngineUpgradeSpec{Version: "2.0"}, agents: []client.Object{agentOn("a", "2.0")},
			phase: agentsv1.UpgradeSucceeded, reason: agentsv1.ReasonUpgradeSucceeded},
		{name: "a wave starts", spec: agentsv1.EngineUpgradeSpec{Version: "2.0", WavePercent: 50},
			agents: []client.Object{agentOn("a", "1.0"), agentOn("b", ""), agentOn("c", "2.0")},
			phase:  agentsv1.UpgradeProgressing, reason: agentsv1.ReasonUpgradeProgressing, wave: []string{"ws/a"}, upgrades: 1, requeue: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eu := &agentsv1.EngineUpgrade{ObjectMeta: metav1.ObjectMeta{Name: "up", Generation: 2}, Spec: tc.spec}
			r, c, writes := setup(interceptor.Funcs{}, append(tc.agents, eu)...)
			res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(eu)})
			if err != nil {
				t.Fatal(err)
			}
			got := &agentsv1.EngineUpgrade{}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(eu), got); err != nil {
				t.Fatal(err)
			}
			cond := meta.FindStatusCondition(got.Status.Conditions, agentsv1.ConditionReady)
			if *writes != 1 || cond == nil || cond.Reason != tc.reason || got.Status.Phase != tc.phase || got.Status.ObservedGeneration != 2 {
				t.Fatalf("%d writes, phase %q, Ready %+v, generation %d; want one write, %q, %s, 2", *writes, got.Status.Phase, cond, got.Status.ObservedGeneration, tc.phase, tc.reason)
			}
			var wave []string
			if n := len(got.Status.Waves); n > 0 {
				wave = got.Status.Waves[n-1].Agents
			}
			if len(wave) != len(tc.wave) || len(wave) > 0 && wave[0] != tc.wave[0] || got.Status.Counts.Upgrading != tc.upgrades {
				t.Errorf("wave %v, %d upgrading; want %v", wave, got.Status.Counts.Upgrading, tc.wave)
			}
			if (res.RequeueAfter > 0) != tc.requeue {
				t.Errorf("result %+v, want a requeue: %v", res, tc.requeue)
			}
			a := &agentsv1.Agent{}
			if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ws", Name: "a"}, a); err == nil && len(a.Annotations) != 0 {
				t.Errorf("an agent was touched in the pass that recorded its wave: %v", a.Annotations)
			}
		})
	}
}

// TestStalePassWritesNothing: a pass whose write to an agent conflicted (it read a stale
// cache) writes no status and runs again soon, on fresh data; a pass that failed writes none
// either.
func TestStalePassWritesNothing(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		wantErr bool
	}{
		{name: "a conflict", err: apierrors.NewConflict(schema.GroupResource{Resource: "agents"}, "a", errors.New("changed"))},
		{name: "another error", err: errors.New("refused"), wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eu := &agentsv1.EngineUpgrade{ObjectMeta: metav1.ObjectMeta{Name: "up", Generation: 2}, Spec: agentsv1.EngineUpgradeSpec{Version: "2.0"},
				Status: agentsv1.EngineUpgradeStatus{CurrentWave: 1, Waves: []agentsv1.UpgradeWave{{Index: 1, Agents: []string{"ws/a"}, State: agentsv1.WaveUpgrading}}}}
			r, _, writes := setup(interceptor.Funcs{Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
				return tc.err
			}}, eu, agentOn("a", "1.0"))
			res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(eu)})
			if (err != nil) != tc.wantErr || *writes != 0 {
				t.Fatalf("error %v, %d status writes; want an error: %v, no write", err, *writes, tc.wantErr)
			}
			if !tc.wantErr && res.RequeueAfter != controllers.StaleCacheRetry {
				t.Fatalf("result %+v, want a run again after %s", res, controllers.StaleCacheRetry)
			}
		})
	}
}
