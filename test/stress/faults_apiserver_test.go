package stress

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/facade"
	"github.com/agentplane/agentplane/internal/devtools/testenv/kubeenv"
	"github.com/agentplane/agentplane/internal/platform"
)

// Deadlines of requests around the outage. While the API server is down the facade must
// answer (503) well within outageCallTimeout, never hang. The traffic's requests may also be
// in flight while the API server starts again, which holds them until it is ready (seconds,
// more on a loaded machine): trafficCallTimeout bounds those.
const (
	outageCallTimeout  = 10 * time.Second
	trafficCallTimeout = 30 * time.Second
)

// TestAPIServerOutage stops the kube-apiserver under write and read traffic through both
// facades: while it is down every route that needs it answers 503 (never 500, never a
// hang); once it is back every route answers as before, new agents start, and every write
// acknowledged at any time is stored.
func TestAPIServerOutage(t *testing.T) {
	const ws = "outage"
	workspace(t, ws, agentsv1.PlanPro, func(s *agentsv1.WorkspaceSpec) { s.Internal = true })
	tok := token(t, ws)
	own := populate(t, ws, tok)
	before := getSweep(t, tok, own)

	// A replica that has served nothing yet: its first requests come during the outage.
	cold := startReplica(t)
	tr := startTraffic(tok, own["agentId"])
	defer tr.halt()
	if err := tr.waitFor(func(a trafficAnswer) bool { return a.r.Status == 201 }, 2, settleTimeout); err != nil {
		t.Fatal("traffic before the outage:", err)
	}
	restart := crashAPIServer(t, env)
	down := time.Now()
	// Every route on every facade, 8 requests at a time per facade (more would only queue in
	// the facade's client-side rate limit to the API server, each still needing a token).
	var wg sync.WaitGroup
	for _, base := range []string{mainURL, replicaURL, cold} {
		slots := make(chan struct{}, 8)
		for _, r := range plat.API.Routes() {
			c := callFor(t, r, own)
			wg.Add(1)
			go func() {
				defer wg.Done()
				slots <- struct{}{}
				defer func() { <-slots }()
				got := callWithin(outageCallTimeout, base, c.method, c.path, tok, c.body)
				switch {
				case got.Err != nil:
					t.Errorf("%s %s while the API server is down: %s", base, c, got)
				case !needsAPIServer(r):
					if got.Status >= 300 {
						t.Errorf("%s %s needs no API server but answered %s", base, c, got)
					}
				case got.Status != 503:
					t.Errorf("%s %s while the API server is down: want 503, got %s", base, c, got)
				}
			}()
		}
	}
	wg.Wait()
	gw := tr.gatewayToken
	if got := callWithin(outageCallTimeout, mainURL, "GET", "/v0/agents/"+own["agentId"], gw, nil); got.Err != nil || got.Status != 503 {
		t.Errorf("gateway token while the API server is down: want 503, got %s", got)
	}
	restart()
	up := time.Now()
	t.Logf("the API server was down for %s", up.Sub(down).Round(time.Millisecond))

	for f := range facades() {
		if err := tr.waitFor(func(a trafficAnswer) bool { return a.facade == f && a.at.After(up) && a.r.Status == 201 }, 1, settleTimeout); err != nil {
			t.Fatalf("facade %d after the outage: %v", f, err)
		}
	}
	tr.halt()
	if after := getSweep(t, tok, own); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("GET routes before the outage: %v\nafter it: %v", before, after)
	}
	// An agent is created again through each facade: kube-apiserver serves the CRDs a moment
	// after it answers (its discovery names Agent later than AgentSecret), and until then a
	// create answers 503, never anything else.
	for i, base := range facades() {
		var got reply
		_ = eventually(settleTimeout, 100*time.Millisecond, func() error {
			got = call(base, "POST", "/v0/agents", tok, map[string]any{"name": fmt.Sprintf("after the outage %d", i)})
			if got.Status == 503 {
				return errors.New("not yet") // the next try
			}
			return nil // 201, or an answer that fails below
		})
		if got.Status != 201 {
			t.Fatalf("create agent through facade %d after the outage: want 201 (503 meanwhile), got %s", i, got)
		}
	}

	var stored agentsv1.AgentSecretList
	if err := k8s.List(bg(), &stored, client.InNamespace(ws)); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, s := range stored.Items {
		names[s.Spec.Name] = true
	}
	counts := map[int]int{}
	for _, a := range tr.answers() {
		counts[a.r.Status]++
		switch {
		case a.r.Err != nil:
			t.Errorf("traffic at %s got no answer: %s", a.at.Format(time.StampMilli), a.r)
		case a.r.Status != 200 && a.r.Status != 201 && a.r.Status != 503:
			t.Errorf("traffic at %s: %s", a.at.Format(time.StampMilli), a.r)
		case a.r.Status == 201 && !names[a.name]:
			t.Errorf("secret %s was acknowledged at %s but is not stored", a.name, a.at.Format(time.StampMilli))
		}
	}
	t.Logf("traffic answers by status: %v", counts)
	var slowest time.Duration
	for _, a := range tr.answers() {
		slowest = max(slowest, a.r.Took)
	}
	t.Logf("slowest traffic answer: %s", slowest.Round(time.Millisecond))
}

