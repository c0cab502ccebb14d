package controllers

import (
	"context"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// Rollout is one pass over one rollout of agents in waves (an EngineUpgrade, or a
// RenderingRollout standing in for one): the agents it selects, and what the pass did. Per
// agent of a wave it takes a Snapshot, then moves the agent to the Goal, then waits for it to
// be healthy on the goal within the health timeout; an agent that is not is rolled back and
// the rollout halts. Each agent's progress lives in annotations on the Agent (api/v1alpha1
// AnnotationUpgrade*), so a restarted manager resumes where it stopped. The EngineUpgrade and
// RenderingRollout controllers both run it (the machinery two controllers share lives here).
type Rollout struct {
	Client   client.Client
	Recorder events.EventRecorder
	// EU is the rollout's spec and status (the RenderingRollout's as an EngineUpgrade).
	EU *agentsv1.EngineUpgrade
	// Obj is the rollout object (EU itself, or the RenderingRollout EU stands for): events
	// name it.
	Obj  client.Object
	Goal RolloutGoal
	Now  time.Time
	// agents the policy selects, by `<namespace>/<name>`.
	agents map[string]*agentsv1.Agent
	// wake: the pass wants to run again after this long (a health deadline, a new wave).
	wake time.Duration
	// waits say what the wave under way waits for, agent by agent (waitOn).
	waits []string
}

// RolloutGoal is where a rollout moves its agents: an engine version (EngineUpgrade) or the
// manager's rendering of the gateways (RenderingRollout). The waves, snapshots, health
// deadlines and halts are the same for both (rollout_agent.go); only what follows says how
// they differ.
type RolloutGoal interface {
	// String names the goal for people ("engine 2026.9.7").
	String() string
	// Reached: the agent is on the goal.
	Reached(a *agentsv1.Agent) bool
	// Wanted: the agent is one to move (not on the goal, within the rollout's filters), once
	// its status says so; unknown: it may be, its status does not tell yet (not taken in a
	// wave, counted pending).
	Wanted(a *agentsv1.Agent) (wanted, unknown bool)
	// Start sets what moves the agent, after its snapshot.
	Start(a *agentsv1.Agent)
	// Healthy: the agent is on the goal, Ready, as of its current spec.
	Healthy(a *agentsv1.Agent) bool
	// Rollback changes the agent after it was not healthy in time (the snapshot's CID, when
	// one was taken); it returns the agent's new state and what it did, for people.
	Rollback(a *agentsv1.Agent, cid string, now metav1.Time) (state, did string)
	// FailedAs says what happened to the agents that failed ("rolled back").
	FailedAs() string
}

// Agents are the agents the rollout selects, by `<namespace>/<name>` (after Load).
func (u *Rollout) Agents() map[string]*agentsv1.Agent { return u.agents }

// Wake is how soon the pass wants to run again (0: no timer).
func (u *Rollout) Wake() time.Duration { return u.wake }

// agentKey is how a rollout names an agent: `<workspace>/<agent>`.
func agentKey(a *agentsv1.Agent) string { return a.Namespace + "/" + a.Name }

// Load lists the agents the policy selects (spec.workspaces, spec.agentSelector).
func (u *Rollout) Load(ctx context.Context) error {
	sel := labels.Everything()
	if s := u.EU.Spec.AgentSelector; s != nil {
		var err error
		if sel, err = metav1.LabelSelectorAsSelector(s); err != nil {
			return InvalidSelectorError{err}
		}
	}
	list := &agentsv1.AgentList{}
	if err := u.Client.List(ctx, list); err != nil {
		return err
	}
	u.agents = map[string]*agentsv1.Agent{}
	for i := range list.Items {
		a := &list.Items[i]
		if len(u.EU.Spec.Workspaces) > 0 && !slices.Contains(u.EU.Spec.Workspaces, a.Namespace) {
			continue
		}
		if !sel.Matches(labels.Set(a.Labels)) {
			continue
		}
		u.agents[agentKey(a)] = a
	}
	return nil
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
func (u *Rollout) eligible(a *agentsv1.Agent) bool {
	if a.DeletionTimestamp != nil || markOf(a).inFlight() {
		return false
	}
	if wanted, _ := u.Goal.Wanted(a); !wanted {
		return false
	}
	return !a.Spec.Stopped && !a.Spec.Suspended && a.Status.Phase != agentsv1.AgentSuspended
}

// unknown: the goal cannot tell yet whether the agent is to move (counted pending).
func (u *Rollout) unknown(a *agentsv1.Agent) bool {
	_, unknown := u.Goal.Wanted(a)
	return a.DeletionTimestamp == nil && unknown
}

// unknowns counts the agents the goal cannot tell about yet: a wave's size counts them.
func (u *Rollout) unknowns() int {
	n := 0
	for _, a := range u.agents {
		if u.unknown(a) {
			n++
		}
	}
	return n
}

// pending are the eligible agents, sorted by key.
func (u *Rollout) pending() []string {
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
func (u *Rollout) upgradedHere() int {
	n := 0
	for _, a := range u.agents {
		if m := markOf(a); m.policy == u.EU.Name && m.state == agentsv1.AgentUpgradeUpgraded && u.Goal.Reached(a) {
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

// InvalidSelectorError: spec.agentSelector is no valid label selector.
type InvalidSelectorError struct{ err error }

func (e InvalidSelectorError) Error() string { return "spec.agentSelector: " + e.err.Error() }

// defaultHealthTimeout applies when spec.healthTimeout is unset (the CRD defaults it too).
const defaultHealthTimeout = 5 * time.Minute

// Pass advances the rollout and computes its status (SetRolloutStatus); stale: a write
// conflicted (a stale cache: the pass runs again on fresh data).
func (u *Rollout) Pass(ctx context.Context) (stale bool, err error) {
	if err := u.advance(ctx); err != nil {
		if apierrors.IsConflict(err) {
			return true, nil
		}
		return false, err
	}
	SetRolloutStatus(u.EU, u.view())
	return false, nil
}

// Announce records the rollout's phase changes (from before's to eu's) as events of the
// rollout object obj (eu, or the RenderingRollout eu stands for).
func Announce(rec events.EventRecorder, obj client.Object, eu, before *agentsv1.EngineUpgrade) {
	if eu.Status.Phase == before.Status.Phase || rec == nil {
		return
	}
	switch eu.Status.Phase {
	case agentsv1.UpgradeHalted:
		rec.Eventf(obj, nil, corev1.EventTypeWarning, agentsv1.EventHalted, "Halt",
			"rollout to %s halted: %v failed; change the spec (for example pause and unpause) to resume", eu.Spec.Version, eu.Status.FailedAgents)
	case agentsv1.UpgradeSucceeded:
		rec.Eventf(obj, nil, corev1.EventTypeNormal, agentsv1.EventSucceeded, "Succeed",
			"%d agents moved to %s", eu.Status.Counts.Upgraded, eu.Spec.Version)
	}
}

func (u *Rollout) event(regarding, related client.Object, typ, reason, action, note string, args ...any) {
	if u.Recorder != nil {
		u.Recorder.Eventf(regarding, related, typ, reason, action, note, args...)
	}
}

// RolloutOfSnapshot maps a Snapshot a rollout took (agentsv1.LabelUpgrade) to that rollout.
func RolloutOfSnapshot(_ context.Context, obj client.Object) []reconcile.Request {
	if p := obj.GetLabels()[agentsv1.LabelUpgrade]; p != "" {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: p}}}
	}
	return nil
}

// RolloutHealthTimeout is spec.healthTimeout or the default.
func RolloutHealthTimeout(eu *agentsv1.EngineUpgrade) time.Duration {
	if eu.Spec.HealthTimeout != nil && eu.Spec.HealthTimeout.Duration > 0 {
		return eu.Spec.HealthTimeout.Duration
	}
	return defaultHealthTimeout
}

// currentWave is the last wave when it is still upgrading.
func currentWave(eu *agentsv1.EngineUpgrade) *agentsv1.UpgradeWave {
	if n := len(eu.Status.Waves); n > 0 && eu.Status.Waves[n-1].State == agentsv1.WaveUpgrading {
		return &eu.Status.Waves[n-1]
	}
	return nil
}

// startWave appends a wave of the given agents.
func startWave(eu *agentsv1.EngineUpgrade, agents []string, now time.Time) *agentsv1.UpgradeWave {
	eu.Status.CurrentWave++
	eu.Status.Waves = append(eu.Status.Waves, agentsv1.UpgradeWave{
		Index: eu.Status.CurrentWave, Agents: slices.Clone(agents), State: agentsv1.WaveUpgrading,
		StartedAt: &metav1.Time{Time: now},
	})
	return &eu.Status.Waves[len(eu.Status.Waves)-1]
}
