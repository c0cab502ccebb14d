package localcluster_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentplane/agentplane/internal/devtools/images"
	"github.com/agentplane/agentplane/internal/devtools/localcluster"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
	"github.com/agentplane/agentplane/internal/devtools/testenv/kubeenv"
)

// TestClusterRunsPodsWithVolumesAndLeavesNothing starts the cluster (with three simulated
// nodes: checkSimulatedNodes), checks its Service network (checkServiceNetwork) and that it
// enforces NetworkPolicies (checkNetworkPolicies), runs a pod of the sandbox image with a claim
// of the default class as a non-root user, checks that the user can write the volume and that
// the claim's data goes with the claim, then stops the cluster and finds nothing of it left on
// the machine.
func TestClusterRunsPodsWithVolumesAndLeavesNothing(t *testing.T) {
	if !testenv.RealNode(t) {
		return
	}
	ctx := context.Background()
	// KWOK's simulated nodes beside the real one (checkSimulatedNodes) on the same cluster: a
	// cluster start and stop is most of this package's time, and the machine runs one at a time.
	c, stopLeavingNothing := startCluster(t, localcluster.Options{BinDir: kubeenv.AssetsDir(), SimulatedNodes: 3})
	if !strings.Contains(c.Config.Host, c.NodeIP) {
		t.Errorf("the API server serves on %s, want the node address %s (pods reach it there)", c.Config.Host, c.NodeIP)
	}
	netcheck := importNetcheck(ctx, t, c)
	checkServiceNetwork(ctx, t, c, netcheck)
	checkNetworkPolicies(ctx, t, c, netcheck)
	const ns = "default"
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "home", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if err := c.Client.Create(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	// The sandbox image has only /pause: the kubelet's exec is not needed to prove the mount
	// is writable, the provisioner's directory on the node shows what the pod wrote.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](images.NodeUID), RunAsGroup: ptr.To[int64](images.NodeUID), FSGroup: ptr.To[int64](images.NodeUID)},
			Containers: []corev1.Container{{
				Name: "c", Image: images.Pause, ImagePullPolicy: corev1.PullNever,
				VolumeMounts: []corev1.VolumeMount{{Name: "home", MountPath: "/home"}},
			}},
			Volumes: []corev1.Volume{{Name: "home", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "home"},
			}}},
		},
	}
	if err := c.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, func() error {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		if pod.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("pod %s: %+v", pod.Status.Phase, pod.Status.Conditions)
		}
		return nil
	})
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
		t.Fatal(err)
	}
	if pvc.Status.Phase != corev1.ClaimBound {
		t.Fatalf("claim %s, want Bound", pvc.Status.Phase)
	}
	var pv corev1.PersistentVolume
	if err := c.Client.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, &pv); err != nil {
		t.Fatal(err)
	}
	data := pv.Spec.Local.Path
	// fsGroup made the volume the pod user's group's, group-writable.
	st, err := os.Stat(data)
	if err != nil {
		t.Fatal(err)
	}
	if out, _ := exec.Command("stat", "-c", "%g %A", data).Output(); !strings.HasPrefix(string(out), "1000 drwxrws") {
		t.Errorf("volume %s is %q (mode %s), want group 1000 with group write and setgid", data, strings.TrimSpace(string(out)), st.Mode())
	}
	if err := c.Client.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, func() error {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err == nil {
			return fmt.Errorf("pod %s still there", pod.Name)
		}
		return nil
	})
	if err := c.Client.Delete(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, func() error {
		if _, err := os.Stat(data); err == nil {
			return fmt.Errorf("volume data %s still there", data)
		}
		if err := c.Client.Get(ctx, client.ObjectKey{Name: pv.Name}, &pv); err == nil {
			return fmt.Errorf("volume %s still there (%s)", pv.Name, pv.Status.Phase)
		}
		return nil
	})

	t.Run("simulated nodes beside the real node", func(t *testing.T) { checkSimulatedNodes(ctx, t, c) })
	stopLeavingNothing()
}

// startCluster starts a cluster of o, stopped when the test ends if it has not been by then;
// stopLeavingNothing stops it and checks that nothing of it is left: its directory, and what
// Leftovers finds.
func startCluster(t *testing.T, o localcluster.Options) (c *localcluster.Cluster, stopLeavingNothing func()) {
	t.Helper()
	c, err := localcluster.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = c.Stop()
		}
	})
	return c, func() {
		t.Helper()
		stopped = true
		checkStopLeavesNothing(t, c)
	}
}

func checkStopLeavesNothing(t *testing.T, c *localcluster.Cluster) {
	t.Helper()
	dir := c.Dir
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the cluster's directory %s is still there", dir)
	}
	// Stop checked for leftovers while it still held the machine's cluster lock; check once
	// more from outside.
	left, err := localcluster.LeftoversAfterStop(dir, localcluster.Baseline{})
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("left behind: %s", strings.Join(left, "\n"))
	}
}

func eventually(t *testing.T, timeout time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
