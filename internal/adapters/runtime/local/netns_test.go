package local_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/runtime/local"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
)

// serveLoopback serves body over HTTP on a port of the host's loopback until the test ends,
// and returns its address.
func serveLoopback(t *testing.T, body string) string {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, body) })}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String()
}

// TestAgentNetworkIsItsOwn is what code in agent A tried while all agents shared the host's
// network: open a connection to agent B's gateway port, reach a service on the host's
// loopback that asks for no credential, read the host's sockets in /proc/net. Each gateway
// now has a network namespace of its own: every one of these fails, while what the agent
// needs still works: its own gateway at 127.0.0.1 from its commands (the engine's CLI), the
// model proxy at its own address (Options.HostServices), and the manager reaching each
// gateway at its endpoint. It runs as root and, through
// TestAgentNetworkIsItsOwnAsAnOrdinaryUser, as an ordinary user (the network helper).
func TestAgentNetworkIsItsOwn(t *testing.T) {
	if want := os.Getenv("AGENTPLANE_TEST_AS_UID"); want != "" && want != fmt.Sprint(os.Geteuid()) {
		t.Fatalf("runs as uid %d, want %s", os.Geteuid(), want)
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is needed inside the agents for this test: apt-get install curl")
	}
	hostOnly := serveLoopback(t, "host-only service")
	proxy := serveLoopback(t, "model proxy")
	opened := serveLoopback(t, "opened service")
	openedPort, _ := strconv.Atoi(opened[strings.LastIndexByte(opened, ':')+1:])
	f := newFixture(t, func(o *local.Options) {
		o.Sandbox = local.SandboxRequired
		o.HostServices = []string{proxy}
		o.Egress = []local.EgressRule{{Prefix: netip.MustParsePrefix("127.0.0.1/32"), Port: openedPort}}
	})
	if ok, why := f.rt.Networks(); !ok {
		t.Fatalf("no network namespace per agent: %s", why)
	}
	victim := waitPhase(t, f, newAgent("victim"), desired("victim-gateway-token-0123456789"), runtime.PhaseRunning)
	attacker := waitPhase(t, f, newAgent("attacker"), desired("attacker-gateway-token-012345678"), runtime.PhaseRunning)
	// The manager reaches both gateways at their endpoints (through their doors): a good token
	// and an unknown tool give 404.
	waitStatus(t, victim.Endpoint, "victim-gateway-token-0123456789", http.StatusNotFound)
	waitStatus(t, attacker.Endpoint, "attacker-gateway-token-012345678", http.StatusNotFound)

	curl := func(url string) runtime.ExecResult {
		return sh(t, f, "attacker", "curl -s --max-time 5 -w ' %{http_code}' "+url)
	}
	for what, url := range map[string]string{
		"another agent's gateway":          victim.Endpoint + "/",
		"a service on the host's loopback": "http://" + hostOnly + "/",
	} {
		if res := curl(url); res.ExitCode == 0 || strings.Contains(string(res.Stdout), "host-only") {
			t.Errorf("%s (%s): reachable from inside an agent: exit %d %q", what, url, res.ExitCode, res.Stdout)
		}
	}
	// The host's sockets are not in the agent's /proc/net: the host-only service's listening
	// port (hex, after the address) is absent.
	_, port, _ := net.SplitHostPort(hostOnly)
	var p int
	fmt.Sscan(port, &p)
	if res := sh(t, f, "attacker", "cat /proc/net/tcp"); res.ExitCode != 0 || strings.Contains(string(res.Stdout), fmt.Sprintf(":%04X 00000000:0000 0A", p)) {
		t.Errorf("the host's listening sockets in the agent's /proc/net/tcp: exit %d %.300q", res.ExitCode, res.Stdout)
	}
	// What the agent needs: the model proxy at its address, its own gateway at 127.0.0.1.
	if res := curl("http://" + proxy + "/"); res.ExitCode != 0 || strings.TrimSpace(string(res.Stdout)) != "model proxy 200" {
		t.Errorf("the model proxy from inside the agent: exit %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	if res := curl(attacker.Endpoint + "/"); res.ExitCode != 0 || strings.HasSuffix(strings.TrimSpace(string(res.Stdout)), " 000") {
		t.Errorf("the agent's own gateway at %s from its commands: exit %d %q %q", attacker.Endpoint, res.ExitCode, res.Stdout, res.Stderr)
	}
	// The way out is the egress proxy its environment names: it refuses the host's loopback
	// (plain and tunnelled), and reaches what a rule opens (here a loopback port, standing for
	// a private service an operator opens; the public internet is open by default,
	// TestEgressPolicy).
	viaProxy := func(tunnel bool, url string) string {
		flags := "--noproxy ''"
		if tunnel {
			flags += " -p"
		}
		return strings.TrimSpace(string(sh(t, f, "attacker", "curl -s --max-time 5 "+flags+" -w ' %{http_code}' "+url).Stdout))
	}
	for _, tunnel := range []bool{false, true} {
		if out := viaProxy(tunnel, "http://"+hostOnly+"/"); strings.Contains(out, "host-only") {
			t.Errorf("the host's loopback through the egress proxy (tunnel %v): %q", tunnel, out)
		}
		if out := viaProxy(tunnel, "http://"+opened+"/"); out != "opened service 200" {
			t.Errorf("a destination a rule opens, through the egress proxy (tunnel %v): %q", tunnel, out)
		}
	}
	// A command that needs the network (a plugin's install from the registry) runs in its
	// gateway's namespace, with the way out; with the gateway down, where a command has no
	// network at all, it is refused at once (ErrNotRunning) instead of failing after its own
	// retries. A command that does not say so still runs there.
	ctx := context.Background()
	res, err := f.rt.Exec(ctx, newAgent("attacker"), runtime.ExecRequest{
		Argv: []string{"sh", "-c", "curl -s --max-time 5 --noproxy '' -p -w ' %{http_code}' http://" + opened + "/"}, Network: true, Timeout: 20 * time.Second,
	})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != "opened service 200" {
		t.Errorf("a command that needs the network, its gateway running: %v %q %q", err, res.Stdout, res.Stderr)
	}
	stoppedAgent(t, f, "stopped", nil)
	if _, err := f.rt.Exec(ctx, newAgent("stopped"), runtime.ExecRequest{Argv: []string{"true"}, Network: true}); !errors.Is(err, runtime.ErrNotRunning) {
		t.Errorf("a command that needs the network, its gateway down: %v, want ErrNotRunning", err)
	}
	if res := sh(t, f, "stopped", "true"); res.ExitCode != 0 {
		t.Errorf("a command of a stopped agent: exit %d %q", res.ExitCode, res.Stderr)
	}
}

// TestAgentNetworkIsItsOwnAsAnOrdinaryUser runs TestAgentNetworkIsItsOwn, and the plain case of
// TestReadoptionAfterManagerRestart (a gateway that outlives its manager, reached through its
// door once the next manager adopts it), with the manager as an ordinary user (nobody): this
// test binary, copied where that user can run it, on a state dir of its own. There the
// manager cannot enter its sandboxes' network namespaces, and their network helpers make its
// sockets in them (nethelper.go).
func TestAgentNetworkIsItsOwnAsAnOrdinaryUser(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Skip(t, "becoming an ordinary user needs root (as one, the tests it runs are these tests)")
	}
	const nobody = 65534
	dir, err := os.MkdirTemp("", "agentplane-as-user-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "local.test")
	if err := copyFile(exe, bin); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, bin} {
		if err := os.Chown(p, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ run, passed string }{
		{"^TestAgentNetworkIsItsOwn$", "--- PASS: TestAgentNetworkIsItsOwn "},
		{"^TestReadoptionAfterManagerRestart$/^plain$", "--- PASS: TestReadoptionAfterManagerRestart/plain "},
	} {
		cmd := exec.Command(bin, "-test.run="+c.run, "-test.count=1", "-test.v")
		cmd.Dir = dir
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "TMPDIR=" + dir, "LANG=C.UTF-8", "CI=" + os.Getenv("CI"), "AGENTPLANE_TEST_AS_UID=" + fmt.Sprint(nobody)}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}, Pdeathsig: syscall.SIGKILL}
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), c.passed) {
			t.Errorf("%s as uid %d: %v\n%s", c.run, nobody, err, out)
		}
	}
}

// copyFile copies src to dst (mode 0755).
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
