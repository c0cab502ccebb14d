package localcluster_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentplane/agentplane/internal/devtools/images"
	"github.com/agentplane/agentplane/internal/devtools/localcluster"
)

// checkSimulatedNodes: on a cluster started with three KWOK nodes, a StatefulSet with a claim
// that tolerates their taint and selects them becomes Ready on one (its claim bound), and a pod
// that does neither runs on the real node.
func checkSimulatedNodes(ctx context.Context, t *testing.T, c *localcluster.Cluster) {
	var nodes corev1.NodeList
	if err := c.Client.List(ctx, &nodes, client.MatchingLabels(localcluster.SimulatedNodeSelector())); err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 3 {
		t.Fatalf("%d simulated nodes, want 3", len(nodes.Items))
	}
	for _, n := range nodes.Items {
		if len(n.Spec.Taints) != 1 || !n.Spec.Taints[0].MatchTaint(&localcluster.SimulatedNodeTaint) {
			t.Errorf("node %s has taints %v, want only %v", n.Name, n.Spec.Taints, localcluster.SimulatedNodeTaint)
		}
	}

	const ns = "default"
	labels := map[string]string{"app": "sim"}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "sim", Namespace: ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: localcluster.SimulatedNodeSelector(),
					Tolerations:  []corev1.Toleration{localcluster.SimulatedNodeToleration()},
					Containers: []corev1.Container{{
						Name: "c", Image: "example.invalid/never-pulled:1",
						VolumeMounts: []corev1.VolumeMount{{Name: "home", MountPath: "/home"}},
					}},
				},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "home"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}},
		},
	}
	if err := c.Client.Create(ctx, sts); err != nil {
		t.Fatal(err)
	}
	real := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "real", Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "c", Image: images.Pause, ImagePullPolicy: corev1.PullNever,
		}}},
	}
	if err := c.Client.Create(ctx, real); err != nil {
		t.Fatal(err)
	}
	simulated := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "sim-0", Namespace: ns}}
	eventually(t, time.Minute, func() error {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(simulated), simulated); err != nil {
			return err
		}
		if !strings.HasPrefix(simulated.Spec.NodeName, localcluster.SimulatedNodePrefix) || !podReady(simulated) {
			return fmt.Errorf("pod %s on %q, %s %+v", simulated.Name, simulated.Spec.NodeName, simulated.Status.Phase, simulated.Status.Conditions)
		}
		return nil
	})
	var pvc corev1.PersistentVolumeClaim
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "home-sim-0"}, &pvc); err != nil {
		t.Fatal(err)
	}
	if pvc.Status.Phase != corev1.ClaimBound {
		t.Errorf("claim %s is %s, want Bound", pvc.Name, pvc.Status.Phase)
	}
	eventually(t, 2*time.Minute, func() error {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(real), real); err != nil {
			return err
		}
		if real.Spec.NodeName != c.NodeName || !podReady(real) {
			return fmt.Errorf("pod %s on %q, %s %+v", real.Name, real.Spec.NodeName, real.Status.Phase, real.Status.Conditions)
		}
		return nil
	})
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
