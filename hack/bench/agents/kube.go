package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/hack/bench/internal/report"
	"github.com/agentplane/agentplane/hack/bench/internal/rss"
	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/adapters/engine/openclaw"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/runtime/kube"
	"github.com/agentplane/agentplane/internal/devtools/testenv/kubeenv"
	"github.com/agentplane/agentplane/internal/platform"
	"github.com/agentplane/agentplane/internal/rules/auth"
	"github.com/agentplane/agentplane/internal/rules/workspacens"
)

// benchKube times the kube runtime's controller on n Agents in envtest against the same
// objects written directly.
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
	direct, err := kubeBaseline(ctx, c, n, kube.Options{Engine: openclaw.New(), Scheme: env.Scheme})
	if err != nil {
		return err
	}

	// The controller: n Agents created, wall time until every StatefulSet exists.
	run, err := runKube(ctx, env, n, spaces, timeout)
	if err != nil {
		return err
	}
	reportKube(n, spaces, direct, run)
	return nil
}

// kubeBaseline: n Agents and their owned objects, built by the same builders, created
// directly: the same writes from the first Agent to the last StatefulSet as the controller's
// run is timed over. It returns how long they took and removes them.
func kubeBaseline(ctx context.Context, c client.Client, n int, opts kube.Options) (time.Duration, error) {
	start := time.Now()
	agents, err := createAgents(ctx, c, []string{"bench-direct"}, n)
	if err != nil {
		return 0, err
	}
	if err := createDirect(ctx, c, agents, opts); err != nil {
		return 0, fmt.Errorf("baseline: %w", err)
	}
	direct := time.Since(start)
	// The baseline's objects go before the platform starts: its controller would reconcile
	// the Agents too (they are Agents like any other) and the run would measure twice the
	// work, and its cache would hold the rest (the manager's memory is measured).
	for _, o := range []client.Object{&agentsv1.Agent{}, &appsv1.StatefulSet{}, &corev1.Service{}, &corev1.Secret{}} {
		if err := c.DeleteAllOf(ctx, o, client.InNamespace("bench-direct")); err != nil {
			return 0, fmt.Errorf("remove the baseline's %T: %w", o, err)
		}
	}
	// The finalizer policy (config/policy) gave the baseline's Agents the controller's
	// finalizer: they go now, not through the controller's delete path during the run.
	if err := dropFinalizers(ctx, c, agents); err != nil {
		return 0, fmt.Errorf("remove the baseline's Agents: %w", err)
	}
	return direct, nil
}

// reportKube prints the controller's run against the direct writes and adds its JSON rows.
func reportKube(n int, spaces []string, direct time.Duration, run *kubeRun) {
	reconciled, ready, created, times, requests := run.reconciled, run.ready, run.created, run.times, run.requests
	rssBefore, rssAfter := run.rssBefore, run.rssAfter
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
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// kubeRun is a timed run of agentplane's manager over n Agents.
type kubeRun struct {
	// reconciled is the wall time from the first Agent written to the last StatefulSet
	// existing, ready the manager's start to its first StatefulSet (before the timed run),
	// created the benchmark's own creates of the Agents.
	reconciled, ready, created time.Duration
	// times are the StatefulSets' arrivals since the first Agent was written.
	times []time.Duration
	// requests are the manager's API requests since the first Agent was written.
	requests            *requestCounter
	rssBefore, rssAfter float64
}

// runKube runs agentplane's manager (runController, its shipped client settings) on env,
// creates n Agents over spaces (benchWorkspaces made them) and waits until every StatefulSet
// exists, every workspace's slot count is exact and the governing Service is there. The
// manager runs until ctx ends.
func runKube(ctx context.Context, env *kubeenv.Env, n int, spaces []string, timeout time.Duration) (*kubeRun, error) {
	c := env.Client
	rssBefore := rss.MiB("self")
	prog, err := watchStatefulSets(ctx, env.Config, "bench-kube", n)
	if err != nil {
		return nil, err
	}
	start, ready, requests, err := runController(ctx, c, env.Config, platform.RuntimeOptions{}, n, spaces)
	if err != nil {
		return nil, err
	}
	created := time.Since(start)
	if _, err := prog.wait(ctx, timeout); err != nil {
		return nil, err
	}
	times := prog.times(start)
	run := &kubeRun{reconciled: times[len(times)-1], ready: ready, created: created, times: times, requests: requests,
		rssBefore: rssBefore, rssAfter: rss.MiB("self")}
	if err := writeHeapProfile(); err != nil {
		return nil, err
	}
	// Sanity: an agent's objects are complete and the limit's count is exact.
	if err := c.Get(ctx, types.NamespacedName{Namespace: spaces[0], Name: kube.GoverningService}, &corev1.Service{}); err != nil {
		return nil, fmt.Errorf("governing service of %s: %w", spaces[0], err)
	}
	if err := slotsSettled(ctx, c, spaces, n, timeout); err != nil {
		return nil, err
	}
	return run, nil
}

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
	rt.Name, rt.Versions = platform.RuntimeKube, []string{engine.PinnedVersion}
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
	if err := firstStatefulSet(ctx, c, warmSpace, began); err != nil {
		return time.Time{}, 0, nil, err
	}
	ready := time.Since(began)
	requests.reset()
	start := time.Now()
	_, err = createAgents(ctx, c, spaces, n)
	return start, ready, requests, err
}

// firstStatefulSet waits until namespace ns has a StatefulSet: the manager started at began
// has reconciled its first object. It gives up 5 minutes after began.
func firstStatefulSet(ctx context.Context, c client.Client, ns string, began time.Time) error {
	for {
		var l appsv1.StatefulSetList
		if err := c.List(ctx, &l, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(l.Items) > 0 {
			return nil
		}
		if time.Since(began) > 5*time.Minute {
			return fmt.Errorf("the manager did not reconcile its first object in %s in 5 minutes", ns)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// warmSpace is the workspace of the agent that tells the manager is ready.
const warmSpace = "bench-warm"

// benchWorkspaces creates the workspaces bench-direct (the baseline's agents), warmSpace and
// spaces (the controller's), each allowed n agents.
func benchWorkspaces(ctx context.Context, c client.Client, n int, spaces []string) error {
	for _, ws := range append([]string{"bench-direct", warmSpace}, spaces...) {
		if err := workspacens.EnsureWorkspace(ctx, c, &agentsv1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: ws},
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
		d := runtime.Desired{EngineVersion: engine.PinnedVersion, GatewayTokenSecret: agentsv1.GatewayTokenSecretName(a.Name)}
		sts, err := kube.BuildStatefulSet(a, d, opts)
		if err != nil {
			return err
		}
		for _, o := range []client.Object{auth.GatewayTokenSecret(a, "t"), sts} {
			if err := c.Create(ctx, o); err != nil {
				return err
			}
		}
		return nil
	})
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
