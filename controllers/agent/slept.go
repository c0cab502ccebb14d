package agent

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// sleepRecord is the sleep a pass of this process put an agent's gateway to: its Suspended
// condition and status.sleep, as the pass wrote them.
type sleepRecord struct {
	cond  metav1.Condition
	sleep *agentsv1.AgentSleep
}

// rememberSleep records the pass's outcome for the sleep: the gateway stopped because the
// agent sleeps (asleep, and the runtime observes it stopped) is recorded and the status shows
// it; any other outcome (a gateway asked to run, an agent stopped by its spec) drops the
// record.
func (r *Reconciler) rememberSleep(agent *agentsv1.Agent, asleep bool, observed runtime.Observed) {
	c := meta.FindStatusCondition(agent.Status.Conditions, agentsv1.ConditionSuspended)
	if !asleep || observed.Phase != runtime.PhaseStopped || c == nil || c.Status != metav1.ConditionTrue {
		r.slept.forget(agent.UID)
		return
	}
	applySleeping(agent)
	r.slept.store(agent.UID, sleepRecord{cond: *c, sleep: agent.Status.Sleep.DeepCopy()})
}

// recallSleep puts back into the agent's status the sleep this process's last pass put its
// gateway to, when the status does not show it: that pass's status write was lost (its
// optimistic lock conflicted with another writer's change of the agent, a last-active stamp
// for example). Without it the next pass would take the agent for awake and suspend it
// again, and suspending lists the tasks through a gateway that no longer runs: the list
// fails, the agent "stays awake until they can be read" and the gateway is restored, to be
// suspended once more a pass later. Restored, a checkpointed engine retries what it was
// doing when it was dumped, and a chat answer it had sent but whose reply it had not read was
// sent twice. Like the home's records (homeRecord), the record is newer than a status that
// disagrees: only this process's passes suspend and wake the agent (a manager that loses its
// lease exits), and every pass that does not leave the gateway asleep drops it.
func (r *Reconciler) recallSleep(agent *agentsv1.Agent) {
	rec, ok := r.slept.load(agent.UID)
	if !ok || meta.IsStatusConditionTrue(agent.Status.Conditions, agentsv1.ConditionSuspended) {
		return
	}
	agent.Status.Sleep = rec.sleep.DeepCopy()
	meta.SetStatusCondition(&agent.Status.Conditions, rec.cond)
}
