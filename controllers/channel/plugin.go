package channel

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/controllers"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// defaultPluginTimeout bounds `openclaw plugins install` (an npm install, ~30 s).
const defaultPluginTimeout = 5 * time.Minute

// errGatewayUnreachable: the install could not apply the plugin through the agent's gateway,
// which did not answer (it was restarting, for this very channel's tokens, say): the agent is
// not ready yet, the plugin is not at fault.
var errGatewayUnreachable = errors.New("the agent's gateway did not answer the plugin's install")

// installPlugin runs `openclaw plugins install @openclaw/<type>@<engine version>` in the
// agent's home: the channel plugins are released with the engine, one version each, and a
// newer plugin may not load in an older engine. It comes from the registry, the official
// source: the engine trusts a local copy or archive of the same package less (a channel that
// needs trusted plugin state, as Slack's relay mode's durable ingress does, stays blocked). The engine refuses to install a plugin twice
// ("plugin already exists"), which counts as installed. The install also trusts the plugin in
// the config (plugins.entries.<id>), which the gateway hot-reloads.
func (r *Reconciler) installPlugin(ctx context.Context, agent *agentsv1.Agent, t agentsv1.ChannelType) error {
	spec := controllers.ChannelPlugin(t)
	if v := agent.Status.EngineVersion; v != "" {
		spec += "@" + v
	}
	timeout := r.PluginTimeout
	if timeout <= 0 {
		timeout = defaultPluginTimeout
	}
	res, err := r.Runtime.Exec(ctx, agent, runtime.ExecRequest{
		Argv: []string{"plugins", "install", spec}, Engine: true, Network: true, Timeout: timeout, MaxOutput: 64 << 10,
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
	case strings.Contains(out, "Gateway not reachable"):
		// With a local gateway running, the engine installs through it (docs/cli/plugins/install.md).
		return fmt.Errorf("%w: %s", errGatewayUnreachable, lastLines(out, 3))
	}
	return fmt.Errorf("openclaw plugins install %s exited %d: %s", spec, res.ExitCode, lastLines(out, 6))
}

// lastLines are the last n non-empty lines of out, joined by " | " (the cause of a failure is
// rarely the last line alone: the engine ends with the gateway's connection details).
func lastLines(out string, n int) string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines[max(0, len(lines)-n):], " | ")
}
