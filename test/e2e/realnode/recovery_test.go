package realnode

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime/kube"
	"github.com/agentplane/agentplane/internal/devtools/images"
	"github.com/agentplane/agentplane/test/e2e"
)

// checkLostAgent loses an Agent object the way a restore of a stale backup does (the object
// gone without the platform deleting anything: its finalizer dropped while no manager runs)
// and expects what README "Recovery" promises on the kube runtime: the garbage collector
// takes the agent's StatefulSet and pod, the home claim stays; `agentplane doctor` reports
// the orphan home (exit status 1); the Agent re-created by name (as from a newer backup or
// its manifest) runs on the same home with its files, and doctor no longer reports it.
func checkLostAgent(ctx context.Context, t *testing.T, d *deployment) {
	p := d.client(ctx, t)
	id := e2e.CreateRunning(t, p, map[string]any{"name": "Lost"})["id"].(string)
	base := "/v0/agents/" + id
	e2e.Eventually(t, "the agent to run", func() bool {
		r := p.Call("GET", base, nil)
		return r.Status == 200 && r.Obj("agent")["status"] == "running"
	})
	e2e.Must(t, p.Call("POST", base+"/console/exec", map[string]string{"command": "echo kept through the loss > kept.txt"}), 200, "exec")
	agent := &agentsv1.Agent{}
	if err := d.k8s.Get(ctx, client.ObjectKey{Namespace: "demo", Name: id}, agent); err != nil {
		t.Fatal(err)
	}
	saved := agent.DeepCopy()

	replicas := d.scaleManager(ctx, t, 0)
	agent.Finalizers = nil
	if err := d.k8s.Update(ctx, agent); err != nil {
		t.Fatal(err)
	}
	if err := d.k8s.Delete(ctx, agent); err != nil {
		t.Fatal(err)
	}
	e2e.Eventually(t, "the garbage collector to take the agent's StatefulSet and pod", func() bool {
		sts := apierrors.IsNotFound(d.k8s.Get(ctx, client.ObjectKey{Namespace: saved.Namespace, Name: kube.StatefulSetName(saved)}, &appsv1.StatefulSet{}))
		pod := apierrors.IsNotFound(d.k8s.Get(ctx, client.ObjectKey{Namespace: saved.Namespace, Name: kube.PodName(saved)}, &corev1.Pod{}))
		return sts && pod
	})
	claim := &corev1.PersistentVolumeClaim{}
	if err := d.k8s.Get(ctx, client.ObjectKey{Namespace: saved.Namespace, Name: kube.PVCName(saved)}, claim); err != nil || claim.DeletionTimestamp != nil {
		t.Fatalf("the lost agent's home claim: %v (deleting: %v)", err, claim.DeletionTimestamp)
	}
	if out, code := d.doctor(t); code != 1 || !strings.Contains(out, "OrphanHome") || !strings.Contains(out, id) {
		t.Fatalf("doctor after the loss: exit %d\n%s", code, out)
	}

	d.scaleManager(ctx, t, replicas)
	d.waitAvailable(ctx, images.ManagerImage)
	d.waitFacade(t)
	again := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Name: saved.Name, Namespace: saved.Namespace,
		Labels: saved.Labels, Annotations: saved.Annotations}, Spec: saved.Spec}
	if err := d.k8s.Create(ctx, again); err != nil {
		t.Fatal(err)
	}
	e2e.Eventually(t, "the re-created agent to run", func() bool {
		r := p.Call("GET", base, nil)
		return r.Status == 200 && r.Obj("agent")["status"] == "running"
	})
	if r := e2e.Must(t, p.Call("POST", base+"/console/exec", map[string]string{"command": "cat kept.txt"}), 200, "exec"); r.Str("stdout") != "kept through the loss\n" {
		t.Fatalf("the re-created agent's file: %s", r.Raw)
	}
	if out, _ := d.doctor(t); strings.Contains(out, id) {
		t.Errorf("doctor still reports the re-created agent:\n%s", out)
	}
	e2e.Must(t, p.Call("DELETE", base, nil), 200, "delete")
	e2e.Eventually(t, "the agent to be gone", func() bool { return p.Call("GET", base, nil).Status == 404 })
}

// doctor runs `agentplane doctor --runtime kube` against the cluster and returns its output
// and exit status.
func (d *deployment) doctor(t *testing.T) (string, int) {
	t.Helper()
	cmd := exec.Command(d.bin, "doctor", "--runtime", "kube")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+d.cl.Kubeconfig)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &exit):
		return out.String(), exit.ExitCode()
	}
	t.Fatalf("agentplane doctor: %v\n%s", err, out.String())
	return "", 0
}
