// Package program is fakeclaw, the engine test double: a small program with the command-line
// surface and output shapes of openclaw 2026.9.6 for what agentplane uses, so runtime and
// controller tests run in milliseconds instead of booting a 1 GB Node.js gateway. It is a
// library so that any binary can be it: fakeclaw.EngineDir makes <dir>/bin/openclaw re-run the
// current executable (a test binary, for instance) with Main in charge.
//
// Commands:
//
//	openclaw --version | -V        "OpenClaw 2026.9.6-fake (fake)"
//	openclaw gateway run [--port P] [--bind loopback|lan|auto|custom|tailnet] [--auth token|none]
//	                     [--token T] [--allow-unconfigured]
//	    Serves GET /healthz (/health) {"ok":true,"status":"live"}, /readyz (/ready), /startupz
//	    (/startup), POST /tools/invoke (401 on a wrong bearer token, 404 for an unknown tool,
//	    200 for sessions_list), POST /v1/chat/completions when the config enables it (streamed
//	    turns relayed from the configured provider, chat.go), 404 for /api/* and the rest of
//	    /v1/*, and the Control UI's 200 HTML for any
//	    other GET. The token is resolved per request, config first like openclaw (--token >
//	    gateway.auth.token in the config, plain, "${VAR}" or an env SecretRef >
//	    OPENCLAW_GATEWAY_TOKEN), so rotating it in the config applies without a restart, like
//	    the real hot reload; a config that does not parse keeps the last good token. Port: --port > OPENCLAW_GATEWAY_PORT > gateway.port >
//	    18789. Exits 78 without a config (unless --allow-unconfigured), with an invalid config,
//	    or without a token on a non-loopback bind (loopback gets a random runtime token). Stops
//	    with exit 0 on SIGTERM/SIGINT. Writes <state>/fake-gateway.json {"pid","port","bind"}
//	    while it runs and keeps cron jobs in <state>/fake-cron.json. Uses a compile cache the
//	    way Node does for the real one and says how in <state>/fake-compile-cache.json
//	    (compilecache.go).
//	openclaw config validate [--json]
//	    JSON or JSON5 syntax plus a small strict check (unknown top-level and gateway keys,
//	    gateway.port/mode/auth types, unknown channel ids, dmPolicy values, SecretRef shape),
//	    with the real verdict shapes and exit codes 0/1.
//	openclaw config file            prints the config path
//	openclaw cron add|list|rm ...   cron add: --name --declaration-key (idempotent upsert)
//	                                --cron [--tz] | --every | --at, --message [--no-deliver] |
//	                                --system-event, --disabled, --delete-after-run,
//	                                --keep-after-run, --description, --agent; cron list [--all];
//	                                cron rm <id>.
//	openclaw devices list [--json]  {"pending":[],"paired":[]}
//	openclaw plugins install <spec> [--force]
//	                                records the npm plugin (no network) in
//	                                <state>/fake-plugins.json and sets
//	                                plugins.entries.<id>.enabled in the config; a second
//	                                install exits 1 with "plugin already exists: ... (delete it
//	                                first)" on stderr, like openclaw (plugins.go).
//	openclaw plugins list [--json]  the recorded plugins {"plugins":[{"id",...}]}
//
// Like the real CLI, cron and devices reach the running gateway: they connect to 127.0.0.1 on
// --port > OPENCLAW_GATEWAY_PORT > gateway.port > 18789 (or --url / OPENCLAW_GATEWAY_URL, which
// need an explicit --token) with --token > the config's token > OPENCLAW_GATEWAY_TOKEN. A
// gateway that is not running gives exit 1 with {"ok":false,"error":{...,"message":"Gateway not
// reachable at ws://127.0.0.1:P (ECONNREFUSED)..."}}, a wrong token exit 1 with "unauthorized:
// gateway token mismatch ...". Paths follow OpenClaw: OPENCLAW_HOME > HOME for the home, state
// dir <home>/.openclaw (OPENCLAW_STATE_DIR), config <state>/openclaw.json
// (OPENCLAW_CONFIG_PATH; a leading "~/" expands to the home).
//
// Fault injection, environment only:
//
//	FAKECLAW_FAIL_START=1           gateway run writes a message to stderr and exits 1 at once
//	FAKECLAW_BOOT_DELAY=<duration>  time before the gateway listens (default 100ms); as the
//	                                engine's startup guard, a change of the config file
//	                                after "[gateway] starting on the config read" ends the
//	                                start with exit 78 and the engine's "OpenClaw migration
//	                                inputs changed during startup" message
//	FAKECLAW_CRASH_AFTER=<duration> the gateway exits 1 that long after it started listening
//	FAKECLAW_FAIL=<cmd>[,<cmd>...]  those CLI commands exit 1 with {"ok":false,"error":{...}};
//	                                a <cmd> is a command path prefix such as "cron add", "cron",
//	                                "devices list", "config validate" or "version"
//	FAKECLAW_NPM_MISSING=<pkg>[,...] plugins install of those packages fails as the engine does
//	                                when the registry has no such package (exit 1, "Package
//	                                not found on npm: <spec>. ...")
//	FAKECLAW_RELOAD_DELAY=<duration> a change of the config's token applies only once the
//	                                config file is that old (the engine's hot reload); the
//	                                gateway serves the token it applied before until then
//	FAKECLAW_VERSION=<v>            the version --version and /startupz report
//	                                (default 2026.9.6-fake)
package program

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// PinnedVersion is the openclaw release whose surface the fake copies.
const PinnedVersion = "2026.9.6"

