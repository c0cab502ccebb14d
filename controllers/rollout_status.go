package controllers

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// RolloutView is what a pass observed of a rollout, after it acted.
type RolloutView struct {
	// Invalid: why the rollout cannot run at all (the version is not offered).
	Invalid string
	// InvalidReason is the Ready reason of Invalid (default InvalidVersion).
	InvalidReason string
	counts        agentsv1.UpgradeCounts
	// failedAs says what happened to the failed agents ("rolled back").
	failedAs string
	// waits: what the rollout waits for, agent by agent (the wave's agents not settled yet,
	// or the pending agents no wave can take yet), sorted.
	waits []string
}

// maxWaits is how many agents the Ready condition's message names when the rollout waits.
const maxWaits = 5

// view counts the selected agents: upgrading (the wave under way), upgraded and rolled back
// by this policy, pending (the rest that still need the target).
func (u *Rollout) view() RolloutView {
	var c agentsv1.UpgradeCounts
	inWave := map[string]bool{}
	if w := currentWave(u.EU); w != nil {
		for _, k := range w.Agents {
			if _, ok := u.agents[k]; ok {
				inWave[k] = true
			}
		}
	}
	for k, a := range u.agents {
		m := markOf(a)
		mine := m.policy == u.EU.Name
		switch {
		case inWave[k] && !(mine && (m.state == agentsv1.AgentUpgradeUpgraded || m.state == agentsv1.AgentUpgradeRolledBack)):
			c.Upgrading++
		case mine && m.state == agentsv1.AgentUpgradeUpgraded && u.Goal.Reached(a):
			c.Upgraded++
		case mine && m.state == agentsv1.AgentUpgradeRolledBack:
			c.RolledBack++
		case u.eligible(a) || u.unknown(a):
			c.Pending++
		}
	}
	failedAs := u.Goal.FailedAs()
	waits := slices.Clone(u.waits)
	if currentWave(u.EU) == nil && len(u.pending()) == 0 {
		waits = append(waits, u.unknownWaits()...)
	}
	sort.Strings(waits)
	return RolloutView{counts: c, failedAs: failedAs, waits: waits}
}

// unknownWaits say which agents the rollout counts pending but cannot take in a wave yet:
// their status does not tell the goal whether they are to move.
func (u *Rollout) unknownWaits() []string {
	var out []string
	for k, a := range u.agents {
		if u.unknown(a) {
			out = append(out, k+": its status does not say yet whether it is on "+u.Goal.String()+" ("+agentHealthSummary(a)+")")
		}
	}
	return out
}

// waitsMessage names what the rollout waits for (at most maxWaits agents), for the Ready
// condition's message; "" when it waits for nothing.
func waitsMessage(waits []string) string {
	if len(waits) == 0 {
		return ""
	}
	msg := "; waiting for " + strings.Join(waits[:min(len(waits), maxWaits)], "; ")
	if len(waits) > maxWaits {
		msg += fmt.Sprintf("; and %d more", len(waits)-maxWaits)
	}
	return msg
}

// SetRolloutStatus computes the policy's phase, counts and Ready condition: the one place
// the status is made.
func SetRolloutStatus(eu *agentsv1.EngineUpgrade, v RolloutView) {
	eu.Status.ObservedGeneration = eu.Generation
	cond := metav1.Condition{Type: agentsv1.ConditionReady, Status: metav1.ConditionFalse, ObservedGeneration: eu.Generation}
	if v.Invalid != "" {
		cond.Reason, cond.Message = agentsv1.ReasonInvalidVersion, v.Invalid
		if v.InvalidReason != "" {
			cond.Reason = v.InvalidReason
		}
		meta.SetStatusCondition(&eu.Status.Conditions, cond)
		return
	}
	eu.Status.Counts = v.counts
	c := v.counts
	switch {
	case currentWave(eu) != nil:
		eu.Status.Phase = agentsv1.UpgradeProgressing
		cond.Reason = agentsv1.ReasonUpgradeProgressing
		cond.Message = fmt.Sprintf("wave %d: %d agents upgrading to %s, %d upgraded, %d pending", eu.Status.CurrentWave, c.Upgrading, eu.Spec.Version, c.Upgraded, c.Pending)
		if eu.Spec.Paused {
			cond.Message += "; paused after this wave"
		}
		cond.Message += waitsMessage(v.waits)
	case len(eu.Status.FailedAgents) > 0 && eu.Generation <= eu.Status.HaltedGeneration:
		eu.Status.Phase = agentsv1.UpgradeHalted
		cond.Reason = agentsv1.ReasonUpgradeHalted
		cond.Message = fmt.Sprintf("halted in wave %d: %s %s (not healthy on %s in time); change the spec (for example pause and unpause) to resume",
			eu.Status.CurrentWave, strings.Join(eu.Status.FailedAgents, ", "), v.failedAs, eu.Spec.Version)
	case c.Pending == 0:
		eu.Status.Phase = agentsv1.UpgradeSucceeded
		cond.Status, cond.Reason = metav1.ConditionTrue, agentsv1.ReasonUpgradeSucceeded
		cond.Message = fmt.Sprintf("%d agents upgraded to %s in %d waves", c.Upgraded, eu.Spec.Version, eu.Status.CurrentWave)
	case eu.Spec.Paused:
		eu.Status.Phase = agentsv1.UpgradePaused
		cond.Reason = agentsv1.ReasonUpgradePaused
		cond.Message = fmt.Sprintf("paused after wave %d: %d agents pending", eu.Status.CurrentWave, c.Pending)
	default:
		eu.Status.Phase = agentsv1.UpgradeProgressing
		cond.Reason = agentsv1.ReasonUpgradeProgressing
		cond.Message = fmt.Sprintf("%d agents pending: the next wave starts", c.Pending) + waitsMessage(v.waits)
	}
	meta.SetStatusCondition(&eu.Status.Conditions, cond)
}
