package openclaw

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/adapters/engine"
)

// pluginInstallTimeout bounds `openclaw plugins install` (an npm install from the registry:
// about 30 s on an idle host, minutes on a loaded one).
const pluginInstallTimeout = 5 * time.Minute

// The engine CLI's words this adapter classifies a plugin install by.
const (
	// pluginExists: the engine refuses to install a plugin twice (exit 1).
	pluginExists = "plugin already exists"
	// gatewayUnreachable: with a local gateway configured, the engine applies an install
	// through it (docs/cli/plugins/install.md) and says so when the gateway does not answer.
	gatewayUnreachable = "Gateway not reachable"
)

// pluginRejected matches an install that fails the same way whenever it is tried: the
// registry has no such package or version (the engine's own test for npm's answer, plus npm's
// ETARGET, as whole words: npm's output carries base64 hashes), or the engine's install
// policy blocks the plugin.
var pluginRejected = regexp.MustCompile(`Package not found on npm:|\bE404\b|(?i:404 not found|not in this registry)|\bETARGET\b|No matching version found|Install blocked by policy|blocked by your plugin policy`)

// PluginInstallCommand implements engine.Engine: `openclaw plugins install <spec>`, which
// installs the package from the registry into the agent's home and trusts it in the config
// (plugins.entries.<id>, hot-reloaded by the gateway).
func (e *Engine) PluginInstallCommand(spec string) engine.Command {
	return engine.Command{Args: []string{"plugins", "install", spec}, Timeout: pluginInstallTimeout}
}

// ParsePluginInstall implements engine.Engine: exit 0, or the engine's refusal of a plugin it
// already has, is installed (nil); the engine saying the agent's gateway did not answer is
// engine.ErrGatewayUnreachable; the registry or the install policy refusing the plugin is
// engine.ErrPluginRejected; anything else (the registry or the gateway busy or down, ...) is
// engine.ErrCLI alone. Each carries the output's last lines.
func (e *Engine) ParsePluginInstall(stdout, stderr []byte, exitCode int) error {
	out := string(stdout) + "\n" + string(stderr)
	switch {
	case exitCode == 0, strings.Contains(out, pluginExists):
		return nil
	case strings.Contains(out, gatewayUnreachable):
		return fmt.Errorf("%w: %s", engine.ErrGatewayUnreachable, lastLines(out, 3))
	case pluginRejected.MatchString(out):
		return fmt.Errorf("%w (%w): exit code %d: %s", engine.ErrPluginRejected, engine.ErrCLI, exitCode, lastLines(out, 6))
	}
	return fmt.Errorf("%w: exit code %d: %s", engine.ErrCLI, exitCode, lastLines(out, 6))
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
