package agentplanetest

import (
	"context"
	"fmt"

	"github.com/onsi/gomega/gcustom"
	"github.com/onsi/gomega/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// Agent phases, as Agent.status.phase reports them.
const (
	PhaseStarting   = agentsv1.AgentStarting
	PhaseRunning    = agentsv1.AgentRunning
	PhaseNotRunning = agentsv1.AgentNotRunning
)

// ConditionReady is the condition type every agentplane kind reports once reconciled.
const ConditionReady = agentsv1.ConditionReady

// Fresh returns a function that reads obj (by its namespace and name) from c and returns it, for
// Gomega's Eventually and Consistently, which call it on every poll:
//
//	Eventually(agentplanetest.Fresh(ctx, p.Client(), agent)).Should(agentplanetest.HavePhase(agentplanetest.PhaseRunning))
//
// obj is overwritten by each read.
func Fresh[T client.Object](ctx context.Context, c client.Client, obj T) func() (T, error) {
	key := client.ObjectKeyFromObject(obj)
	return func() (T, error) {
		err := c.Get(ctx, key, obj)
		return obj, err
	}
}

// HavePhase matches an *Agent (v1alpha1) whose status.phase is phase.
func HavePhase(phase agentsv1.AgentPhase) types.GomegaMatcher {
	return gcustom.MakeMatcher(func(a *agentsv1.Agent) (bool, error) {
		if a == nil {
			return false, fmt.Errorf("HavePhase: nil Agent")
		}
		return a.Status.Phase == phase, nil
	}).WithTemplate("Expected agent {{.Actual.Namespace}}/{{.Actual.Name}} {{.To}} be in phase {{.Data}}; it is in phase {{printf \"%q\" .Actual.Status.Phase}} with conditions {{range .Actual.Status.Conditions}}{{.Type}}={{.Status}} ({{.Reason}}: {{.Message}}) {{end}}", phase)
}

// HaveCondition matches an agentplane object (any kind with status.conditions, such as an
// Agent, a Domain or a Snapshot) that has a condition of type condType with status, and
// whose observedGeneration (when the condition records one) is the object's generation.
func HaveCondition(condType string, status metav1.ConditionStatus) types.GomegaMatcher {
	return gcustom.MakeMatcher(func(obj client.Object) (bool, error) {
		c, err := condition(obj, condType)
		if err != nil || c == nil {
			return false, err
		}
		fresh := c.ObservedGeneration == 0 || c.ObservedGeneration == obj.GetGeneration()
		return c.Status == status && fresh, nil
	}).WithTemplate("Expected {{.Actual.GetObjectKind.GroupVersionKind.Kind}} {{.Actual.GetNamespace}}/{{.Actual.GetName}} {{.To}} have condition {{index .Data 0}}={{index .Data 1}} for its generation {{.Actual.GetGeneration}}", []any{condType, status})
}

// condition returns obj's condition of type t (nil when absent).
func condition(obj client.Object, t string) (*metav1.Condition, error) {
	if obj == nil {
		return nil, fmt.Errorf("HaveCondition: nil object")
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	status, _ := u["status"].(map[string]any)
	raw, _ := status["conditions"].([]any)
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok || m["type"] != t {
			continue
		}
		c := &metav1.Condition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, c); err != nil {
			return nil, err
		}
		return c, nil
	}
	return nil, nil
}
