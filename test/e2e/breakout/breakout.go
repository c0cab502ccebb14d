// Package breakout is the hostile-agent suite that both runtimes run (test/e2e/devmode on the
// local runtime, test/e2e/realnode on the kube runtime's real node): code inside agent A, with
// nothing but what an agent has (its tools run commands in its sandbox: console exec stands
// for a prompt injection or a malicious skill; its own tokens), tries to get out of its box.
// Every attempt is one list (package plan), run by one static program (the intruder) uploaded into
// the agent's home as any file would be; the runtime's test says only what is out of reach on
// its runtime (Box). Each attempt must fail, each control must work.
package breakout

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/internal/devtools/testenv"
	"github.com/agentplane/agentplane/test/e2e"
	"github.com/agentplane/agentplane/test/e2e/breakout/plan"
)

// Target is an address code in the agent tries to reach: TCP ("tcp", host:port) or a DNS
// server asked for a name ("dns", server:port and Query).
type Target struct {
	Name, Kind, Addr, Query string
}

// Box is a runtime's side of the suite: two running agents of one workspace and what is out
// of the attacker's reach there.
type Box struct {
	P *e2e.Platform
	// Attacker and Victim are agent ids; VictimSecret is the value of a secret attached to the
	// victim (its gateway's environment holds it).
	Attacker, Victim, VictimSecret string
	// PlatformFiles are the platform's credentials and data, by the paths code in the agent
	// would try (the host's state dir, a service-account token).
	PlatformFiles []string
	// Unreachable are addresses code in the agent must not reach (another agent's gateway,
	// the control plane); Reachable are the ones it must (the cluster DNS), as controls.
	Unreachable, Reachable []Target
	// HostAddr is an address of this host on which the suite listens: the agent must neither
	// connect to it nor see the listener in /proc/net.
	HostAddr string
	// Sleep is a program in the agent's sandbox that sleeps for the seconds it is given.
	Sleep string
	// The attacker's bounds: memory and pids of its sandbox or pod, its home's and /tmp's
	// sizes. Each attempt goes to twice the bound, so a missing one fails the test without
	// harming the machine.
	MemoryLimit, PidsLimit, HomeSize, TmpSize int64
	// LinkTarget is a directory outside the attacker's home, named as the platform's writes
	// into the home would resolve it (a host directory on the local runtime); Planted lists
	// what is in it.
	LinkTarget string
	Planted    func() []string
}

// attempt is one entry of the intruder's plan (test/e2e/breakout/intruder).
type attempt struct {
	plan.Attempt
	want bool // a control: it must work
}

// try is an attempt that must fail.
func try(name, kind, arg string, n int64) attempt {
	return attempt{Attempt: plan.Attempt{Name: name, Kind: kind, Arg: arg, N: n}}
}

// intruderPath is where the intruder is installed, in the agent's home (console exec's dir).
const intruderPath = "./.intruder"

// Check runs every attempt of the suite from inside b.Attacker.
func Check(t *testing.T, b Box) {
	in := &inside{t: t, b: b}
	in.install()

	t.Run("credentials open only the agent's own", b.checkCredentials)
	t.Run("the platform, the other agent, the host's network and the kernel", func(t *testing.T) {
		victimToken := e2e.Must(t, b.P.Call("GET", "/v0/agents/"+b.Victim+"/gateway-token", nil), 200, "victim token").Str("token")
		attempts := []attempt{
			try("find the victim's secret in /proc", "proc", b.VictimSecret, 0),
			try("find the victim's gateway token in /proc", "proc", victimToken, 0),
			try("make a user namespace", "userns", "", 0),
		}
		if b.HostAddr != "" {
			host := listen(t, b.HostAddr)
			_, port, _ := net.SplitHostPort(host)
			attempts = append(attempts, try("connect to a listener on the host", "tcp", host, 0),
				try("see the host's listener in /proc/net", "procnet", "", atoi(port)))
		}
		for _, f := range b.PlatformFiles {
			attempts = append(attempts, try("read "+f, "read", f, 0))
		}
		for _, c := range refusedCalls {
			attempts = append(attempts, try("call "+c, "syscall", c, 0))
		}
		for _, tg := range b.Unreachable {
			attempts = append(attempts, tg.attempt(false))
		}
		for _, tg := range b.Reachable {
			attempts = append(attempts, tg.attempt(true))
		}
		in.run(t, attempts...)
	})
	t.Run("bounds: memory, processes, home and /tmp", func(t *testing.T) {
		// One at a time: each goes to twice its bound.
		in.run(t, try("touch twice the memory limit", "memory", "", 2*b.MemoryLimit))
		in.awaitUsable(t)
		in.run(t, try("start twice the pids limit", "pids", b.Sleep, 2*b.PidsLimit))
		in.run(t, try("reserve twice the home's size", "fallocate", "./.fill", 2*b.HomeSize))
		in.run(t, try("reserve twice /tmp's size", "fallocate", "/tmp/.fill", 2*b.TmpSize))
	})
	t.Run("a link planted in the home steers no write of the platform", func(t *testing.T) {
		in.awaitUsable(t)
		in.checkLink(t)
	})
	t.Run("the agents still run", func(t *testing.T) {
		in.awaitUsable(t)
		for _, id := range []string{b.Attacker, b.Victim} {
			r := b.P.Call("GET", "/v0/agents/"+id, nil)
			if r.Status != 200 || r.Obj("agent")["status"] != "running" {
				t.Errorf("agent %s after the attempts: %d %s", id, r.Status, e2e.Tail(string(r.Raw), 300))
			}
		}
		if code, out := in.sh(t, "touch mine /tmp/mine && echo usable"); code != 0 || !strings.Contains(out, "usable") {
			t.Errorf("the agent cannot use its own home and /tmp: %d %s", code, out)
		}
	})
}

