package local_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/runtime/local"
	"github.com/agentplane/agentplane/internal/rules/secrets"
)

// stoppedAgent provisions an agent without a gateway (Exec and files need only the home).
func stoppedAgent(t *testing.T, f *fixture, name string, env map[string]string) (workspace string) {
	t.Helper()
	d := desired("tok-" + name + "-000000000000")
	d.Stopped, d.Env = true, env
	ensure(t, f, newAgent(name), d)
	return filepath.Join(f.rt.AgentDir(keyOf(newAgent(name))), "home/.openclaw/workspace")
}

func TestExecOutputsAndExitCode(t *testing.T) {
	f := newFixture(t)
	ws := stoppedAgent(t, f, "exec", map[string]string{"ATTACHED_SECRET": "s3cr3t-value"})
	a := newAgent("exec")

	res, err := f.rt.Exec(context.Background(), a, runtime.ExecRequest{
		Argv: []string{"sh", "-c", `echo out; echo err >&2; echo "$ATTACHED_SECRET|$HOME|$(pwd)|$EXTRA"; exit 3`},
		Env:  map[string]string{"EXTRA": "x"},
	})
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Dir(filepath.Dir(ws))
	want := "out\ns3cr3t-value|" + home + "|" + ws + "|x\n"
	if res.ExitCode != 3 || string(res.Stdout) != want || string(res.Stderr) != "err\n" || res.TimedOut || res.Truncated {
		t.Fatalf("res = %d %q %q (want %q)", res.ExitCode, res.Stdout, res.Stderr, want)
	}

	res, err = f.rt.Exec(context.Background(), a, runtime.ExecRequest{Argv: []string{"cat"}, Stdin: []byte("fed")})
	if err != nil || string(res.Stdout) != "fed" || res.ExitCode != 0 {
		t.Fatalf("stdin: %+v %v", res, err)
	}

	// Engine commands run the engine binary with the engine env.
	res, err = f.rt.Exec(context.Background(), a, runtime.ExecRequest{Argv: []string{"--version"}, Engine: true})
	if err != nil || !strings.Contains(string(res.Stdout), "OpenClaw "+fakeVersion) {
		t.Fatalf("engine --version: %+v %v", res, err)
	}
	res, err = f.rt.Exec(context.Background(), a, runtime.ExecRequest{Argv: []string{"config", "file"}, Engine: true})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != filepath.Join(home, ".openclaw/openclaw.json") {
		t.Fatalf("engine config file: %q %v", res.Stdout, err)
	}
}

