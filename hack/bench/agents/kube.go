package main

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
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
	"github.com/agentplane/agentplane/controllers"
	"github.com/agentplane/agentplane/hack/bench/internal/rss"
	"github.com/agentplane/agentplane/internal/engine/openclaw"
	"github.com/agentplane/agentplane/internal/platform"
	"github.com/agentplane/agentplane/internal/runtime"
	"github.com/agentplane/agentplane/internal/runtime/kube"
	"github.com/agentplane/agentplane/internal/tenancy"
	"github.com/agentplane/agentplane/internal/testenv"
)

func benchKube(n int) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env, err := testenv.Start()
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	c := env.Client
	if err := benchWorkspaces(ctx, c, n); err != nil {
		return err
	}

	// Baseline: the owned objects of n agents, built by the same builders, created directly.
	opts := kube.Options{Engine: openclaw.New(), Scheme: env.Scheme}
	agents, err := createAgents(ctx, c, "bench-direct", n)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := createDirect(ctx, c, agents, opts); err != nil {
		return fmt.Errorf("baseline: %w", err)
	}
	direct := time.Since(start)
	// The baseline's Agents go before the platform starts, or its controller would reconcile
	// them too (they are Agents like any other) and the run would measure twice the work.
	if err := c.DeleteAllOf(ctx, &agentsv1.Agent{}, client.InNamespace("bench-direct")); err != nil {
		return fmt.Errorf("remove the baseline's agents: %w", err)
	}

	// The controller: n Agents created, wall time until every StatefulSet exists.
	rssBefore := rss.MiB("self")
	start, requests, err := runController(ctx, c, env.Config, platform.RuntimeOptions{}, n)
	if err != nil {
		return err
	}
	// Poll metadata only: listing 1,000 whole StatefulSets every tick would load the API
	// server more than the controller does.
	for {
		sets := &metav1.PartialObjectMetadataList{}
		sets.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("StatefulSetList"))
		if err := c.List(ctx, sets, client.InNamespace("bench-kube")); err != nil {
			return err
		}
		if len(sets.Items) >= n {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	reconciled := time.Since(start)
	rssAfter := rss.MiB("self")
	if err := writeHeapProfile(); err != nil {
		return err
	}
	// Sanity: an agent's objects are complete.
	if err := c.Get(ctx, types.NamespacedName{Namespace: "bench-kube", Name: "agt-0000"}, &corev1.Service{}); err != nil {
		return fmt.Errorf("service of agt-0000: %w", err)
	}
	fmt.Printf("kube runtime reconcile, %d agents, envtest\n", n)
	fmt.Printf("  controller          %8.2f s   (%.0f agents/s)\n", reconciled.Seconds(), float64(n)/reconciled.Seconds())
	fmt.Printf("  direct API writes   %8.2f s   (same objects, 8 writers, no controller)\n", direct.Seconds())
	fmt.Printf("  ratio direct/controller: %.2f\n", direct.Seconds()/reconciled.Seconds())
	fmt.Printf("  process RSS %.0f MiB -> %.0f MiB (+%.1f MiB per 1,000 agents)\n", rssBefore, rssAfter, (rssAfter-rssBefore)*1000/float64(n))
	requests.print(n)
	return nil
}

// runController starts the platform on cfg with the kube runtime (rt's placement), its API
// requests counted, and creates n Agents in bench-kube; it returns once they are created, with
// the time it began creating them.
func runController(ctx context.Context, c client.Client, cfg *rest.Config, rt platform.RuntimeOptions, n int) (time.Time, *requestCounter, error) {
	counted, requests := countRequests(cfg)
	rt.Name, rt.Versions = platform.RuntimeKube, []string{"2026.9.6"}
	p, err := platform.New(ctx, counted, platform.Options{MetricsAddr: "0", ProbeAddr: "0", Runtime: rt})
	if err != nil {
		return time.Time{}, nil, err
	}
	go func() { _ = p.Start(ctx) }()
	start := time.Now()
	_, err = createAgents(ctx, c, "bench-kube", n)
	return start, requests, err
}

// benchWorkspaces creates the workspaces bench-direct (the baseline's agents) and bench-kube
// (the controller's), each allowed n agents.
func benchWorkspaces(ctx context.Context, c client.Client, n int) error {
	for _, ws := range []string{"bench-direct", "bench-kube"} {
		if err := tenancy.EnsureWorkspace(ctx, c, &agentsv1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: ws},
			Spec: agentsv1.WorkspaceSpec{AgentLimit: ptr.To(int32(n))}}); err != nil {
			return err
		}
	}
	return nil
}

// createAgents creates n Agents agt-0000.. in namespace ns, 8 at a time.
func createAgents(ctx context.Context, c client.Client, ns string, n int) ([]*agentsv1.Agent, error) {
	agents := make([]*agentsv1.Agent, n)
	err := parallel(8, n, func(i int) error {
		a := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("agt-%04d", i)},
			Spec: agentsv1.AgentSpec{DisplayName: "bench"}}
		agents[i] = a
		return c.Create(ctx, a)
	})
	return agents, err
}

// createDirect creates the owned objects of agents (gateway token Secret, Service, ConfigMap,
// StatefulSet), built by the runtime's builders with opts, as one client with 8 writers.
func createDirect(ctx context.Context, c client.Client, agents []*agentsv1.Agent, opts kube.Options) error {
	return parallel(8, len(agents), func(i int) error {
		a := agents[i]
		d := runtime.Desired{EngineVersion: "2026.9.6", GatewayTokenSecret: controllers.GatewayTokenSecretName(a.Name)}
		sts, err := kube.BuildStatefulSet(a, d, opts)
		if err != nil {
			return err
		}
		cm, err := kube.BuildConfigMap(a, d, opts)
		if err != nil {
			return err
		}
		svc, err := kube.BuildService(a, opts)
		if err != nil {
			return err
		}
		for _, o := range []client.Object{controllers.BuildGatewayTokenSecret(a, "t"), svc, cm, sts} {
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
}

// countRequests returns a copy of cfg whose requests are counted.
func countRequests(cfg *rest.Config) (*rest.Config, *requestCounter) {
	rc := &requestCounter{counts: map[string]int{}}
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			rc.add(req)
			return rt.RoundTrip(req)
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

// print shows the most frequent requests, per agent.
func (rc *requestCounter) print(n int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	keys := make([]string, 0, len(rc.counts))
	total := 0
	for k, v := range rc.counts {
		keys = append(keys, k)
		total += v
	}
	sort.Slice(keys, func(i, j int) bool { return rc.counts[keys[i]] > rc.counts[keys[j]] })
	fmt.Printf("  manager API requests: %d (%.1f per agent); most frequent:\n", total, float64(total)/float64(n))
	for _, k := range keys[:min(len(keys), 10)] {
		fmt.Printf("    %-48s %6d  (%.2f per agent)\n", k, rc.counts[k], float64(rc.counts[k])/float64(n))
	}
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
