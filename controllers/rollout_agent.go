package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// advance moves the rollout on: the agents of the wave under way one step each, or, with no
// wave under way, the next wave (unless the rollout is halted, paused or done).
func (u *Rollout) advance(ctx context.Context) error {
	eu := u.EU
	if w := currentWave(eu); w != nil {
		return u.advanceWave(ctx, w)
	}
	if eu.Status.Phase == agentsv1.UpgradeHalted && eu.Generation <= eu.Status.HaltedGeneration {
		return nil
	}
	pending := u.pending()
	if len(pending) == 0 || eu.Spec.Paused {
		return nil
	}
	n := waveSize(eu.Spec.WavePercent, len(pending)+u.unknowns()+u.upgradedHere())
	w := startWave(eu, pending[:min(n, len(pending))], u.Now)
	eu.Status.FailedAgents = nil
	u.event(u.Obj, nil, corev1.EventTypeNormal, agentsv1.EventWaveStarted, "StartWave",
		"wave %d: %d agents to %s: %v", w.Index, len(w.Agents), u.Goal, w.Agents)
	for _, k := range w.Agents {
		u.event(u.agents[k], u.Obj, corev1.EventTypeNormal, agentsv1.EventWaveStarted, "StartWave",
			"wave %d of %s %s moves the agent to %s", w.Index, kindOf(u.Obj), eu.Name, u.Goal)
	}
	// The wave is recorded (the status write) before any agent is touched.
	u.wake = time.Millisecond
	return nil
}

// advanceWave steps each agent of the wave; a wave whose agents all settled is Succeeded, or
// Failed (and the rollout halted) when one was rolled back or could not be snapshotted.
func (u *Rollout) advanceWave(ctx context.Context, w *agentsv1.UpgradeWave) error {
	settled, failed := 0, []string(nil)
	for _, k := range w.Agents {
		a, ok := u.agents[k]
		if !ok { // deleted (or no longer selected): nothing to wait for
			settled++
			continue
		}
		state, err := u.step(ctx, a, w)
		if err != nil {
			return err
		}
		switch state {
		case agentsv1.AgentUpgradeUpgraded:
			settled++
		case agentsv1.AgentUpgradeRolledBack, agentsv1.AgentUpgradeFailed:
			settled++
			failed = append(failed, k)
		}
	}
	if settled < len(w.Agents) {
		return nil
	}
	if len(failed) > 0 {
		w.State = agentsv1.WaveFailed
		u.EU.Status.FailedAgents = failed
		u.EU.Status.HaltedGeneration = u.EU.Generation
		return nil
	}
	w.State = agentsv1.WaveSucceeded
	u.wake = time.Millisecond // the next wave
	return nil
}

// step moves one agent of wave w one step on and returns its state:
// (unmarked) -> Snapshotting: the previous version is recorded and a Snapshot is asked for;
// Snapshotting -> Upgrading: the Snapshot completed, its CID is recorded and
// spec.engine.version is the target; Upgrading -> Upgraded: the gateway runs the target and
// is Ready; Upgrading -> RolledBack: not within the health timeout, the previous version and
// a restore of the snapshot are set. Snapshotting -> Failed: the snapshot failed (the
// version was never changed).
func (u *Rollout) step(ctx context.Context, a *agentsv1.Agent, w *agentsv1.UpgradeWave) (string, error) {
	eu := u.EU
	m := markOf(a)
	if m.policy != eu.Name || m.wave != strconv.Itoa(int(w.Index)) {
		if m.inFlight() { // another policy's upgrade: wait for it to settle
			u.waitOn(a, "in %s's upgrade (%s)", m.policy, m.state)
			return "", nil
		}
		patch := client.MergeFromWithOptions(a.DeepCopy(), client.MergeFromWithOptimisticLock{})
		setAnnotations(a, map[string]string{
			agentsv1.AnnotationUpgradePolicy:          fmt.Sprintf("%s/%d", eu.Name, w.Index),
			agentsv1.AnnotationUpgradeState:           agentsv1.AgentUpgradeSnapshotting,
			agentsv1.AnnotationUpgradePreviousVersion: a.Spec.Engine.Version,
			agentsv1.AnnotationUpgradeSnapshot:        "",
			agentsv1.AnnotationUpgradeStartedAt:       "",
		})
		if err := u.Client.Patch(ctx, a, patch); err != nil {
			return "", err
		}
		m = markOf(a)
	}
	switch m.state {
	case agentsv1.AgentUpgradeSnapshotting:
		return u.snapshot(ctx, a, w)
	case agentsv1.AgentUpgradeUpgrading:
		return u.checkHealth(ctx, a)
	}
	return m.state, nil
}