// startReplica starts another facade-only replica for the rest of test t.
func startReplica(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	_, url, done, err := startPlatform(ctx, platform.Options{
		APIOnly: true, ProvisionTimeout: provisionTimeout, ClawHubURL: hub.URL, Files: files,
		Runtime: platform.RuntimeOptions{Name: platform.RuntimeLocal, DefaultVersion: versionGood, EngineDirs: map[string]string{versionGood: fakeDir}},
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		if err := awaitStop("cold replica", done, ""); err != nil {
			t.Error(err)
		}
	})
	return url
}

// needsAPIServer: every route but the public ones and those answered from the caller alone.
func needsAPIServer(r facade.RouteInfo) bool {
	return !r.Public && r.Path != "/v0/me" && r.Path != "/v3/data/testAuthentication"
}

// getSweep calls every GET route with the objects of id and returns "route status" lines.
func getSweep(t *testing.T, tok string, id ids) []string {
	t.Helper()
	var out []string
	for _, r := range plat.API.Routes() {
		if r.Method != "GET" {
			continue
		}
		c := callFor(t, r, id)
		got := callWithin(outageCallTimeout, mainURL, c.method, c.path, tok, nil)
		out = append(out, fmt.Sprintf("%s %s=%d", r.Method, r.Path, got.Status))
	}
	sort.Strings(out)
	return out
}

