package channel

import (
	"context"
	"fmt"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/controllers"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// installPlugin runs the engine's plugin install of `@openclaw/<type>@<engine version>` in the
// agent's home: the channel plugins are released with the engine, one version each, and a
// newer plugin may not load in an older engine. It comes from the registry, the official
// source: the engine trusts a local copy or archive of the same package less (a channel that
// needs trusted plugin state, as Slack's relay mode's durable ingress does, stays blocked).
// The engine adapter reads the outcome (engine.Engine.ParsePluginInstall): a plugin already
// there counts as installed, and engine.ErrGatewayUnreachable says the agent's gateway did not
// answer, not that the plugin is at fault.
func (r *Reconciler) installPlugin(ctx context.Context, agent *agentsv1.Agent, t agentsv1.ChannelType) error {
	spec := controllers.ChannelPlugin(t)
	if v := agent.Status.EngineVersion; v != "" {
		spec += "@" + v
	}
	cmd := r.Engine.PluginInstallCommand(spec)
	if r.PluginTimeout > 0 {
		cmd.Timeout = r.PluginTimeout
	}
	res, err := r.Runtime.Exec(ctx, agent, runtime.ExecRequest{
		Argv: cmd.Args, Engine: true, Env: cmd.Env, Network: true, Timeout: cmd.Timeout, MaxOutput: 64 << 10,
	})
	if err != nil {
		return err
	}
	if res.TimedOut {
		return fmt.Errorf("the install of %s timed out after %s", spec, cmd.Timeout)
	}
	if err := r.Engine.ParsePluginInstall(res.Stdout, res.Stderr, res.ExitCode); err != nil {
		return fmt.Errorf("the install of %s: %w", spec, err)
	}
	return nil
}
