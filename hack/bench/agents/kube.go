package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/agentplane/agentplane/hack/bench/internal/report"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/controllers"
	"github.com/agentplane/agentplane/hack/bench/internal/rss"
	"github.com/agentplane/agentplane/internal/engine/openclaw"
	"github.com/agentplane/agentplane/internal/platform"
	"github.com/agentplane/agentplane/internal/runtime"
	"github.com/agentplane/agentplane/internal/runtime/kube"
	"github.com/agentplane/agentplane/internal/tenancy"
	"github.com/agentplane/agentplane/internal/testenv/kubeenv"
)

func benchKube(n, workspaces int, timeout time.Duration) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env, err := kubeenv.Start()
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	c := env.Client
	spaces := kubeSpaces(workspaces)
	if err := benchWorkspaces(ctx, c, n, spaces); err != nil {
		return err
	}

	// Baseline: n Agents and their owned objects, built by the same builders, created
	// directly: the same writes from the first Agent to the last StatefulSet as the
	// controller's run is timed over.
	opts := kube.Options{Engine: openclaw.New(), Scheme: env.Scheme}
	start := time.Now()
	agents, err := createAgents(ctx, c, []string{"bench-direct"}, n)
	if err != nil {
		return err
	}
	if err := createDirect(ctx, c, agents, opts); err != nil {
		return fmt.Errorf("baseline: %w", err)
	}
	direct := time.Since(start)
	// The baseline's objects go before the platform starts: its controller would reconcile
	// the Agents too (they are Agents like any other) and the run would measure twice the
	// work, and its cache would hold the rest (the manager's memory is measured).
	for _, o := range []client.Object{&agentsv1.Agent{}, &appsv1.StatefulSet{}, &corev1.Service{}, &corev1.Secret{}} {
		if err := c.DeleteAllOf(ctx, o, client.InNamespace("bench-direct")); err != nil {
			return fmt.Errorf("remove the baseline's %T: %w", o, err)
		}
	}
	// The finalizer policy (config/policy) gave the baseline's Agents the controller's
	// finalizer: they go now, not through the controller's delete path during the run.
	if err := dropFinalizers(ctx, c, agents); err != nil {
		return fmt.Errorf("remove the baseline's Agents: %w", err)
	}

	// The controller: n Agents created, wall time until every StatefulSet exists.
	rssBefore := rss.MiB("self")
	prog, err := watchStatefulSets(ctx, env.Config, "bench-kube", n)
	if err != nil {
		return err
	}
	start, ready, requests, err := runController(ctx, c, env.Config, platform.RuntimeOptions{}, n, spaces)
	if err != nil {
		return err
	}
	created := time.Since(start)
	if _, err := prog.wait(ctx, timeout); err != nil {
		return err
	}
	times := prog.times(start)
	reconciled := times[len(times)-1]
	rssAfter := rss.MiB("self")
	if err := writeHeapProfile(); err != nil {
		return err
	}
	// Sanity: an agent's objects are complete and the limit's count is exact.
	if err := c.Get(ctx, types.NamespacedName{Namespace: spaces[0], Name: kube.GoverningService}, &corev1.Service{}); err != nil {
		return fmt.Errorf("governing service of %s: %w", spaces[0], err)
	}
	if err := slotsSettled(ctx, c, spaces, n, timeout); err != nil {
		return err
	}
	first, last := decileCost(times)
	fmt.Printf("kube runtime reconcile, %d agents in %d workspace(s), envtest\n", n, len(spaces))
	fmt.Printf("  %s\n", clientSettings())
	fmt.Printf("  controller          %8.2f s   (%.0f agents/s)\n", reconciled.Seconds(), float64(n)/reconciled.Seconds())
	fmt.Printf("  (from the first Agent created, the manager started and ready: its start to its first StatefulSet took %.2f s before; the benchmark's own creates of the %d Agents, 8 writers, took %.2f s; the first StatefulSet appeared after %.2f s)\n", ready.Seconds(), n, created.Seconds(), times[0].Seconds())
	fmt.Printf("  direct API writes   %8.2f s   (the same Agents and objects, 8 writers, no controller)\n", direct.Seconds())
	fmt.Printf("  ratio direct/controller: %.2f\n", direct.Seconds()/reconciled.Seconds())
	fmt.Printf("  time per agent: first tenth %.2f ms, last tenth %.2f ms (ratio last/first %.2f)\n",
		ms(first), ms(last), last.Seconds()/first.Seconds())
	fmt.Printf("  process RSS %.0f MiB -> %.0f MiB (+%.1f MiB per 1,000 agents)\n", rssBefore, rssAfter, (rssAfter-rssBefore)*1000/float64(n))
	perAgent := requests.print(n)
	// The direct writes of the objects the manager writes: a Secret and a StatefulSet per
	// agent, the governing Service once.
	directPerAgent := float64(2*n+1) / float64(n)
	row := fmt.Sprintf("%d agents, %s", n, flagsLabel())
	if len(spaces) > 1 {
		row = fmt.Sprintf("%d agents in %d workspaces, %s", n, len(spaces), flagsLabel())
	}
	jsonRows = append(jsonRows,
		report.Result{Bench: "agents-kube", Row: row, Metric: "wall time", Value: reconciled.Seconds(), Unit: "s",
			Baseline: "direct writes", BaselineValue: direct.Seconds(), Ratio: direct.Seconds() / reconciled.Seconds(), RatioOf: "direct / controller; target >= 0.5"},
		report.Result{Bench: "agents-kube", Row: row, Metric: "agents per second", Value: float64(n) / reconciled.Seconds(), Unit: "agents/s",
			Baseline: "direct writes", BaselineValue: float64(n) / direct.Seconds(), Ratio: direct.Seconds() / reconciled.Seconds()},
		report.Result{Bench: "agents-kube", Row: row, Metric: "API requests per agent", Value: perAgent, Unit: "requests",
			Baseline: "direct writes", BaselineValue: directPerAgent, Ratio: directPerAgent / perAgent, RatioOf: "direct / controller"},
		report.Result{Bench: "agents-kube", Row: row, Metric: "API answers 429", Value: float64(requests.throttled), Unit: "requests"},
		report.Result{Bench: "agents-kube", Row: row, Metric: "time per agent, last tenth", Value: ms(last), Unit: "ms",
			Baseline: "first tenth", BaselineValue: ms(first), Ratio: last.Seconds() / first.Seconds(), RatioOf: "last / first; flat cost: near 1"},
		report.Result{Bench: "agents-kube", Row: row, Metric: "RSS growth", Value: rssAfter - rssBefore, Unit: "MiB"},
		report.Result{Bench: "agents-kube", Row: row, Metric: "first StatefulSet", Value: times[0].Seconds(), Unit: "s"},
		report.Result{Bench: "agents-kube", Row: row, Metric: "manager start to its first StatefulSet (before the timed run)", Value: ready.Seconds(), Unit: "s"},
	)
	fmt.Printf("  row | %d | %d | %.1f | %.0f | %.1f | %.0f | %.2f | %.2f | %.2f |\n",
		n, len(spaces), reconciled.Seconds(), float64(n)/reconciled.Seconds(), perAgent, rssAfter-rssBefore,
		last.Seconds()/first.Seconds(), direct.Seconds(), direct.Seconds()/reconciled.Seconds())
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// kubeSpaces names the workspaces of the controller's agents: bench-kube, or w of them.
func kubeSpaces(w int) []string {
	if w <= 1 {
		return []string{"bench-kube"}
	}
	out := make([]string, w)
	for i := range out {
		out[i] = fmt.Sprintf("bench-kube-%03d", i)
	}
	return out
}

