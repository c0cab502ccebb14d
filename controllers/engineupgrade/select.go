package engineupgrade

import (
	"context"
	"slices"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// upgradeRun is one pass over one EngineUpgrade: the agents it selects, and what the pass did.
type upgradeRun struct {
	r  *Reconciler
	eu *agentsv1.EngineUpgrade
	// obj is the rollout object (eu itself, or the RenderingRollout eu stands for): events
	// name it.
	obj  client.Object
	goal goal
	now  time.Time
	// agents the policy selects, by `<namespace>/<name>`.
	agents map[string]*agentsv1.Agent
	// wake: the pass wants to run again after this long (a health deadline, a new wave).
	wake time.Duration
	// waits say what the wave under way waits for, agent by agent (waitOn).
	waits []string
}

// agentKey is how a rollout names an agent: `<workspace>/<agent>`.
func agentKey(a *agentsv1.Agent) string { return a.Namespace + "/" + a.Name }

// load lists the agents the policy selects (spec.workspaces, spec.agentSelector).
func (u *upgradeRun) load(ctx context.Context) error {
	sel := labels.Everything()
	if s := u.eu.Spec.AgentSelector; s != nil {
		var err error
		if sel, err = metav1.LabelSelectorAsSelector(s); err != nil {
			return invalidSelectorError{err}
		}
	}
	list := &agentsv1.AgentList{}
	if err := u.r.List(ctx, list); err != nil {
		return err
	}
	u.agents = map[string]*agentsv1.Agent{}
	for i := range list.Items {
		a := &list.Items[i]
		if len(u.eu.Spec.Workspaces) > 0 && !slices.Contains(u.eu.Spec.Workspaces, a.Namespace) {
			continue
		}
		if !sel.Matches(labels.Set(a.Labels)) {
			continue
		}
		u.agents[agentKey(a)] = a
	}
	return nil
}

// version is the engine version the agent's spec asks for (unset: the platform default).
func (u *upgradeRun) version(a *agentsv1.Agent) string {
	v, _ := u.r.Versions.Resolve(a.Spec.Engine.Version)
	return v
}

// upgradeMark is what an agent's annotations say of its upgrade.
type upgradeMark struct {
	policy string
	wave   string
	state  string
}

func markOf(a *agentsv1.Agent) upgradeMark {
	p, w, _ := strings.Cut(a.Annotations[agentsv1.AnnotationUpgradePolicy], "/")
	return upgradeMark{policy: p, wave: w, state: a.Annotations[agentsv1.AnnotationUpgradeState]}
}

// inFlight: the mark is of an upgrade still under way (snapshot or health check).
func (m upgradeMark) inFlight() bool {
	return m.policy != "" && (m.state == agentsv1.AgentUpgradeSnapshotting || m.state == agentsv1.AgentUpgradeUpgrading)
}

// eligible: the agent is one to move in a next wave: selected, wanted by the goal (not on
// it, within its filters), awake (a stopped or sleeping agent has no gateway to check; it is
// taken once it runs again), and not in the middle of an upgrade (this policy's or another's).
func (u *upgradeRun) eligible(a *agentsv1.Agent) bool {
	if a.DeletionTimestamp != nil || markOf(a).inFlight() {
		return false
	}
	if wanted, _ := u.goal.wanted(a); !wanted {
		return false
	}
	return !a.Spec.Stopped && !a.Spec.Suspended && a.Status.Phase != agentsv1.AgentSuspended
}

// unknown: the goal cannot tell yet whether the agent is to move (counted pending).
func (u *upgradeRun) unknown(a *agentsv1.Agent) bool {
	_, unknown := u.goal.wanted(a)
	return a.DeletionTimestamp == nil && unknown
}

// unknowns counts the agents the goal cannot tell about yet: a wave's size counts them.
func (u *upgradeRun) unknowns() int {
	n := 0
	for _, a := range u.agents {
		if u.unknown(a) {
			n++
		}
	}
	return n
}

// pending are the eligible agents, sorted by key.
func (u *upgradeRun) pending() []string {
	var keys []string
	for k, a := range u.agents {
		if u.eligible(a) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// upgradedHere counts the selected agents this policy upgraded (healthy on the target).
func (u *upgradeRun) upgradedHere() int {
	n := 0
	for _, a := range u.agents {
		if m := markOf(a); m.policy == u.eu.Name && m.state == agentsv1.AgentUpgradeUpgraded && u.goal.reached(a) {
			n++
		}
	}
	return n
}

// waveSize is spec.wavePercent of the rollout's agents (those upgraded by it, those still
// pending and those not known yet), rounded up, at least one.
func waveSize(percent int32, total int) int {
	if percent <= 0 {
		percent = 25
	}
	return max(1, (total*int(percent)+99)/100)
}

// invalidSelectorError: spec.agentSelector is no valid label selector.
type invalidSelectorError struct{ err error }

func (e invalidSelectorError) Error() string { return "spec.agentSelector: " + e.err.Error() }
