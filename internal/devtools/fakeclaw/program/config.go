package program

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/titanous/json5"
)

// issue is one validation finding, shaped like openclaw's.
type issue struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// Keys the real schema allows (openclaw config schema, 2026.9.6).
var (
	topLevelKeys = []string{"$schema", "meta", "env", "wizard", "diagnostics", "logging", "update", "telemetry",
		"browser", "ui", "secrets", "auth", "accessGroups", "acp", "models", "nodeHost", "agents", "worktreeRoot",
		"worktreeAcceleration", "tools", "security", "bindings", "broadcast", "attachments", "messages", "tts",
		"commands", "approvals", "session", "cron", "transcripts", "hooks", "channels", "discovery", "talk",
		"gateway", "cloudWorkers", "desktop", "memory", "mcp", "skills", "plugins", "surfaces", "proxy"}
	gatewayKeys = []string{"port", "mode", "bind", "customBindHost", "publicOrigin", "portals", "controlUi",
		"cliAgents", "terminal", "auth", "roles", "trustedProxies", "allowRealIpFallback", "tools", "tailscale",
		"remote", "reload", "tls", "http", "push", "nodes"}
	channelKeys = []string{"defaults", "modelByChannel", "a2a", "buzz", "clickclack", "discord", "feishu",
		"googlechat", "imessage", "irc", "line", "matrix", "mattermost", "msteams", "nextcloud-talk", "nostr",
		"qa-channel", "raft", "reef", "signal", "slack", "sms", "synology-chat", "telegram", "tlon", "twitch",
		"whatsapp", "zalo", "zalouser"}
	dmPolicies  = []string{"pairing", "allowlist", "open", "disabled"}
	authModes   = []string{"none", "token", "password", "trusted-proxy"}
	tokenFields = map[string][]string{"telegram": {"botToken"}, "slack": {"botToken", "appToken", "userToken", "signingSecret"}, "discord": {"token"}}
	envVarRE    = regexp.MustCompile(`\$\{([A-Z_][A-Z0-9_]*)\}`)
)

var errNoConfig = errors.New("file not found")

// loadConfig reads and parses the config file (JSON, then JSON5).
func loadConfig(path string) (map[string]any, []issue, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, errNoConfig
	}
	if err != nil {
		return nil, nil, err
	}
	cfg, iss := parseConfig(b)
	return cfg, iss, nil
}

func parseConfig(b []byte) (map[string]any, []issue) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	err := dec.Decode(&v)
	if err == nil {
		if _, tail := dec.Token(); tail != io.EOF {
			err = errors.New("trailing data")
		}
	}
	if err != nil {
		v = nil
		if err5 := json5.Unmarshal(b, &v); err5 != nil {
			return nil, []issue{{"<root>", "JSON5 parse failed: SyntaxError: JSON5: " + err5.Error()}}
		}
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, []issue{{"<root>", "Invalid input: expected object, received " + typeName(v)}}
	}
	return m, checkConfig(m)
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "boolean"
	case json.Number, float64:
		return "number"
	case []any:
		return "array"
	}
	return "object"
}

// checkConfig is the fake's small strict check.
func checkConfig(cfg map[string]any) []issue {
	var out []issue
	add := func(path, format string, a ...any) { out = append(out, issue{path, fmt.Sprintf(format, a...)}) }
	for _, k := range sortedKeys(cfg) {
		if !slices.Contains(topLevelKeys, k) {
			add("<root>", "Unrecognized key: %q", k)
		}
	}
	if gw, ok := cfg["gateway"].(map[string]any); ok {
		for _, k := range sortedKeys(gw) {
			if !slices.Contains(gatewayKeys, k) {
				add("gateway", "Unrecognized key: %q", k)
			}
		}
		if p, ok := gw["port"]; ok {
			if n, isNum := number(p); !isNum {
				add("gateway.port", "Invalid input: expected number, received %s", typeName(p))
			} else if n < 1 || n > 65535 || n != float64(int(n)) {
				add("gateway.port", "Invalid input: expected an integer from 1 to 65535")
			}
		}
		if m, ok := gw["mode"]; ok && m != "local" && m != "remote" {
			add("gateway.mode", `Invalid input: expected "local" | "remote"`)
		}
		if auth, ok := gw["auth"].(map[string]any); ok {
			if m, ok := auth["mode"]; ok && !slices.Contains(authModes, fmt.Sprint(m)) {
				add("gateway.auth.mode", "Invalid input: expected one of %s", strings.Join(authModes, "|"))
			}
			if t, ok := auth["token"]; ok {
				checkSecret(t, "gateway.auth.token", add)
			}
		}
	} else if v, ok := cfg["gateway"]; ok {
		add("gateway", "Invalid input: expected object, received %s", typeName(v))
	}
	if chans, ok := cfg["channels"].(map[string]any); ok {
		for _, id := range sortedKeys(chans) {
			if !slices.Contains(channelKeys, id) {
				add("channels."+id, "unknown channel id: %s", id)
				continue
			}
			ch, _ := chans[id].(map[string]any)
			if p, ok := ch["dmPolicy"]; ok && !slices.Contains(dmPolicies, fmt.Sprint(p)) {
				add("channels."+id+".dmPolicy", `invalid config: must be equal to one of the allowed values (allowed: "pairing", "allowlist", "open", "disabled")`)
			}
			for _, f := range tokenFields[id] {
				if t, ok := ch[f]; ok {
					checkSecret(t, "channels."+id+"."+f, add)
				}
			}
		}
	}
	return out
}

