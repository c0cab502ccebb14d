package openclaw

import (
	"errors"
	"reflect"
	"testing"

	"github.com/agentplane/agentplane/internal/adapters/engine"
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
		models   []engine.ModelProvider
	}{
		{"adopts the live file when the user has no config", "", []string{"telegram"}, []engine.Channel{tg},
			map[string]any{"gateway.auth.token": "gw-live", "channels.telegram.dmPolicy": "pairing", "meta.lastTouchedVersion": "2026.9.6", "agents.defaults.workspace": "~/.openclaw/workspace"}, nil},
		{"a channel rendered before and now gone is removed", "", []string{"telegram"}, nil,
			map[string]any{"channels": nil, "gateway.auth.token": "gw-live"}, nil},
		{"an unmanaged channel of the user's own stays", "", nil, nil,
			map[string]any{"channels.telegram.enabled": true}, nil},
		{"the user's config replaces the rest; engine and runtime keys come from live",
			`{gateway: {mode: "local", auth: {mode: "none"}, port: 1}, tools: {profile: "coding"}, meta: {lastTouchedVersion: "1.0.0"}}`,
			[]string{"telegram"}, []engine.Channel{tg},
			map[string]any{"gateway.auth.mode": "token", "gateway.auth.token": "gw-live", "gateway.port": float64(1), "tools.profile": "coding",
				"meta.lastTouchedVersion": "2026.9.6", "agents": nil, "channels.telegram.botToken.id": "TG"}, nil},
		{"the user's keys under a managed channel stay", `{channels: {telegram: {groupPolicy: "open"}}}`, []string{"telegram"}, []engine.Channel{tg},
			map[string]any{"channels.telegram.groupPolicy": "open", "channels.telegram.enabled": true}, nil},
		{"an external channel trusts its plugin", `{}`, nil, []engine.Channel{dc},
			map[string]any{"plugins.entries.discord.enabled": true, "channels.discord.token.id": "DC"}, nil},
		{"a proxied provider points at the proxy; the user's other keys under it stay",
			`{models: {providers: {anthropic: {timeoutSeconds: 30, apiKey: "sk-user", baseUrl: "https://api.anthropic.com"}}}}`, nil, nil,
			map[string]any{"models.providers.anthropic.baseUrl": "http://127.0.0.1:1/llm/anthropic", "models.providers.anthropic.apiKey": "apx1.a.b",
				"models.providers.anthropic.timeoutSeconds": float64(30)},
			[]engine.ModelProvider{{Name: "anthropic", BaseURL: "http://127.0.0.1:1/llm/anthropic", APIKey: "apx1.a.b"}}},
		{"a provider no longer proxied loses the proxy's URL and credential, a user's own provider stays",
			`{models: {providers: {openai: {baseUrl: "http://p/llm/openai/v1", apiKey: "apx1.old.x"}, groq: {apiKey: "apx1.old.y", timeoutSeconds: 5}, vllm: {baseUrl: "http://gpu:8000/v1", apiKey: "local"}}}}`, nil, nil,
			map[string]any{"models.providers.openai": nil, "models.providers.groq.apiKey": nil, "models.providers.groq.timeoutSeconds": float64(5),
				"models.providers.vllm.apiKey": "local"}, nil},
		{"the last proxied provider gone leaves no empty providers object",
			`{models: {providers: {openai: {baseUrl: "http://p/llm/openai/v1", apiKey: "apx1.old.x"}}}}`, nil, nil,
			map[string]any{"models.providers": nil, "models.catalogRefresh.enabled": false}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var base []byte
			if tc.base != "" {
				base = []byte(tc.base)
			}
			r := engine.Render{Base: base, Live: []byte(live), Managed: tc.managed, Channels: tc.channels, ModelProviders: tc.models}
			b, err := New().RenderConfig(r)
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
			r.Live = b
			again, err := New().RenderConfig(r)
			if err != nil || string(again) != string(b) {
				t.Fatalf("second render differs (%v):\n%s\nvs\n%s", err, again, b)
			}
		})
	}
	if _, err := New().RenderConfig(engine.Render{Base: []byte(`[1]`), Live: []byte(live)}); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("a user config that is not an object: %v", err)
	}
	if _, err := New().RenderConfig(engine.Render{Live: []byte(live), Channels: []engine.Channel{{Type: "irc"}}}); !errors.Is(err, engine.ErrInvalidInput) {
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

// A config read back (GET /config) and sent again does not pin the model proxy's rotating
// credential; a user's own provider entry stays whole.
func TestUserConfigDropsModelProxyEntries(t *testing.T) {
	b, err := New().UserConfig([]byte(`{models: {providers: {
		anthropic: {baseUrl: "http://p/llm/anthropic", apiKey: "apx1.x.y", timeoutSeconds: 9},
		openai: {baseUrl: "http://p/llm/openai/v1", apiKey: "apx1.x.z"},
		vllm: {baseUrl: "http://gpu:8000/v1", apiKey: "local"}}}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	m := decode(t, b)
	for path, want := range map[string]any{
		"models.providers.anthropic.apiKey": nil, "models.providers.anthropic.baseUrl": nil,
		"models.providers.anthropic.timeoutSeconds": float64(9), "models.providers.openai": nil,
		"models.providers.vllm.apiKey": "local",
	} {
		if got := at(m, path); !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %#v, want %#v\n%s", path, got, want, b)
		}
	}
}
