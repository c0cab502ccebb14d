package openclaw

import (
	"errors"
	"reflect"
	"testing"

	"github.com/agentplane/agentplane/internal/engine"
)

// live is an agent's file as the runtime seeded it, a platform channel rendered into it and
// what OpenClaw wrote itself (meta, on `plugins install`).
const live = `{
  "gateway": {"mode": "local", "auth": {"mode": "token", "token": "gw-live"}},
  "agents": {"defaults": {"workspace": "~/.openclaw/workspace"}},
  "channels": {"telegram": {"enabled": true, "botToken": {"source": "env", "provider": "default", "id": "TG"}}},
  "plugins": {"entries": {"discord": {"enabled": true}}},
  "meta": {"lastTouchedVersion": "2026.9.6"}
}`

func TestRenderConfig(t *testing.T) {
	tg := engine.Channel{Type: "telegram", Enabled: true, BotTokenEnv: "TG", DMPolicy: "pairing"}
	dc := engine.Channel{Type: "discord", Enabled: true, BotTokenEnv: "DC"}
	for _, tc := range []struct {
		name     string
		base     string // "" = nil (adopt live)
		managed  []string
		channels []engine.Channel
		want     map[string]any // path -> value (nil: absent)
	}{
		{"adopts the live file when the user has no config", "", []string{"telegram"}, []engine.Channel{tg},
			map[string]any{"gateway.auth.token": "gw-live", "channels.telegram.dmPolicy": "pairing", "meta.lastTouchedVersion": "2026.9.6", "agents.defaults.workspace": "~/.openclaw/workspace"}},
		{"a channel rendered before and now gone is removed", "", []string{"telegram"}, nil,
			map[string]any{"channels": nil, "gateway.auth.token": "gw-live"}},
		{"an unmanaged channel of the user's own stays", "", nil, nil,
			map[string]any{"channels.telegram.enabled": true}},
		{"the user's config replaces the rest; engine and runtime keys come from live",
			`{gateway: {mode: "local", auth: {mode: "none"}, port: 1}, tools: {profile: "coding"}, meta: {lastTouchedVersion: "1.0.0"}}`,
			[]string{"telegram"}, []engine.Channel{tg},
			map[string]any{"gateway.auth.mode": "token", "gateway.auth.token": "gw-live", "gateway.port": float64(1), "tools.profile": "coding",
				"meta.lastTouchedVersion": "2026.9.6", "agents": nil, "channels.telegram.botToken.id": "TG"}},
		{"the user's keys under a managed channel stay", `{channels: {telegram: {groupPolicy: "open"}}}`, []string{"telegram"}, []engine.Channel{tg},
			map[string]any{"channels.telegram.groupPolicy": "open", "channels.telegram.enabled": true}},
		{"an external channel trusts its plugin", `{}`, nil, []engine.Channel{dc},
			map[string]any{"plugins.entries.discord.enabled": true, "channels.discord.token.id": "DC"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var base []byte
			if tc.base != "" {
				base = []byte(tc.base)
			}
			b, err := New().RenderConfig(base, []byte(live), tc.managed, tc.channels)
			if err != nil {
				t.Fatal(err)
			}
			m := decode(t, b)
			for path, want := range tc.want {
				if got := at(m, path); !reflect.DeepEqual(got, want) {
					t.Errorf("%s = %#v, want %#v\n%s", path, got, want, b)
				}
			}
			// Rendering is a fixed point: the render of the render is the same file.
			again, err := New().RenderConfig(base, b, tc.managed, tc.channels)
			if err != nil || string(again) != string(b) {
				t.Fatalf("second render differs (%v):\n%s\nvs\n%s", err, again, b)
			}
		})
	}
	if _, err := New().RenderConfig([]byte(`[1]`), []byte(live), nil, nil); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("a user config that is not an object: %v", err)
	}
	if _, err := New().RenderConfig(nil, []byte(live), nil, []engine.Channel{{Type: "irc"}}); !errors.Is(err, engine.ErrInvalidInput) {
		t.Errorf("an unknown channel type: %v", err)
	}
}

func TestUserConfig(t *testing.T) {
	b, err := New().UserConfig([]byte(live), []string{"telegram", "discord"})
	if err != nil {
		t.Fatal(err)
	}
	m := decode(t, b)
	for _, path := range []string{"meta", "gateway.auth", "channels", "plugins"} {
		if v := at(m, path); v != nil {
			t.Errorf("%s kept: %#v", path, v)
		}
	}
	if at(m, "gateway.mode") != "local" || at(m, "agents.defaults.workspace") == nil {
		t.Fatalf("lost the user's part: %s", b)
	}
	// Channels the platform does not manage are the user's.
	b, err = New().UserConfig([]byte(live), nil)
	if err != nil || at(decode(t, b), "channels.telegram") == nil {
		t.Fatalf("an unmanaged channel was dropped: %s %v", b, err)
	}
}
