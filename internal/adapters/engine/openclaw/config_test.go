package openclaw

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/engine"
)

func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	return m
}

// at returns the value at a dotted path.
func at(m map[string]any, path string) any {
	var cur any = m
	for _, k := range strings.Split(path, ".") {
		o, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = o[k]
	}
	return cur
}

func TestInitialConfig(t *testing.T) {
	id := engine.Identity{Name: "Robo", AgentProfile: agentsv1.AgentProfile{Description: "Writes reports", Vibe: "calm", Emoji: "🤖"}}
	b, err := New().InitialConfig(id, "tok-123")
	if err != nil {
		t.Fatal(err)
	}
	m := decode(t, b)
	for path, want := range map[string]any{
		"gateway.mode":                           "local",
		"gateway.auth.mode":                      "token",
		"gateway.auth.token":                     "tok-123",
		"agents.defaults.workspace":              "~/.openclaw/workspace",
		"agents.entries.main.workspace":          "~/.openclaw/workspace",
		"agents.entries.main.description":        "Writes reports",
		"agents.entries.main.identity.name":      "Robo",
		"agents.entries.main.identity.theme":     "calm",
		"agents.entries.main.identity.emoji":     "🤖",
		"logging.file":                           "${OPENCLAW_HOME}/.openclaw/logs/openclaw.log",
		"gateway.port":                           nil,
		"channels":                               nil,
		"agents.entries.main.identity.something": nil,
	} {
		if got := at(m, path); !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %#v, want %#v", path, got, want)
		}
	}
	// No token: the gateway takes OPENCLAW_GATEWAY_TOKEN from its environment (kube runtime).
	b, err = New().InitialConfig(engine.Identity{}, "")
	if err != nil {
		t.Fatal(err)
	}
	m = decode(t, b)
	if _, ok := at(m, "gateway.auth").(map[string]any)["token"]; ok {
		t.Error("empty token written")
	}
	if at(m, "agents.entries.main.identity") != nil || at(m, "agents.entries.main.description") != nil {
		t.Error("empty identity written")
	}
}

func TestIdentityFile(t *testing.T) {
	path, b := IdentityFile(engine.Identity{Name: "Robo", AgentProfile: agentsv1.AgentProfile{Vibe: "calm", Emoji: "🤖", Description: "Writes reports."}})
	if path != ".openclaw/workspace/IDENTITY.md" {
		t.Fatalf("path = %q", path)
	}
	for _, want := range []string{"- **Name:** Robo\n", "- **Vibe:** calm\n", "- **Emoji:** 🤖\n", "\nWrites reports.\n"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("missing %q in\n%s", want, b)
		}
	}
}

