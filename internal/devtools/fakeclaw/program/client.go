package program

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// Connection options every gateway-backed command accepts.
var connFlags = []string{"url", "token", "password", "port", "timeout"}

// target is where and how the CLI reaches the gateway.
type target struct {
	host, token, url string
	port             int
	source           string
}

// resolveTarget follows openclaw: --url/OPENCLAW_GATEWAY_URL (explicit credentials required
// with --url; only the env token with OPENCLAW_GATEWAY_URL), else 127.0.0.1 on --port >
// OPENCLAW_GATEWAY_PORT > gateway.port > 18789; token --token > gateway.auth.token >
// OPENCLAW_GATEWAY_TOKEN (openclaw's "config-first" local precedence).
func resolveTarget(f *flags) (target, error) {
	cfg, _, _ := loadConfig(configPath())
	t := target{host: "127.0.0.1", port: defaultPort, source: "local loopback"}
	if p := configPort(cfg); p > 0 {
		t.port = p
	}
	for _, s := range []string{os.Getenv("OPENCLAW_GATEWAY_PORT"), f.vals["port"]} {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			t.port = n
		}
	}
	t.token = f.vals["token"]
	if t.token == "" {
		t.token = f.vals["password"]
	}
	explicit := t.token != ""
	raw, src := f.vals["url"], "cli --url"
	if raw == "" {
		raw, src = os.Getenv("OPENCLAW_GATEWAY_URL"), "env OPENCLAW_GATEWAY_URL"
	}
	if t.token == "" && raw == "" {
		t.token = configToken(cfg) // local mode: config first
	}
	if t.token == "" {
		t.token = os.Getenv("OPENCLAW_GATEWAY_TOKEN")
	}
	if raw != "" {
		if src == "cli --url" && !explicit {
			return t, errors.New("gateway url override requires explicit credentials")
		}
		u, err := url.Parse(raw)
		if err != nil || u.Hostname() == "" {
			return t, fmt.Errorf("invalid gateway url: %s", raw)
		}
		t.host, t.source = u.Hostname(), src
		if p, err := strconv.Atoi(u.Port()); err == nil {
			t.port = p
		}
	}
	t.url = fmt.Sprintf("ws://%s:%d", t.host, t.port)
	return t, nil
}

// errUnreachable: no gateway listens at the target.
type errUnreachable struct{ t target }

func (e errUnreachable) Error() string {
	return fmt.Sprintf("Gateway not reachable at %s (ECONNREFUSED).", e.t.url)
}

