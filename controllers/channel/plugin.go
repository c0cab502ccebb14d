package channel

import (
	"context"
	"fmt"
	"strings"
	"time"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/controllers"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// defaultPluginTimeout bounds `openclaw plugins install` (an npm install, ~30 s).
const defaultPluginTimeout = 5 * time.Minute

// installPlugin runs `openclaw plugins install @openclaw/<type>` in the agent's home. The
// engine refuses to install a plugin twice ("plugin already exists"), which counts as
// installed. The install also trusts the plugin in the config (plugins.entries.<id>), which
// the gateway hot-reloads.
func (r *Reconciler) installPlugin(ctx context.Context, agent *agentsv1.Agent, t agentsv1.ChannelType) error {
	spec := controllers.ChannelPlugin(t)
	timeout := r.PluginTimeout
	if timeout <= 0 {
		timeout = defaultPluginTimeout
	}
	res, err := r.Runtime.Exec(ctx, agent, runtime.ExecRequest{
		Argv: []string{"plugins", "install", spec}, Engine: true, Timeout: timeout, MaxOutput: 64 << 10,
	})
	if err != nil {
		return err
	}
	out := string(res.Stdout) + "\n" + string(res.Stderr)
	switch {
	case res.ExitCode == 0, strings.Contains(out, "plugin already exists"):
		return nil
	case res.TimedOut:
		return fmt.Errorf("openclaw plugins install %s timed out after %s", spec, timeout)
	}
	return fmt.Errorf("openclaw plugins install %s exited %d: %s", spec, res.ExitCode, lastLine(out))
}

// lastLine is the last non-empty line of out.
func lastLine(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
