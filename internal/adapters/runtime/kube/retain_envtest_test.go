package kube_test

import (
	"context"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/runtime/kube"
)

// homeClaim makes the home claim the StatefulSet controller would make for sts's pod (envtest
// runs no StatefulSet controller), labelled as its volume claim template.
func homeClaim(t *testing.T, ctx context.Context, sts *appsv1.StatefulSet) *corev1.PersistentVolumeClaim {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "home-" + sts.Name + "-0", Namespace: sts.Namespace, Labels: sts.Spec.VolumeClaimTemplates[0].Labels},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
	}
	if err := env.Client.Create(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	return pvc
}

// getStatefulSet reads StatefulSet ns/name from the API server.
func getStatefulSet(t *testing.T, ctx context.Context, ns, name string) *appsv1.StatefulSet {
	t.Helper()
	sts := &appsv1.StatefulSet{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sts); err != nil {
		t.Fatal(err)
	}
	return sts
}

// deleted reports whether obj is gone or going (a claim keeps its protection finalizer
// until a controller removes it: being deleted is what Delete can do).
func deleted(t *testing.T, ctx context.Context, obj client.Object) bool {
	t.Helper()
	err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err != nil || obj.GetDeletionTimestamp() != nil
}

func retention(sts *appsv1.StatefulSet) appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy {
	if p := sts.Spec.PersistentVolumeClaimRetentionPolicy; p != nil {
		return *p
	}
	return appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{}
}

var retained = appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
	WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
	WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
}

// TestHomeOutlivesStatefulSet: an agent's StatefulSet retains its home, so the garbage
// collector deleting the StatefulSet (the Agent object lost, not deleted by a user) deletes no
// files; the next Ensure runs the agent on the same home, and only Delete removes it.
func TestHomeOutlivesStatefulSet(t *testing.T) {
	ctx, a := setup(t, "retain")
	r := newRuntime(kube.Options{})
	ensure(t, ctx, r, a, desired())
	sts := getStatefulSet(t, ctx, "retain", "a1")
	if got := retention(sts); got != retained {
		t.Errorf("retention policy %+v, want %+v", got, retained)
	}
	pvc := homeClaim(t, ctx, sts)

	// What the garbage collector does once the StatefulSet's owner is gone.
	if err := env.Client.Delete(ctx, sts, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	if deleted(t, ctx, pvc) {
		t.Fatal("the home went with the StatefulSet")
	}
	ensure(t, ctx, newRuntime(kube.Options{}), a, desired())
	if sts := getStatefulSet(t, ctx, "retain", "a1"); sts.Spec.VolumeClaimTemplates[0].Name+"-a1-0" != pvc.Name {
		t.Errorf("the new StatefulSet's home %s-a1-0, want %s", sts.Spec.VolumeClaimTemplates[0].Name, pvc.Name)
	}

	if err := r.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	if !deleted(t, ctx, pvc) {
		t.Error("Delete left the agent's home")
	}
}

// TestRetentionMovesWithoutRestart: a StatefulSet an earlier version made (WhenDeleted:
// Delete) is switched to Retain by the next Ensure, its pod template unchanged and its pod
// kept.
func TestRetentionMovesWithoutRestart(t *testing.T) {
	ctx, a := setup(t, "retain-upgrade")
	ensure(t, ctx, newRuntime(kube.Options{}), a, desired())
	pod := podFor(t, ctx, "retain-upgrade")
	sts := getStatefulSet(t, ctx, "retain-upgrade", "a1")
	base := sts.DeepCopy()
	sts.Spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted = appsv1.DeletePersistentVolumeClaimRetentionPolicyType
	sts.Annotations[agentsv1.AnnotationApplied] = "earlier-version"
	if err := env.Client.Patch(ctx, sts, client.MergeFrom(base), client.FieldOwner(kube.FieldManager)); err != nil {
		t.Fatal(err)
	}
	template := sts.Spec.Template.DeepCopy()

	ensure(t, ctx, newRuntime(kube.Options{}), a, desired())
	sts = getStatefulSet(t, ctx, "retain-upgrade", "a1")
	if got := retention(sts); got != retained {
		t.Errorf("retention policy %+v after Ensure, want %+v", got, retained)
	}
	if !equality.Semantic.DeepEqual(*template, sts.Spec.Template) {
		t.Errorf("the pod template changed:\n%+v\n%+v", *template, sts.Spec.Template)
	}
	live := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), live); err != nil || live.UID != pod.UID || live.DeletionTimestamp != nil {
		t.Errorf("the pod did not survive the change (%v)", err)
	}
}

