package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/config/crd"
	"github.com/agentplane/agentplane/hack/bench/internal/report"
	"github.com/agentplane/agentplane/hack/bench/internal/rss"
	"github.com/agentplane/agentplane/internal/adapters/engine/openclaw"
	"github.com/agentplane/agentplane/internal/adapters/runtime/kube"
	"github.com/agentplane/agentplane/internal/devtools/localcluster"
	"github.com/agentplane/agentplane/internal/devtools/testenv/kubeenv"
	"github.com/agentplane/agentplane/internal/platform"
	"github.com/agentplane/agentplane/internal/scheme"
)

// benchKwok runs n agents on a local cluster with `nodes` simulated (KWOK) nodes: first the
// baseline (the same StatefulSets, Services, ConfigMaps and Secrets, built by the runtime's
// builders, created directly by one client) until all their pods are Ready, then the kube
// runtime's controller on n new Agents until all are running. Both place their pods on the
// simulated nodes with the runtime's node selector and toleration. It gives up waiting after
// timeout and reports how far it got.
func benchKwok(n, nodes int, timeout time.Duration) (err error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	crds, err := crd.CRDs()
	if err != nil {
		return err
	}
	bootStart := time.Now()
	cl, err := localcluster.Start(ctx, localcluster.Options{
		BinDir: kubeenv.AssetsDir(), CRDs: crds, Scheme: scheme.New(), SimulatedNodes: nodes,
	})
	if err != nil {
		return err
	}
	defer func() {
		stopStart := time.Now()
		if serr := cl.Stop(); serr != nil && err == nil {
			err = fmt.Errorf("stop: %w", serr)
		}
		fmt.Printf("  cluster stopped in %.1f s\n", time.Since(stopStart).Seconds())
	}()
	fmt.Printf("local cluster with 1 real and %d simulated nodes up in %.1f s\n", nodes, time.Since(bootStart).Seconds())
	c := cl.Client
	if err := benchWorkspaces(ctx, c, n, []string{"bench-kube"}); err != nil {
		return err
	}
	placement := kube.Options{
		NodeSelector: localcluster.SimulatedNodeSelector(),
		Tolerations:  []corev1.Toleration{localcluster.SimulatedNodeToleration()},
	}

	// Baseline: the same objects created directly; done when every pod is Ready.
	opts := placement
	opts.Engine, opts.Scheme = openclaw.New(), c.Scheme()
	base, err := kwokBaseline(ctx, c, n, opts, timeout)
	if err != nil {
		return err
	}
	direct, directDone, directWrites := base.wall, base.done, base.writes

	// The controller: n Agents created; done when every Agent is running.
	run, err := kwokController(ctx, cl, n, placement, timeout)
	if err != nil {
		return err
	}
	managed, managedDone := run.wall, run.done

	fmt.Printf("kube runtime on simulated nodes, %d agents over %d KWOK nodes, local cluster\n", n, nodes)
	fmt.Printf("  %s\n", clientSettings())
	fmt.Printf("  controller: Agents running %5d/%d in %8.2f s\n", managedDone, n, managed.Seconds())
	fmt.Printf("  direct:     pods Ready     %5d/%d in %8.2f s   (same objects, 8 writers, no controller; writes took %.2f s)\n",
		directDone, n, direct.Seconds(), directWrites.Seconds())
	if managedDone < n || directDone < n {
		fmt.Printf("  ratio direct/controller: none (a run did not finish within %s)\n", timeout)
	} else {
		fmt.Printf("  ratio direct/controller: %.2f\n", direct.Seconds()/managed.Seconds())
	}
	fmt.Printf("  controller's pods on simulated nodes: %d\n", run.onSimulated)
	fmt.Printf("  process RSS %.0f MiB -> %.0f MiB (+%.1f MiB per 1,000 agents; the process also holds the cluster's volume provisioner)\n",
		run.rssBefore, run.rssAfter, (run.rssAfter-run.rssBefore)*1000/float64(n))
	perAgent := run.requests.print(n)
	cancel()
	if managedDone < n || directDone < n {
		return fmt.Errorf("a run did not finish within %s: controller %d/%d, direct %d/%d", timeout, managedDone, n, directDone, n)
	}
	row := fmt.Sprintf("%d agents on %d KWOK nodes, %s", n, nodes, flagsLabel())
	jsonRows = append(jsonRows,
		report.Result{Bench: "agents-kwok", Row: row, Metric: "until every Agent runs", Value: managed.Seconds(), Unit: "s",
			Baseline: "the same objects applied directly until their pods are Ready", BaselineValue: direct.Seconds(),
			Ratio: direct.Seconds() / managed.Seconds(), RatioOf: "direct / controller"},
		report.Result{Bench: "agents-kwok", Row: row, Metric: "API requests per agent", Value: perAgent, Unit: "requests"},
	)
	return nil
}

// kwokManaged is what the controller's run measured.
type kwokManaged struct {
	wall                time.Duration
	done, onSimulated   int
	rssBefore, rssAfter float64
	requests            *requestCounter
}

