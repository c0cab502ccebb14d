package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/controllers"
	"github.com/agentplane/agentplane/internal/engine/openclaw"
	"github.com/agentplane/agentplane/internal/platform"
	"github.com/agentplane/agentplane/internal/runtime"
	"github.com/agentplane/agentplane/internal/runtime/kube"
	"github.com/agentplane/agentplane/internal/tenancy"
	"github.com/agentplane/agentplane/internal/testenv"
)

// rssMiB is this process's resident set size.
func rssMiB() float64 {
	raw, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			kb, _ := strconv.Atoi(strings.Fields(line)[1])
			return float64(kb) / 1024
		}
	}
	return 0
}

func benchKube(n int) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env, err := testenv.Start()
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	c := env.Client
	for _, ws := range []string{"bench-direct", "bench-kube"} {
		if err := tenancy.EnsureWorkspace(ctx, c, &agentsv1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: ws},
			Spec: agentsv1.WorkspaceSpec{AgentLimit: ptr.To(int32(n))}}); err != nil {
			return err
		}
	}

	// Baseline: the owned objects of n agents, built by the same builders, created directly.
	eng := openclaw.New()
	opts := kube.Options{Engine: eng, Scheme: env.Scheme}
	agents := make([]*agentsv1.Agent, n)
	for i := range agents {
		a := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "bench-direct", Name: fmt.Sprintf("agt-%04d", i)},
			Spec: agentsv1.AgentSpec{DisplayName: "bench"}}
		if err := c.Create(ctx, a); err != nil {
			return err
		}
		agents[i] = a
	}
	start := time.Now()
	if err := parallel(8, n, func(i int) error {
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
	}); err != nil {
		return fmt.Errorf("baseline: %w", err)
	}
	direct := time.Since(start)

	// The controller: n Agents created, wall time until every StatefulSet exists.
	rssBefore := rssMiB()
	p, err := platform.New(ctx, env.Config, platform.Options{MetricsAddr: "0", ProbeAddr: "0",
		Runtime: platform.RuntimeOptions{Name: platform.RuntimeKube, Versions: []string{"2026.9.6"}}})
	if err != nil {
		return err
	}
	go func() { _ = p.Start(ctx) }()
	start = time.Now()
	if err := parallel(8, n, func(i int) error {
		return c.Create(ctx, &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "bench-kube", Name: fmt.Sprintf("agt-%04d", i)},
			Spec: agentsv1.AgentSpec{DisplayName: "bench"}})
	}); err != nil {
		return err
	}
	for {
		var sets appsv1.StatefulSetList
		if err := c.List(ctx, &sets, client.InNamespace("bench-kube")); err != nil {
			return err
		}
		if len(sets.Items) >= n {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	reconciled := time.Since(start)
	rssAfter := rssMiB()
	// Sanity: an agent's objects are complete.
	if err := c.Get(ctx, types.NamespacedName{Namespace: "bench-kube", Name: "agt-0000"}, &corev1.Service{}); err != nil {
		return fmt.Errorf("service of agt-0000: %w", err)
	}
	fmt.Printf("kube runtime reconcile, %d agents, envtest\n", n)
	fmt.Printf("  controller          %8.2f s   (%.0f agents/s)\n", reconciled.Seconds(), float64(n)/reconciled.Seconds())
	fmt.Printf("  direct API writes   %8.2f s   (same objects, 8 writers, no controller)\n", direct.Seconds())
	fmt.Printf("  ratio direct/controller: %.2f\n", direct.Seconds()/reconciled.Seconds())
	fmt.Printf("  process RSS %.0f MiB -> %.0f MiB (+%.1f MiB per 1,000 agents)\n", rssBefore, rssAfter, (rssAfter-rssBefore)*1000/float64(n))
	return nil
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