// crashAPIServer kills the control plane's kube-apiserver (etcd keeps running) and returns
// the function that starts it again. envtest keeps the port, and the client CA in memory, but
// removes a certificate directory it made itself and would mint a new serving CA on restart,
// which every client's config would then distrust: the serving certificate is saved before
// the stop and put back in a directory of our own, so the old rest.Config keeps working.
func crashAPIServer(t *testing.T, e *kubeenv.Env) (restart func()) {
	t.Helper()
	as := e.ControlPlane.APIServer
	port := as.SecureServing.Port
	saved := map[string][]byte{}
	entries, err := os.ReadDir(as.CertDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Type().IsRegular() {
			b, err := os.ReadFile(filepath.Join(as.CertDir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			saved[e.Name()] = b
		}
	}
	var once sync.Once
	restart = func() { once.Do(func() { startAPIServer(t, e, port, saved) }) }
	t.Cleanup(restart) // back for the other tests even when this one fails
	// A crash: SIGKILL (a SIGTERM would have it drain for envtest's 20 s stop timeout). Stop
	// then only reaps it and removes its directory.
	pid := processWithArgs("kube-apiserver", "--secure-port="+port)
	if pid == 0 {
		t.Fatalf("no kube-apiserver process with --secure-port=%s", port)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := as.Stop(); err != nil {
		t.Fatal("stop the API server:", err)
	}
	if err := eventually(30*time.Second, 100*time.Millisecond, func() error {
		if err := e.Client.List(bg(), &corev1.NamespaceList{}); err == nil {
			return fmt.Errorf("the API server still answers")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return restart
}

// startAPIServer starts e's stopped kube-apiserver with the saved certificate files and
// checks that it is back on port and that the old client config works.
func startAPIServer(t *testing.T, e *kubeenv.Env, port string, saved map[string][]byte) {
	t.Helper()
	as := e.ControlPlane.APIServer
	dir, err := os.MkdirTemp(suiteTmp, "apiserver-certs-")
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range saved {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	as.CertDir = dir
	if err := as.Start(); err != nil {
		t.Fatal("restart the API server:", err)
	}
	if as.SecureServing.Port != port {
		t.Fatalf("the API server came back on port %s, was %s", as.SecureServing.Port, port)
	}
	if err := eventually(settleTimeout, 200*time.Millisecond, func() error {
		return e.Client.List(bg(), &corev1.NamespaceList{})
	}); err != nil {
		t.Fatal("the old client config does not work after the restart:", err)
	}
}

// traffic writes secrets (through both facades in turn) and reads agents until halted.
type traffic struct {
	tok, agent, gatewayToken string
	quit                     chan struct{}
	once                     sync.Once
	wg                       sync.WaitGroup
	mu                       sync.Mutex
	seen                     []trafficAnswer
}

// trafficAnswer is one answer the traffic got.
type trafficAnswer struct {
	at     time.Time
	facade int
	name   string // the secret written ("" for reads)
	r      reply
}

// startTraffic starts 4 writers and 2 readers.
func startTraffic(tok, agent string) *traffic {
	tr := &traffic{tok: tok, agent: agent, quit: make(chan struct{})}
	r := call(mainURL, "GET", "/v0/agents/"+agent+"/gateway-token", tok, nil)
	tr.gatewayToken = remember("gateway token", fmt.Sprint(r.Body["token"]))
	for w := range 6 {
		tr.wg.Add(1)
		go func() {
			defer tr.wg.Done()
			for n := 0; ; n++ {
				select {
				case <-tr.quit:
					return
				case <-time.After(50 * time.Millisecond):
				}
				a := trafficAnswer{at: time.Now(), facade: w % 2}
				if w < 4 {
					a.name = fmt.Sprintf("TRAFFIC_%d_%d", w, n)
					a.r = callWithin(trafficCallTimeout, facades()[a.facade], "POST", "/v0/secrets", tok,
						map[string]any{"name": a.name, "value": remember("secret value", "traffic-"+a.name+"-"+stamp())})
				} else {
					a.r = callWithin(trafficCallTimeout, facades()[a.facade], "GET", "/v0/agents/"+agent, tok, nil)
				}
				tr.mu.Lock()
				tr.seen = append(tr.seen, a)
				tr.mu.Unlock()
			}
		}()
	}
	return tr
}

// waitFor waits until n answers satisfy match.
func (tr *traffic) waitFor(match func(trafficAnswer) bool, n int, timeout time.Duration) error {
	return eventually(timeout, 50*time.Millisecond, func() error {
		got := 0
		for _, a := range tr.answers() {
			if match(a) {
				got++
			}
		}
		if got < n {
			return fmt.Errorf("%d of %d matching answers (last: %s)", got, n, tr.last())
		}
		return nil
	})
}

func (tr *traffic) answers() []trafficAnswer {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]trafficAnswer(nil), tr.seen...)
}

func (tr *traffic) last() string {
	all := tr.answers()
	if len(all) == 0 {
		return "none"
	}
	return strings.TrimSpace(all[len(all)-1].r.String())
}

// halt stops the traffic and waits for its requests to end.
func (tr *traffic) halt() {
	tr.once.Do(func() { close(tr.quit) })
	tr.wg.Wait()
}