func TestSetGatewayToken(t *testing.T) {
	in := []byte(`// user config in JSON5
{ gateway: { mode: 'local', port: 18801, auth: { mode: 'none' } }, agents: { defaults: { maxConcurrent: 3, }, }, }`)
	b, err := New().SetGatewayToken(in, "new-token")
	if err != nil {
		t.Fatal(err)
	}
	m := decode(t, b)
	if at(m, "gateway.auth.token") != "new-token" || at(m, "gateway.auth.mode") != "token" || at(m, "gateway.port") != 18801.0 || at(m, "agents.defaults.maxConcurrent") != 3.0 {
		t.Fatalf("got %s", b)
	}
	b, err = New().SetGatewayToken(b, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := at(decode(t, b), "gateway.auth").(map[string]any)["token"]; ok {
		t.Fatalf("empty token kept a token: %s", b)
	}
	// Big integers of plain JSON keep their digits.
	b, err = New().SetGatewayToken([]byte(`{"logging":{"maxFileBytes":9007199254740993}}`), "t")
	if err != nil || !strings.Contains(string(b), "9007199254740993") {
		t.Fatalf("number precision: %s %v", b, err)
	}
	for _, bad := range []string{"", "[]", "{", `{"a":1} {"b":2}`, "null"} {
		if _, err := New().SetGatewayToken([]byte(bad), "t"); !errors.Is(err, engine.ErrInvalidConfig) {
			t.Errorf("SetGatewayToken(%q) err = %v, want ErrInvalidConfig", bad, err)
		}
	}
}

func ref(id string) map[string]any {
	return map[string]any{"source": "env", "provider": "default", "id": id}
}

func TestSetChannel(t *testing.T) {
	base, _ := New().InitialConfig(engine.Identity{Name: "A"}, "tok")
	for _, tc := range []struct {
		ch     engine.Channel
		want   map[string]any
		plugin bool
	}{
		{engine.Channel{Type: "telegram", Enabled: true, BotTokenEnv: "TELEGRAM_BOT_TOKEN", DMPolicy: "allowlist", AllowFrom: []string{"123456789"}},
			map[string]any{"enabled": true, "botToken": ref("TELEGRAM_BOT_TOKEN"), "dmPolicy": "allowlist", "allowFrom": []any{"123456789"}}, false},
		{engine.Channel{Type: "slack", Enabled: true, BotTokenEnv: "SLACK_BOT_TOKEN", AppTokenEnv: "SLACK_APP_TOKEN", DMPolicy: "open", AllowFrom: []string{"*"}},
			map[string]any{"enabled": true, "mode": "socket", "botToken": ref("SLACK_BOT_TOKEN"), "appToken": ref("SLACK_APP_TOKEN"), "dmPolicy": "open", "allowFrom": []any{"*"}}, true},
		{engine.Channel{Type: "discord", Enabled: false, BotTokenEnv: "DISCORD_BOT_TOKEN"},
			map[string]any{"enabled": false, "token": ref("DISCORD_BOT_TOKEN")}, true},
		{engine.Channel{Type: "whatsapp", Enabled: true, DMPolicy: "pairing"},
			map[string]any{"enabled": true, "dmPolicy": "pairing"}, true},
	} {
		t.Run(tc.ch.Type, func(t *testing.T) {
			b, err := New().SetChannel(base, tc.ch)
			if err != nil {
				t.Fatal(err)
			}
			m := decode(t, b)
			if got := at(m, "channels."+tc.ch.Type); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("channel = %#v\nwant %#v", got, tc.want)
			}
			if got := at(m, "plugins.entries."+tc.ch.Type+".enabled"); (got == true) != tc.plugin {
				t.Fatalf("plugin entry = %v, want %v", got, tc.plugin)
			}
			if at(m, "gateway.auth.token") != "tok" {
				t.Fatal("lost the rest of the config")
			}
			// Removing restores the config SetChannel started from (with the lean defaults
			// every render ends with).
			r, err := New().RemoveChannel(b, tc.ch.Type)
			if err != nil {
				t.Fatal(err)
			}
			removed := decode(t, r)
			applyLean(removed)
			if !reflect.DeepEqual(removed, decode(t, base)) {
				t.Fatalf("RemoveChannel left\n%s", r)
			}
		})
	}
	// Updating keeps the user's own keys and drops what the new channel no longer says.
	user := []byte(`{channels:{telegram:{botToken:"123:plain",groupPolicy:"open",dmPolicy:"open",allowFrom:["*"]}},plugins:{entries:{slack:{enabled:true,config:{x:1}}}}}`)
	b, err := New().SetChannel(user, engine.Channel{Type: "telegram", Enabled: true, BotTokenEnv: "TG"})
	if err != nil {
		t.Fatal(err)
	}
	m := decode(t, b)
	if want := map[string]any{"enabled": true, "botToken": ref("TG"), "groupPolicy": "open"}; !reflect.DeepEqual(at(m, "channels.telegram"), want) {
		t.Fatalf("update: %#v", at(m, "channels.telegram"))
	}
	// Relayed: the relay's root and the relay token; off again, the platform's root goes and a
	// user's own root (a self-hosted Bot API server) stays.
	b, err = New().SetChannel(base, engine.Channel{Type: "telegram", Enabled: true, BotTokenEnv: "TG", APIRoot: "http://127.0.0.1:1/relay/telegram", BotToken: "1:relay"})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]any{"enabled": true, "botToken": "1:relay", "apiRoot": "http://127.0.0.1:1/relay/telegram"}; !reflect.DeepEqual(at(decode(t, b), "channels.telegram"), want) {
		t.Fatalf("relayed: %#v", at(decode(t, b), "channels.telegram"))
	}
	if b, err = New().SetChannel(b, engine.Channel{Type: "telegram", Enabled: true, BotTokenEnv: "TG"}); err != nil || at(decode(t, b), "channels.telegram.apiRoot") != nil {
		t.Fatalf("relay off: %v %s", err, b)
	}
	own := []byte(`{channels:{telegram:{apiRoot:"https://bots.example"}}}`)
	if b, err = New().SetChannel(own, engine.Channel{Type: "telegram", Enabled: true, BotTokenEnv: "TG"}); err != nil || at(decode(t, b), "channels.telegram.apiRoot") != "https://bots.example" {
		t.Fatalf("the user's apiRoot: %v %s", err, b)
	}
	// Slack relayed: relay mode with the relay's websocket and the relay token for both the
	// Web API and the websocket, no app token; its API origin is the environment's. Off again,
	// socket mode with the tokens' references and the platform's relay gone.
	slack := engine.Channel{Type: "slack", Enabled: true, BotTokenEnv: "SB", AppTokenEnv: "SA", DMPolicy: "open", AllowFrom: []string{"*"},
		APIRoot: "http://127.0.0.1:1/relay/slack/api/", BotToken: "xoxb-relay", RelayURL: "ws://127.0.0.1:1" + SlackRelayPath, GatewayID: "ws/a"}
	if b, err = New().SetChannel([]byte(`{channels:{slack:{appToken:"xapp-old",streaming:{mode:"off"}}}}`), slack); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"enabled": true, "mode": "relay", "botToken": "xoxb-relay", "dmPolicy": "open", "allowFrom": []any{"*"},
		"streaming": map[string]any{"mode": "off"},
		"relay":     map[string]any{"url": "ws://127.0.0.1:1/relay/slack/gateway", "authToken": "xoxb-relay", "gatewayId": "ws/a"}}
	if got := at(decode(t, b), "channels.slack"); !reflect.DeepEqual(got, want) {
		t.Fatalf("slack relayed: %#v", got)
	}
	if env := New().ChannelEnv(slack); !reflect.DeepEqual(env, map[string]string{SlackAPIURLEnv: slack.APIRoot}) {
		t.Fatalf("slack relayed env: %v", env)
	}
	unrelayed := engine.Channel{Type: "slack", Enabled: true, BotTokenEnv: "SB", AppTokenEnv: "SA"}
	if b, err = New().SetChannel(b, unrelayed); err != nil || at(decode(t, b), "channels.slack.relay") != nil || at(decode(t, b), "channels.slack.mode") != "socket" ||
		!reflect.DeepEqual(at(decode(t, b), "channels.slack.appToken"), ref("SA")) {
		t.Fatalf("slack relay off: %v %s", err, b)
	}
	if env := New().ChannelEnv(unrelayed); env != nil {
		t.Fatalf("unrelayed env: %v", env)
	}
	// Discord relayed: the relay token as the token, the relay's REST base in the environment
	// only. Off again, the token's reference and nothing else: the config held no more of the
	// relay than its token.
	discord := engine.Channel{Type: "discord", Enabled: true, BotTokenEnv: "DB", DMPolicy: "pairing",
		APIRoot: "http://127.0.0.1:1/relay/discord/api/v10", BotToken: "MTIz.bnMvYQ.relay"}
	if b, err = New().SetChannel([]byte(`{channels:{discord:{token:"plain",guilds:{"1":{}}}}}`), discord); err != nil {
		t.Fatal(err)
	}
	if want := map[string]any{"enabled": true, "token": "MTIz.bnMvYQ.relay", "dmPolicy": "pairing", "guilds": map[string]any{"1": map[string]any{}}}; !reflect.DeepEqual(at(decode(t, b), "channels.discord"), want) {
		t.Fatalf("discord relayed: %#v", at(decode(t, b), "channels.discord"))
	}
	if at(decode(t, b), "plugins.entries.discord.enabled") != true {
		t.Fatalf("discord relayed: the plugin entry: %s", b)
	}
	if env := New().ChannelEnv(discord); !reflect.DeepEqual(env, map[string]string{DiscordAPIURLEnv: discord.APIRoot}) {
		t.Fatalf("discord relayed env: %v", env)
	}
	unrelayedDiscord := engine.Channel{Type: "discord", Enabled: true, BotTokenEnv: "DB", DMPolicy: "pairing"}
	if b, err = New().SetChannel(b, unrelayedDiscord); err != nil {
		t.Fatal(err)
	}
	if want := map[string]any{"enabled": true, "token": ref("DB"), "dmPolicy": "pairing", "guilds": map[string]any{"1": map[string]any{}}}; !reflect.DeepEqual(at(decode(t, b), "channels.discord"), want) {
		t.Fatalf("discord relay off: %#v", at(decode(t, b), "channels.discord"))
	}
	if env := New().ChannelEnv(unrelayedDiscord); env != nil {
		t.Fatalf("unrelayed discord env: %v", env)
	}
	for _, bad := range []engine.Channel{
		{Type: "slack", Enabled: true, APIRoot: "http://relay", BotToken: "xoxb-relay"},                      // no websocket
		{Type: "discord", Enabled: true, BotTokenEnv: "D", RelayURL: "ws://127.0.0.1:1/relay/slack/gateway"}, // only slack
		{Type: "telegram", Enabled: true, APIRoot: "http://relay"},                                           // no relay token
		{Type: "discord", Enabled: true, BotTokenEnv: "D", APIRoot: "http://relay"},                          // no relay token
		{Type: "whatsapp", Enabled: true, APIRoot: "http://relay", BotToken: "relay"},                        // not relayed
	} {
		if _, err := New().SetChannel(base, bad); err == nil {
			t.Errorf("accepted %+v", bad)
		}
	}
	// A plugin entry with more than "enabled" is the user's: RemoveChannel keeps it.
	b, err = New().RemoveChannel(user, "slack")
	if err != nil || at(decode(t, b), "plugins.entries.slack.config") == nil {
		t.Fatalf("user's plugin entry removed: %s %v", b, err)
	}
	for _, bad := range []engine.Channel{
		{Type: "irc", BotTokenEnv: "X"},
		{Type: "telegram"},
		{Type: "telegram", BotTokenEnv: "lower_case"},
		{Type: "slack", BotTokenEnv: "A"},
		{Type: "discord", BotTokenEnv: "A", DMPolicy: "sometimes"},
	} {
		if _, err := New().SetChannel(base, bad); !errors.Is(err, engine.ErrInvalidInput) {
			t.Errorf("SetChannel(%+v) err = %v, want ErrInvalidInput", bad, err)
		}
	}
	if _, err := New().RemoveChannel(base, "irc"); !errors.Is(err, engine.ErrInvalidInput) {
		t.Errorf("RemoveChannel(irc) err = %v", err)
	}
	if _, err := New().SetChannel([]byte("{"), engine.Channel{Type: "whatsapp"}); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("broken config: %v", err)
	}
}

