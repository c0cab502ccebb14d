package controllers_test

import (
	"slices"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/rules/admission"
)

const domainWait = 20 * time.Second

// newWorkspaceNS creates a workspace's namespace (the domain controller needs no Workspace).
func newWorkspaceNS(name string) string {
	Expect(k8sClient.Create(ctx, namespace(name))).To(Succeed())
	return name
}

// newAgent creates a stopped Agent (no runtime is needed for domains).
func newAgent(ns, name string) *agentsv1.Agent {
	a := &agentsv1.Agent{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       agentsv1.AgentSpec{DisplayName: name, Stopped: true},
	}
	Expect(k8sClient.Create(ctx, a)).To(Succeed())
	return a
}

// newDomain creates a Domain routing to agent; mut sets its names.
func newDomain(ns, name, agent string, mut func(*agentsv1.Domain)) *agentsv1.Domain {
	d := &agentsv1.Domain{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       agentsv1.DomainSpec{AgentRef: agentsv1.LocalObjectReference{Name: agent}},
	}
	mut(d)
	Expect(k8sClient.Create(ctx, d)).To(Succeed())
	return d
}

func getDomain(d *agentsv1.Domain) *agentsv1.Domain {
	got := &agentsv1.Domain{}
	Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(d), got)).To(Succeed())
	return got
}

// eventuallyPhase waits for d's phase and returns d as it then is.
func eventuallyPhase(d *agentsv1.Domain, phase agentsv1.DomainPhase) *agentsv1.Domain {
	var got *agentsv1.Domain
	EventuallyWithOffset(1, func() agentsv1.DomainPhase {
		got = getDomain(d)
		return got.Status.Phase
	}, domainWait, 100*time.Millisecond).Should(Equal(phase))
	return got
}

// eventuallyReason waits for d's Verified condition to have one of reasons.
func eventuallyReason(d *agentsv1.Domain, reasons ...string) *agentsv1.Domain {
	var got *agentsv1.Domain
	EventuallyWithOffset(1, func() string {
		got = getDomain(d)
		if c := meta.FindStatusCondition(got.Status.Conditions, agentsv1.DomainVerified); c != nil && c.ObservedGeneration == got.Generation {
			return c.Reason
		}
		return ""
	}, domainWait, 100*time.Millisecond).Should(BeElementOf(reasons))
	return got
}

// expectCondition asserts a condition of d at its generation and returns it.
func expectCondition(d *agentsv1.Domain, typ string, status metav1.ConditionStatus, reason string) *metav1.Condition {
	c := meta.FindStatusCondition(d.Status.Conditions, typ)
	ExpectWithOffset(1, c).NotTo(BeNil(), typ)
	ExpectWithOffset(1, c.Status).To(Equal(status), c.Message)
	ExpectWithOffset(1, c.Reason).To(Equal(reason), c.Message)
	ExpectWithOffset(1, c.ObservedGeneration).To(Equal(d.Generation))
	return c
}

// expectNoClaim asserts that nobody holds host (now or very soon).
func expectNoClaim(host string) {
	EventuallyWithOffset(1, func() bool {
		err := k8sClient.Get(ctx, client.ObjectKey{Namespace: domSystemNS, Name: admission.ClaimName(host)}, &coordinationv1.Lease{})
		return apierrors.IsNotFound(err)
	}).Should(BeTrue())
}

// reservations are the names holding the agent's domain slots.
func reservations(ns, agent string) []string {
	a := &agentsv1.Agent{}
	ExpectWithOffset(1, k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: agent}, a)).To(Succeed())
	out := []string{}
	for _, r := range a.Status.DomainReservations {
		out = append(out, r.Name)
	}
	slices.Sort(out)
	return out
}
