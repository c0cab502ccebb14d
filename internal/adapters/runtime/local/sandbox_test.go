package local_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/engine/openclaw"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/runtime/local"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
)

// sandboxed builds a fixture whose runtime must sandbox (it fails the test where this host
// cannot: under CI=true that is an error, elsewhere a skip says why).
func sandboxed(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t, func(o *local.Options) { o.Sandbox = local.SandboxAuto })
	if ok, why := f.rt.Sandboxed(); !ok {
		testenv.Skip(t, "this host cannot sandbox agents: %s", why)
	}
	return f
}

// sh runs a shell command inside agent name's sandbox.
func sh(t *testing.T, f *fixture, name, script string) runtime.ExecResult {
	t.Helper()
	res, err := f.rt.Exec(context.Background(), newAgent(name), runtime.ExecRequest{Argv: []string{"sh", "-c", script}, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	return res
}

// TestSandboxHidesThePlatformAndOtherAgents is what an attacker with console exec in agent A
// tried on an unsandboxed runtime: walk up from the home to the state dir (the platform's
// kubeconfig and keys live there), read another agent's engine config (its gateway token),
// read another agent's processes' environment (its attached secrets). Each is refused now.
func TestSandboxHidesThePlatformAndOtherAgents(t *testing.T) {
	f := sandboxed(t)
	// The platform's own files beside the agents (devenv writes these into the state dir).
	for _, name := range []string{"kubeconfig", "dev.env"} {
		if err := os.WriteFile(filepath.Join(f.opts.StateDir, name), []byte("platform secret"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	victim := newAgent("victim")
	d := desired("victim-gateway-token-0123456789")
	d.Env = map[string]string{"VICTIM_SECRET": "victim-attached-secret"}
	waitPhase(t, f, victim, d, runtime.PhaseRunning)
	victimHome := filepath.Join(f.rt.AgentDir(keyOf(victim)), "home")
	stoppedAgent(t, f, "attacker", nil)

	state := f.opts.StateDir
	cases := map[string]string{
		"the state dir's kubeconfig":      "cat " + state + "/kubeconfig",
		"the state dir's dev.env":         "cat " + state + "/dev.env",
		"another agent's engine config":   "cat " + victimHome + "/.openclaw/openclaw.json",
		"another agent's state":           "cat " + f.rt.AgentDir(keyOf(victim)) + "/state.json",
		"another agent's home, listed":    "ls " + victimHome,
		"a walk up from the home":         "cat ../../../../../kubeconfig ../../../../../../kubeconfig",
		"another agent's secret in /proc": "cat /proc/*/environ | tr '\\0' '\\n' | grep -q 'victim-attached[-]secret'",
		"another agent's token in /proc":  "cat /proc/*/cmdline /proc/*/environ | grep -q 'victim-gateway[-]token'",
		"the host's root home":            "ls /root/.kube /root/.ssh",
		"writing the engine":              "touch " + f.opts.EngineDirs[version] + "/bin/x",
	}
	for what, script := range cases {
		if res := sh(t, f, "attacker", script); res.ExitCode == 0 {
			t.Errorf("%s: reachable from inside an agent (exit 0): %q", what, res.Stdout)
		}
	}
	// The attacker's own home and /tmp (OpenClaw keeps its state locks there) are writable,
	// and its view of the state dir holds
	// nothing but the path to it.
	res := sh(t, f, "attacker", "touch .mine /tmp/mine && ls -A "+state+" && ls -A "+state+"/agents")
	if res.ExitCode != 0 || strings.TrimSpace(string(res.Stdout)) != "agents\n"+newAgent("x").Namespace {
		t.Errorf("own home or the state dir's view: exit %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	// Its own PID namespace: only its own processes.
	res = sh(t, f, "attacker", "ls /proc | grep -c '^[0-9]'")
	if n, _ := strconv.Atoi(strings.TrimSpace(string(res.Stdout))); n == 0 || n > 5 {
		t.Errorf("processes visible inside the sandbox: %q", res.Stdout)
	}
	if os.Geteuid() == 0 {
		res = sh(t, f, "attacker", "id -u; grep CapEff /proc/self/status")
		if out := string(res.Stdout); strings.HasPrefix(out, "0\n") || !strings.Contains(out, "0000000000000000") {
			t.Errorf("as root the agent runs as root or keeps capabilities: %q", out)
		}
	}
}

// TestSandboxSetsidDoesNotEscape: a process that leaves the command's process group and
// session (setsid) dies with the sandbox: with the command's end for console exec, with the
// gateway's stop for the gateway.
func TestSandboxSetsidDoesNotEscape(t *testing.T) {
	f := sandboxed(t)
	stoppedAgent(t, f, "escaper", nil)
	marker := "agentplane-escape-" + strconv.Itoa(os.Getpid())
	res := sh(t, f, "escaper", "setsid sh -c 'exec -a "+marker+" sleep 300' </dev/null >/dev/null 2>&1 & sleep 0.2; echo started")
	if res.ExitCode != 0 {
		t.Fatalf("exec: %+v", res)
	}
	deadline := time.Now().Add(eventBound)
	for hostHas(marker) {
		if time.Now().After(deadline) {
			t.Fatal("a setsid process outlived its console exec")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitHostGone waits until no process on this host has s in its command line.
func waitHostGone(t *testing.T, s string) {
	t.Helper()
	deadline := time.Now().Add(eventBound)
	for hostHas(s) {
		if time.Now().After(deadline) {
			t.Fatalf("a process with %q in its command line still runs after %s", s, eventBound)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// hostPIDIn is the host pid of the process that is nsPID in the PID namespace of the sandbox
// whose bwrap is outer (nsPID itself when outer runs no sandbox).
func hostPIDIn(t *testing.T, outer, nsPID int) int {
	t.Helper()
	children, _ := os.ReadFile("/proc/" + strconv.Itoa(outer) + "/task/" + strconv.Itoa(outer) + "/children")
	own, _ := os.Readlink("/proc/" + strconv.Itoa(outer) + "/ns/pid")
	f := strings.Fields(string(children))
	if len(f) == 0 {
		return nsPID
	}
	ns, _ := os.Readlink("/proc/" + f[0] + "/ns/pid")
	if ns == "" || ns == own {
		return nsPID
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if l, _ := os.Readlink("/proc/" + e.Name() + "/ns/pid"); l != ns {
			continue
		}
		status, _ := os.ReadFile("/proc/" + e.Name() + "/status")
		for _, line := range strings.Split(string(status), "\n") {
			if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
				if ids := strings.Fields(rest); len(ids) > 0 && ids[len(ids)-1] == strconv.Itoa(nsPID) {
					pid, _ := strconv.Atoi(e.Name())
					return pid
				}
			}
		}
	}
	t.Fatalf("no process %d in the sandbox of %d", nsPID, outer)
	return 0
}

// hostHas: some process on this host has s in its command line.
func hostHas(s string) bool {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && strings.Contains(string(b), s) {
			return true
		}
	}
	return false
}

// TestUnsandboxedServesOneWorkspace: without sandboxes the runtime refuses an agent of a
// second workspace rather than let two tenants share the host's files.
func TestUnsandboxedServesOneWorkspace(t *testing.T) {
	f := newFixture(t, func(o *local.Options) { o.Sandbox = local.SandboxOff })
	if ok, why := f.rt.Sandboxed(); ok || why == "" {
		t.Fatalf("Sandboxed() = %v %q with the sandbox off", ok, why)
	}
	d := desired("tok-first-0000000000")
	d.Stopped = true
	ensure(t, f, newAgent("first"), d)
	other := &agentsv1.Agent{}
	other.Namespace, other.Name = "ws-other", "second"
	if _, err := f.rt.Ensure(context.Background(), other, d); !errors.Is(err, local.ErrOtherWorkspace) {
		t.Fatalf("Ensure of a second workspace's agent = %v, want ErrOtherWorkspace", err)
	}
	ensure(t, f, newAgent("again"), d) // the first workspace is still served
}

// fakeCompileCache is what the fake engine's gateway of home says of its compile cache.
type fakeCompileCache struct {
	Dir        string `json:"dir"`
	Enabled    bool   `json:"enabled"`
	Hit        bool   `json:"hit"`
	WriteError string `json:"writeError"`
}

func readFakeCompileCache(t *testing.T, home string) fakeCompileCache {
	t.Helper()
	var c fakeCompileCache
	b, err := os.ReadFile(filepath.Join(home, ".openclaw", "fake-compile-cache.json"))
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil {
		t.Fatalf("the gateway's compile cache report: %v", err)
	}
	return c
}

// TestSandboxCompileCacheIsSharedReadOnly: the engine's compile cache is warmed once per
// engine, and every sandboxed gateway then finds it warm at the path its Node uses (under its
// own uid's name) but can neither change it for the others nor leave anything there that
// another agent's sandbox would see.
func TestSandboxCompileCacheIsSharedReadOnly(t *testing.T) {
	f := sandboxed(t)
	ctx := context.Background()
	for range 2 { // the second finds it sealed
		if err := f.rt.WarmCompileCache(ctx, version); err != nil {
			t.Fatal(err)
		}
	}
	caches, _ := os.ReadDir(filepath.Join(f.opts.StateDir, "compile-cache"))
	if len(caches) != 1 || strings.HasPrefix(caches[0].Name(), ".") {
		t.Fatalf("compile caches after two warm-ups of one engine: %v, want one sealed dir", caches)
	}
	sealed := filepath.Join(f.opts.StateDir, "compile-cache", caches[0].Name())
	entries := 0
	err := filepath.WalkDir(sealed, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if st := info.Sys().(*syscall.Stat_t); int(st.Uid) != os.Geteuid() || info.Mode().Perm()&0o022 != 0 || !(d.IsDir() || d.Type().IsRegular()) {
			t.Errorf("sealed cache entry %s: owner %d mode %v, want the manager's, not writable by others", p, st.Uid, info.Mode())
		}
		if d.Name() == "gateway" {
			entries++
		}
		return nil
	})
	if err != nil || entries != 1 {
		t.Fatalf("the sealed cache holds %d entries of the warm-up gateway (%v), want 1", entries, err)
	}

	homes := map[string]string{}
	for _, name := range []string{"first", "second"} {
		ag := newAgent(name)
		waitPhase(t, f, ag, desired(name+"-gateway-token-0123456789"), runtime.PhaseRunning)
		homes[name] = filepath.Join(f.rt.AgentDir(keyOf(ag)), "home")
		c := readFakeCompileCache(t, homes[name])
		uid := strings.TrimSpace(string(sh(t, f, name, "id -u").Stdout))
		if !c.Enabled || !c.Hit || !strings.HasPrefix(c.Dir, "/tmp/node-compile-cache/") || !strings.HasSuffix(c.Dir, "-"+uid) {
			t.Fatalf("%s's gateway (uid %s) and its compile cache: %+v, want the warm one at /tmp/node-compile-cache/.../*-%s", name, uid, c, uid)
		}
		for what, script := range map[string]string{
			"overwrite an entry":     "echo poison > " + c.Dir + "/gateway",
			"add an entry":           "echo poison > " + c.Dir + "/other",
			"remove an entry":        "rm -f " + c.Dir + "/gateway && test ! -e " + c.Dir + "/gateway",
			"change an entry's mode": "chmod 666 " + c.Dir + "/gateway",
			"replace the dir":        "mv " + c.Dir + " " + c.Dir + ".old",
		} {
			if res := sh(t, f, name, script); res.ExitCode == 0 {
				t.Errorf("%s could %s of the shared compile cache", name, what)
			}
		}
		if res := sh(t, f, name, "cat "+c.Dir+"/gateway"); res.ExitCode != 0 || !strings.HasPrefix(string(res.Stdout), "code cache of ") {
			t.Errorf("%s reads the shared cache's entry: exit %d %q", name, res.ExitCode, res.Stdout)
		}
		// What it may write beside it stays in its own /tmp.
		if name == "first" {
			if res := sh(t, f, name, "echo poison > "+filepath.Dir(c.Dir)+"/planted"); res.ExitCode != 0 {
				t.Fatalf("first cannot write its own /tmp: %+v", res)
			}
		} else if res := sh(t, f, name, "ls -A "+filepath.Dir(c.Dir)); strings.Contains(string(res.Stdout), "planted") {
			t.Errorf("second sees what first planted in its /tmp: %q", res.Stdout)
		}
	}
	// On the host, the sealed cache is as the warm-up left it.
	var after []string
	_ = filepath.WalkDir(sealed, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			after = append(after, strings.TrimPrefix(p, sealed)+"="+string(b))
		}
		return nil
	})
	if len(after) != 2 || strings.Contains(strings.Join(after, " "), "poison") {
		t.Errorf("the sealed cache after the agents tried: %q, want the manifest and the warm-up's entry", after)
	}
}

// TestEngineConfigStaysReadableInTheSandbox: the engine config is rewritten under a running
// gateway (a rotated gateway token, a rendered config) while a command in the sandbox reads
// it. It always finds it readable: the agent's uid owns each new version before it replaces
// the old one (a root-owned 0600 file between the rename and a later chown read as nothing).
// The reader reads from before the first rewrite until after the last one, however fast
// the machine runs either side.
func TestEngineConfigStaysReadableInTheSandbox(t *testing.T) {
	const rewrites = 50
	f := sandboxed(t)
	a := newAgent("config-reader")
	d := desired("tok-reader-0000000000")
	waitPhase(t, f, a, d, runtime.PhaseRunning)
	cfgPath := openclaw.New().Layout().ConfigPath
	workspace := filepath.Join(f.rt.AgentDir(keyOf(a)), "home", ".openclaw", "workspace")
	started, done := filepath.Join(workspace, "reader-started"), filepath.Join(workspace, "writer-done")

	writes, readerDone := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(writes)
		defer os.WriteFile(done, nil, 0o644) //nolint:errcheck // the reader ends on it
		for _, err := os.Stat(started); err != nil; _, err = os.Stat(started) {
			select {
			case <-readerDone:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
		for i := range rewrites {
			d.GatewayToken = fmt.Sprintf("tok-reader-%010d", i)
			if _, err := f.rt.Ensure(context.Background(), a, d); err != nil {
				writes <- fmt.Errorf("rotate the token: %w", err)
				return
			}
			cfg, err := f.rt.ReadFile(context.Background(), a, cfgPath)
			if err == nil {
				err = f.rt.WriteFile(context.Background(), a, cfgPath, cfg)
			}
			if err != nil {
				writes <- fmt.Errorf("rewrite the config: %w", err)
				return
			}
		}
	}()
	res, err := f.rt.Exec(context.Background(), a, runtime.ExecRequest{Argv: []string{"sh", "-c",
		`n=0; touch reader-started; until [ -e writer-done ]; do n=$((n+1)); cat ../openclaw.json > /dev/null || { echo "unreadable at read $n"; exit 1; }; done; echo "$n reads"`},
		Timeout: 10 * time.Minute})
	close(readerDone)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-writes; err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("a command in the sandbox could not read the engine config while it was rewritten (exit %d): %s %s", res.ExitCode, res.Stdout, res.Stderr)
	}
	t.Logf("%s during %d rewrites", bytes.TrimSpace(res.Stdout), rewrites)
}

// TestSandboxRefusesUserNamespacesAndTheKernelsSurface is what code in an agent tried as root
// (`unshare -Ur` gave it namespaced CAP_SYS_ADMIN and CAP_NET_ADMIN): no new user namespace,
// whoever runs the manager; the seccomp filter is installed, and the system calls on its list
// answer their error (the ones that would answer something else without it are checked).
func TestSandboxRefusesUserNamespacesAndTheKernelsSurface(t *testing.T) {
	f := sandboxed(t)
	stoppedAgent(t, f, "prober", nil)
	res := sh(t, f, "prober", "unshare -Ur true 2>&1; echo rc=$?; unshare -U true 2>&1; echo rc=$?")
	if strings.Count(string(res.Stdout), "rc=0") > 0 {
		t.Errorf("a user namespace was made in the sandbox: %s", res.Stdout)
	}
	res = sh(t, f, "prober", "grep '^Seccomp:' /proc/self/status")
	if got := strings.Fields(string(res.Stdout)); len(got) != 2 || got[1] != "2" {
		t.Errorf("the sandbox's seccomp mode: %q, want 2 (filter)", res.Stdout)
	}
	// Numbers and errnos from the one list; each call with zero arguments, whose answer
	// without the filter is another error (EINVAL, EFAULT, EBADF) or success.
	probe := map[string]bool{"io_uring_setup": true, "io_uring_enter": true, "clone3": true, "keyctl": true,
		"userfaultfd": true, "perf_event_open": true, "open_tree": true, "fsopen": true}
	var nrs []string
	want := map[string]int{}
	for _, s := range local.RefusedSyscalls() {
		if probe[s.Name] {
			nrs = append(nrs, strconv.Itoa(s.Nr))
			want[strconv.Itoa(s.Nr)] = s.Errno
		}
	}
	res = sh(t, f, "prober", `perl -e 'for $n (@ARGV) { $! = 0; $r = syscall($n, 0, 0, 0, 0, 0); print "$n ", ($r == -1 ? $!+0 : "ok"), "\n" }' `+strings.Join(nrs, " "))
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
		if nr, errno, ok := strings.Cut(line, " "); ok {
			got[nr] = errno
		}
	}
	for nr, errno := range want {
		if got[nr] != strconv.Itoa(errno) {
			t.Errorf("syscall %s in the sandbox: %q, want errno %d (%s)", nr, got[nr], errno, res.Stderr)
		}
	}
}

// TestSandboxTmpIsBounded: code in an agent that fills its /tmp (a tmpfs: the host's memory)
// stops at runtime.TmpSize with ENOSPC, instead of taking half the host's RAM from every other
// agent and the control plane. The attempt itself is bounded at twice the size.
func TestSandboxTmpIsBounded(t *testing.T) {
	f := sandboxed(t)
	stoppedAgent(t, f, "filler", nil)
	script := fmt.Sprintf("head -c %d /dev/zero > /tmp/fill; echo exit=$?; stat -c %%s /tmp/fill", 2*runtime.TmpSize)
	res := sh(t, f, "filler", script)
	out := strings.Fields(string(res.Stdout))
	if len(out) != 2 || out[0] == "exit=0" || !strings.Contains(string(res.Stderr), "No space left on device") {
		t.Fatalf("writing %d bytes into /tmp: %q %q, want ENOSPC", 2*runtime.TmpSize, res.Stdout, res.Stderr)
	}
	if n, err := strconv.ParseInt(out[1], 10, 64); err != nil || n > runtime.TmpSize {
		t.Fatalf("/tmp took %s bytes, want at most %d", out[1], runtime.TmpSize)
	}
}
