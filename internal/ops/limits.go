package ops

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// Budgets and limits (additions beyond the contract): an agent's and a workspace's model
// budget, and an agent's memory limit. The API server validates the budgets (the CRDs'
// minimums: its refusal reads `Validation failed: ...`, as every Invalid does).
const (
	MsgInvalidBudget      = "Invalid budget"
	MsgNoPriceTable       = "A spend budget needs the platform's model price table"
	MsgInvalidMemoryLimit = "Invalid memory limit"
	// MinMemoryLimit is the smallest memory limit the REST door sets: a typo (`512`, bytes)
	// must not starve the gateway.
	MinMemoryLimit = 256 << 20
)

// budgetOrNil is b, or nil when it limits nothing.
func budgetOrNil(b agentsv1.ModelBudget) *agentsv1.ModelBudget {
	if b == (agentsv1.ModelBudget{}) {
		return nil
	}
	return &b
}

// checkSpend refuses a spend budget on a platform whose model proxy prices nothing: every
// model call under it would be refused.
func (o *Ops) checkSpend(b agentsv1.ModelBudget) error {
	if b.CostMicrosPerDay > 0 && (o.d.ModelMeter == nil || o.d.ModelMeter.Currency() == "") {
		return Fail(Invalid, MsgNoPriceTable)
	}
	return nil
}

// SetAgentBudget sets the agent's model budget (zero fields: unlimited).
func (o *Ops) SetAgentBudget(ctx context.Context, t Scope, id string, b agentsv1.ModelBudget) (*agentsv1.Agent, error) {
	if err := o.checkSpend(b); err != nil {
		return nil, err
	}
	return o.updateAgentSpec(ctx, t, id, func(a *agentsv1.Agent) { a.Spec.Budget = budgetOrNil(b) })
}

// SetWorkspaceBudget sets the model budget of all the workspace's agents together.
func (o *Ops) SetWorkspaceBudget(ctx context.Context, workspace string, b agentsv1.ModelBudget) (*agentsv1.Workspace, error) {
	if err := o.checkSpend(b); err != nil {
		return nil, err
	}
	ws := &agentsv1.Workspace{}
	err := retry.RetryOnConflict(specRetry, func() error {
		if err := o.d.APIReader.Get(ctx, client.ObjectKey{Name: workspace}, ws); err != nil {
			return err
		}
		ws.Spec.Budget = budgetOrNil(b)
		return o.d.Client.Update(ctx, ws)
	})
	if err != nil {
		return nil, err
	}
	return ws, nil
}

// SetAgentMemoryLimit sets the agent's memory limit ("" returns it to the platform's
// default). It must be a quantity of at least MinMemoryLimit. The Agent controller applies
// it: the gateway restarts with it (kube: its pod; local: its cgroup and Node heap).
func (o *Ops) SetAgentMemoryLimit(ctx context.Context, t Scope, id, limit string) (*agentsv1.Agent, error) {
	var q resource.Quantity
	if limit != "" {
		var err error
		if q, err = resource.ParseQuantity(limit); err != nil || q.Value() < MinMemoryLimit {
			return nil, Fail(Invalid, MsgInvalidMemoryLimit)
		}
	}
	return o.updateAgentSpec(ctx, t, id, func(a *agentsv1.Agent) {
		res := a.Spec.Resources
		if res == nil {
			res = &agentsv1.AgentResources{}
		}
		res = res.DeepCopy()
		if limit == "" {
			delete(res.Limits, corev1.ResourceMemory)
		} else {
			if res.Limits == nil {
				res.Limits = corev1.ResourceList{}
			}
			res.Limits[corev1.ResourceMemory] = q
		}
		if len(res.Limits) == 0 && len(res.Requests) == 0 {
			res = nil
		}
		a.Spec.Resources = res
	})
}