// slotsSettled waits until every workspace counts each of its agents as a used slot, none
// pending: the count the limit is enforced against is exact.
func slotsSettled(ctx context.Context, c client.Client, spaces []string, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		used, pending := 0, 0
		for _, ws := range spaces {
			w := &agentsv1.Workspace{}
			if err := c.Get(ctx, client.ObjectKey{Name: ws}, w); err != nil {
				return err
			}
			used += int(w.Status.AgentSlots.Used)
			pending += len(w.Status.AgentSlots.Pending)
		}
		if used == n && pending == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("agent slots: %d used, %d pending for %d agents", used, pending, n)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// runController starts the platform on cfg with the kube runtime (rt's placement), its API
// requests counted, waits until it is ready (an agent of workspace warmSpace has its
// StatefulSet: caches synced, controllers running, as in a cluster whose manager runs before
// agents arrive) and creates n Agents over spaces; it returns once they are created, with the
// time it began creating them, how long the manager took to be ready, and the requests it
// made since.
func runController(ctx context.Context, c client.Client, cfg *rest.Config, rt platform.RuntimeOptions, n int, spaces []string) (time.Time, time.Duration, *requestCounter, error) {
	counted, requests := countRequests(cfg)
	rt.Name, rt.Versions = platform.RuntimeKube, []string{"2026.9.6"}
	// The manager's client-side limit is the shipped one (or -kube-api-qps/-burst), not the
	// control plane's client config (envtest's is 1,000 QPS).
	p, err := platform.New(ctx, counted, platform.Options{MetricsAddr: "0", ProbeAddr: "0", Runtime: rt, AgentWorkers: agentWorkers,
		APIQPS: apiQPS, APIBurst: apiBurst})
	if err != nil {
		return time.Time{}, 0, nil, err
	}
	began := time.Now()
	go func() { _ = p.Start(ctx) }()
	if _, err := createAgents(ctx, c, []string{warmSpace}, 1); err != nil {
		return time.Time{}, 0, nil, err
	}
	for {
		var l appsv1.StatefulSetList
		if err := c.List(ctx, &l, client.InNamespace(warmSpace)); err != nil {
			return time.Time{}, 0, nil, err
		}
		if len(l.Items) > 0 {
			break
		}
		if time.Since(began) > 5*time.Minute {
			return time.Time{}, 0, nil, fmt.Errorf("the manager did not reconcile its first agent in 5 minutes")
		}
		time.Sleep(20 * time.Millisecond)
	}
	ready := time.Since(began)
	requests.reset()
	start := time.Now()
	_, err = createAgents(ctx, c, spaces, n)
	return start, ready, requests, err
}

// warmSpace is the workspace of the agent that tells the manager is ready.
const warmSpace = "bench-warm"

// benchWorkspaces creates the workspaces bench-direct (the baseline's agents), warmSpace and
// spaces (the controller's), each allowed n agents.
func benchWorkspaces(ctx context.Context, c client.Client, n int, spaces []string) error {
	for _, ws := range append([]string{"bench-direct", warmSpace}, spaces...) {
		if err := tenancy.EnsureWorkspace(ctx, c, &agentsv1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: ws},
			Spec: agentsv1.WorkspaceSpec{AgentLimit: ptr.To(int32(n))}}); err != nil {
			return err
		}
	}
	return nil
}

