package engineupgrade

import (
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/controllers"
	"github.com/agentplane/agentplane/internal/rules/admission"
)

// engineGoal moves agents to an engine version.
type engineGoal struct {
	versions admission.Versions
	eu       *agentsv1.EngineUpgrade
	target   string
}

func (g engineGoal) String() string { return "engine " + g.target }

func (g engineGoal) Reached(a *agentsv1.Agent) bool { return g.version(a) == g.target }

// version is the engine version the agent's spec asks for (unset: the platform default).
func (g engineGoal) version(a *agentsv1.Agent) string {
	v, _ := g.versions.Resolve(a.Spec.Engine.Version)
	return v
}

func (g engineGoal) FailedAs() string { return "rolled back" }

func (g engineGoal) Wanted(a *agentsv1.Agent) (bool, bool) {
	v := g.version(a)
	from := g.eu.Spec.FromVersions
	return v != g.target && (len(from) == 0 || slices.Contains(from, v)), false
}

func (g engineGoal) Start(a *agentsv1.Agent) { a.Spec.Engine.Version = g.target }

func (g engineGoal) Healthy(a *agentsv1.Agent) bool {
	return controllers.RolloutAgentReady(a) && a.Status.EngineVersion == g.target
}

func (g engineGoal) Rollback(a *agentsv1.Agent, cid string, now metav1.Time) (string, string) {
	prev := a.Annotations[agentsv1.AnnotationUpgradePreviousVersion]
	a.Spec.Engine.Version = prev
	if cid != "" {
		a.Spec.DesiredSnapshot = cid
		a.Spec.RestoreRequestedAt = &now
	}
	return agentsv1.AgentUpgradeRolledBack, fmt.Sprintf("back to %s with the workspace of snapshot %s", describeVersion(prev), cid)
}

// describeVersion names a spec.engine.version for people ("" is the platform default).
func describeVersion(v string) string {
	if v == "" {
		return "the default version"
	}
	return v
}
