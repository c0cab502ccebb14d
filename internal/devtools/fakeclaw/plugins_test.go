package fakeclaw_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/internal/adapters/engine"
)

// TestPluginsInstall: `plugins install` records the plugin and trusts it in the config the
// way openclaw does, refuses a second install like openclaw, and lists what it recorded.
func TestPluginsInstall(t *testing.T) {
	a := newAgent(t)
	a.writeConfig([]byte(`{"gateway":{"mode":"local"},"channels":{"slack":{"enabled":true}}}`))
	out, errOut, code := a.run(engine.Command{Args: []string{"plugins", "install", "@openclaw/slack"}})
	if code != 0 || !strings.Contains(string(out), "Installed plugin: slack") {
		t.Fatalf("install: exit %d\n%s\n%s", code, out, errOut)
	}
	var cfg map[string]any
	if err := json.Unmarshal(a.readConfig(), &cfg); err != nil {
		t.Fatal(err)
	}
	entry, _ := cfg["plugins"].(map[string]any)["entries"].(map[string]any)["slack"].(map[string]any)
	if entry["enabled"] != true || cfg["channels"] == nil || cfg["gateway"] == nil {
		t.Fatalf("config after install: %s", a.readConfig())
	}

	_, errOut, code = a.run(engine.Command{Args: []string{"plugins", "install", "@openclaw/slack"}})
	if code != 1 || !strings.Contains(string(errOut), "plugin already exists: ") {
		t.Fatalf("second install: exit %d, stderr %s", code, errOut)
	}
	if _, _, code = a.run(engine.Command{Args: []string{"plugins", "install", "@openclaw/slack", "--force"}}); code != 0 {
		t.Fatalf("forced install: exit %d", code)
	}

	out, _, code = a.run(engine.Command{Args: []string{"plugins", "list", "--json"}})
	var list struct {
		Plugins []struct {
			ID          string `json:"id"`
			PackageName string `json:"packageName"`
		} `json:"plugins"`
	}
	if code != 0 || json.Unmarshal(out, &list) != nil || len(list.Plugins) != 1 ||
		list.Plugins[0].ID != "slack" || list.Plugins[0].PackageName != "@openclaw/slack" {
		t.Fatalf("list: exit %d: %s", code, out)
	}

	a.env["FAKECLAW_FAIL"] = "plugins install"
	if _, _, code = a.run(engine.Command{Args: []string{"plugins", "install", "@openclaw/discord"}}); code != 1 {
		t.Fatalf("injected failure: exit %d", code)
	}
}

// TestPluginsInstallRefusesAnInvalidConfig: the config is not rewritten from garbage.
func TestPluginsInstallRefusesAnInvalidConfig(t *testing.T) {
	a := newAgent(t)
	a.writeConfig([]byte(`{broken`))
	if _, _, code := a.run(engine.Command{Args: []string{"plugins", "install", "@openclaw/discord"}}); code != 1 {
		t.Fatalf("install over an invalid config: exit %d", code)
	}
	if string(a.readConfig()) != `{broken` {
		t.Fatalf("config changed: %s", a.readConfig())
	}
}