// createAgents creates n Agents agt-0000.., agent i in spaces[i % len(spaces)], 8 at a time.
func createAgents(ctx context.Context, c client.Client, spaces []string, n int) ([]*agentsv1.Agent, error) {
	agents := make([]*agentsv1.Agent, n)
	err := parallel(8, n, func(i int) error {
		a := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: spaces[i%len(spaces)], Name: fmt.Sprintf("agt-%04d", i)},
			Spec: agentsv1.AgentSpec{DisplayName: "bench"}}
		agents[i] = a
		return c.Create(ctx, a)
	})
	return agents, err
}

// dropFinalizers removes the finalizers of agents (deleted) so that they go without a
// controller.
func dropFinalizers(ctx context.Context, c client.Client, agents []*agentsv1.Agent) error {
	return parallel(8, len(agents), func(i int) error {
		a := agents[i]
		patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
		return client.IgnoreNotFound(c.Patch(ctx, &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: a.Namespace, Name: a.Name}}, patch))
	})
}

// createDirect creates the objects of agents (gateway token Secret and StatefulSet each, the
// governing Service of their namespace once), built by the runtime's builders with opts, as
// one client with 8 writers.
func createDirect(ctx context.Context, c client.Client, agents []*agentsv1.Agent, opts kube.Options) error {
	if len(agents) == 0 {
		return nil
	}
	svc, err := kube.BuildGoverningService(agents[0].Namespace, opts)
	if err != nil {
		return err
	}
	if err := c.Create(ctx, svc); err != nil {
		return err
	}
	return parallel(8, len(agents), func(i int) error {
		a := agents[i]
		d := runtime.Desired{EngineVersion: "2026.9.6", GatewayTokenSecret: controllers.GatewayTokenSecretName(a.Name)}
		sts, err := kube.BuildStatefulSet(a, d, opts)
		if err != nil {
			return err
		}
		for _, o := range []client.Object{controllers.BuildGatewayTokenSecret(a, "t"), sts} {
			if err := c.Create(ctx, o); err != nil {
				return err
			}
		}
		return nil
	})
}

