package realnode

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentplane/agentplane/internal/devtools/localcluster"
	"github.com/agentplane/agentplane/internal/devtools/testenv/kubeenv"
	"github.com/agentplane/agentplane/test/e2e"
)

// checkKernels proves the gateway of agent onGVisor runs inside gVisor's kernel (the Sentry:
// its /proc/version, and runsc on the host lists its container) while that of agent onRunc
// sees the host's kernel.
func checkKernels(t *testing.T, p *e2e.Platform, k8s client.Client, ns, onRunc, onGVisor string) {
	t.Helper()
	// kernel is the gateway's view of the kernel it runs on.
	kernel := func(name string) string {
		t.Helper()
		r := e2e.Must(t, p.Call("POST", "/v0/agents/"+name+"/console/exec", map[string]string{
			"command": `read -r v < /proc/version; echo "$v"`,
		}), 200, "exec in "+name)
		return strings.TrimSpace(r.Str("stdout"))
	}
	uname, err := exec.Command("uname", "-r").Output()
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimSpace(string(uname))
	if v := kernel(onRunc); !strings.Contains(v, host) || strings.Contains(v, "gvisor") {
		t.Errorf("/proc/version in the runc gateway: %q, want the host's %s", v, host)
	}
	pod := gatewayPod(t, k8s, ns, onGVisor)
	if pod.Spec.RuntimeClassName == nil || *pod.Spec.RuntimeClassName != localcluster.GVisorRuntimeClass {
		t.Errorf("runtimeClassName %v, want %s", pod.Spec.RuntimeClassName, localcluster.GVisorRuntimeClass)
	}
	v := kernel(onGVisor)
	if !strings.Contains(v, "gvisor") || strings.Contains(v, host) {
		t.Errorf("/proc/version in the gVisor gateway: %q, want gVisor's kernel, not the host's %s", v, host)
	}
	t.Logf("/proc/version in the gVisor gateway: %s", v)
	// runsc on the host knows the gateway's container: it is a gVisor sandbox, not a runc one.
	if len(pod.Status.ContainerStatuses) == 0 {
		t.Fatal("the gateway pod has no container status")
	}
	id := strings.TrimPrefix(pod.Status.ContainerStatuses[0].ContainerID, "containerd://")
	roots, _ := filepath.Glob(filepath.Join(p.StateDir, "cluster", "runsc", "*"))
	var listed string
	for _, root := range roots {
		out, err := exec.Command(filepath.Join(kubeenv.AssetsDir(), "runsc"), "--root", root, "list", "--quiet").CombinedOutput()
		if err != nil {
			t.Fatalf("runsc list in %s: %v: %s", root, err, out)
		}
		listed += string(out)
	}
	if id == "" || !strings.Contains(listed, id) {
		t.Errorf("runsc lists %q, want the gateway's container %s", listed, id)
	}
}