// checkSecret: a secret is a string or a SecretRef {source, provider, id}.
func checkSecret(v any, path string, add func(string, string, ...any)) {
	switch t := v.(type) {
	case string:
	case map[string]any:
		if src, _ := t["source"].(string); !slices.Contains([]string{"env", "file", "exec", "store"}, src) {
			add(path, `invalid config: must be equal to one of the allowed values (allowed: "env", "file", "exec", "store")`)
		}
		if _, ok := t["provider"].(string); !ok {
			add(path, "invalid config: must have required property 'provider'")
		}
		if _, ok := t["id"].(string); !ok {
			add(path, "invalid config: must have required property 'id'")
		}
	default:
		add(path, "Invalid input: expected string or SecretRef, received %s", typeName(v))
	}
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case float64:
		return n, true
	}
	return 0, false
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func get(m map[string]any, path ...string) any {
	var cur any = m
	for _, k := range path {
		o, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = o[k]
	}
	return cur
}

// resolveSecret turns a config secret into its value: "${VAR}" substitution in strings,
// env SecretRefs from the environment. Other SecretRef sources are not supported.
func resolveSecret(v any) string {
	switch t := v.(type) {
	case string:
		return envVarRE.ReplaceAllStringFunc(t, func(s string) string { return os.Getenv(s[2 : len(s)-1]) })
	case map[string]any:
		if t["source"] == "env" {
			id, _ := t["id"].(string)
			return os.Getenv(id)
		}
	}
	return ""
}

// configToken is gateway.auth.token of cfg, resolved ("" when there is none).
func configToken(cfg map[string]any) string {
	return resolveSecret(get(cfg, "gateway", "auth", "token"))
}

// configPort is gateway.port of cfg (0 when unset).
func configPort(cfg map[string]any) int {
	if n, ok := number(get(cfg, "gateway", "port")); ok {
		return int(n)
	}
	return 0
}

// configValidate implements `openclaw config validate [--json]`.
func configValidate(args []string) int {
	f, err := parseFlags(args, nil, []string{"json"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	path := configPath()
	_, issues, err := loadConfig(path)
	if err != nil {
		if f.bools["json"] {
			printJSON(map[string]any{"ok": false, "error": map[string]any{"type": "cli_error", "message": err.Error()}, "valid": false, "path": path})
		} else {
			fmt.Fprintln(os.Stderr, err.Error())
		}
		return 1
	}
	if len(issues) == 0 {
		if f.bools["json"] {
			fmt.Println(encodeJSON(map[string]any{"valid": true, "path": path, "warnings": []any{}}, ""))
		} else {
			fmt.Println("Config valid: " + path)
		}
		return 0
	}
	msg := "OpenClaw config is invalid: " + path
	if f.bools["json"] {
		printJSON(map[string]any{"ok": false, "error": map[string]any{"type": "cli_error", "message": msg},
			"valid": false, "path": path, "issues": issues})
		return 1
	}
	fmt.Fprintln(os.Stderr, msg)
	for _, is := range issues {
		fmt.Fprintf(os.Stderr, "  × %s: %s\n", is.Path, is.Message)
	}
	return 1
}
