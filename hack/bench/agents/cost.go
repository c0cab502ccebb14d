package main

import (
	"context"
	"fmt"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/config/policy"
	"github.com/agentplane/agentplane/hack/bench/internal/report"
	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/adapters/engine/openclaw"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/runtime/kube"
	"github.com/agentplane/agentplane/internal/devtools/testenv/kubeenv"
	"github.com/agentplane/agentplane/internal/rules/auth"
)

// benchCost times, on envtest with 8 writers, each kind of request the manager makes per agent
// on its own, n of them: what one costs the API server, to cut the expensive ones first. The
// baseline is the benchmark's own POST of an Agent (no policy, no finalizer).
func benchCost(n int) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env, err := kubeenv.Start()
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	c := env.Client
	if err := benchWorkspaces(ctx, c, n, []string{"bench-cost"}); err != nil {
		return err
	}
	opts := kube.Options{Engine: openclaw.New(), Scheme: env.Scheme}
	svc, err := kube.BuildGoverningService("bench-cost", opts)
	if err != nil {
		return err
	}
	if err := c.Create(ctx, svc); err != nil {
		return err
	}
	agents, results, err := costCreates(ctx, c, n)
	if err != nil {
		return err
	}
	for _, s := range costSteps(ctx, c, env.Scheme, opts) {
		d, err := timed(s.name, func() error { return parallel(8, n, func(i int) error { return s.f(agents[i]) }) })
		if err != nil {
			return err
		}
		results = append(results, costRow{s.name, d})
	}
	create := results[0].took
	fmt.Printf("API server cost per request kind, %d each, 8 writers, envtest\n", n)
	for _, r := range results {
		fmt.Printf("  %-55s %7.2f s  %6.2f ms/request  %.2fx POST agents\n", r.name, r.took.Seconds(), ms(r.took)/float64(n), r.took.Seconds()/create.Seconds())
		jsonRows = append(jsonRows, report.Result{Bench: "agents-cost", Row: fmt.Sprintf("%d requests, 8 writers", n), Metric: r.name, Value: r.took.Seconds(), Unit: "s",
			Baseline: "POST agents", BaselineValue: create.Seconds(), Ratio: r.took.Seconds() / create.Seconds(), RatioOf: "this request / an Agent create"})
	}
	return nil
}

// timed runs f and says how long it took; its error is named name.
func timed(name string, f func() error) (time.Duration, error) {
	start := time.Now()
	if err := f(); err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	return time.Since(start), nil
}

// costCreates times the creates: the baseline without the finalizer policy (testenv installs
// it: its binding goes for this), then the same creates with it. It returns the baseline's
// Agents and both rows, the baseline first.
func costCreates(ctx context.Context, c client.Client, n int) ([]*agentsv1.Agent, []costRow, error) {
	pols, err := policy.Load()
	if err != nil {
		return nil, nil, err
	}
	binding := pols.Bindings[0]
	if err := setPolicy(ctx, c, binding, false); err != nil {
		return nil, nil, err
	}
	var agents []*agentsv1.Agent
	create, err := timed("POST agents", func() error {
		var err error
		agents, err = createAgents(ctx, c, []string{"bench-cost"}, n)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	results := []costRow{{"POST agents (the baseline)", create}}
	if err := setPolicy(ctx, c, binding, true); err != nil {
		return nil, nil, err
	}
	if err := benchWorkspaces(ctx, c, n, []string{"bench-cost-policy"}); err != nil {
		return nil, nil, err
	}
	withPolicy, err := timed("POST agents with the policy", func() error {
		_, err := createAgents(ctx, c, []string{"bench-cost-policy"}, n)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return agents, append(results, costRow{"POST agents (the policy adds the finalizer)", withPolicy}), nil
}

// costStep is one kind of request the manager makes for an agent.
type costStep struct {
	name string
	f    func(a *agentsv1.Agent) error
}

// costSteps are the requests the manager makes per agent, each timed on its own.
func costSteps(ctx context.Context, c client.Client, scheme *k8sruntime.Scheme, opts kube.Options) []costStep {
	return []costStep{
		{"PUT agents (add the finalizer)", func(a *agentsv1.Agent) error {
			controllerutil.AddFinalizer(a, agentsv1.AgentFinalizer)
			return c.Update(ctx, a)
		}},
		{"PATCH agents/status (first status, optimistic lock)", func(a *agentsv1.Agent) error {
			before := a.DeepCopy()
			firstStatus(a)
			return c.Status().Patch(ctx, a, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}),
				client.FieldOwner(agentsv1.ControllerFieldManager))
		}},
		{"POST secrets (gateway token)", func(a *agentsv1.Agent) error {
			s := auth.GatewayTokenSecret(a, "t")
			if err := controllerutil.SetControllerReference(a, s, scheme); err != nil {
				return err
			}
			return c.Create(ctx, s)
		}},
		{"POST statefulsets", func(a *agentsv1.Agent) error {
			sts, err := kube.BuildStatefulSet(a, runtime.Desired{EngineVersion: engine.PinnedVersion, GatewayTokenSecret: agentsv1.GatewayTokenSecretName(a.Name)}, opts)
			if err != nil {
				return err
			}
			return c.Create(ctx, sts)
		}},
	}
}

// setPolicy binds the finalizer policy (or removes its binding) and waits until a dry-run
// Agent shows it.
func setPolicy(ctx context.Context, c client.Client, b *admissionregistrationv1.MutatingAdmissionPolicyBinding, on bool) error {
	var err error
	if on {
		err = c.Create(ctx, b.DeepCopy())
	} else {
		err = client.IgnoreNotFound(c.Delete(ctx, b.DeepCopy()))
	}
	if err != nil {
		return err
	}
	for range 600 {
		probe := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-", Namespace: "default"}, Spec: agentsv1.AgentSpec{DisplayName: "probe"}}
		if err := c.Create(ctx, probe, client.DryRunAll); err != nil {
			return err
		}
		if controllerutil.ContainsFinalizer(probe, agentsv1.AgentFinalizer) == on {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("the finalizer policy's binding: not in effect after 30 s")
}

type costRow struct {
	name string
	took time.Duration
}

// firstStatus is an agent's status as the controller first writes it (a StatefulSet created,
// its pod not yet running).
func firstStatus(a *agentsv1.Agent) {
	now := metav1.Now()
	a.Status.Phase = agentsv1.AgentStarting
	a.Status.EngineVersion = engine.PinnedVersion
	a.Status.Endpoint = fmt.Sprintf("http://%s-0.%s.%s.svc:18789", a.Name, kube.GoverningService, a.Namespace)
	a.Status.HoldsSlot = true
	a.Status.GatewayTokenSecret = agentsv1.GatewayTokenSecretName(a.Name)
	a.Status.ObservedGeneration = a.Generation
	for _, c := range []metav1.Condition{
		{Type: agentsv1.AgentProvisioned, Status: metav1.ConditionTrue, Reason: agentsv1.ReasonProvisioned, Message: "the runtime holds the agent's gateway"},
		{Type: agentsv1.AgentGatewayReady, Status: metav1.ConditionFalse, Reason: agentsv1.ReasonStarting, Message: "the gateway is starting"},
		{Type: agentsv1.ConditionReady, Status: metav1.ConditionFalse, Reason: agentsv1.ReasonStarting, Message: "the gateway is starting"},
	} {
		c.ObservedGeneration, c.LastTransitionTime = a.Generation, now
		meta.SetStatusCondition(&a.Status.Conditions, c)
	}
}