// refusedCalls are the kernel's attack surface an unprivileged program reaches without a
// filter (each answers an fd or success on a kernel that allows it).
var refusedCalls = []string{"keyctl", "io_uring_setup", "userfaultfd", "perf_event_open", "bpf"}

func (tg Target) attempt(want bool) attempt {
	if tg.Kind == "dns" {
		return attempt{Attempt: plan.Attempt{Name: tg.Name, Kind: "dns", Arg: tg.Addr + "|" + tg.Query}, want: want}
	}
	return attempt{Attempt: plan.Attempt{Name: tg.Name, Kind: "tcp", Arg: tg.Addr}, want: want}
}

// checkCredentials: the attacker's gateway token, and a platform token it mints with it,
// open nothing of the victim.
func (b Box) checkCredentials(t *testing.T) {
	p := b.P
	own := e2e.Must(t, p.Call("GET", "/v0/agents/"+b.Attacker+"/gateway-token", nil), 200, "attacker token").Str("token")
	minted := e2e.Must(t, p.CallAs(own, "POST", "/v0/agents/"+b.Attacker+"/platform/token", nil), 201, "mint a platform token").Str("token")
	for _, tok := range []struct{ what, token string }{{"its gateway token", own}, {"a platform token it minted", minted}} {
		for _, path := range []string{"/v0/agents/" + b.Victim + "/config", "/v0/agents/" + b.Victim + "/gateway-token", "/v0/agents/" + b.Victim} {
			if r := p.CallAs(tok.token, "GET", path, nil); r.Status != 404 {
				t.Errorf("%s on %s: %d %s, want 404", tok.what, path, r.Status, e2e.Tail(string(r.Raw), 200))
			}
		}
	}
}

// inside runs things in the attacker, as its tools would.
type inside struct {
	t *testing.T // the suite's (install)
	b Box
}

// sh runs script in the attacker (console exec) and returns its exit code and output.
func (in *inside) sh(t *testing.T, script string) (int, string) {
	t.Helper()
	r := e2e.Must(t, in.b.P.Call("POST", "/v0/agents/"+in.b.Attacker+"/console/exec", map[string]any{"command": script}), 200, "exec")
	code, _ := r.Body["exitCode"].(float64)
	return int(code), r.Str("stdout") + r.Str("stderr")
}

// install uploads the intruder into the attacker's home, as any file, and makes it a
// program of the agent's own.
func (in *inside) install() {
	t := in.t
	bin := build(t)
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	e2e.Must(t, in.b.P.Call("POST", "/v0/agents/"+in.b.Attacker+"/files/upload", map[string]string{
		"filename": "intruder", "contentBase64": base64.StdEncoding.EncodeToString(data)}), 201, "upload the intruder")
	if code, out := in.sh(t, "cp intruder "+intruderPath+" && chmod 700 "+intruderPath+" && rm intruder"); code != 0 {
		t.Fatalf("install the intruder: %d %s", code, out)
	}
}

