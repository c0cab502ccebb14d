package domain

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

func TestDomainReadyAndPhase(t *testing.T) {
	d := &agentsv1.Domain{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
	if c := computeDomainReadyCondition(d); c.Status != metav1.ConditionFalse || c.Reason != agentsv1.ReasonNotChecked {
		t.Fatalf("nothing checked: %+v", c)
	}
	o := &domainOutcome{verified: &verdict{metav1.ConditionTrue, agentsv1.ReasonNotRequired, "no proof"}}
	o.apply(d)
	if c := computeDomainReadyCondition(d); c.Status != metav1.ConditionFalse || c.Reason != agentsv1.ReasonNotChecked {
		t.Fatalf("verified, not routed yet: %+v", c)
	}
	o.routed = &verdict{metav1.ConditionFalse, agentsv1.ReasonHostTaken, "taken"}
	o.apply(d)
	if c := computeDomainReadyCondition(d); c.Status != metav1.ConditionFalse || c.Reason != agentsv1.ReasonHostTaken || d.Status.Phase != agentsv1.DomainFailed {
		t.Fatalf("host taken: %+v, phase %s", c, d.Status.Phase)
	}
	o.routed = &verdict{metav1.ConditionFalse, agentsv1.ReasonAwaitingOwnership, "waiting"}
	o.apply(d)
	if d.Status.Phase != agentsv1.DomainPendingOwnership {
		t.Fatalf("phase %s", d.Status.Phase)
	}
	o.routed = &verdict{metav1.ConditionTrue, agentsv1.ReasonRouted, "routed"}
	o.apply(d)
	c := computeDomainReadyCondition(d)
	if c.Status != metav1.ConditionTrue || d.Status.Phase != agentsv1.DomainActive || c.ObservedGeneration != 3 {
		t.Fatalf("routed: %+v, phase %s", c, d.Status.Phase)
	}
	// A pass that did not get to routing leaves Routed and the phase as they were.
	(&domainOutcome{verified: o.verified}).apply(d)
	if d.Status.Phase != agentsv1.DomainActive || !routed(d) {
		t.Fatalf("phase %s", d.Status.Phase)
	}
}
