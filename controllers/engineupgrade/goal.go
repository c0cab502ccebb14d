package engineupgrade

import (
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// goal is where a rollout moves its agents: an engine version (EngineUpgrade) or the
// manager's rendering of the gateways (RenderingRollout). The waves, snapshots, health
// deadlines and halts are the same for both (agent.go); only what follows says how they
// differ.
type goal interface {
	// String names the goal for people ("engine 2026.9.7").
	String() string
	// reached: the agent is on the goal.
	reached(a *agentsv1.Agent) bool
	// wanted: the agent is one to move (not on the goal, within the rollout's filters), once
	// its status says so; unknown: it may be, its status does not tell yet (not taken in a
	// wave, counted pending).
	wanted(a *agentsv1.Agent) (wanted, unknown bool)
	// start sets what moves the agent, after its snapshot; prev is recorded to roll back.
	start(a *agentsv1.Agent)
	// healthy: the agent is on the goal, Ready, as of its current spec.
	healthy(a *agentsv1.Agent) bool
	// rollback changes the agent after it was not healthy in time (the snapshot's CID, when
	// one was taken); it returns the agent's new state and what it did, for people.
	rollback(a *agentsv1.Agent, cid string, now metav1.Time) (state, did string)
}

// engineGoal moves agents to an engine version.
type engineGoal struct {
	u      *upgradeRun
	target string
}

func (g engineGoal) String() string { return "engine " + g.target }

func (g engineGoal) reached(a *agentsv1.Agent) bool { return g.u.version(a) == g.target }

func (g engineGoal) wanted(a *agentsv1.Agent) (bool, bool) {
	v := g.u.version(a)
	from := g.u.eu.Spec.FromVersions
	return v != g.target && (len(from) == 0 || slices.Contains(from, v)), false
}

func (g engineGoal) start(a *agentsv1.Agent) { a.Spec.Engine.Version = g.target }

func (g engineGoal) healthy(a *agentsv1.Agent) bool {
	return ready(a) && a.Status.EngineVersion == g.target
}

func (g engineGoal) rollback(a *agentsv1.Agent, cid string, now metav1.Time) (string, string) {
	prev := a.Annotations[agentsv1.AnnotationUpgradePreviousVersion]
	a.Spec.Engine.Version = prev
	if cid != "" {
		a.Spec.DesiredSnapshot = cid
		a.Spec.RestoreRequestedAt = &now
	}
	return agentsv1.AgentUpgradeRolledBack, fmt.Sprintf("back to %s with the workspace of snapshot %s", describeVersion(prev), cid)
}
