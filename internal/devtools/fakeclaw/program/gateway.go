package program

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const defaultPort = 18789

// gateway is a running fake gateway.
type gateway struct {
	cfgPath   string
	flagToken string // --token: fixed, wins over everything
	authNone  bool
	started   time.Time
	cron      *cronStore
	reload    time.Duration // FAKECLAW_RELOAD_DELAY

	mu           sync.Mutex
	lastGood     string // last token resolved from a readable config
	runtimeToken string // generated when no token is configured (loopback only)
}

func gatewayRun(args []string) int {
	f, err := parseFlags(args,
		[]string{"port", "bind", "auth", "token", "password", "password-file", "tailscale", "ws-log", "raw-stream-path"},
		[]string{"allow-unconfigured", "verbose", "force", "dev", "reset", "compact", "ambient-channels", "raw-stream",
			"claude-cli-logs", "cli-backend-logs", "dev-ambient-channels"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if os.Getenv("FAKECLAW_FAIL_START") == "1" {
		fmt.Fprintln(os.Stderr, "fakeclaw: gateway failed to start (FAKECLAW_FAIL_START=1)")
		return 1
	}
	g := &gateway{cfgPath: configPath(), flagToken: f.vals["token"], started: time.Now(), reload: envDuration("FAKECLAW_RELOAD_DELAY", 0)}
	authored, _ := os.ReadFile(g.cfgPath)
	cfg, code := loadGatewayConfig(g.cfgPath, f.bools["allow-unconfigured"])
	if code != 0 {
		return code
	}

	bind := f.vals["bind"]
	if bind == "" {
		bind = "loopback"
	}
	if !g.setupAuth(cfg, f.vals["auth"], bind) {
		return 78
	}
	port := gatewayPort(cfg, f.vals["port"])

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	fmt.Println(startingLine)
	if code, stop := g.boot(envDuration("FAKECLAW_BOOT_DELAY", 100*time.Millisecond), authored, sigs); stop {
		return code
	}
	host := "0.0.0.0"
	if bind == "loopback" {
		host = "127.0.0.1"
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		fmt.Fprintf(os.Stderr, "Gateway failed to start: %v\n", err)
		return 1
	}
	g.cron = openCronStore(filepath.Join(stateDir(), "fake-cron.json"))
	g.prepareState(cfg, port, bind)
	cc := openCompileCache()
	statePath := filepath.Join(stateDir(), "fake-gateway.json")
	defer os.Remove(statePath)

	srv := &http.Server{Handler: g.routes(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	fmt.Printf("[gateway] listening on ws://%s:%d (PID %d)\n", host, port, os.Getpid())
	fmt.Println("[gateway] ready")
	if n, err := strconv.Atoi(os.Getenv("FAKECLAW_HOG_BYTES")); err == nil && n > 0 {
		go hog(n)
	}

	crash, why := crashTrigger()
	select {
	case s := <-sigs:
		fmt.Printf("[gateway] received %s; shutting down\n", signalName(s))
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		cc.persist()
		fmt.Println("[shutdown] completed cleanly")
		return 0
	case <-crash:
		fmt.Fprintf(os.Stderr, "fakeclaw: gateway crashed (%s)\n", why)
		return 1
	}
}

// crashTrigger is when the gateway crashes on purpose (never when neither FAKECLAW_CRASH_AFTER
// nor FAKECLAW_CRASH_ON is set) and the setting that says why.
func crashTrigger() (<-chan time.Time, string) {
	if p := os.Getenv("FAKECLAW_CRASH_ON"); p != "" {
		return crashOn(p), "FAKECLAW_CRASH_ON=" + p
	}
	if d := envDuration("FAKECLAW_CRASH_AFTER", 0); d > 0 {
		return time.After(d), "FAKECLAW_CRASH_AFTER=" + os.Getenv("FAKECLAW_CRASH_AFTER")
	}
	return nil, ""
}

// startingLine is what the gateway prints once it has read its config and starts.
const startingLine = "[gateway] starting on the config read"

// msgStartupInputsChanged is what the engine prints when its config file changed while it
// started (exit 78).
const msgStartupInputsChanged = "OpenClaw migration inputs changed during startup (authored config file contents changed); refusing to report the gateway ready. Restart OpenClaw so state migrations run against the final config and plugin inventory."

// boot is the gateway's startup, d long. Like the engine's startup guard, a change of the
// config file's contents since authored (read when the gateway started) ends it with exit 78
// and the engine's message, noticed as it happens or at the end; a signal ends it with 0.
func (g *gateway) boot(d time.Duration, authored []byte, sigs <-chan os.Signal) (code int, stop bool) {
	changed := func() bool {
		now, _ := os.ReadFile(g.cfgPath)
		return !bytes.Equal(now, authored)
	}
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	for done := time.After(d); ; {
		select {
		case s := <-sigs:
			fmt.Printf("[gateway] received %s during startup; exiting\n", signalName(s))
			return 0, true
		case <-poll.C:
			if !changed() {
				continue
			}
		case <-done:
			if !changed() {
				return 0, false
			}
		}
		fmt.Fprintln(os.Stderr, msgStartupInputsChanged)
		return 78, true
	}
}

// loadGatewayConfig reads the config as openclaw's gateway does before it starts; code is
// the exit code it refuses to start with (0: it starts).
func loadGatewayConfig(cfgPath string, allowUnconfigured bool) (cfg map[string]any, code int) {
	cfg, issues, err := loadConfig(cfgPath)
	switch {
	case errors.Is(err, errNoConfig) && allowUnconfigured:
		cfg = map[string]any{}
	case errors.Is(err, errNoConfig):
		fmt.Fprintln(os.Stderr, "Missing config. Run `openclaw setup` or set gateway.mode=local (or pass --allow-unconfigured).")
		return nil, 78
	case err != nil:
		fmt.Fprintln(os.Stderr, "Failed to read config: "+err.Error())
		return nil, 78
	case len(issues) > 0:
		fmt.Fprintf(os.Stderr, "Invalid config at %s:\n", cfgPath)
		for _, is := range issues {
			fmt.Fprintf(os.Stderr, "- %s: %s\n", is.Path, is.Message)
		}
		fmt.Fprintln(os.Stderr, "Run `openclaw doctor --fix` to repair, then retry.")
		return nil, 78
	case get(cfg, "gateway", "mode") != "local" && !allowUnconfigured:
		fmt.Fprintln(os.Stderr, "Gateway start blocked: set gateway.mode=local (current: unset) or pass --allow-unconfigured.")
		return nil, 78
	}
	return cfg, 0
}

// setupAuth sets the gateway's auth from --auth (authFlag) or the config: without a token
// it uses a runtime-only one on loopback and refuses (false) to bind elsewhere.
func (g *gateway) setupAuth(cfg map[string]any, authFlag, bind string) bool {
	authMode := authFlag
	if authMode == "" {
		authMode, _ = get(cfg, "gateway", "auth", "mode").(string)
	}
	g.authNone = authMode == "none"
	g.lastGood = configToken(cfg)
	if !g.authNone && g.token() == "" {
		if bind != "loopback" {
			fmt.Fprintf(os.Stderr, "Refusing to bind gateway to %s without auth. Set OPENCLAW_GATEWAY_TOKEN or OPENCLAW_GATEWAY_PASSWORD, or pass --token/--password.\n", bind)
			return false
		}
		g.runtimeToken = randomHex(24)
		fmt.Println("[gateway] no token configured: using a runtime-only token (restart will generate a different token)")
	}
	return true
}

// gatewayPort is the config's port, else the default, overridden by OPENCLAW_GATEWAY_PORT
// and then by --port (portFlag).
func gatewayPort(cfg map[string]any, portFlag string) int {
	port := defaultPort
	if p := configPort(cfg); p > 0 {
		port = p
	}
	for _, s := range []string{os.Getenv("OPENCLAW_GATEWAY_PORT"), portFlag} {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			port = n
		}
	}
	return port
}

// prepareState creates the state dir and workspace and writes the pid/port file.
func (g *gateway) prepareState(cfg map[string]any, port int, bind string) {
	ws := filepath.Join(stateDir(), "workspace")
	if w, ok := get(cfg, "agents", "defaults", "workspace").(string); ok && w != "" {
		ws = userPath(resolveSecret(w))
	}
	_ = os.MkdirAll(ws, 0o755)
	info := encodeJSON(map[string]any{"pid": os.Getpid(), "port": port, "bind": bind, "startedAtMs": g.started.UnixMilli()}, "")
	_ = os.WriteFile(filepath.Join(stateDir(), "fake-gateway.json"), []byte(info+"\n"), 0o600)
}

// token is the token clients must present now. The config is read on every call so that a
// rotated gateway.auth.token applies at once (with FAKECLAW_RELOAD_DELAY, only once the file
// is that old: the engine's hot reload); an unreadable config keeps the last good token.
func (g *gateway) token() string {
	if g.flagToken != "" {
		return g.flagToken
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if cfg, issues, err := loadConfig(g.cfgPath); err == nil && len(issues) == 0 && g.reloaded() {
		g.lastGood = configToken(cfg)
	}
	if g.lastGood != "" {
		return g.lastGood
	}
	if t := os.Getenv("OPENCLAW_GATEWAY_TOKEN"); t != "" {
		return t
	}
	return g.runtimeToken
}

// reloaded tells whether the config file as it is now has been applied: always, unless
// FAKECLAW_RELOAD_DELAY is set and the file changed less than that long ago.
func (g *gateway) reloaded() bool {
	if g.reload <= 0 {
		return true
	}
	fi, err := os.Stat(g.cfgPath)
	return err != nil || time.Since(fi.ModTime()) >= g.reload
}

func (g *gateway) authorized(r *http.Request) bool {
	if g.authNone {
		return true
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	want := g.token()
	return ok && want != "" && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(want)) == 1
}

func (g *gateway) routes() http.Handler {
	mux := http.NewServeMux()
	live := func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"ok": true, "status": "live"})
	}
	ready := func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"ready": true, "failing": []any{}, "uptimeMs": g.uptime()})
	}
	startup := func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"ok": true, "status": "started", "version": version(), "uptimeMs": g.uptime()})
	}
	for path, h := range map[string]http.HandlerFunc{"/healthz": live, "/health": live, "/readyz": ready,
		"/ready": ready, "/startupz": startup, "/startup": startup} {
		mux.HandleFunc("GET "+path, h)
	}
	mux.HandleFunc("POST /tools/invoke", g.toolsInvoke)
	mux.HandleFunc("POST /__fakeclaw/rpc", g.rpc)
	mux.HandleFunc("/api/", notFound)
	mux.HandleFunc("POST /v1/chat/completions", g.chat)
	mux.HandleFunc("/v1/", notFound)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			notFound(w, r)
			return
		}
		// The Control UI's SPA fallback: any other GET answers 200 HTML.
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, "<!doctype html><html><head><title>OpenClaw Control</title></head><body><openclaw-app></openclaw-app></body></html>\n")
	})
	return mux
}