// snapshot takes the agent's Snapshot (one name per policy, wave and agent, so a restarted
// manager finds it) and, once it completed, sets the target version.
func (u *Rollout) snapshot(ctx context.Context, a *agentsv1.Agent, w *agentsv1.UpgradeWave) (string, error) {
	sn := &agentsv1.Snapshot{}
	key := client.ObjectKey{Namespace: a.Namespace, Name: upgradeSnapshotName(a.Name, string(u.EU.UID), w.Index)}
	err := u.Client.Get(ctx, key, sn)
	if apierrors.IsNotFound(err) {
		sn = newUpgradeSnapshot(a, key.Name, u.EU.Name, u.Now)
		if err := u.Client.Create(ctx, sn); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", err
		}
		u.waitOn(a, "snapshot %s asked for (due by %s)", sn.Name, u.snapshotDeadline(sn).UTC().Format(time.RFC3339))
		u.wakeAfter(RolloutHealthTimeout(u.EU))
		return agentsv1.AgentUpgradeSnapshotting, nil
	}
	if err != nil {
		return "", err
	}
	switch sn.Status.Phase {
	case agentsv1.SnapshotFailed:
		return u.snapshotFailed(ctx, a, "snapshot %s failed (%s)", sn.Name, snapshotSummary(sn))
	case agentsv1.SnapshotCompleted:
	default:
		left := u.snapshotDeadline(sn).Sub(u.Now)
		if left <= 0 {
			return u.snapshotFailed(ctx, a, "snapshot %s did not complete within %s (%s)", sn.Name, RolloutHealthTimeout(u.EU), snapshotSummary(sn))
		}
		u.waitOn(a, "snapshot %s: %s (due by %s)", sn.Name, snapshotSummary(sn), u.snapshotDeadline(sn).UTC().Format(time.RFC3339))
		u.wakeAfter(left)
		return agentsv1.AgentUpgradeSnapshotting, nil
	}
	err = u.mark(ctx, a, agentsv1.AgentUpgradeUpgrading, func(a *agentsv1.Agent) {
		a.Annotations[agentsv1.AnnotationUpgradeSnapshot] = sn.Status.CID
		a.Annotations[agentsv1.AnnotationUpgradeStartedAt] = u.Now.UTC().Format(time.RFC3339)
		u.Goal.Start(a)
	})
	if err != nil {
		return "", err
	}
	u.eventBoth(a, corev1.EventTypeNormal, agentsv1.EventSnapshotTaken, "Snapshot",
		"%s: snapshot %s (%s) taken; moving to %s", agentKey(a), sn.Name, sn.Status.CID, u.Goal)
	u.wakeAfter(RolloutHealthTimeout(u.EU))
	return agentsv1.AgentUpgradeUpgrading, nil
}