// kwokController starts the platform with placement, creates n Agents in bench-kube and
// waits until they run.
func kwokController(ctx context.Context, cl *localcluster.Cluster, n int, placement kube.Options, timeout time.Duration) (kwokManaged, error) {
	var r kwokManaged
	c := cl.Client
	r.rssBefore = rss.MiB("self")
	start, _, requests, err := runController(ctx, c, cl.Config, platform.RuntimeOptions{
		NodeSelector: placement.NodeSelector, Tolerations: placement.Tolerations}, n, []string{"bench-kube"})
	if err != nil {
		return r, err
	}
	r.requests = requests
	r.wall, r.done = waitCount(ctx, n, start, timeout, "Agents running", func() (int, error) {
		return countRunning(ctx, c, "bench-kube")
	})
	r.rssAfter = rss.MiB("self")
	r.onSimulated, err = countOnSimulated(ctx, c, "bench-kube")
	return r, err
}

// kwokDirect is what the baseline measured: its wall time, how many pods got Ready and how
// long its writes took.
type kwokDirect struct {
	wall, writes time.Duration
	done         int
}

// kwokBaseline creates n Agents' objects directly (opts) in bench-direct and waits for their
// pods to be Ready; then removes the Agents, orphaning their objects.
func kwokBaseline(ctx context.Context, c client.Client, n int, opts kube.Options, timeout time.Duration) (kwokDirect, error) {
	var r kwokDirect
	start := time.Now()
	agents, err := createAgents(ctx, c, []string{"bench-direct"}, n)
	if err != nil {
		return r, err
	}
	if err := createDirect(ctx, c, agents, opts); err != nil {
		return r, fmt.Errorf("baseline: %w", err)
	}
	r.writes = time.Since(start)
	r.wall, r.done = waitCount(ctx, n, start, timeout, "pods Ready", func() (int, error) {
		return countReadyPods(ctx, c, "bench-direct")
	})
	return r, removeBaselineAgents(ctx, c, agents, timeout)
}

// removeBaselineAgents: the baseline's Agents go before the platform starts, or its
// controller would reconcile them too; their objects stay (orphaned), so both runs see a
// cluster of the same size.
func removeBaselineAgents(ctx context.Context, c client.Client, agents []*agentsv1.Agent, timeout time.Duration) error {
	orphanStart := time.Now()
	if err := c.DeleteAllOf(ctx, &agentsv1.Agent{}, client.InNamespace("bench-direct"), client.PropagationPolicy("Orphan")); err != nil {
		return fmt.Errorf("remove the baseline's agents: %w", err)
	}
	// The finalizer policy (config/policy) gave them the controller's finalizer.
	if err := dropFinalizers(ctx, c, agents); err != nil {
		return fmt.Errorf("remove the baseline's agents: %w", err)
	}
	if _, done := waitCount(ctx, 1, orphanStart, timeout, "baseline Agents gone", func() (int, error) {
		var l agentsv1.AgentList
		if err := c.List(ctx, &l, client.InNamespace("bench-direct")); err != nil {
			return 0, err
		}
		return 1 - min(len(l.Items), 1), nil
	}); done < 1 {
		return fmt.Errorf("the baseline's Agents are not gone after %s", timeout)
	}
	return nil
}

// waitCount polls count every second until it reaches n or timeout passes since start, printing
// when it passes each tenth of n; it returns the time from start and the last count.
func waitCount(ctx context.Context, n int, start time.Time, timeout time.Duration, what string, count func() (int, error)) (time.Duration, int) {
	step, next, got := max(n/10, 1), max(n/10, 1), 0
	for time.Since(start) < timeout && ctx.Err() == nil {
		k, err := count()
		if err == nil {
			got = k
		}
		for got >= next && next <= n {
			fmt.Printf("    %s: %d after %.1f s\n", what, next, time.Since(start).Seconds())
			next += step
		}
		if got >= n {
			break
		}
		time.Sleep(time.Second)
	}
	return time.Since(start), got
}

func countReadyPods(ctx context.Context, c client.Client, ns string) (int, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		return 0, err
	}
	ready := 0
	for i := range pods.Items {
		for _, cond := range pods.Items[i].Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	return ready, nil
}

func countRunning(ctx context.Context, c client.Client, ns string) (int, error) {
	var l agentsv1.AgentList
	if err := c.List(ctx, &l, client.InNamespace(ns)); err != nil {
		return 0, err
	}
	running := 0
	for i := range l.Items {
		if l.Items[i].Status.Phase == agentsv1.AgentRunning {
			running++
		}
	}
	return running, nil
}

func countOnSimulated(ctx context.Context, c client.Client, ns string) (int, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		return 0, err
	}
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes, client.MatchingLabels(localcluster.SimulatedNodeSelector())); err != nil {
		return 0, err
	}
	simulated := map[string]bool{}
	for i := range nodes.Items {
		simulated[nodes.Items[i].Name] = true
	}
	on := 0
	for i := range pods.Items {
		if simulated[pods.Items[i].Spec.NodeName] {
			on++
		}
	}
	return on, nil
}