func TestExecTimeoutKillsTree(t *testing.T) {
	f := newFixture(t)
	stoppedAgent(t, f, "sleeper", nil)
	// Background sleeps are found on this host by their argument (a pid written from inside
	// a sandbox is its PID namespace's).
	bgMark := "100.0" + strconv.Itoa(os.Getpid())
	res, err := f.rt.Exec(context.Background(), newAgent("sleeper"), runtime.ExecRequest{
		Argv:    []string{"sh", "-c", "sleep " + bgMark + "1 & sleep 100"},
		Timeout: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut {
		t.Fatalf("timeout: %+v", res)
	}
	if res.ExitCode != 137 {
		t.Errorf("exit code %d, want 137 (SIGKILL)", res.ExitCode)
	}
	waitHostGone(t, "sleep\x00"+bgMark+"1")

	// A background child of a command that exits is killed too, without waiting for it: an
	// exec that waited for it (it sleeps past the exec's default timeout) would time out.
	res, err = f.rt.Exec(context.Background(), newAgent("sleeper"), runtime.ExecRequest{
		Argv: []string{"sh", "-c", "sleep " + bgMark + "2 & echo done"},
	})
	if err != nil || string(res.Stdout) != "done\n" || res.TimedOut {
		t.Fatalf("background: %+v %v", res, err)
	}
	waitHostGone(t, "sleep\x00"+bgMark+"2")
}

func TestExecOutputCap(t *testing.T) {
	f := newFixture(t)
	stoppedAgent(t, f, "chatty", nil)
	res, err := f.rt.Exec(context.Background(), newAgent("chatty"), runtime.ExecRequest{
		Argv:      []string{"sh", "-c", "head -c 5000000 /dev/zero; head -c 10 /dev/zero >&2"},
		MaxOutput: 1000,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Stdout) != 1000 || len(res.Stderr) != 10 || !res.Truncated || res.ExitCode != 0 {
		t.Fatalf("cap: out=%d err=%d truncated=%v code=%d", len(res.Stdout), len(res.Stderr), res.Truncated, res.ExitCode)
	}
}

func TestExecWorkingDirectory(t *testing.T) {
	f := newFixture(t)
	ws := stoppedAgent(t, f, "cwd", nil)
	a := newAgent("cwd")
	outside := t.TempDir()
	for _, p := range []string{"sub/deeper"} {
		if err := os.MkdirAll(filepath.Join(ws, p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(ws, "out-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub", filepath.Join(ws, "in-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string]string{"sub/deeper": "sub/deeper", "in-link": "sub", "sub/../sub": "sub"} {
		res, err := f.rt.Exec(context.Background(), a, runtime.ExecRequest{Argv: []string{"pwd"}, Dir: dir})
		if err != nil || strings.TrimSpace(string(res.Stdout)) != filepath.Join(ws, want) {
			t.Errorf("Dir %q: %q %v", dir, res.Stdout, err)
		}
	}
	for _, dir := range []string{"..", "../..", "sub/../../x", "/tmp", outside, "out-link", "out-link/", "missing", "file"} {
		_, err := f.rt.Exec(context.Background(), a, runtime.ExecRequest{Argv: []string{"pwd"}, Dir: dir})
		if !errors.Is(err, runtime.ErrInvalidPath) {
			t.Errorf("Dir %q: err = %v, want ErrInvalidPath", dir, err)
		}
	}
}

func TestExecErrors(t *testing.T) {
	f := newFixture(t)
	if _, err := f.rt.Exec(context.Background(), newAgent("ghost"), runtime.ExecRequest{Argv: []string{"true"}}); !errors.Is(err, runtime.ErrNotRunning) {
		t.Fatalf("unknown agent: %v", err)
	}
	stoppedAgent(t, f, "errs", nil)
	a := newAgent("errs")
	for _, argv := range [][]string{{"/nonexistent/binary"}, {"no-such-command-anywhere"}, {}} {
		if _, err := f.rt.Exec(context.Background(), a, runtime.ExecRequest{Argv: argv}); !errors.Is(err, runtime.ErrExec) {
			t.Errorf("%v: err = %v, want ErrExec", argv, err)
		}
	}
	// Cancelling the caller's context kills the command (which would otherwise end well,
	// 100 s later).
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := f.rt.Exec(ctx, a, runtime.ExecRequest{Argv: []string{"sleep", "100"}}); err == nil {
		t.Fatal("cancelled exec: no error")
	}
}

// An attached secret named like a value the platform sets (one created before the name was
// reserved) does not override it: the platform's environment comes last.
func TestExecPlatformEnvWinsOverSecrets(t *testing.T) {
	f := newFixture(t)
	ws := stoppedAgent(t, f, "envorder", map[string]string{
		"PATH": "/evil", "HOME": "/evil", "LANG": "evil", "OPENCLAW_HOME": "/evil", "ATTACHED": "kept",
	})
	home := filepath.Dir(filepath.Dir(ws))
	res, err := f.rt.Exec(context.Background(), newAgent("envorder"), runtime.ExecRequest{
		Argv: []string{"sh", "-c", `echo "$PATH|$HOME|$LANG|$OPENCLAW_HOME|$ATTACHED"`},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSpace(string(res.Stdout)), "|")
	if len(got) != 5 || strings.Contains(got[0], "/evil") || got[1] != home || got[2] == "evil" || got[3] != home || got[4] != "kept" {
		t.Fatalf("environment = %q (home %s)", res.Stdout, home)
	}
}

// The gateway's environment, too: the platform's values come after the attached secrets.
func TestGatewayPlatformEnvWinsOverSecrets(t *testing.T) {
	f := newFixture(t)
	a := newAgent("gwenvorder")
	d := desired("tok-gwenvorder-000000000000")
	d.Env = map[string]string{"HOME": "/evil", "OPENCLAW_HOME": "/evil", "AGENTPLANE_AGENT_HOME": "/evil", "LANG": "evil", "ATTACHED": "kept",
		"NODE_OPTIONS": "--require /evil.js"}
	waitPhase(t, f, a, d, runtime.PhaseRunning)
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(gatewayPID(t, f, a)) + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, kv := range strings.Split(string(raw), "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	home := filepath.Join(f.rt.AgentDir(keyOf(a)), "home")
	if env["HOME"] != home || env["OPENCLAW_HOME"] != home || env["AGENTPLANE_AGENT_HOME"] != home || env["LANG"] == "evil" || env["ATTACHED"] != "kept" {
		t.Fatalf("gateway environment: %v (home %s)", env, home)
	}
	// The platform's Node settings, not the secret's (runtime.GatewayNodeEnv).
	for k, v := range runtime.GatewayNodeEnv(local.DefaultGatewayHeapMiB) {
		if env[k] != v {
			t.Errorf("gateway %s = %q, want the platform's %q", k, env[k], v)
		}
	}
	// Every name the platform sets is one a secret may not take.
	for k := range env {
		if k != "ATTACHED" && !secrets.IsReservedEnvName(k) {
			t.Errorf("the local runtime sets %s for the gateway, which secrets.IsReservedEnvName does not reserve", k)
		}
	}
}

// StdinFile: the command reads Stdin from a private file outside the agent's home, removed
// after; the home is untouched.
func TestExecStdinFile(t *testing.T) {
	f := newFixture(t)
	ws := stoppedAgent(t, f, "stdinfile", nil)
	home := filepath.Dir(filepath.Dir(ws))
	// A first command makes the workspace of the agent that never ran (ensureWorkspace).
	if _, err := f.rt.Exec(context.Background(), newAgent("stdinfile"), runtime.ExecRequest{Argv: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	before := treeOf(t, home)
	res, err := f.rt.Exec(context.Background(), newAgent("stdinfile"), runtime.ExecRequest{
		Argv:  []string{"sh", "-c", `cat "$CANDIDATE"; echo; echo "$CANDIDATE"; ls -ld "$(dirname "$CANDIDATE")" | cut -c1-10`},
		Stdin: []byte(`{"gateway":{}}`), StdinFile: &runtime.StdinFile{Env: "CANDIDATE", Name: "openclaw.json"},
	})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %+v %v", res, err)
	}
	out := strings.Split(strings.TrimSpace(string(res.Stdout)), "\n")
	if len(out) != 3 || out[0] != `{"gateway":{}}` || filepath.Base(out[1]) != "openclaw.json" || strings.HasPrefix(out[1], home) || out[2] != "drwx------" {
		t.Fatalf("stdout %q", res.Stdout)
	}
	if _, err := os.Stat(filepath.Dir(out[1])); !os.IsNotExist(err) {
		t.Errorf("the temporary directory %s is left: %v", filepath.Dir(out[1]), err)
	}
	if after := treeOf(t, home); after != before {
		t.Errorf("the home changed:\n%s\n---\n%s", before, after)
	}
}

// treeOf lists every file under dir with its mode, size and contents.
func treeOf(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		b.WriteString(p + " " + info.Mode().String() + " " + strconv.FormatInt(info.Size(), 10))
		if info.Mode().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			b.Write(data)
		}
		b.WriteByte('\n')
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// Options.CAFile: the agents' commands and gateways trust the CAs of an egress that
// intercepts TLS (NODE_EXTRA_CA_CERTS), and read them in their sandbox; without it, the
// engine's registry installs fail behind such an egress ("self-signed certificate in
// certificate chain"). A relative path is refused at start.
func TestCAFileReachesCommandsAndGateways(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "egress-ca.pem")
	const pem = "-----BEGIN CERTIFICATE-----\nnot checked by the runtime\n-----END CERTIFICATE-----\n"
	if err := os.WriteFile(ca, []byte(pem), 0o644); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, func(o *local.Options) { o.CAFile = ca })
	stoppedAgent(t, f, "ca", nil)
	res, err := f.rt.Exec(context.Background(), newAgent("ca"), runtime.ExecRequest{
		Argv: []string{"sh", "-c", `echo "$NODE_EXTRA_CA_CERTS"; cat "$NODE_EXTRA_CA_CERTS"`},
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := ca + "\n" + pem; res.ExitCode != 0 || string(res.Stdout) != want {
		t.Fatalf("a command's CA file: exit %d, %q (stderr %q), want %q", res.ExitCode, res.Stdout, res.Stderr, want)
	}

	a := newAgent("cagw")
	waitPhase(t, f, a, desired("tok-cagw-000000000000"), runtime.PhaseRunning)
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(gatewayPID(t, f, a)) + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains("\x00"+string(raw), "\x00NODE_EXTRA_CA_CERTS="+ca+"\x00") {
		t.Errorf("the gateway's environment has no NODE_EXTRA_CA_CERTS=%s", ca)
	}

	cwd, _ := os.Getwd()
	rel, err := filepath.Rel(cwd, ca) // names the file from here: only its form is wrong
	if err != nil {
		t.Fatal(err)
	}
	rt, err := local.New(local.Options{StateDir: t.TempDir(), Engine: f.opts.Engine, EngineDirs: f.opts.EngineDirs, CAFile: rel})
	if err == nil {
		_ = rt.Shutdown(context.Background())
	}
	if err == nil || !strings.Contains(err.Error(), "not an absolute path") {
		t.Errorf("the relative CA file %s: %v, want it refused as not absolute", rel, err)
	}
}

// Options.GatewayEnv (the platform's channel relays): every gateway and command has it from
// its start, above an attached secret of the same name, naming the platform by PlatformAddr in
// the gateways' network namespaces, where it reaches Options.PlatformService; a gateway the
// next manager adopts keeps running when only the platform's port moved (the environment is
// the same), and restarts when the environment itself changed, as for a change of its own.
func TestGatewayEnvReachesGatewaysAndRestartsOnChange(t *testing.T) {
	const name = "SLACK_API_URL"
	services := [2]string{}
	for i := range services {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, "platform-"+strconv.Itoa(i))
		}))
		t.Cleanup(srv.Close)
		services[i] = srv.Listener.Addr().String()
	}
	var named []string // the addresses the runtimes named the platform by
	relay := func(path string) func(string) map[string]string {
		return func(platform string) map[string]string {
			named = append(named, platform)
			return map[string]string{name: "http://" + platform + path}
		}
	}
	keep := func(o *local.Options) {
		o.KeepRunningOnShutdown, o.PlatformService, o.GatewayEnv = true, services[0], relay("/relay/slack/api/")
	}
	f1 := newFixture(t, keep)
	stopKeptOnFailure(t, f1)
	netns, _ := f1.rt.Networks()
	platform := services[0]
	if netns {
		platform = local.PlatformAddr
	}
	first := "http://" + platform + "/relay/slack/api/"
	environ := func(pid int) string {
		raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		if err != nil {
			t.Fatal(err)
		}
		return "\x00" + string(raw)
	}
	// fetch is what a command of the agent gets from the platform at the address its
	// environment names.
	fetch := func(f *fixture, a *agentsv1.Agent) string {
		t.Helper()
		host, port, _ := net.SplitHostPort(strings.TrimPrefix(strings.Split(first, "/relay")[0], "http://"))
		res, err := f.rt.Exec(context.Background(), a, runtime.ExecRequest{Argv: []string{"bash", "-c",
			`exec 3<>/dev/tcp/` + host + `/` + port + ` && printf 'GET / HTTP/1.0\r\n\r\n' >&3 && cat <&3`}, Timeout: time.Minute})
		if err != nil {
			t.Fatalf("a command's request to the platform: %v", err)
		}
		return string(res.Stdout)
	}
	a := newAgent("relayed")
	d := desired("tok-relayed-00000000000")
	d.Env = map[string]string{name: "http://attacker.example/"} // an attached secret of that name
	waitPhase(t, f1, a, d, runtime.PhaseRunning)
	pid := gatewayPID(t, f1, a)
	if env := environ(pid); !strings.Contains(env, "\x00"+name+"="+first+"\x00") {
		t.Fatalf("the gateway's %s is not the platform's %s", name, first)
	}
	res, err := f1.rt.Exec(context.Background(), a, runtime.ExecRequest{Argv: []string{"sh", "-c", `echo "$` + name + `"`}})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != first {
		t.Fatalf("a command's %s: %q %v", name, res.Stdout, err)
	}
	if got := fetch(f1, a); !strings.HasSuffix(got, "platform-0") {
		t.Fatalf("at %s the agent reached %q, want the platform's service %s", platform, got, services[0])
	}
	if err := f1.rt.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	// The next manager's platform listens on another port: where the gateways have network
	// namespaces the environment is the same, the adopted gateway keeps running and reaches
	// the new port at the same address.
	opts := f1.opts
	opts.Notify, opts.PlatformService = nil, services[1]
	f2 := newFixtureWith(t, opts)
	stopKeptOnFailure(t, f2)
	if netns {
		waitPhase(t, f2, a, d, runtime.PhaseRunning)
		if p := gatewayPID(t, f2, a); p != pid {
			t.Fatalf("the gateway restarted (%d, then %d) when only the platform's port moved", pid, p)
		}
		if got := fetch(f2, a); !strings.HasSuffix(got, "platform-1") {
			t.Fatalf("after the move the agent reached %q at %s, want the platform's new port %s", got, platform, services[1])
		}
	}
	if err := f2.rt.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	// The same Desired on a manager whose environment changed: the gateway restarts with it.
	opts.KeepRunningOnShutdown, opts.GatewayEnv = false, relay("/relay/v2/slack/api/")
	f3 := newFixtureWith(t, opts)
	waitObserved(t, f3, a, d, func(o runtime.Observed) bool {
		p := gatewayPID(t, f3, a)
		return o.Phase == runtime.PhaseRunning && p != pid && p != 0
	})
	second := "http://" + platform + "/relay/v2/slack/api/"
	if env := environ(gatewayPID(t, f3, a)); !strings.Contains(env, "\x00"+name+"="+second+"\x00") {
		t.Fatalf("the restarted gateway's %s is not %s", name, second)
	}
	waitGone(t, pid)
	for _, n := range named {
		if n != platform {
			t.Fatalf("the runtimes named the platform %v, want %s each time", named, platform)
		}
	}
}