// checkHealth settles an upgrading agent: Upgraded once its gateway runs the target and is
// Ready, rolled back once the health timeout passed without.
func (u *Rollout) checkHealth(ctx context.Context, a *agentsv1.Agent) (string, error) {
	if u.Goal.Healthy(a) {
		if err := u.mark(ctx, a, agentsv1.AgentUpgradeUpgraded, nil); err != nil {
			return "", err
		}
		u.eventBoth(a, corev1.EventTypeNormal, agentsv1.EventUpgraded, "Upgrade", "%s runs %s and is ready", agentKey(a), u.Goal)
		return agentsv1.AgentUpgradeUpgraded, nil
	}
	started, err := time.Parse(time.RFC3339, a.Annotations[agentsv1.AnnotationUpgradeStartedAt])
	if err != nil {
		started = u.Now // a mangled mark: the timeout counts from now
	}
	if left := started.Add(RolloutHealthTimeout(u.EU)).Sub(u.Now); left > 0 {
		u.waitOn(a, "not yet healthy on %s: %s (due by %s)", u.Goal, agentHealthSummary(a), started.Add(RolloutHealthTimeout(u.EU)).UTC().Format(time.RFC3339))
		u.wakeAfter(left)
		return agentsv1.AgentUpgradeUpgrading, nil
	}
	cid := a.Annotations[agentsv1.AnnotationUpgradeSnapshot]
	patch := client.MergeFromWithOptions(a.DeepCopy(), client.MergeFromWithOptimisticLock{})
	state, did := u.Goal.Rollback(a, cid, metav1.Time{Time: u.Now})
	setAnnotations(a, map[string]string{agentsv1.AnnotationUpgradeState: state})
	if err := u.Client.Patch(ctx, a, patch); err != nil {
		return "", err
	}
	reason := agentsv1.EventRolledBack
	if state != agentsv1.AgentUpgradeRolledBack { // nothing to roll back to: the agent halts the rollout
		reason = agentsv1.EventHalted
	}
	u.eventBoth(a, corev1.EventTypeWarning, reason, "Rollback",
		"%s was not healthy on %s within %s (%s): %s", agentKey(a), u.Goal, RolloutHealthTimeout(u.EU), agentHealthSummary(a), did)
	return state, nil
}

// snapshotFailed marks an agent whose snapshot failed or did not complete in time Failed (its
// version or rendering was never changed): the wave fails and the rollout halts.
func (u *Rollout) snapshotFailed(ctx context.Context, a *agentsv1.Agent, why string, args ...any) (string, error) {
	if err := u.mark(ctx, a, agentsv1.AgentUpgradeFailed, nil); err != nil {
		return "", err
	}
	u.eventBoth(a, corev1.EventTypeWarning, agentsv1.EventHalted, "Snapshot",
		"%s: "+why+": the agent stays as it is and the rollout halts", append([]any{agentKey(a)}, args...)...)
	return agentsv1.AgentUpgradeFailed, nil
}

// snapshotDeadline is when an agent's upgrade snapshot must have completed: the health
// timeout after it was asked for (by this controller's clock; its creation time when the
// request time is unreadable).
func (u *Rollout) snapshotDeadline(sn *agentsv1.Snapshot) time.Time {
	asked, err := time.Parse(time.RFC3339Nano, sn.Annotations[agentsv1.AnnotationSnapshotRequestedAt])
	if err != nil {
		asked = sn.CreationTimestamp.Time
	}
	return asked.Add(RolloutHealthTimeout(u.EU))
}

// snapshotSummary says where a Snapshot is: its phase and Ready condition.
func snapshotSummary(sn *agentsv1.Snapshot) string {
	phase := string(sn.Status.Phase)
	if phase == "" {
		phase = "not started"
	}
	if c := meta.FindStatusCondition(sn.Status.Conditions, agentsv1.ConditionReady); c != nil && c.Message != "" {
		return fmt.Sprintf("%s, %s: %s", phase, c.Reason, Truncate(c.Message))
	}
	return phase
}

// waitOn records what the wave under way waits for on agent a (the rollout's status says it).
func (u *Rollout) waitOn(a *agentsv1.Agent, what string, args ...any) {
	u.waits = append(u.waits, agentKey(a)+": "+fmt.Sprintf(what, args...))
}

