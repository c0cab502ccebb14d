package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/localcluster"
	"github.com/agentplane/agentplane/internal/testenv"
)

// TestRealNodeGVisor runs a gateway on gVisor: the real node's containerd has runsc (built
// from gVisor's Go module by make gvisor) as the runtime handler of the RuntimeClass gvisor,
// and an Agent whose spec.runtimeClassName names it reaches `running` with its gateway inside
// gVisor's kernel (the Sentry), while an agent without one runs on runc and the host's
// kernel. The cluster's stop leaves nothing of either behind (runsc's sandbox and gofer
// processes included). Create-to-running of both is logged, not asserted.
func TestRealNodeGVisor(t *testing.T) {
	if !testenv.RealNode(t) {
		return
	}
	if !localcluster.HasGVisor(testenv.AssetsDir()) {
		t.Fatalf("no runsc and containerd-shim-runsc-v1 in %s: run `make gvisor` (make test does)", testenv.AssetsDir())
	}
	p, baseline := startRealNode(t, engineDir(t))
	k8s := p.kubeClient()
	ctx := context.Background()
	ns := "dev"

	// create makes an agent through the Agent resource and waits until it runs.
	create := func(name, runtimeClass string) time.Duration {
		t.Helper()
		start := time.Now()
		a := &agentsv1.Agent{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec:       agentsv1.AgentSpec{DisplayName: name, RuntimeClassName: runtimeClass},
		}
		if err := k8s.Create(ctx, a); err != nil {
			t.Fatal(err)
		}
		eventually(t, 5*time.Minute, name+" to run", func() bool {
			r := p.call("GET", "/v0/agents/"+name, nil)
			return r.status == 200 && r.obj("agent")["status"] == "running"
		})
		return time.Since(start)
	}
	// kernel is the gateway's view of the kernel it runs on.
	kernel := func(name string) string {
		t.Helper()
		r := must(t, p.call("POST", "/v0/agents/"+name+"/console/exec", map[string]string{
			"command": `read -r v < /proc/version; echo "$v"`,
		}), 200, "exec in "+name)
		return strings.TrimSpace(r.str("stdout"))
	}
	uname, err := exec.Command("uname", "-r").Output()
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimSpace(string(uname))

	runcTook := create("on-runc", "")
	gvisorTook := create("on-gvisor", localcluster.GVisorRuntimeClass)
	t.Logf("create to running on the real node: runc %s, gVisor (runsc, platform %s) %s",
		runcTook.Round(time.Millisecond), localcluster.GVisorPlatform, gvisorTook.Round(time.Millisecond))

	t.Run("the runc gateway sees the host's kernel", func(t *testing.T) {
		if v := kernel("on-runc"); !strings.Contains(v, host) || strings.Contains(v, "gvisor") {
			t.Errorf("/proc/version in the runc gateway: %q, want the host's %s", v, host)
		}
	})

	t.Run("the gVisor gateway sees gVisor's kernel", func(t *testing.T) {
		pod := gatewayPod(t, k8s, ns, "on-gvisor")
		if pod.Spec.RuntimeClassName == nil || *pod.Spec.RuntimeClassName != localcluster.GVisorRuntimeClass {
			t.Errorf("runtimeClassName %v, want %s", pod.Spec.RuntimeClassName, localcluster.GVisorRuntimeClass)
		}
		v := kernel("on-gvisor")
		if !strings.Contains(v, "gvisor") || strings.Contains(v, host) {
			t.Errorf("/proc/version in the gVisor gateway: %q, want gVisor's kernel, not the host's %s", v, host)
		}
		t.Logf("/proc/version in the gVisor gateway: %s", v)
		// runsc on the host knows the gateway's container: it is a gVisor sandbox, not a runc one.
		if len(pod.Status.ContainerStatuses) == 0 {
			t.Fatal("the gateway pod has no container status")
		}
		id := strings.TrimPrefix(pod.Status.ContainerStatuses[0].ContainerID, "containerd://")
		roots, _ := filepath.Glob(filepath.Join(p.stateDir, "cluster", "runsc", "*"))
		var listed string
		for _, root := range roots {
			out, err := exec.Command(filepath.Join(testenv.AssetsDir(), "runsc"), "--root", root, "list", "--quiet").CombinedOutput()
			if err != nil {
				t.Fatalf("runsc list in %s: %v: %s", root, err, out)
			}
			listed += string(out)
		}
		if id == "" || !strings.Contains(listed, id) {
			t.Errorf("runsc lists %q, want the gateway's container %s", listed, id)
		}
	})

	stopClusterClean(t, p, baseline)
}