// run runs attempts in the attacker and checks that each failed (a control worked).
func (in *inside) run(t *testing.T, attempts ...attempt) {
	t.Helper()
	arg, _ := json.Marshal(attempts)
	code, out := in.sh(t, intruderPath+" '"+strings.ReplaceAll(string(arg), "'", `'\''`)+"'")
	got := map[string]plan.Result{}
	for _, line := range strings.Split(out, "\n") {
		var r plan.Result
		if json.Unmarshal([]byte(line), &r) == nil && r.Name != "" {
			got[r.Name] = r
		}
	}
	for _, a := range attempts {
		r, ok := got[a.Name]
		switch {
		case !ok && a.Kind == "memory" && code == oomKilled:
			// The memory cgroup's OOM killer took the intruder down with its hog: the bound
			// held. A second kill in the same cgroup, while the hog's memory is being freed,
			// can take the agent's gateway and the exec with it (seen on the real node,
			// invoked by a runc exec into the loaded pod): awaitUsable waits for its restart.
			t.Logf("%s: the bound held, the intruder was killed (exit %d)", a.Name, code)
		case !ok:
			t.Errorf("%s: no result (exit %d: %s)", a.Name, code, e2e.Tail(out, 500))
		case r.Done != a.want && a.want:
			t.Errorf("%s: failed from inside the agent, and it must work: %s", a.Name, r.Detail)
		case r.Done != a.want:
			t.Errorf("%s: it worked from inside an agent: %s", a.Name, r.Detail)
		default:
			t.Logf("%s: done=%v (%s)", a.Name, r.Done, r.Detail)
		}
	}
}

// oomKilled is the exit code of a command SIGKILLed, as the OOM killer does.
const oomKilled = 128 + 9

// awaitUsable waits until the attacker is running and runs a command of its own again: an
// attempt on its bounds may restart its gateway (an agent that exhausts its own memory takes
// itself down, and its runtime starts it again; no other agent is touched, as the last
// subtest checks).
func (in *inside) awaitUsable(t *testing.T) {
	t.Helper()
	restarted := false
	e2e.Eventually(t, "the attacker running and answering an exec", func() bool {
		r := in.b.P.Call("GET", "/v0/agents/"+in.b.Attacker, nil)
		if r.Status == 200 && r.Obj("agent")["status"] == "running" {
			x := in.b.P.Call("POST", "/v0/agents/"+in.b.Attacker+"/console/exec", map[string]any{"command": "echo usable"})
			if code, _ := x.Body["exitCode"].(float64); x.Status == 200 && code == 0 && strings.Contains(x.Str("stdout"), "usable") {
				return true
			}
		}
		restarted = true
		return false
	})
	if restarted {
		t.Logf("the attacker was not usable after its attempts, and is again")
	}
}

// checkLink: the agent replaces a dir of its home with a link to b.LinkTarget, then has
// the platform write a file through it (an upload): the platform refuses, and nothing
// appears at the link's target.
func (in *inside) checkLink(t *testing.T) {
	b := in.b
	if code, out := in.sh(t, "mkdir -p "+b.LinkTarget+" 2>/dev/null; ln -sfn "+b.LinkTarget+" drop && echo planted"); code != 0 {
		t.Fatalf("plant the link: %d %s", code, out)
	}
	r := b.P.Call("POST", "/v0/agents/"+b.Attacker+"/files/upload", map[string]string{
		"filename": "drop/planted", "contentBase64": base64.StdEncoding.EncodeToString([]byte("through the link\n"))})
	if r.Status < 400 || r.Status >= 500 {
		t.Errorf("an upload through a link out of the home: %d %s, want a 4xx", r.Status, e2e.Tail(string(r.Raw), 200))
	}
	if got := b.Planted(); len(got) > 0 {
		t.Errorf("the platform wrote through the agent's link into %s: %v", b.LinkTarget, got)
	}
	in.sh(t, "rm -f drop")
}

// listen serves TCP on addr (port 0) until the test ends, accepting and closing.
func listen(t *testing.T, addr string) string {
	l, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return l.Addr().String()
}

// build compiles the intruder: static, for this machine's kernel.
func build(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "intruder")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, "./test/e2e/breakout/intruder")
	cmd.Dir = testenv.RepoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the intruder: %v\n%s", err, b)
	}
	return out
}

// HostRuns reports whether a process on this host has s in its /proc file ("environ",
// "cmdline"): a victim's gateway holding its secret (both runtimes' gateways are processes of
// this machine), or a process that should be gone.
func HostRuns(file, s string) bool {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), file)); err == nil && strings.Contains(string(b), s) {
			return true
		}
	}
	return false
}

func atoi(s string) int64 {
	var n int64
	fmt.Sscan(s, &n)
	return n
}
