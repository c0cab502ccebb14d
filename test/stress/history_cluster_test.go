package stress

import (
	"fmt"
	"math/rand"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
	"github.com/agentplane/agentplane/internal/devtools/testenv/kubeenv"
	"github.com/agentplane/agentplane/internal/platform"
	"github.com/agentplane/agentplane/internal/rules/auth"
	"github.com/agentplane/agentplane/internal/rules/secrets"
)

// The processes of a histCluster.
const (
	procManager = iota // the manager (leader-elected controllers, local runtime) and facade A
	procReplica        // facade B, API-only, reaching the API server through the proxy
)

// Gateway ports of the history cluster's manager: clear of the shared platform's range.
const histFirstPort, histLastPort = 21000, 21499

// The history cluster's reservation staleness (far longer than any request takes from its
// reservation to its object, even through the faults) and recount interval.
const histStaleAfter, histRecountInterval = 15 * time.Second, 3 * time.Second

// histCluster is the deployment TestHistoryIsLinearizable runs against, on a control plane of
// its own: the manager with every controller (leader-elected) serving facade A, and an
// API-only facade replica B, each a process of its own that a fault can SIGKILL. Replica B
// reaches the API server through a toxiproxy proxy that a fault can make slow or failing.
type histCluster struct {
	cp     *kubeenv.Env
	signer *auth.Signer
	proxy  *toxiproxy.Proxy
	state  string

	mu    sync.Mutex
	cfgs  [2]childConfig
	procs [2]*child
	// logs are the log files of every process started, restarts included.
	logs []string
}

// startHistCluster starts the control plane, the proxy and both processes; everything stops
// when t ends.
func startHistCluster(t *testing.T) *histCluster {
	t.Helper()
	cp := ownControlPlane(t)
	c := &histCluster{cp: cp, state: t.TempDir()}
	t.Cleanup(func() { // after the processes, before the dir goes
		if left := killGateways(c.state); len(left) > 0 {
			t.Errorf("gateways left running at the end: %v", left)
		}
	})
	if err := cp.Client.Create(bg(), kubeenv.Namespace(platform.DefaultSystemNamespace)); err != nil {
		t.Fatal(err)
	}
	if err := cp.Client.Create(bg(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: secrets.KeySecretName, Namespace: platform.DefaultSystemNamespace},
		Data:       map[string][]byte{"key": []byte(strings.Repeat("k", 32))},
	}); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(cp.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	c.proxy = toxiproxy.NewProxy(srv, "apiserver", "127.0.0.1:0", u.Host)
	if err := c.proxy.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.proxy.Stop)

	files := t.TempDir()
	engines := map[string]string{versionGood: fakeDir}
	mgr := childConfigFor(cp.Config)
	mgr.StateDir, mgr.EngineDirs, mgr.DefaultVersion = c.state, engines, versionGood
	mgr.LeaderElection, mgr.FilesDir, mgr.ClawHubURL = true, files, hub.URL
	mgr.FirstPort, mgr.LastPort = histFirstPort, histLastPort
	// Leftovers of requests the faults cut are freed within seconds, so the validators can
	// check that reservations equal objects after one recount.
	mgr.StaleAfter, mgr.RecountInterval = histStaleAfter, histRecountInterval
	rep := childConfigFor(cp.Config)
	rep.Host = "https://" + c.proxy.Listen
	rep.APIOnly, rep.EngineDirs, rep.DefaultVersion = true, engines, versionGood
	rep.FilesDir, rep.ClawHubURL, rep.StaleAfter = files, hub.URL, histStaleAfter
	c.cfgs = [2]childConfig{mgr, rep}
	for i := range c.procs {
		c.start(t, i)
	}
	t.Cleanup(func() { c.stop(t) })
	key, err := auth.EnsureSigningKey(bg(), cp.Client, platform.DefaultSystemNamespace)
	if err != nil {
		t.Fatal(err)
	}
	if c.signer, err = auth.NewSigner(key); err != nil {
		t.Fatal(err)
	}
	return c
}

func procName(i int) string {
	return [2]string{"manager with facade A", "facade replica B"}[i]
}

// start starts process i (again).
func (c *histCluster) start(t *testing.T, i int) {
	p := startChild(t, procName(i), c.cfgs[i])
	c.mu.Lock()
	c.procs[i] = p
	c.logs = append(c.logs, p.log)
	c.mu.Unlock()
}

// keepLogs copies every process's log into dir (a failed history's directory: the ops name
// their X-Request-Id, the logs say what each request met).
func (c *histCluster) keepLogs(t *testing.T, dir string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for n, src := range c.logs {
		b, err := os.ReadFile(src)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, fmt.Sprintf("process-%02d-%s", n, filepath.Base(src))), b, 0o600)
		}
		if err != nil {
			t.Logf("keeping %s: %v", src, err)
		}
	}
}

// url is where process i's facade listens; "" while it is down.
func (c *histCluster) url(i int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.procs[i]; p != nil && !p.exited() {
		return p.url
	}
	return ""
}

// kill SIGKILLs process i.
func (c *histCluster) kill(i int) {
	c.mu.Lock()
	p := c.procs[i]
	c.procs[i] = nil
	c.mu.Unlock()
	if p != nil {
		p.kill()
	}
}