func (g *gateway) uptime() int64 { return time.Since(g.started).Milliseconds() }

func notFound(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusNotFound)
	_, _ = io.WriteString(w, "Not Found")
}

func unauthorized(w http.ResponseWriter) {
	writeJSON(w, http.StatusUnauthorized, map[string]any{"error": map[string]any{"message": "Unauthorized", "type": "unauthorized"}})
}

func (g *gateway) toolsInvoke(w http.ResponseWriter, r *http.Request) {
	if !g.authorized(r) {
		unauthorized(w)
		return
	}
	var req struct {
		Tool string `json:"tool"`
	}
	_ = json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req)
	if req.Tool != "sessions_list" {
		writeJSON(w, http.StatusNotFound, map[string]any{"ok": false, "error": map[string]any{"type": "not_found", "message": "Tool not available: " + req.Tool}})
		return
	}
	writeJSON(w, 200, map[string]any{"ok": true, "result": map[string]any{"content": []any{},
		"details": map[string]any{"count": 0, "sessions": []any{}, "hasMore": false, "limitApplied": 100}}})
}

// rpc serves the fake CLI (cron, devices). The real CLI speaks WebSocket RPC instead.
func (g *gateway) rpc(w http.ResponseWriter, r *http.Request) {
	if !g.authorized(r) {
		unauthorized(w)
		return
	}
	var req struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		writeJSON(w, 400, rpcError(err))
		return
	}
	var res any
	var err error
	switch req.Method {
	case "cron.add":
		var spec jobSpec
		if err = json.Unmarshal(req.Params, &spec); err == nil {
			res, err = g.cron.add(spec, time.Now())
		}
	case "cron.list":
		var p struct{ All bool }
		_ = json.Unmarshal(req.Params, &p)
		res = g.cron.list(p.All)
	case "cron.rm":
		var p struct{ ID string }
		_ = json.Unmarshal(req.Params, &p)
		res, err = g.cron.remove(p.ID)
	case "devices.list":
		res = map[string]any{"pending": []any{}, "paired": []any{}}
	default:
		err = fmt.Errorf("unknown method: %s", req.Method)
	}
	if err != nil {
		writeJSON(w, 400, rpcError(err))
		return
	}
	writeJSON(w, 200, map[string]any{"ok": true, "result": res})
}