// call runs one RPC on the gateway and returns its result.
func call(f *flags, method string, params any) (json.RawMessage, error) {
	t, err := resolveTarget(f)
	if err != nil {
		return nil, err
	}
	timeout := 30 * time.Second
	if ms, err := strconv.Atoi(f.vals["timeout"]); err == nil && ms > 0 {
		timeout = time.Duration(ms) * time.Millisecond
	}
	body, _ := json.Marshal(map[string]any{"method": method, "params": params})
	req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("http://%s/__fakeclaw/rpc", hostPort(t)), bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if t.token != "" {
		req.Header.Set("Authorization", "Bearer "+t.token)
	}
	client := &http.Client{Timeout: timeout, Transport: &http.Transport{Proxy: nil}}
	resp, err := client.Do(req)
	if err != nil {
		return nil, errUnreachable{t}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusUnauthorized {
		return nil, errors.New("unauthorized: gateway token mismatch (use this gateway's gateway.auth.token or pair the device)")
	}
	var out struct {
		OK     bool            `json:"ok"`
		Result json.RawMessage `json:"result"`
		Error  struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("gateway answered %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	if !out.OK {
		return nil, errors.New(out.Error.Message)
	}
	return out.Result, nil
}

func hostPort(t target) string {
	if strings.Contains(t.host, ":") {
		return fmt.Sprintf("[%s]:%d", t.host, t.port)
	}
	return fmt.Sprintf("%s:%d", t.host, t.port)
}

// cliFail prints an error of a gateway-backed command the way openclaw does.
func cliFail(err error) int {
	var un errUnreachable
	if errors.As(err, &un) {
		return fail(un.Error() + "\nStart it with `openclaw gateway run` or check `openclaw gateway status`.\nGateway target: " +
			un.t.url + "\nSource: " + un.t.source + "\nConfig: " + configPath())
	}
	return fail(err.Error())
}

// printRaw prints a result as indented JSON.
func printRaw(raw json.RawMessage) {
	var buf bytes.Buffer
	if json.Indent(&buf, raw, "", "  ") != nil {
		fmt.Println(string(raw))
		return
	}
	fmt.Println(buf.String())
}

func devicesList(args []string) int {
	f, err := parseFlags(args, connFlags, []string{"json"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	res, err := call(f, "devices.list", nil)
	var un errUnreachable
	if errors.As(err, &un) {
		// devices prints a transport error of its own shape, and nothing on stderr.
		printJSON(map[string]any{"ok": false,
			"error": map[string]any{"type": "gateway_transport_error", "kind": "closed", "message": un.Error(),
				"reason": fmt.Sprintf("connect ECONNREFUSED %s", hostPort(un.t))},
			"gateway": map[string]any{"url": un.t.url, "urlSource": un.t.source}})
		return 1
	}
	if err != nil {
		return fail(err.Error())
	}
	if !f.bools["json"] {
		fmt.Println("No device pairing entries.")
		return 0
	}
	printRaw(res)
	return 0
}

func cronList(args []string) int {
	f, err := parseFlags(args, append([]string{"agent"}, connFlags...), []string{"json", "all"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	res, err := call(f, "cron.list", map[string]any{"all": f.bools["all"]})
	if err != nil {
		return cliFail(err)
	}
	printRaw(res)
	return 0
}

func cronRemove(args []string) int {
	f, err := parseFlags(args, connFlags, []string{"json"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if len(f.args) != 1 {
		fmt.Fprintln(os.Stderr, "error: missing required argument 'id'")
		return 1
	}
	res, err := call(f, "cron.rm", map[string]any{"id": f.args[0]})
	if err != nil {
		return cliFail(err)
	}
	printRaw(res)
	return 0
}

func cronAdd(args []string) int {
	f, err := parseFlags(args,
		append([]string{"name", "declaration-key", "description", "display-name", "agent", "cron", "tz", "every", "at",
			"message", "system-event", "session", "model", "timeout-seconds"}, connFlags...),
		[]string{"json", "no-deliver", "announce", "disabled", "delete-after-run", "keep-after-run", "exact", "light-context"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	spec := jobSpec{Name: f.vals["name"], DeclarationKey: f.vals["declaration-key"], Description: f.vals["description"],
		AgentID: f.vals["agent"], Message: f.vals["message"], SystemEvent: f.vals["system-event"],
		NoDeliver: f.bools["no-deliver"], Disabled: f.bools["disabled"]}
	if count(f.vals["cron"], f.vals["every"], f.vals["at"]) != 1 {
		return fail("Choose exactly one schedule: --at, --every, --cron, --on-exit, or --stream-command")
	}
	if count(f.vals["message"], f.vals["system-event"]) != 1 {
		return fail("Choose exactly one payload: --system-event, --message, --command, or --script")
	}
	if spec.SystemEvent != "" && (spec.NoDeliver || f.bools["announce"]) {
		return fail("--announce/--no-deliver require a non-main agentTurn, command, or script session target.")
	}
	if spec.AgentID == "" {
		fmt.Fprintln(os.Stderr, "No --agent specified; the job will run with the configured default agent.")
	}
	now := time.Now()
	switch {
	case f.vals["cron"] != "":
		spec.Cron, spec.TZ = f.vals["cron"], f.vals["tz"]
	case f.vals["every"] != "":
		d, err := parseDuration(f.vals["every"])
		if err != nil || d <= 0 {
			return fail("Invalid --every: " + f.vals["every"])
		}
		spec.EveryMs = d.Milliseconds()
	default:
		at, err := parseAt(f.vals["at"], f.vals["tz"], now)
		if err != nil {
			return fail(err.Error())
		}
		spec.At = at.Format(time.RFC3339Nano)
	}
	if f.bools["delete-after-run"] || f.bools["keep-after-run"] {
		v := f.bools["delete-after-run"]
		spec.DeleteAfterRun = &v
	}
	res, err := call(f, "cron.add", spec)
	if err != nil {
		return cliFail(err)
	}
	printRaw(res)
	return 0
}

func count(vals ...string) int {
	n := 0
	for _, v := range vals {
		if v != "" {
			n++
		}
	}
	return n
}

// parseDuration accepts Go durations plus days ("7d").
func parseDuration(s string) (time.Duration, error) {
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(d)
		return time.Duration(n) * 24 * time.Hour, err
	}
	return time.ParseDuration(s)
}

// parseAt: an ISO time (offset-less ones in tz) or a duration from now ("20m").
func parseAt(s, tz string, now time.Time) (time.Time, error) {
	if d, err := parseDuration(s); err == nil {
		return now.Add(d), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	loc := time.UTC
	if tz != "" {
		l, err := time.LoadLocation(tz)
		if err != nil {
			return time.Time{}, fmt.Errorf("Invalid --tz: %s", tz)
		}
		loc = l
	}
	for _, layout := range []string{"2006-01-02T15:04:05.999999999", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, loc); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("Invalid --at: %s", s)
}
