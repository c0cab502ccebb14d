package openclaw

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/titanous/json5"

	"github.com/agentplane/agentplane/internal/adapters/engine"
)

// Config paths OpenClaw resolves itself: "~/" expands to OPENCLAW_HOME, and ${VAR} is
// substituted from the environment (logging.file does not expand "~").
const (
	configWorkspace = "~/" + WorkspaceDir
	configLogFile   = "${OPENCLAW_HOME}/" + LogFile
)

// MainAgent is the id of the agent entry every OpenClaw gateway has.
const MainAgent = "main"

// Channel types OpenClaw knows and agentplane configures.
var channelTypes = []string{"telegram", "slack", "discord", "whatsapp"}

// externalPluginChannels are channels whose plugin is an npm package (not bundled). OpenClaw
// only trusts an installed external plugin when plugins.entries.<id>.enabled is true.
var externalPluginChannels = []string{"slack", "discord", "whatsapp"}

var (
	// envNameRE is OpenClaw's SecretRef id pattern for env refs.
	envNameRE  = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,127}$`)
	dmPolicies = []string{"pairing", "allowlist", "open", "disabled"}
)

// InitialConfig implements engine.Engine. The config is portable between homes: the workspace
// is "~/.openclaw/workspace" and the log file "${OPENCLAW_HOME}/.openclaw/logs/openclaw.log",
// both resolved by OpenClaw against the home Env gives it. The identity goes to
// agents.entries.main (identity.name/theme/emoji, description); Vibe is OpenClaw's "theme".
// With an empty gatewayToken the config has no token and the gateway uses
// OPENCLAW_GATEWAY_TOKEN from its environment. The lean defaults (lean.go) are set.
func (e *Engine) InitialConfig(id engine.Identity, gatewayToken string) ([]byte, error) {
	auth := map[string]any{"mode": "token"}
	if gatewayToken != "" {
		auth["token"] = gatewayToken
	}
	main := map[string]any{"workspace": configWorkspace}
	if id.Description != "" {
		main["description"] = id.Description
	}
	identity := map[string]any{}
	for k, v := range map[string]string{"name": id.Name, "theme": id.Vibe, "emoji": id.Emoji} {
		if v != "" {
			identity[k] = v
		}
	}
	if len(identity) > 0 {
		main["identity"] = identity
	}
	cfg := map[string]any{
		"gateway": map[string]any{"mode": "local", "auth": auth},
		"agents": map[string]any{
			"defaults": map[string]any{"workspace": configWorkspace},
			"entries":  map[string]any{MainAgent: main},
		},
		"logging": map[string]any{"file": configLogFile},
	}
	applyLean(cfg)
	return marshalConfig(cfg)
}

// IdentityFile returns the workspace's IDENTITY.md for id (path relative to the agent's home).
// OpenClaw bootstraps a blank template there on first start unless the file exists; its
// fields are "- **Label:** value" lines (Name, Vibe, Emoji), followed by the description.
func IdentityFile(id engine.Identity) (string, []byte) {
	var b strings.Builder
	b.WriteString("# IDENTITY.md - Who Am I?\n\n")
	line := func(label, v string) {
		if v = strings.TrimSpace(strings.ReplaceAll(v, "\n", " ")); v != "" {
			fmt.Fprintf(&b, "- **%s:** %s\n", label, v)
		}
	}
	line("Name", id.Name)
	line("Vibe", id.Vibe)
	line("Emoji", id.Emoji)
	if d := strings.TrimSpace(id.Description); d != "" {
		b.WriteString("\n" + d + "\n")
	}
	return WorkspaceDir + "/IDENTITY.md", []byte(b.String())
}

// SetGatewayToken implements engine.Engine: gateway.auth.token = token (mode "token"); an
// empty token removes it so the gateway falls back to OPENCLAW_GATEWAY_TOKEN.
func (e *Engine) SetGatewayToken(config []byte, token string) ([]byte, error) {
	cfg, err := parseConfig(config)
	if err != nil {
		return nil, err
	}
	auth := object(cfg, "gateway", "auth")
	auth["mode"] = "token"
	if token == "" {
		delete(auth, "token")
	} else {
		auth["token"] = token
	}
	return marshalConfig(cfg)
}

// RelayAPIRootSuffix ends the channel relay's Bot API root (channelrelay's route): a
// channels.telegram.apiRoot with it is the platform's, taken out when the relay is off.
const RelayAPIRootSuffix = "/relay/telegram"

// SlackRelayPath ends the channel relay's Slack websocket URL (channelrelay's route): a
// channels.slack.relay with it is the platform's, taken out when the relay is off.
const SlackRelayPath = "/relay/slack/gateway"

// SlackAPIURLEnv is the variable the Slack plugin reads its Web API origin from (every
// client it builds, the Bolt app's included; openclaw 2026.9.6 has no config key for it).
const SlackAPIURLEnv = "SLACK_API_URL"

// DiscordAPIURLEnv is the variable the Discord plugin reads its versioned REST base from (the
// gateway process's environment; it discovers the gateway websocket at <base>/gateway/bot
// and takes plain http and ws on loopback only).
const DiscordAPIURLEnv = "DISCORD_API_URL"

// ChannelEnv implements engine.Engine: a relayed Slack channel's Web API origin, a relayed
// Discord channel's REST base.
func (e *Engine) ChannelEnv(ch engine.Channel) map[string]string {
	switch {
	case ch.Type == "slack" && ch.RelayURL != "" && ch.APIRoot != "":
		return map[string]string{SlackAPIURLEnv: ch.APIRoot}
	case ch.Type == "discord" && ch.APIRoot != "":
		return map[string]string{DiscordAPIURLEnv: ch.APIRoot}
	}
	return nil
}

// SetChannel implements engine.Engine. It writes channels.<type> with the tokens as env
// SecretRefs ({source:"env",provider:"default",id:ENV}) or, for a relayed channel, the
// agent's relay token (telegram: with the relay's apiRoot; slack: in relay mode; discord: its
// REST base is ChannelEnv's), enabled, dmPolicy and allowFrom,
// keeping any other keys the user set there, and trusts the channel's external plugin
// (plugins.entries.<type>.enabled) for slack, discord and whatsapp.
func (e *Engine) SetChannel(config []byte, ch engine.Channel) ([]byte, error) {
	if err := checkChannel(ch); err != nil {
		return nil, err
	}
	cfg, err := parseConfig(config)
	if err != nil {
		return nil, err
	}
	c := object(cfg, "channels", ch.Type)
	c["enabled"] = ch.Enabled
	switch ch.Type {
	case "telegram":
		if ch.APIRoot != "" {
			c["botToken"], c["apiRoot"] = ch.BotToken, ch.APIRoot
		} else {
			c["botToken"] = envRef(ch.BotTokenEnv)
			if root, _ := c["apiRoot"].(string); strings.HasSuffix(root, RelayAPIRootSuffix) {
				delete(c, "apiRoot") // the platform's relay, no longer on
			}
		}
		delete(c, "tokenFile")
	case "slack":
		if ch.RelayURL != "" {
			// relay mode: the platform holds the Socket Mode connection; the gateway takes
			// the channel's events from the relay's websocket and calls the Web API at
			// ChannelEnv's SLACK_API_URL with its relay token.
			c["mode"], c["botToken"] = "relay", ch.BotToken
			c["relay"] = map[string]any{"url": ch.RelayURL, "authToken": ch.BotToken, "gatewayId": ch.GatewayID}
			delete(c, "appToken")
		} else {
			c["mode"] = "socket"
			c["botToken"] = envRef(ch.BotTokenEnv)
			c["appToken"] = envRef(ch.AppTokenEnv)
			if relay, _ := c["relay"].(map[string]any); relay != nil {
				if u, _ := relay["url"].(string); strings.HasSuffix(u, SlackRelayPath) {
					delete(c, "relay") // the platform's relay, no longer on
				}
			}
		}
	case "discord":
		// Relayed, the gateway calls the relay's REST base (ChannelEnv's DISCORD_API_URL, in
		// the environment only: nothing of it to take out of the config when the relay is off).
		if ch.APIRoot != "" {
			c["token"] = ch.BotToken
		} else {
			c["token"] = envRef(ch.BotTokenEnv)
		}
	}
	if ch.DMPolicy != "" {
		c["dmPolicy"] = ch.DMPolicy
	} else {
		delete(c, "dmPolicy")
	}
	if len(ch.AllowFrom) > 0 {
		allow := make([]any, len(ch.AllowFrom))
		for i, a := range ch.AllowFrom {
			allow[i] = a
		}
		c["allowFrom"] = allow
	} else {
		delete(c, "allowFrom")
	}
	if slices.Contains(externalPluginChannels, ch.Type) {
		object(cfg, "plugins", "entries", ch.Type)["enabled"] = true
	}
	return marshalConfig(cfg)
}

// RemoveChannel implements engine.Engine: it deletes channels.<type> and the plugin entry
// SetChannel wrote (an entry holding more than "enabled" is the user's and stays).
func (e *Engine) RemoveChannel(config []byte, channelType string) ([]byte, error) {
	if !slices.Contains(channelTypes, channelType) {
		return nil, fmt.Errorf("%w: unsupported channel type %q", engine.ErrInvalidInput, channelType)
	}
	cfg, err := parseConfig(config)
	if err != nil {
		return nil, err
	}
	if chans, ok := cfg["channels"].(map[string]any); ok {
		delete(chans, channelType)
		if len(chans) == 0 {
			delete(cfg, "channels")
		}
	}
	if plugins, ok := cfg["plugins"].(map[string]any); ok {
		if entries, ok := plugins["entries"].(map[string]any); ok {
			if entry, ok := entries[channelType].(map[string]any); ok && onlyKeys(entry, "enabled") {
				delete(entries, channelType)
			}
			if len(entries) == 0 {
				delete(plugins, "entries")
			}
		}
		if len(plugins) == 0 {
			delete(cfg, "plugins")
		}
	}
	return marshalConfig(cfg)
}

func checkChannel(ch engine.Channel) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: channel: "+format, append([]any{engine.ErrInvalidInput}, a...)...)
	}
	if !slices.Contains(channelTypes, ch.Type) {
		return bad("unsupported type %q", ch.Type)
	}
	switch {
	case ch.APIRoot != "" && ch.Type == "slack":
		if ch.BotToken == "" || ch.RelayURL == "" || ch.GatewayID == "" {
			return bad("a relayed slack channel needs the agent's relay token, the relay's websocket and a gateway id")
		}
		return checkPolicy(ch, bad)
	case ch.RelayURL != "":
		return bad("only slack takes a relay websocket, with its API root")
	case ch.APIRoot != "":
		if (ch.Type != "telegram" && ch.Type != "discord") || ch.BotToken == "" {
			return bad("only telegram, slack and discord are relayed, with the agent's relay token")
		}
	case ch.Type != "whatsapp" && !envNameRE.MatchString(ch.BotTokenEnv):
		return bad("%s needs the bot token's env var name (A-Z, 0-9, _), got %q", ch.Type, ch.BotTokenEnv)
	}
	if ch.Type == "slack" && !envNameRE.MatchString(ch.AppTokenEnv) {
		return bad("slack needs the app token's env var name (A-Z, 0-9, _), got %q", ch.AppTokenEnv)
	}
	return checkPolicy(ch, bad)
}

func checkPolicy(ch engine.Channel, bad func(string, ...any) error) error {
	if ch.DMPolicy != "" && !slices.Contains(dmPolicies, ch.DMPolicy) {
		return bad("dmPolicy must be one of %s, got %q", strings.Join(dmPolicies, ", "), ch.DMPolicy)
	}
	return nil
}

func envRef(name string) map[string]any {
	return map[string]any{"source": "env", "provider": "default", "id": name}
}

func onlyKeys(m map[string]any, keys ...string) bool {
	for k := range m {
		if !slices.Contains(keys, k) {
			return false
		}
	}
	return true
}

// object returns the object at path in cfg, creating (or replacing non-objects) on the way.
func object(cfg map[string]any, path ...string) map[string]any {
	cur := cfg
	for _, k := range path {
		next, ok := cur[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			cur[k] = next
		}
		cur = next
	}
	return cur
}

// parseConfig reads a config the way OpenClaw does: JSON, falling back to JSON5. The top
// level must be an object. Numbers of plain JSON keep their exact text.
func parseConfig(b []byte) (map[string]any, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	err := dec.Decode(&v)
	if err == nil {
		if _, tail := dec.Token(); tail != io.EOF {
			err = fmt.Errorf("data after the top-level value")
		}
	}
	if err != nil {
		v = nil
		if err5 := json5.Unmarshal(b, &v); err5 != nil {
			return nil, fmt.Errorf("%w: not JSON or JSON5: %v", engine.ErrInvalidConfig, err5)
		}
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: the config must be an object", engine.ErrInvalidConfig)
	}
	return m, nil
}

// marshalConfig writes cfg as indented JSON (keys sorted) with a trailing newline.
func marshalConfig(cfg map[string]any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(cfg); err != nil {
		return nil, fmt.Errorf("%w: %v", engine.ErrInvalidConfig, err)
	}
	return buf.Bytes(), nil
}