func rpcError(err error) map[string]any {
	return map[string]any{"ok": false, "error": map[string]any{"message": err.Error()}}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, encodeJSON(v, "")+"\n")
}

// crashOn fires once the file at path exists, which it removes (one crash per file): a crash
// at a moment the test picks, unlike FAKECLAW_CRASH_AFTER (whose timer, in a gateway restored
// from a checkpoint, may fire while CRIU still restores it).
func crashOn(path string) <-chan time.Time {
	c := make(chan time.Time, 1)
	go func() {
		for now := range time.Tick(50 * time.Millisecond) {
			if _, err := os.Stat(path); err == nil {
				_ = os.Remove(path)
				c <- now
				return
			}
		}
	}()
	return c
}

func envDuration(name string, def time.Duration) time.Duration {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		fmt.Fprintf(os.Stderr, "fakeclaw: ignoring %s=%q: %v\n", name, s, err)
		return def
	}
	return d
}

func signalName(s os.Signal) string {
	if s == syscall.SIGTERM {
		return "SIGTERM"
	}
	return "SIGINT"
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// hog takes n bytes of memory and keeps them (FAKECLAW_HOG_BYTES: a gateway that outgrows its
// memory limit, for the kernel to end), touching every page.
func hog(n int) {
	b := make([]byte, n)
	for i := 0; i < n; i += 4096 {
		b[i] = 1
	}
	select {} // hold it
}