// stop shuts the manager down (its runtime stops the gateways, adopted ones included) and
// kills the replica.
func (c *histCluster) stop(t *testing.T) {
	c.mu.Lock()
	procs := c.procs
	c.procs = [2]*child{}
	c.mu.Unlock()
	if p := procs[procManager]; p != nil && !p.stop(90*time.Second) {
		t.Errorf("the manager did not stop within 90s")
	}
	if p := procs[procReplica]; p != nil {
		p.kill()
	}
}

// ensureUp restarts a process that exited on its own (a manager that lost its lease while
// the API server was down exits, and its Deployment would start it again).
func (c *histCluster) ensureUp(t *testing.T) {
	for i := range c.procs {
		if c.url(i) == "" {
			t.Logf("%s is down: starting it", procName(i))
			c.start(t, i)
		}
	}
}

// admitsAgents waits until the API server admits an Agent in namespace ns (a server-side dry
// run, which stores nothing). The previous run's last fault may have restarted the API server,
// and until its admission knows the CRDs' kinds again it refuses their writes with 503
// ("Resource kind ... not found. There can be a delay between when CustomResourceDefinitions
// are created and when they are available."), which the facade passes on as its own 503. The
// traffic takes such answers as they come (the contract's answer while a dependency is down);
// a run's setup expects its creates to succeed, so it waits for the event first.
func (c *histCluster) admitsAgents(t *testing.T, ns string) {
	t.Helper()
	probe := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "admission-probe"},
		Spec: agentsv1.AgentSpec{DisplayName: "admission probe"}}
	var last error
	refused := 0
	_ = eventually(testenv.EventBound, 100*time.Millisecond, func() error {
		last = c.cp.Client.Create(bg(), probe.DeepCopy(), client.DryRunAll)
		if apierrors.IsServiceUnavailable(last) {
			refused++
			return last
		}
		return nil
	})
	if last != nil {
		t.Fatalf("the API server does not admit an Agent in %s (a dry run, %d refusals with 503): %v", ns, refused, last)
	}
	if refused > 0 {
		t.Logf("the API server admitted an Agent in %s after %d refusals with 503", ns, refused)
	}
}

// facade is facade A's address once every process runs: the validators call it on each
// attempt, so a manager that exits after the traffic (a lease lost to an earlier API server
// crash takes its graceful shutdown's time to end the process) is started again, as its
// Deployment would, instead of leaving the checks a dead address.
func (c *histCluster) facade(t *testing.T) string {
	c.ensureUp(t)
	return c.url(procManager)
}

// fault is one fault the history run injects while the traffic runs.
type fault struct {
	name string
	do   func(t *testing.T, c *histCluster, rng *rand.Rand)
}

// historyFaults are the faults a run picks from.
var historyFaults = []fault{
	{"kill -9 facade replica B, start it again", func(t *testing.T, c *histCluster, rng *rand.Rand) {
		c.kill(procReplica)
		time.Sleep(time.Duration(500+rng.Intn(1500)) * time.Millisecond)
		c.start(t, procReplica)
	}},
	{"kill -9 the manager mid-reconcile (facade A with it), start it again", func(t *testing.T, c *histCluster, rng *rand.Rand) {
		c.kill(procManager)
		time.Sleep(time.Duration(500+rng.Intn(1500)) * time.Millisecond)
		c.start(t, procManager)
	}},
	{"crash kube-apiserver (etcd keeps its data), start it again", func(t *testing.T, c *histCluster, rng *rand.Rand) {
		restart := crashAPIServer(t, c.cp)
		time.Sleep(time.Duration(1000+rng.Intn(2000)) * time.Millisecond)
		restart()
	}},
	{"latency, resets and timeouts between facade B and the API server", func(t *testing.T, c *histCluster, rng *rand.Rand) {
		for _, toxic := range []string{
			`{"name":"slow","type":"latency","stream":"downstream","attributes":{"latency":300,"jitter":300}}`,
			`{"name":"reset","type":"reset_peer","stream":"upstream","toxicity":0.3,"attributes":{"timeout":50}}`,
			`{"name":"hang","type":"timeout","stream":"upstream","toxicity":0.3,"attributes":{"timeout":3000}}`,
		} {
			w, err := c.proxy.Toxics.AddToxicJson(strings.NewReader(toxic))
			if err != nil {
				t.Fatalf("toxic %s: %v", toxic, err)
			}
			time.Sleep(time.Duration(1500+rng.Intn(1500)) * time.Millisecond)
			if err := c.proxy.Toxics.RemoveToxic(bg(), w.Name); err != nil {
				t.Fatalf("remove toxic %s: %v", w.Name, err)
			}
		}
	}},
}

// pickFaults chooses at least three of the faults, in a random order.
func pickFaults(rng *rand.Rand) []fault {
	picked := append([]fault(nil), historyFaults...)
	rng.Shuffle(len(picked), func(i, j int) { picked[i], picked[j] = picked[j], picked[i] })
	return picked[:3+rng.Intn(len(picked)-2)]
}

// String names the faults.
func faultNames(fs []fault) string {
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = fmt.Sprintf("%d. %s", i+1, f.name)
	}
	return strings.Join(names, "; ")
}
