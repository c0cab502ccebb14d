package realnode

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/devtools/images"
	"github.com/agentplane/agentplane/test/e2e"
)

// checkFailover measures the hand-over of the leader lease between the deployment's two
// replicas on the real node, after a crash (the leader's process killed: its lease has to
// expire) and after a clean stop (its pod deleted: the lease is released on the way out). Two
// figures from the kill: the lease held by a new holder, and the first reconcile by the new
// leader (a Workspace created once the lease changed hands becoming Active: the old leader
// can no longer be the one that reconciles it). Meanwhile a client calls the other replica's
// facade directly (its pod IP) every 50 ms: no request may fail. The figures are logged, not
// asserted (README "Failover" names the command).
func checkFailover(ctx context.Context, t *testing.T, d *deployment) {
	for i, c := range []struct {
		name string
		stop func(ctx context.Context, t *testing.T, pod corev1.Pod)
	}{
		{"crash", d.killManager},
		{"clean stop", d.deletePod},
	} {
		d.waitAvailable(ctx, images.ManagerImage)
		var leader corev1.Pod
		e2e.Eventually(t, "a leader", func() bool {
			var ok bool
			leader, ok = d.leader(ctx)
			return ok
		})
		holder := d.holder(ctx, t)
		other := d.otherPod(ctx, t, leader)
		poll := pollFacade("http://"+other.Status.PodIP+":8080", d.client(ctx, t).Token)
		start := time.Now()
		c.stop(ctx, t, leader)
		for h := holder; h == holder || h == ""; h = d.holder(ctx, t) {
			if time.Since(start) > e2e.EventBound {
				t.Fatalf("the lease is still %s's %s after the %s", holder, e2e.EventBound, c.name)
			}
			time.Sleep(20 * time.Millisecond)
		}
		handover := time.Since(start)
		ws := &agentsv1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("failover-%d", i)}}
		if err := d.k8s.Create(ctx, ws); err != nil {
			t.Fatal(err)
		}
		// Polled every 20 ms (e2e.Eventually's 250 ms would blur the figure).
		for ws.Status.Phase != "Active" {
			if time.Since(start) > e2e.EventBound {
				t.Fatalf("the workspace created after the %s is not Active after %s", c.name, e2e.EventBound)
			}
			time.Sleep(20 * time.Millisecond)
			_ = d.k8s.Get(ctx, client.ObjectKeyFromObject(ws), ws)
		}
		reconciled := time.Since(start)
		total, failed := poll.stop()
		t.Logf("failover after a %s: lease handed over %.2f s after it, first reconcile by the new leader "+
			"%.2f s after it; %d requests to the other replica, %d failed", c.name, handover.Seconds(),
			reconciled.Seconds(), total, len(failed))
		if total == 0 || len(failed) > 0 {
			t.Errorf("the other replica's facade during the %s: %d requests, failed: %v", c.name, total, failed)
		}
		if err := d.k8s.Delete(ctx, ws); err != nil {
			t.Fatal(err)
		}
	}
}

// holder is the leader lease's holder identity ("" when none).
func (d *deployment) holder(ctx context.Context, t *testing.T) string {
	t.Helper()
	var lease coordinationv1.Lease
	if err := d.k8s.Get(ctx, client.ObjectKey{Namespace: deployNamespace, Name: "agentplane.io"}, &lease); err != nil {
		t.Fatal(err)
	}
	if lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}

// otherPod is the manager pod that is not leader.
func (d *deployment) otherPod(ctx context.Context, t *testing.T, leader corev1.Pod) corev1.Pod {
	t.Helper()
	for _, p := range d.managerPods(ctx) {
		if p.UID != leader.UID && p.Status.PodIP != "" {
			return p
		}
	}
	t.Fatalf("no manager pod beside the leader %s", leader.Name)
	return corev1.Pod{}
}

// killManager kills the manager process of pod with SIGKILL, as a crash does: the kubelet
// restarts the container, and nothing releases the lease.
func (d *deployment) killManager(_ context.Context, t *testing.T, pod corev1.Pod) {
	t.Helper()
	pid, err := managerPID(string(pod.UID))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill the manager of %s (pid %d): %v", pod.Name, pid, err)
	}
}

// deletePod deletes pod with its grace period, as a rollout or a drain does: the manager
// stops cleanly and releases the lease.
func (d *deployment) deletePod(ctx context.Context, t *testing.T, pod corev1.Pod) {
	t.Helper()
	if err := d.k8s.Delete(ctx, &pod); err != nil {
		t.Fatal(err)
	}
}

// managerPID finds the process of the node that runs /agentplane in the pod uid's cgroup (the
// cgroup path holds the pod's UID, with underscores under the systemd driver).
func managerPID(uid string) (int, error) {
	forms := []string{uid, strings.ReplaceAll(uid, "-", "_")}
	procs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return 0, err
	}
	for _, proc := range procs {
		cmdline, err := os.ReadFile(filepath.Join(proc, "cmdline"))
		if err != nil || !strings.HasPrefix(string(cmdline), "/agentplane\x00manager") {
			continue
		}
		cgroup, err := os.ReadFile(filepath.Join(proc, "cgroup"))
		if err != nil {
			continue
		}
		for _, f := range forms {
			if strings.Contains(string(cgroup), f) {
				return strconv.Atoi(filepath.Base(proc))
			}
		}
	}
	return 0, fmt.Errorf("no manager process of pod %s on the node", uid)
}

// poller calls a facade's GET /v0/agents every 50 ms until stopped.
type poller struct {
	done   chan struct{}
	wg     sync.WaitGroup
	mu     sync.Mutex
	total  int
	failed []string
}

func pollFacade(url, token string) *poller {
	p := &poller{done: make(chan struct{})}
	hc := &http.Client{Timeout: 5 * time.Second}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-p.done:
				return
			case <-tick.C:
			}
			req, _ := http.NewRequest("GET", url+"/v0/agents", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := hc.Do(req)
			p.mu.Lock()
			p.total++
			switch {
			case err != nil:
				p.failed = append(p.failed, err.Error())
			case resp.StatusCode != http.StatusOK:
				p.failed = append(p.failed, resp.Status)
			}
			p.mu.Unlock()
			if err == nil {
				resp.Body.Close()
			}
		}
	}()
	return p
}

// stop ends the polling and returns how many calls were made and the failures.
func (p *poller) stop() (int, []string) {
	close(p.done)
	p.wg.Wait()
	return p.total, p.failed
}