// requestCounter counts the manager's API requests by method and resource.
type requestCounter struct {
	mu     sync.Mutex
	counts map[string]int
	// throttled counts the API server's 429 answers (priority and fairness), retried by
	// client-go and counted again in counts.
	throttled int
	// throttledBy counts the 429s by request and by what the API server said.
	throttledBy map[string]int
}

// throttleKey names a 429: the request (method, path, whether a watch) and the API server's
// message (priority and fairness says "too many requests", the watch cache of a resource
// whose storage is still starting "storage is (re)initializing").
func throttleKey(req *http.Request, resp *http.Response) string {
	var body bytes.Buffer
	_, _ = body.ReadFrom(resp.Body)
	resp.Body = io.NopCloser(bytes.NewReader(body.Bytes()))
	var status metav1.Status
	_ = json.Unmarshal(body.Bytes(), &status)
	watch := ""
	if req.URL.Query().Get("watch") == "true" {
		watch = " (watch)"
	}
	return fmt.Sprintf("%s %s%s: %q", req.Method, req.URL.Path, watch, status.Message)
}

// countRequests returns a copy of cfg whose requests are counted.
func countRequests(cfg *rest.Config) (*rest.Config, *requestCounter) {
	rc := &requestCounter{counts: map[string]int{}, throttledBy: map[string]int{}}
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			rc.add(req)
			resp, err := rt.RoundTrip(req)
			if err == nil && resp.StatusCode == http.StatusTooManyRequests {
				rc.mu.Lock()
				rc.throttled++
				rc.throttledBy[throttleKey(req, resp)]++
				rc.mu.Unlock()
			}
			return resp, err
		})
	})
	return out, rc
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// add counts req as "<METHOD> <resource>[/<subresource>]" (watches apart).
func (rc *requestCounter) add(req *http.Request) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	// .../namespaces/<ns>/<resource>/<name>/<sub> or .../<resource>[/<name>[/<sub>]]
	var resource string
	for i := 0; i < len(parts); i++ {
		if parts[i] == "namespaces" && i+2 < len(parts) {
			i++
			continue
		}
		if i >= 2 && (parts[0] == "api" && i >= 2 || parts[0] == "apis" && i >= 3) {
			resource = parts[i]
			if i+2 < len(parts) {
				resource += "/" + parts[i+2]
			}
			break
		}
	}
	key := req.Method + " " + resource
	if req.URL.Query().Get("watch") == "true" {
		key = "WATCH " + resource
	}
	rc.mu.Lock()
	rc.counts[key]++
	rc.mu.Unlock()
}

// reset forgets the requests counted so far.
func (rc *requestCounter) reset() {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	clear(rc.counts)
	clear(rc.throttledBy)
	rc.throttled = 0
}

// print shows the most frequent requests, per agent, and returns the requests per agent.
func (rc *requestCounter) print(n int) float64 {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	keys := make([]string, 0, len(rc.counts))
	total := 0
	for k, v := range rc.counts {
		keys = append(keys, k)
		total += v
	}
	sort.Slice(keys, func(i, j int) bool { return rc.counts[keys[i]] > rc.counts[keys[j]] })
	fmt.Printf("  manager API requests: %d (%.1f per agent), %d answered 429; most frequent:\n", total, float64(total)/float64(n), rc.throttled)
	for _, k := range keys[:min(len(keys), 10)] {
		fmt.Printf("    %-48s %6d  (%.2f per agent)\n", k, rc.counts[k], float64(rc.counts[k])/float64(n))
	}
	if len(rc.throttledBy) > 0 {
		fmt.Printf("  answered 429:\n")
		for k, v := range rc.throttledBy {
			fmt.Printf("    %4d  %s\n", v, k)
		}
	}
	return float64(total) / float64(n)
}

func parallel(workers, n int, f func(int) error) error {
	var wg sync.WaitGroup
	next := make(chan int)
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}
