package localcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// gVisor is the node's optional sandboxed runtime: when BinDir holds runsc and its containerd
// shim (make gvisor, hack/build-gvisor.sh builds both from gVisor's Go module), containerd gets
// the runtime handler GVisorHandler and the cluster the RuntimeClass GVisorRuntimeClass, so a
// pod (an agent's gateway with spec.runtimeClassName) can run on gVisor's kernel instead of
// the host's.
const (
	// GVisorRuntimeClass is the RuntimeClass the cluster creates when gVisor is present.
	GVisorRuntimeClass = "gvisor"
	// GVisorHandler is containerd's runtime handler for runsc.
	GVisorHandler = "runsc"
	// GVisorPlatform is how runsc's Sentry intercepts the sandbox's system calls: systrap
	// (seccomp traps, gVisor's default; ptrace runs here too). kvm needs hardware
	// virtualisation; on a node that is itself a virtual machine with only a paravirtual
	// /dev/kvm (kvm-pvm, no VMX/SVM, as where this was written) runsc's KVM platform hangs
	// before the container's first process runs.
	GVisorPlatform = "systrap"
)

// gvisorFiles are what BinDir must hold for the node to offer gVisor.
var gvisorFiles = []string{"runsc", "containerd-shim-runsc-v1"}

// HasGVisor tells whether binDir holds gVisor's runsc and containerd shim.
func HasGVisor(binDir string) bool {
	for _, f := range gvisorFiles {
		if st, err := os.Stat(filepath.Join(binDir, f)); err != nil || st.Size() == 0 {
			return false
		}
	}
	return true
}

// GVisor tells whether the node offers gVisor (the RuntimeClass GVisorRuntimeClass).
func (c *Cluster) GVisor() bool { return c.gvisor != nil }

// gvisorRuntime is the runsc handler of the node's containerd.
type gvisorRuntime struct {
	// shimDir holds only a link to the shim: containerd 1.6 finds a runtime's shim by its
	// name (containerd-shim-runsc-v1) on its PATH, ignoring the CRI's runtime_path, and this
	// directory on its PATH adds nothing else of BinDir to it.
	shimDir string
	runsc   string // absolute path
	config  string // the shim's options (toml), in the cluster's directory
}

// env is what containerd's environment needs for the runsc handler: the shim on its PATH.
func (g *gvisorRuntime) env() []string {
	if g == nil {
		return nil
	}
	return []string{"PATH=" + g.shimDir + string(os.PathListSeparator) + os.Getenv("PATH")}
}

// gvisorSetup writes the shim's options when BinDir holds gVisor; nil when it does not.
//
// runsc keeps its state (root) and its logs in the cluster's directory, so the leak check
// and the sweep of Stop, which look for the directory in processes' command lines, find its
// sandbox and gofer processes too. Its network mode is runsc's default, sandbox: the Sentry's
// own network stack takes over the interface of the pod's network namespace that the CNI
// bridge made, so the host kernel's stack never sees the pod's sockets.
func (c *Cluster) gvisorSetup() (*gvisorRuntime, error) {
	if !HasGVisor(c.opts.BinDir) {
		return nil, nil
	}
	bin, err := filepath.Abs(c.opts.BinDir)
	if err != nil {
		return nil, err
	}
	g := &gvisorRuntime{
		shimDir: filepath.Join(c.Dir, "gvisor-bin"),
		runsc:   filepath.Join(bin, "runsc"),
		config:  filepath.Join(c.Dir, "runsc.toml"),
	}
	if err := os.MkdirAll(g.shimDir, 0o755); err != nil {
		return nil, err
	}
	shim := filepath.Join(g.shimDir, "containerd-shim-runsc-v1")
	_ = os.Remove(shim)
	if err := os.Symlink(filepath.Join(bin, "containerd-shim-runsc-v1"), shim); err != nil {
		return nil, err
	}
	cfg := fmt.Sprintf(`binary_name = %q
root = %q

[runsc_config]
  platform = %q
  network = "sandbox"
  debug-log = %q
`, g.runsc, filepath.Join(c.Dir, "runsc"), GVisorPlatform, filepath.Join(c.LogDir, "runsc")+"/")
	if err := os.WriteFile(g.config, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	return g, nil
}

// containerdRuntime is the runsc handler's section of containerd's configuration.
func (g *gvisorRuntime) containerdRuntime() string {
	if g == nil {
		return ""
	}
	return fmt.Sprintf(`    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.%s]
      runtime_type = "io.containerd.runsc.v1"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.%s.options]
        TypeUrl = "io.containerd.runsc.v1.options"
        ConfigPath = %q
`, GVisorHandler, GVisorHandler, g.config)
}

// createGVisorRuntimeClass creates the RuntimeClass of the runsc handler.
func (c *Cluster) createGVisorRuntimeClass(ctx context.Context) error {
	rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: GVisorRuntimeClass}, Handler: GVisorHandler}
	if err := c.Client.Create(ctx, rc); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("RuntimeClass %s: %w", GVisorRuntimeClass, err)
	}
	return nil
}
