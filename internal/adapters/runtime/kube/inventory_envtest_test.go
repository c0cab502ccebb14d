package kube_test

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/runtime/kube"
)

// TestHomesListsTheHomeVolumes: the kube runtime's inventory is the agents' home claims, found
// by label whether or not their Agent exists (the claims the StatefulSet controller makes
// from the agent's StatefulSet; an unrelated claim is not a home), and Delete takes the home
// out of it.
func TestHomesListsTheHomeVolumes(t *testing.T) {
	ctx, a := setup(t, "inventory")
	r := newRuntime(kube.Options{})
	ensure(t, ctx, r, a, desired())
	sts := &appsv1.StatefulSet{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: kube.StatefulSetName(a)}, sts); err != nil {
		t.Fatal(err)
	}
	// What the StatefulSet controller makes of the claim template, and a claim of someone else.
	tmpl := sts.Spec.VolumeClaimTemplates[0]
	claims := []*corev1.PersistentVolumeClaim{
		{ObjectMeta: metav1.ObjectMeta{Name: kube.PVCName(a), Namespace: a.Namespace, Labels: tmpl.Labels}, Spec: tmpl.Spec},
		{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: a.Namespace}, Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		}},
	}
	for _, c := range claims {
		if err := env.Client.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	homes, err := r.Homes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := runtime.Home{Namespace: a.Namespace, Name: a.Name, Location: "pvc/" + kube.PVCName(a)}
	if !slices.Contains(homes, want) || slices.ContainsFunc(homes, func(h runtime.Home) bool { return h.Location == "pvc/data" }) {
		t.Fatalf("homes %+v, want %+v and not the claim data", homes, want)
	}
	if err := r.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	if homes, err = r.Homes(ctx); err != nil || slices.Contains(homes, want) {
		t.Fatalf("homes after Delete: %+v, %v", homes, err)
	}
}
