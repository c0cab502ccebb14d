package devmode

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/test/e2e"
)

// TestRealEngineWarmPool: a GatewayPool of 2 real gateways; an agent created through the REST
// facade takes one of them, reserved for it before its token existed: it is running at once,
// its token is the member's own and the gateway accepts it at once (no reload waited for), a
// console exec runs in its own workspace (the member's home, now the agent's), the engine
// config holds the agent's identity; the pool refills; the agent suspends and resumes in that
// home with its files intact, and nothing is left once dev stops.
func TestRealEngineWarmPool(t *testing.T) {
	p := e2e.StartDev(t, e2e.EngineDir(t))
	t.Cleanup(func() { p.InterruptIfRunning() }) // a failed test stops dev as Ctrl-C does: no gateway is left
	k8s := p.KubeClient()
	ctx := context.Background()
	pool := &agentsv1.GatewayPool{ObjectMeta: metav1.ObjectMeta{Name: "e2e"}, Spec: agentsv1.GatewayPoolSpec{Replicas: 2}}
	if err := k8s.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	waitPoolReady(t, k8s, 2, 0)
	t.Logf("pool of 2 real gateways ready after %s", time.Since(start).Round(time.Millisecond))

	// The members' own tokens, before a claim rewrites one of their configs.
	poolDir := filepath.Join(p.StateDir, "runtime", "pool")
	memberTokens := map[string]string{}
	homes, _ := filepath.Glob(filepath.Join(poolDir, "*", "home"))
	for _, h := range homes {
		memberTokens[h] = configToken(t, h)
	}
	if len(memberTokens) != 2 {
		t.Fatalf("member homes: %v", homes)
	}

	start = time.Now()
	created := e2e.CreateRunning(t, p, map[string]any{"name": "Pooled Agent", "vibe": "quick", "emoji": "⚡"})
	createTook := time.Since(start)
	id, endpoint := created["id"].(string), created["endpoint"].(string)
	base := "/v0/agents/" + id
	r := e2e.Must(t, p.Call("POST", base+"/console/exec", map[string]string{"command": "pwd; echo pooled > proof.txt; cat proof.txt"}), 200, "exec")
	t.Logf("create to running %s, + console exec %s", createTook.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	// The agent's token works on its gateway at once: one try, no wait for a reload.
	token := e2e.Must(t, p.Call("GET", base+"/gateway-token", nil), 200, "read token").Str("token")
	if s := e2e.GatewayStatusOnce(t, endpoint, token); s != 404 {
		t.Fatalf("the gateway does not accept the agent's token at once: %d", s)
	}
	if os.Getenv("POOL_E2E_LOG") != "" {
		defer func() { t.Logf("dev log:\n%s", p.Log.String()) }()
	}
	if created["status"] != "running" {
		t.Fatalf("created agent: %v", created)
	}
	// The command runs in the engine's workspace dir of the agent's home (its path is the
	// sandbox's view: a member born from a template sees its home where the template's was),
	// and the file it wrote is in one member's home on the host.
	lines := strings.Split(strings.TrimSpace(r.Str("stdout")), "\n")
	if len(lines) != 2 || lines[1] != "pooled" || filepath.Base(lines[0]) != "workspace" {
		t.Fatalf("exec in the engine's workspace dir: %s", r.Raw)
	}
	var home string
	for h := range memberTokens {
		if b, err := os.ReadFile(filepath.Join(h, ".openclaw", "workspace", "proof.txt")); err == nil && string(b) == "pooled\n" {
			home = h
		}
	}
	memberToken, fromPool := memberTokens[home]
	if !fromPool {
		t.Fatalf("the agent does not run in a member's home (%v): %s", homes, r.Raw)
	}

	// The agent adopted the member's own token (the gateway was reserved for it), and the
	// engine config holds the agent's identity (applied by the engine's hot reload).
	if token != memberToken {
		t.Fatal("the agent's token is not the one of the warm gateway it runs on")
	}
	cfg, _ := os.ReadFile(filepath.Join(home, ".openclaw", "openclaw.json"))
	if !strings.Contains(string(cfg), "Pooled Agent") || !strings.Contains(string(cfg), token) {
		t.Fatalf("the engine config does not hold the agent's identity and token:\n%s", cfg)
	}
	if s := e2e.GatewayStatus(t, endpoint, token); s != 404 {
		t.Fatalf("the gateway refuses the agent's token later: %d", s)
	}
	pid := pidOf(t, p, id)

	// The pool counts the claim and refills.
	start = time.Now()
	waitPoolReady(t, k8s, 2, 1)
	t.Logf("pool refilled after %s", time.Since(start).Round(time.Millisecond))

	// Suspend and resume a pooled agent: its gateway ends, the home it took from the member
	// stays byte for byte, and it resumes (cold) in that same home with its token.
	wsDir := filepath.Join(home, ".openclaw", "workspace")
	before := treeSums(t, wsDir)
	if got := e2e.Must(t, p.Call("POST", base+"/suspend", nil), 200, "suspend").Obj("agent"); got["status"] != "suspended" {
		t.Fatalf("suspended agent: %v", got)
	}
	e2e.Eventually(t, "the pooled agent's gateway to end", func() bool { return !e2e.Alive(pid) })
	sameSums(t, "workspace while suspended", before, treeSums(t, wsDir))
	start = time.Now()
	resumed := e2e.Must(t, p.Call("POST", base+"/resume", nil), 200, "resume").Obj("agent")
	t.Logf("resume of the pooled agent (cold, in its home): %s", time.Since(start).Round(time.Millisecond))
	r = e2e.Must(t, p.Call("POST", base+"/console/exec", map[string]string{"command": "pwd; cat proof.txt"}), 200, "exec after resume")
	if want := lines[0] + "\npooled\n"; r.Str("stdout") != want { // its workspace as before, in the sandbox's view
		t.Fatalf("after resume: %q, want %q", r.Str("stdout"), want)
	}
	sameSums(t, "workspace after resume", before, treeSums(t, wsDir))
	if s := e2e.GatewayStatus(t, resumed["endpoint"].(string), token); s != 404 {
		t.Fatalf("the resumed gateway refuses the agent's token: %d", s)
	}
	pid = pidOf(t, p, id)

	// The agent's state goes with it, the member dir that held its home included.
	e2e.Must(t, p.Call("DELETE", base, nil), 200, "delete agent")
	e2e.Eventually(t, "the agent's gateway and home to go", func() bool {
		_, err := os.Stat(filepath.Dir(home))
		return !e2e.Alive(pid) && os.IsNotExist(err)
	})
	p.Stop()
	if pids := markedProcesses(p.StateDir); len(pids) > 0 {
		t.Fatalf("gateways left after dev stopped: %v", pids)
	}
	if left, _ := filepath.Glob(filepath.Join(poolDir, "*")); len(left) > 0 {
		t.Fatalf("member dirs left after dev stopped: %v", left)
	}
}

// waitPoolReady waits until the pool e2e reports ready gateways and claimed claims.
func waitPoolReady(t *testing.T, k8s client.Client, ready int32, claimed int64) {
	t.Helper()
	gp := &agentsv1.GatewayPool{}
	e2e.Eventually(t, "the pool to hold "+strconv.Itoa(int(ready))+" ready gateways", func() bool {
		if err := k8s.Get(context.Background(), client.ObjectKey{Name: "e2e"}, gp); err != nil {
			t.Fatal(err)
		}
		return gp.Status.Ready == ready && gp.Status.Claimed == claimed
	})
}

// configToken is the gateway token in the engine config of home.
func configToken(t *testing.T, home string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(home, ".openclaw", "openclaw.json"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, _ := strings.Cut(string(b), `"token": "`)
	tok, _, ok := strings.Cut(after, `"`)
	if !ok || tok == "" {
		t.Fatalf("no token in %s", b)
	}
	return tok
}

// markedProcesses are the processes whose environment marks a home under stateDir (the
// runtime's AGENTPLANE_AGENT_HOME).
func markedProcesses(stateDir string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || syscall.Kill(pid, 0) != nil {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err == nil && strings.Contains("\x00"+string(env), "\x00AGENTPLANE_AGENT_HOME="+stateDir+"/") {
			pids = append(pids, pid)
		}
	}
	return pids
}
