package agent

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

func cond(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: reason + " message"}
}

func TestAgentReadyCondition(t *testing.T) {
	const cidA, cidB = "bafkreifjjcie6lypi6ny7amxnfftagclbuxndqonfipmb64f2km2devei4", "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"
	prov := cond(agentsv1.AgentProvisioned, metav1.ConditionTrue, agentsv1.ReasonProvisioned)
	healthy := cond(agentsv1.AgentGatewayReady, metav1.ConditionTrue, agentsv1.ReasonHealthy)
	for _, tc := range []struct {
		name         string
		spec         agentsv1.AgentSpec
		status       agentsv1.AgentStatus
		want, reason string
	}{
		{"nothing observed yet", agentsv1.AgentSpec{}, agentsv1.AgentStatus{}, "False", agentsv1.ReasonProvisioning},
		{"provision failed", agentsv1.AgentSpec{}, agentsv1.AgentStatus{Conditions: []metav1.Condition{
			cond(agentsv1.AgentProvisioned, metav1.ConditionFalse, agentsv1.ReasonInvalidVersion)}}, "False", agentsv1.ReasonInvalidVersion},
		{"running", agentsv1.AgentSpec{}, agentsv1.AgentStatus{Conditions: []metav1.Condition{prov, healthy}}, "True", agentsv1.ReasonHealthy},
		{"starting", agentsv1.AgentSpec{}, agentsv1.AgentStatus{Conditions: []metav1.Condition{prov,
			cond(agentsv1.AgentGatewayReady, metav1.ConditionFalse, agentsv1.ReasonStarting)}}, "False", agentsv1.ReasonStarting},
		{"stopped as asked", agentsv1.AgentSpec{Stopped: true}, agentsv1.AgentStatus{Conditions: []metav1.Condition{prov,
			cond(agentsv1.AgentGatewayReady, metav1.ConditionFalse, agentsv1.ReasonStopped)}}, "True", agentsv1.ReasonStopped},
		{"restore outstanding", agentsv1.AgentSpec{DesiredSnapshot: cidB}, agentsv1.AgentStatus{SnapshotCID: cidA,
			Conditions: []metav1.Condition{prov, healthy}}, "False", agentsv1.ReasonRestoring},
		{"restore failed", agentsv1.AgentSpec{DesiredSnapshot: cidB}, agentsv1.AgentStatus{SnapshotCID: cidA,
			Conditions: []metav1.Condition{prov, healthy, cond(agentsv1.AgentSnapshotRestored, metav1.ConditionFalse, agentsv1.ReasonSnapshotNotFound)}},
			"False", agentsv1.ReasonSnapshotNotFound},
		{"restored", agentsv1.AgentSpec{DesiredSnapshot: cidB}, agentsv1.AgentStatus{SnapshotCID: cidB,
			Conditions: []metav1.Condition{prov, healthy, cond(agentsv1.AgentSnapshotRestored, metav1.ConditionTrue, agentsv1.ReasonRestored)}},
			"True", agentsv1.ReasonHealthy},
	} {
		a := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Generation: 2}, Spec: tc.spec, Status: tc.status}
		c := computeReadyCondition(a)
		if string(c.Status) != tc.want || c.Reason != tc.reason || c.ObservedGeneration != 2 || c.Type != agentsv1.ConditionReady {
			t.Errorf("%s: Ready %s/%s (generation %d), want %s/%s", tc.name, c.Status, c.Reason, c.ObservedGeneration, tc.want, tc.reason)
		}
	}
}

func TestRestorePendingAndRetrying(t *testing.T) {
	const cid = "bafkreifjjcie6lypi6ny7amxnfftagclbuxndqonfipmb64f2km2devei4"
	t1, t2 := metav1.Unix(100, 0), metav1.Unix(200, 0)
	a := &agentsv1.Agent{Spec: agentsv1.AgentSpec{DesiredSnapshot: cid, RestoreRequestedAt: &t1}}
	if !restorePending(a) {
		t.Fatal("a CID never restored is pending")
	}
	a.Status.SnapshotCID, a.Status.LastRestoreAt = cid, &t1
	if restorePending(a) {
		t.Fatal("the request carried out is not pending")
	}
	a.Spec.RestoreRequestedAt = &t2
	if !restorePending(a) {
		t.Fatal("a later stamp asks for the same CID again")
	}
	a.Status.Conditions = []metav1.Condition{cond(agentsv1.AgentSnapshotRestored, metav1.ConditionFalse, agentsv1.ReasonStorageUnavailable)}
	if !restoreRetrying(a) {
		t.Fatal("storage unreachable: retried, the pass did not converge")
	}
	a.Status.Conditions = []metav1.Condition{cond(agentsv1.AgentSnapshotRestored, metav1.ConditionFalse, agentsv1.ReasonSnapshotNotFound)}
	if restoreRetrying(a) {
		t.Fatal("a CID that is no snapshot is a verdict, not a retry")
	}
}

// TestGatewayReadyCondition: the condition carries the runtime's reason and message (what a
// starting gateway waits for, why it crashed), so kubectl and the facade's statusReason show
// the scheduler's or the kubelet's words rather than a generic "Starting".
func TestGatewayReadyCondition(t *testing.T) {
	for _, tc := range []struct {
		name          string
		o             runtime.Observed
		status        metav1.ConditionStatus
		reason, msgIn string
	}{
		{"running", runtime.Observed{Phase: runtime.PhaseRunning, Reason: agentsv1.ReasonHealthy}, metav1.ConditionTrue, agentsv1.ReasonHealthy, "health check"},
		{"starting, no reason", runtime.Observed{Phase: runtime.PhaseStarting}, metav1.ConditionFalse, agentsv1.ReasonStarting, "starting"},
		{"unschedulable", runtime.Observed{Phase: runtime.PhaseStarting, Reason: agentsv1.ReasonUnschedulable,
			Message: "0/1 nodes are available: 1 Insufficient memory."}, metav1.ConditionFalse, agentsv1.ReasonUnschedulable, "Insufficient memory"},
		{"node not ready", runtime.Observed{Phase: runtime.PhaseStarting, Reason: agentsv1.ReasonNodeNotReady,
			Message: "node n1 is not ready: Kubelet stopped posting node status."}, metav1.ConditionFalse, agentsv1.ReasonNodeNotReady, "Kubelet stopped"},
		{"crashed", runtime.Observed{Phase: runtime.PhaseCrashed, Reason: "CrashLoopBackOff", Message: "back-off"}, metav1.ConditionFalse, "CrashLoopBackOff", "back-off"},
		{"crashed, no reason", runtime.Observed{Phase: runtime.PhaseCrashed}, metav1.ConditionFalse, agentsv1.ReasonCrashed, "crashed"},
		{"stopped", runtime.Observed{Phase: runtime.PhaseStopped}, metav1.ConditionFalse, agentsv1.ReasonStopped, "stopped"},
	} {
		c := computeGatewayReadyCondition(&agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Generation: 3}}, tc.o)
		if c.Status != tc.status || c.Reason != tc.reason || !strings.Contains(c.Message, tc.msgIn) || c.ObservedGeneration != 3 {
			t.Errorf("%s: %s/%s %q (generation %d), want %s/%s with %q", tc.name, c.Status, c.Reason, c.Message, c.ObservedGeneration, tc.status, tc.reason, tc.msgIn)
		}
	}
}