const defaultVersion = PinnedVersion + "-fake"

func version() string {
	if v := os.Getenv("FAKECLAW_VERSION"); v != "" {
		return v
	}
	return defaultVersion
}

// Main runs the command line args (without the program name) and returns the exit code.
func Main(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "Usage: openclaw [options] [command]")
		return 1
	}
	path, rest := commandPath(args)
	if failInjected(path) {
		msg := fmt.Sprintf("fakeclaw: injected failure of %q (FAKECLAW_FAIL)", path)
		if path != "version" && path != "gateway run" {
			printJSON(errorBody("cli_error", msg))
		}
		fmt.Fprintln(os.Stderr, msg)
		return 1
	}
	switch path {
	case "version":
		fmt.Printf("OpenClaw %s (fake)\n", version())
		return 0
	case "gateway run":
		return gatewayRun(rest)
	case "config validate":
		return configValidate(rest)
	case "config file":
		fmt.Println(configPath())
		return 0
	case "cron add", "cron create":
		return cronAdd(rest)
	case "cron list":
		return cronList(rest)
	case "cron rm", "cron remove":
		return cronRemove(rest)
	case "devices list":
		return devicesList(rest)
	case "plugins install":
		return pluginsInstall(rest)
	case "plugins list":
		return pluginsList(rest)
	}
	fmt.Fprintf(os.Stderr, "error: unknown command '%s'\n", strings.Join(args, " "))
	return 1
}

// commandPath splits args into the command path ("cron add") and the rest.
func commandPath(args []string) (string, []string) {
	if args[0] == "--version" || args[0] == "-V" {
		return "version", args[1:]
	}
	n := 1
	if len(args) > 1 && !strings.HasPrefix(args[1], "-") {
		n = 2
	}
	return strings.Join(args[:n], " "), args[n:]
}

func failInjected(path string) bool {
	for _, f := range strings.Split(os.Getenv("FAKECLAW_FAIL"), ",") {
		f = strings.TrimSpace(f)
		if f != "" && (path == f || strings.HasPrefix(path, f+" ")) {
			return true
		}
	}
	return false
}

// home is OpenClaw's home: OPENCLAW_HOME > HOME.
func home() string {
	h := os.Getenv("OPENCLAW_HOME")
	if h == "" {
		h = os.Getenv("HOME")
	} else if strings.HasPrefix(h, "~") {
		h = os.Getenv("HOME") + h[1:]
	}
	if h == "" {
		h, _ = os.UserHomeDir()
	}
	abs, err := filepath.Abs(h)
	if err != nil {
		return h
	}
	return abs
}

// userPath expands a leading "~" to the home and makes p absolute.
func userPath(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		p = home() + p[1:]
	}
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}

func stateDir() string {
	if s := os.Getenv("OPENCLAW_STATE_DIR"); s != "" {
		return userPath(s)
	}
	return filepath.Join(home(), ".openclaw")
}

func configPath() string {
	if c := os.Getenv("OPENCLAW_CONFIG_PATH"); c != "" {
		return userPath(c)
	}
	return filepath.Join(stateDir(), "openclaw.json")
}

// flags is a parsed command line: options with values, boolean options, positionals.
type flags struct {
	vals  map[string]string
	bools map[string]bool
	args  []string
}

// parseFlags parses "--name value", "--name=value" and boolean "--name" options the way
// commander does. valued and boolean list the options the command knows.
func parseFlags(args []string, valued, boolean []string) (*flags, error) {
	f := &flags{vals: map[string]string{}, bools: map[string]bool{}}
	known := func(list []string, n string) bool {
		for _, k := range list {
			if k == n {
				return true
			}
		}
		return false
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "--") || a == "--" {
			f.args = append(f.args, a)
			continue
		}
		name, val, hasVal := strings.Cut(a[2:], "=")
		switch {
		case known(valued, name):
			if !hasVal {
				if i+1 >= len(args) {
					return nil, fmt.Errorf("error: option '--%s <value>' argument missing", name)
				}
				i++
				val = args[i]
			}
			f.vals[name] = val
		case known(boolean, name) && !hasVal:
			f.bools[name] = true
		default:
			return nil, fmt.Errorf("error: unknown option '--%s'", name)
		}
	}
	return f, nil
}

// printJSON prints v as indented JSON without HTML escaping, like JSON.stringify(v, null, 2).
func printJSON(v any) { fmt.Println(encodeJSON(v, "  ")) }

func encodeJSON(v any, indent string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", indent)
	_ = enc.Encode(v)
	return strings.TrimSuffix(b.String(), "\n")
}

func errorBody(typ, msg string) map[string]any {
	return map[string]any{"ok": false, "error": map[string]any{"type": typ, "message": msg}}
}

// fail prints a CLI error the way openclaw does (JSON on stdout, text on stderr), exit 1.
func fail(msg string) int {
	printJSON(errorBody("cli_error", msg))
	fmt.Fprintln(os.Stderr, msg)
	return 1
}
