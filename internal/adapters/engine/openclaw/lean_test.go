package openclaw

import (
	"reflect"
	"testing"

	"github.com/agentplane/agentplane/internal/adapters/engine"
)

// leanPaths are the lean defaults as they appear in a rendered config.
var leanPaths = map[string]any{
	"update.checkOnStart":                  false,
	"models.catalogRefresh.enabled":        false,
	"plugins.entries.canvas.enabled":       false,
	"plugins.entries.cua-computer.enabled": false,
	"plugins.entries.geolocation.enabled":  false,
	"plugins.entries.linux-node.enabled":   false,
	"plugins.entries.talk-voice.enabled":   false,
	"plugins.entries.slack.enabled":        false,
	"plugins.entries.discord.enabled":      false,
}

func TestInitialConfigIsLean(t *testing.T) {
	b, err := New().InitialConfig(engine.Identity{Name: "Robo"}, "tok")
	if err != nil {
		t.Fatal(err)
	}
	m := decode(t, b)
	for path, want := range leanPaths {
		if got := at(m, path); !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %#v, want %#v", path, got, want)
		}
	}
	// Nothing that makes the engine take a new agent's first start for an upgrade (its
	// pristine-install check): no plugin entry with a config, no stateful top-level key.
	for _, k := range []string{"channels", "cron", "memory", "tools", "session", "mcp", "env", "secrets"} {
		if v := at(m, k); v != nil {
			t.Errorf("%s = %#v in the initial config", k, v)
		}
	}
	for id, e := range m["plugins"].(map[string]any)["entries"].(map[string]any) {
		if e.(map[string]any)["enabled"] != false {
			t.Errorf("plugins.entries.%s = %#v: only {enabled:false} entries keep a first start pristine", id, e)
		}
	}
	// No channel plugin is trusted before the agent has the channel.
	for _, ch := range externalPluginChannels {
		if v := at(m, "plugins.entries."+ch+".enabled"); v == true {
			t.Errorf("plugins.entries.%s is enabled without a channel", ch)
		}
	}
}

// The relayed channels' plugins are off in a config without their channel: the relay's
// variables in every gateway's environment would otherwise make the engine's startup take
// them for configured channels with missing plugins. A channel enables its plugin; without
// it again the plugin is off again; a channel of the user's own keeps the user's entry.
func TestRelayedChannelPluginsAreOffWithoutTheirChannel(t *testing.T) {
	e := New()
	slack := engine.Channel{Type: "slack", Enabled: true, BotToken: "relay-tok", RelayURL: "ws://relay/slack", APIRoot: "http://relay/slack/api/", GatewayID: "ws/agent"}
	with, err := e.RenderConfig(engine.Render{Live: []byte(live), Managed: []string{"slack", "discord"}, Channels: []engine.Channel{slack}})
	if err != nil {
		t.Fatal(err)
	}
	m := decode(t, with)
	if at(m, "plugins.entries.slack.enabled") != true || at(m, "plugins.entries.discord.enabled") != false {
		t.Fatalf("with a slack channel: %s", with)
	}
	without, err := e.RenderConfig(engine.Render{Live: with, Managed: []string{"slack", "discord"}})
	if err != nil {
		t.Fatal(err)
	}
	m = decode(t, without)
	if at(m, "plugins.entries.slack.enabled") != false || at(m, "channels.slack") != nil {
		t.Fatalf("the slack channel removed: %s", without)
	}
	user, err := e.RenderConfig(engine.Render{Base: []byte(`{channels: {discord: {enabled: true, token: "x"}}}`), Live: []byte(live)})
	if err != nil {
		t.Fatal(err)
	}
	if m := decode(t, user); at(m, "plugins.entries.discord") != nil || at(m, "plugins.entries.slack.enabled") != false {
		t.Fatalf("the user's own discord channel: %s", user)
	}
}

func TestRenderKeepsTheUsersChoices(t *testing.T) {
	user := `{update: {checkOnStart: true}, models: {catalogRefresh: {url: "https://mirror.example/c.json"}},
		plugins: {entries: {canvas: {enabled: true}, "talk-voice": {config: {x: 1}},
		"memory-core": {config: {dreaming: {enabled: true, frequency: "0 3 * * *"}}}}}}`
	b, err := New().RenderConfig(engine.Render{Base: []byte(user), Live: []byte(live)})
	if err != nil {
		t.Fatal(err)
	}
	m := decode(t, b)
	for path, want := range map[string]any{
		"update.checkOnStart":                                   true,
		"models.catalogRefresh.enabled":                         false, // set beside the user's url
		"models.catalogRefresh.url":                             "https://mirror.example/c.json",
		"plugins.entries.canvas.enabled":                        true,
		"plugins.entries.talk-voice.enabled":                    nil, // the user's own entry: as it is
		"plugins.entries.talk-voice.config.x":                   float64(1),
		"plugins.entries.memory-core.config.dreaming.enabled":   true,
		"plugins.entries.memory-core.config.dreaming.frequency": "0 3 * * *",
		"plugins.entries.memory-core.enabled":                   nil,
		"plugins.entries.geolocation.enabled":                   false,
	} {
		if got := at(m, path); !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %#v, want %#v\n%s", path, got, want, b)
		}
	}
	// A non-object where a default would go is the user's (the engine reports it).
	b, err = New().RenderConfig(engine.Render{Base: []byte(`{update: "no", plugins: {entries: []}}`), Live: []byte(live)})
	if err != nil {
		t.Fatal(err)
	}
	if m := decode(t, b); at(m, "update") != "no" || at(m, "models.catalogRefresh.enabled") != false {
		t.Errorf("render over non-objects: %s", b)
	}
}

// The lean defaults are the platform's: a config read back leaves them out (the user's own
// values stay), and sending it again renders the same file.
func TestUserConfigLeavesOutTheLeanDefaults(t *testing.T) {
	e := New()
	initial, err := e.InitialConfig(engine.Identity{Name: "Robo"}, "tok")
	if err != nil {
		t.Fatal(err)
	}
	user, err := e.UserConfig(initial, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := decode(t, user)
	for _, path := range []string{"update", "models", "plugins"} {
		if v := at(m, path); v != nil {
			t.Errorf("%s read back: %#v\n%s", path, v, user)
		}
	}
	again, err := e.RenderConfig(engine.Render{Base: user, Live: initial})
	if err != nil || string(again) != string(initial) {
		t.Fatalf("render of the read-back config differs (%v):\n%s\nvs\n%s", err, again, initial)
	}
	kept, err := e.UserConfig([]byte(`{update: {checkOnStart: true}, plugins: {entries: {canvas: {enabled: false, config: {}}}}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if m := decode(t, kept); at(m, "update.checkOnStart") != true || at(m, "plugins.entries.canvas.enabled") != false {
		t.Errorf("the user's own values were dropped: %s", kept)
	}
}
