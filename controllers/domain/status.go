package domain

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/controllers"
)

// verdict is what a step of a Domain's pass found: a condition's status, reason and message.
type verdict struct {
	status          metav1.ConditionStatus
	reason, message string
}

// notChecked is the Verified verdict of a custom domain whose record was not looked up yet.
var notChecked = verdict{metav1.ConditionFalse, agentsv1.ReasonNotChecked, "the TXT record has not been looked up yet"}

// currentVerdict is d's condition typ as it stands, or def when d has none.
func currentVerdict(d *agentsv1.Domain, typ string, def verdict) *verdict {
	if c := meta.FindStatusCondition(d.Status.Conditions, typ); c != nil {
		return &verdict{c.Status, c.Reason, c.Message}
	}
	return &def
}

// domainOutcome is what one pass found about ownership and routing; nil where the pass did not
// get that far (that condition and the phase stay as they were). The conditions and the phase
// are computed from it in one place (apply).
type domainOutcome struct {
	verified, routed *verdict
}

// apply sets d's Verified and Routed conditions and its phase from what the pass found.
func (o *domainOutcome) apply(d *agentsv1.Domain) {
	if o.verified != nil {
		meta.SetStatusCondition(&d.Status.Conditions, computeVerifiedCondition(d, *o.verified))
	}
	if o.routed != nil {
		c := computeRoutedCondition(d, *o.routed)
		meta.SetStatusCondition(&d.Status.Conditions, c)
		d.Status.Phase = computeDomainPhase(c)
	}
}

// computeVerifiedCondition: ownership is proven (or not required).
func computeVerifiedCondition(d *agentsv1.Domain, v verdict) metav1.Condition {
	return metav1.Condition{Type: agentsv1.DomainVerified, Status: v.status, Reason: v.reason, Message: v.message, ObservedGeneration: d.Generation}
}

// computeRoutedCondition: traffic for the host reaches the agent.
func computeRoutedCondition(d *agentsv1.Domain, v verdict) metav1.Condition {
	return metav1.Condition{Type: agentsv1.DomainRouted, Status: v.status, Reason: v.reason, Message: v.message, ObservedGeneration: d.Generation}
}

// computeDomainPhase is the hosted service's phase for a Routed condition.
func computeDomainPhase(routed metav1.Condition) agentsv1.DomainPhase {
	switch {
	case routed.Status == metav1.ConditionTrue:
		return agentsv1.DomainActive
	case routed.Reason == agentsv1.ReasonAwaitingOwnership:
		return agentsv1.DomainPendingOwnership
	case routed.Reason == agentsv1.ReasonRouting || routed.Reason == agentsv1.ReasonRouteFailed:
		return agentsv1.DomainPending
	}
	return agentsv1.DomainFailed
}

// statusStep computes the conditions and the phase from what the pass found (o), the Ready
// summary, moves status.observedGeneration when the pass converged (it ended without error),
// and records phase changes, once written, as events.
func (r *Reconciler) statusStep(ctx context.Context, d, before *agentsv1.Domain, o *domainOutcome) controllers.StatusStep {
	return controllers.StatusStep{
		Compute: func(passOK bool) bool {
			o.apply(d)
			if passOK {
				d.Status.ObservedGeneration = d.Generation
			}
			meta.SetStatusCondition(&d.Status.Conditions, computeDomainReadyCondition(d))
			return true
		},
		Written: func(changed bool) {
			if changed {
				r.announcePhase(ctx, d, before)
			}
		},
	}
}

// announcePhase records a phase change as an event.
func (r *Reconciler) announcePhase(ctx context.Context, d, before *agentsv1.Domain) {
	if before.Status.Phase != d.Status.Phase {
		typ, msg := corev1.EventTypeNormal, ""
		if c := routedCondition(d); c != nil {
			msg = c.Message
		}
		if d.Status.Phase == agentsv1.DomainFailed {
			typ = corev1.EventTypeWarning
		}
		r.event(d, typ, "Phase", "Reconcile", "domain %s is %s: %s", d.Status.Host, d.Status.Phase, msg)
		log.FromContext(ctx).Info("domain phase changed", "host", d.Status.Host, "from", before.Status.Phase, "to", d.Status.Phase)
	}
}

// computeDomainReadyCondition is the domain's summary: True once ownership is proven (or not
// required) and the host is routed to the agent; otherwise False with the reason of the first
// condition that is not True.
func computeDomainReadyCondition(d *agentsv1.Domain) metav1.Condition {
	return controllers.SummarizeReady(d.Status.Conditions, d.Generation, "the domain has not been checked yet",
		agentsv1.DomainVerified, agentsv1.DomainRouted)
}

func routedCondition(d *agentsv1.Domain) *metav1.Condition {
	for i := range d.Status.Conditions {
		if d.Status.Conditions[i].Type == agentsv1.DomainRouted {
			return &d.Status.Conditions[i]
		}
	}
	return nil
}

// routed reports whether d's Routed condition is True.
func routed(d *agentsv1.Domain) bool {
	return meta.IsStatusConditionTrue(d.Status.Conditions, agentsv1.DomainRouted)
}