func TestRedactAndRestore(t *testing.T) {
	current := []byte(`{
  // JSON5 with secrets in many places
  gateway: { mode: "local", auth: { mode: "token", token: "gw-secret" }, remote: { password: "pw" } },
  channels: {
    telegram: { botToken: "123:ABC", dmPolicy: "open", allowFrom: ["*"] },
    slack: { botToken: { source: "env", provider: "default", id: "SLACK_BOT_TOKEN" }, appToken: "${SLACK_APP_TOKEN}", signingSecret: "sig-value-1" },
    discord: { token: "dis-value-2" },
  },
  models: { providers: { openai: { apiKey: "sk-1", maxTokens: 1000, baseUrl: "https://x" } } },
  env: { vars: { SOME_VAR: "v1" } },
  agents: { defaults: { contextTokens: 5 } },
}`)
	red, err := New().RedactConfig(current)
	if err != nil {
		t.Fatal(err)
	}
	m := decode(t, red)
	for path, want := range map[string]any{
		"gateway.auth.token":                  RedactedMarker,
		"gateway.remote.password":             RedactedMarker,
		"channels.telegram.botToken":          RedactedMarker,
		"channels.slack.signingSecret":        RedactedMarker,
		"channels.discord.token":              RedactedMarker,
		"models.providers.openai.apiKey":      RedactedMarker,
		"env.vars.SOME_VAR":                   RedactedMarker,
		"channels.slack.botToken":             ref("SLACK_BOT_TOKEN"),
		"channels.slack.appToken":             "${SLACK_APP_TOKEN}",
		"channels.telegram.dmPolicy":          "open",
		"models.providers.openai.maxTokens":   1000.0,
		"models.providers.openai.baseUrl":     "https://x",
		"agents.defaults.contextTokens":       5.0,
		"gateway.auth.mode":                   "token",
		"channels.telegram.allowFrom":         []any{"*"},
		"channels.slack.botToken.id":          "SLACK_BOT_TOKEN",
		"gateway.mode":                        "local",
		"models.providers.openai.nonexistent": nil,
	} {
		if got := at(m, path); !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %#v, want %#v", path, got, want)
		}
	}
	for _, secret := range []string{"gw-secret", "123:ABC", "sig-value-1", "dis-value-2", "sk-1", "v1", `"pw"`} {
		if strings.Contains(string(red), secret) {
			t.Errorf("redacted config still holds %s", secret)
		}
	}

	// A client edits the redacted config: changes a setting, keeps the markers.
	m["channels"].(map[string]any)["telegram"].(map[string]any)["dmPolicy"] = "pairing"
	edited, _ := json.Marshal(m)
	restored, err := New().RestoreRedacted(edited, current)
	if err != nil {
		t.Fatal(err)
	}
	r := decode(t, restored)
	for path, want := range map[string]any{
		"gateway.auth.token":             "gw-secret",
		"channels.telegram.botToken":     "123:ABC",
		"channels.telegram.dmPolicy":     "pairing",
		"models.providers.openai.apiKey": "sk-1",
		"env.vars.SOME_VAR":              "v1",
		"gateway.remote.password":        "pw",
	} {
		if got := at(r, path); got != want {
			t.Errorf("restored %s = %#v, want %#v", path, got, want)
		}
	}
	// A new value given by the client wins over the current one.
	m["gateway"].(map[string]any)["auth"].(map[string]any)["token"] = "client-set"
	edited, _ = json.Marshal(m)
	restored, _ = New().RestoreRedacted(edited, current)
	if at(decode(t, restored), "gateway.auth.token") != "client-set" {
		t.Error("client's new token was overwritten")
	}
	// A marker where the current config has nothing cannot be restored.
	_, err = New().RestoreRedacted([]byte(`{"hooks":{"token":"`+RedactedMarker+`"}}`), current)
	if !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "hooks.token") {
		t.Errorf("unrestorable marker: %v", err)
	}
	// Without markers the candidate comes back byte for byte (JSON5 comments kept).
	cand := []byte("// mine\n{gateway:{mode:'local'}}")
	if out, err := New().RestoreRedacted(cand, []byte("this is not parsed")); err != nil || string(out) != string(cand) {
		t.Errorf("no markers: %q %v", out, err)
	}
	// Nothing to hide: unchanged.
	plain := []byte(`{"gateway":{"mode":"local"}}`)
	if out, err := New().RedactConfig(plain); err != nil || string(out) != string(plain) {
		t.Errorf("no secrets: %q %v", out, err)
	}
	if _, err := New().RedactConfig([]byte("{")); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("broken config: %v", err)
	}
	if _, err := New().RestoreRedacted([]byte("{"), current); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("broken candidate: %v", err)
	}
}

func TestRedactArrays(t *testing.T) {
	in := []byte(`{"gateway":{"auth":{"token":"t"}},"x":{"apiKeys":["k1","${K2}"],"list":[{"password":"p"}]}}`)
	red, err := New().RedactConfig(in)
	if err != nil {
		t.Fatal(err)
	}
	m := decode(t, red)
	if !reflect.DeepEqual(at(m, "x.apiKeys"), []any{RedactedMarker, "${K2}"}) {
		t.Fatalf("apiKeys = %#v", at(m, "x.apiKeys"))
	}
	if at(m, "x.list").([]any)[0].(map[string]any)["password"] != RedactedMarker {
		t.Fatalf("list = %#v", at(m, "x.list"))
	}
	back, err := New().RestoreRedacted(red, in)
	if err != nil || !reflect.DeepEqual(decode(t, back), decode(t, in)) {
		t.Fatalf("round trip: %s %v", back, err)
	}
}