// mark writes the agent's upgrade state (and what change does to it) with optimistic lock.
func (u *Rollout) mark(ctx context.Context, a *agentsv1.Agent, state string, change func(*agentsv1.Agent)) error {
	patch := client.MergeFromWithOptions(a.DeepCopy(), client.MergeFromWithOptimisticLock{})
	setAnnotations(a, map[string]string{agentsv1.AnnotationUpgradeState: state})
	if change != nil {
		change(a)
	}
	return u.Client.Patch(ctx, a, patch)
}

// eventBoth records an event on the policy and the same on the agent.
func (u *Rollout) eventBoth(a *agentsv1.Agent, typ, reason, action, note string, args ...any) {
	u.event(u.Obj, a, typ, reason, action, note, args...)
	u.event(a, u.Obj, typ, reason, action, note, args...)
}

func (u *Rollout) wakeAfter(d time.Duration) {
	if u.wake == 0 || d < u.wake {
		u.wake = d
	}
}

// RolloutAgentReady: the agent runs and is Ready, as of its current spec.
func RolloutAgentReady(a *agentsv1.Agent) bool {
	return a.Status.ObservedGeneration == a.Generation &&
		a.Status.Phase == agentsv1.AgentRunning && meta.IsStatusConditionTrue(a.Status.Conditions, agentsv1.ConditionReady)
}

// kindOf names a rollout's kind for people.
func kindOf(obj client.Object) string {
	if _, ok := obj.(*agentsv1.RenderingRollout); ok {
		return "RenderingRollout"
	}
	return "EngineUpgrade"
}

// agentHealthSummary says what the agent last reported: phase and the Ready reason.
func agentHealthSummary(a *agentsv1.Agent) string {
	if c := meta.FindStatusCondition(a.Status.Conditions, agentsv1.ConditionReady); c != nil {
		return fmt.Sprintf("phase %s, %s: %s", a.Status.Phase, c.Reason, Truncate(c.Message))
	}
	return fmt.Sprintf("phase %s", a.Status.Phase)
}

func setAnnotations(a *agentsv1.Agent, kv map[string]string) {
	if a.Annotations == nil {
		a.Annotations = map[string]string{}
	}
	for k, v := range kv {
		a.Annotations[k] = v
	}
}

// upgradeSnapshotName is the Snapshot a policy takes of an agent in a wave.
func upgradeSnapshotName(agent, policyUID string, wave int32) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s/%d", policyUID, wave)))
	suffix := "-upgrade-" + hex.EncodeToString(sum[:4])
	if len(agent)+len(suffix) > validation.DNS1123SubdomainMaxLength {
		agent = agent[:validation.DNS1123SubdomainMaxLength-len(suffix)]
	}
	return agent + suffix
}

// newUpgradeSnapshot is the Snapshot taken before an upgrade, owned by the agent (it goes
// with it) and labelled with the policy (whose controller it wakes).
func newUpgradeSnapshot(a *agentsv1.Agent, name, policy string, now time.Time) *agentsv1.Snapshot {
	sn := &agentsv1.Snapshot{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: a.Namespace,
			Labels:      map[string]string{agentsv1.LabelUpgrade: policy},
			Annotations: map[string]string{agentsv1.AnnotationSnapshotRequestedAt: now.UTC().Format(time.RFC3339Nano)},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: agentsv1.GroupVersion.String(), Kind: agentsv1.KindAgent, Name: a.Name, UID: a.UID,
			}},
		},
		Spec: agentsv1.SnapshotSpec{AgentRef: agentsv1.LocalObjectReference{Name: a.Name}},
	}
	if len(validation.IsValidLabelValue(a.Name)) == 0 {
		sn.Labels[agentsv1.LabelAgent] = a.Name
	}
	return sn
}
