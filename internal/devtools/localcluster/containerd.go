package localcluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/devtools/images"
)

// criNamespace is the containerd namespace the CRI plugin (and so the kubelet) uses.
const criNamespace = "k8s.io"

// containerdConfig is containerd 1.6's configuration for the node: its own root, state and
// socket under the cluster's directories, the CRI plugin with the settings this machine
// needs, and only the snapshotter the node uses.
//
//   - restrict_oom_score_adj: without CAP_SYS_RESOURCE runc fails with "can't get final
//     child's PID from pipe" when it raises a container's OOM score.
//   - SystemdCgroup false: there is no systemd; the kubelet's cgroupDriver is cgroupfs.
//   - sandbox_image: the pause image is imported, never pulled.
//   - runsc: gVisor's runtime handler, only when the node has gVisor (gvisor.go).
func containerdConfig(root, state, sock, cniConf string, g *gvisorRuntime) string {
	return fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = %q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  enable_cdi = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
%s  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
`, root, state, sock, images.Pause, g.containerdRuntime(), cniBinDir, cniConf)
}

// startContainerd starts containerd and waits for its socket.
func (c *Cluster) startContainerd(ctx context.Context) error {
	g, err := c.gvisorSetup()
	if err != nil {
		return err
	}
	c.gvisor = g
	cfg := filepath.Join(c.Dir, "containerd.toml")
	if err := os.WriteFile(cfg, []byte(containerdConfig(c.containerdRoot, filepath.Join(c.Dir, "containerd-state"), c.sock, c.cniConf, g)), 0o600); err != nil {
		return err
	}
	p, err := startEnv("containerd", "containerd", []string{"--config", cfg}, g.env(), c.LogDir, c.Dir)
	if err != nil {
		return err
	}
	c.containerd = p
	return waitFor(ctx, "containerd", 30*time.Second, p, func() error {
		conn, err := net.Dial("unix", c.sock)
		if err != nil {
			return err
		}
		conn.Close()
		return nil
	})
}

// ctr runs containerd's CLI against the node's containerd in the CRI namespace.
func (c *Cluster) ctr(ctx context.Context, args ...string) (string, error) {
	return run(ctx, "ctr", append([]string{"--address", c.sock, "--namespace", criNamespace}, args...)...)
}

// Import imports the image tarball file (its image is named in the tarball).
func (c *Cluster) Import(ctx context.Context, file string) error {
	if _, err := c.ctr(ctx, "images", "import", "--snapshotter", "overlayfs", file); err != nil {
		return fmt.Errorf("import %s: %w", file, err)
	}
	return nil
}

// removeContainers deletes every container and task containerd still has in the CRI
// namespace, which lets their shims exit.
func (c *Cluster) removeContainers(ctx context.Context) error {
	out, err := c.ctr(ctx, "containers", "list", "--quiet")
	if err != nil {
		return err
	}
	var firstErr error
	for _, id := range strings.Fields(out) {
		_, _ = c.ctr(ctx, "tasks", "kill", "--signal", "SIGKILL", id)
		for range 50 {
			if _, err := c.ctr(ctx, "tasks", "delete", "--force", id); err == nil || strings.Contains(err.Error(), "not found") {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if _, err := c.ctr(ctx, "containers", "delete", id); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}