// TestAdoptedHomeGoesWithDelete: a pool member's StatefulSet deletes its home with it until an
// agent adopts it, then retains it. A member whose pod was gone when the agent adopted it keeps
// the pool's labels on its home; Delete removes that home all the same, and no home of a member
// that is not the agent's.
func TestAdoptedHomeGoesWithDelete(t *testing.T) {
	f := newPoolFixture(t, "adopted-home")
	f.pool("adopted-home", 2, "adopted-home")
	f.setPool("adopted-home", 2, "adopted-home")
	ms := f.members("adopted-home", "adopted-home")
	if len(ms) != 2 {
		t.Fatalf("%d members, want 2", len(ms))
	}
	for _, m := range ms {
		if p := retention(&m); p.WhenDeleted != appsv1.DeletePersistentVolumeClaimRetentionPolicyType {
			t.Errorf("member %s retention %+v: its home goes with it", m.Name, p)
		}
	}
	pod := f.boot(ms[0], true)
	mine, other := homeClaim(t, f.ctx, &ms[0]), homeClaim(t, f.ctx, &ms[1])
	a := f.agent("adopted-home", "a1")
	tok, ok, err := f.r.ReserveGateway(f.ctx, a, engine.PinnedVersion)
	if err != nil || !ok {
		t.Fatalf("reserve: ok %v, err %v", ok, err)
	}
	// The member's pod is gone when the agent adopts it: the StatefulSet makes the agent's own
	// on the member's home, which nothing relabels.
	if err := env.Client.Delete(f.ctx, pod); err != nil {
		t.Fatal(err)
	}
	ensure(t, f.ctx, f.r, a, desiredFor(a, tok))
	stored := &agentsv1.Agent{}
	if err := env.Client.Get(f.ctx, client.ObjectKeyFromObject(a), stored); err != nil || stored.Annotations[kube.AnnotationGatewaySet] != ms[0].Name {
		t.Fatalf("agent annotations %v (%v)", stored.Annotations, err)
	}
	if p := retention(getStatefulSet(t, f.ctx, "adopted-home", ms[0].Name)); p != retained {
		t.Errorf("adopted retention %+v, want %+v", p, retained)
	}
	if deleted(t, f.ctx, mine); mine.Labels[agentsv1.LabelAgent] != "" {
		t.Fatalf("the home was relabelled (%v): the case under test is gone", mine.Labels)
	}

	// An agent that names a member it did not adopt deletes nothing of it.
	intruder := f.agent("adopted-home", "intruder")
	intruder.Annotations = map[string]string{kube.AnnotationGatewaySet: ms[1].Name}
	intruder.UID = types.UID("not-the-reserving-agent")
	if err := f.r.Delete(f.ctx, intruder); err != nil {
		t.Fatal(err)
	}
	if deleted(t, f.ctx, other) || deleted(t, f.ctx, &ms[1]) {
		t.Error("Delete of another agent removed a pool member's home or StatefulSet")
	}

	if err := f.r.Delete(f.ctx, stored); err != nil {
		t.Fatal(err)
	}
	if !deleted(t, f.ctx, mine) {
		t.Errorf("Delete left the adopted home (labels %v)", mine.Labels)
	}
	if deleted(t, f.ctx, other) {
		t.Error("Delete removed the home of a member the agent did not adopt")
	}
}

// TestRetainedAdoptedHomeIsListed: the home of an adopted pool member (the agent's labels, the
// member's id) outlives its StatefulSet and is one of the runtime's homes.
func TestRetainedAdoptedHomeIsListed(t *testing.T) {
	ctx, a := setup(t, "retain-inventory")
	r := newRuntime(kube.Options{})
	ensure(t, ctx, r, a, desired())
	member := getStatefulSet(t, ctx, "retain-inventory", "a1")
	member.Name = "pool-x1"
	member.Spec.VolumeClaimTemplates[0].Labels[kube.LabelPoolMember] = "x1" // what relabelHome leaves
	pvc := homeClaim(t, ctx, member)
	homes, err := r.Homes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := runtime.Home{Namespace: "retain-inventory", Name: "a1", Location: "pvc/" + pvc.Name}
	if !slices.Contains(homes, want) {
		t.Errorf("homes %+v, want %+v", homes, want)
	}
}
