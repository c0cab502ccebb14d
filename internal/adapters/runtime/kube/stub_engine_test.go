package kube

import (
	"encoding/json"
	"strconv"

	"github.com/agentplane/agentplane/internal/adapters/engine"
)

// stubEngine is the little of an engine the kube runtime uses. The other methods are left to
// the embedded nil interface: calling one panics, which a test would show.
type stubEngine struct{ engine.Engine }

func (stubEngine) Name() string { return "openclaw" }

func (stubEngine) Layout() engine.Layout {
	return engine.Layout{
		StateDir:     ".openclaw",
		ConfigPath:   ".openclaw/openclaw.json",
		WorkspaceDir: ".openclaw/workspace",
		SkillsDir:    ".openclaw/workspace/skills",
	}
}

func (stubEngine) Env(home string, port int) map[string]string {
	return map[string]string{
		"HOME":                  home,
		"OPENCLAW_HOME":         home,
		"OPENCLAW_NO_RESPAWN":   "1",
		"OPENCLAW_GATEWAY_PORT": strconv.Itoa(port),
	}
}

func (stubEngine) GatewayCommand(p engine.GatewayParams) engine.Command {
	return engine.Command{Args: []string{"gateway", "run", "--port", strconv.Itoa(p.Port), "--bind", p.Bind, "--auth", "token"}}
}

func (stubEngine) InitialConfig(id engine.Identity, token string) ([]byte, error) {
	auth := map[string]any{"mode": "token"}
	if token != "" {
		auth["token"] = token
	}
	return json.Marshal(map[string]any{
		"gateway": map[string]any{"mode": "local", "auth": auth},
		"ui":      map[string]any{"assistant": map[string]any{"name": id.Name, "avatar": id.Emoji}},
	})
}
