package controllers

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/dnsverify"
)

// Defaults of the ownership check's growing delay.
const (
	DefaultCheckInterval    = 10 * time.Second
	DefaultMaxCheckInterval = 10 * time.Minute
	// checkTimeout bounds one ownership check (all nameservers).
	checkTimeout = 15 * time.Second
)

// checkDelay is the wait after the n-th check: CheckInterval doubling up to MaxCheckInterval.
func (r *DomainReconciler) checkDelay(n int32) time.Duration {
	base, ceiling := r.CheckInterval, r.MaxCheckInterval
	if base <= 0 {
		base = DefaultCheckInterval
	}
	if ceiling <= 0 {
		ceiling = DefaultMaxCheckInterval
	}
	d := base
	for i := int32(1); i < n && d < ceiling; i++ {
		d *= 2
	}
	return min(d, ceiling)
}

// verification is the TXT record that proves d's ownership for its workspace.
func (r *DomainReconciler) verification(d *agentsv1.Domain) *agentsv1.DomainVerification {
	return &agentsv1.DomainVerification{
		RecordName: dnsverify.RecordName(r.brand(), d.Spec.CustomDomain),
		Token:      dnsverify.Token(r.TokenKey, d.Namespace, d.Spec.CustomDomain),
	}
}

// checkOwnership brings the Verified condition of custom domain d up to date: once True it
// stays True (the host is immutable); otherwise the TXT record is looked up when the next
// check is due (or a check was requested), never earlier. It reports whether ownership is
// proven and, if not, when to look again.
func (r *DomainReconciler) checkOwnership(ctx context.Context, d *agentsv1.Domain) (bool, time.Duration) {
	if c := meta.FindStatusCondition(d.Status.Conditions, agentsv1.DomainVerified); c != nil && c.Status == metav1.ConditionTrue {
		setDomainCondition(d, agentsv1.DomainVerified, metav1.ConditionTrue, c.Reason, c.Message)
		d.Status.NextCheck = nil
		return true, 0
	}
	now := r.Clock.Now()
	requested := verifyRequested(d)
	forced := !requested.IsZero() && (d.Status.LastChecked == nil || requested.After(d.Status.LastChecked.Time))
	if next := d.Status.NextCheck; next != nil && now.Before(next.Time) && !forced {
		if meta.FindStatusCondition(d.Status.Conditions, agentsv1.DomainVerified) == nil {
			setDomainCondition(d, agentsv1.DomainVerified, metav1.ConditionFalse, agentsv1.ReasonNotChecked, "the TXT record has not been looked up yet")
		}
		bumpCondition(d, agentsv1.DomainVerified)
		return false, next.Sub(now)
	}
	if forced {
		d.Status.Checks = 0 // a requested check restarts the growing delay
	}
	v := d.Status.Verification
	cctx, cancel := context.WithTimeout(ctx, checkTimeout)
	res := dnsverify.Check(cctx, r.Resolver, v.RecordName, v.Token)
	cancel()

	checked := metav1.NewTime(now).Rfc3339Copy()
	if forced && requested.After(checked.Time) {
		// The requester's clock is ahead of ours: record the check as answering the request.
		checked = metav1.NewTime(requested)
	}
	d.Status.LastChecked = &checked
	d.Status.Checks++
	if res.Outcome == dnsverify.Verified {
		d.Status.NextCheck = nil
		setDomainCondition(d, agentsv1.DomainVerified, metav1.ConditionTrue, agentsv1.ReasonDomainVerified, res.Message)
		return true, 0
	}
	delay := r.checkDelay(d.Status.Checks)
	// Status times have second precision: round the next check up so it is never "due" early.
	next := metav1.NewTime(now.Add(delay + time.Second - 1).Truncate(time.Second))
	d.Status.NextCheck = &next
	setDomainCondition(d, agentsv1.DomainVerified, metav1.ConditionFalse, string(res.Outcome), res.Message)
	return false, next.Sub(now)
}

// verifyRequested is the time of a requested check (zero when none).
func verifyRequested(d *agentsv1.Domain) time.Time {
	v := d.Annotations[agentsv1.AnnotationVerifyRequested]
	if v == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}
	}
	return t.Truncate(time.Second)
}

// setDomainCondition sets a condition of d at its current generation.
func setDomainCondition(d *agentsv1.Domain, typ string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&d.Status.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: message, ObservedGeneration: d.Generation,
	})
}

// bumpCondition moves an existing condition to d's current generation.
func bumpCondition(d *agentsv1.Domain, typ string) {
	if c := meta.FindStatusCondition(d.Status.Conditions, typ); c != nil {
		c.ObservedGeneration = d.Generation
	}
}

// setDomainFailed records why d cannot be served.
func setDomainFailed(d *agentsv1.Domain, reason, message string) {
	d.Status.Phase = agentsv1.DomainFailed
	setDomainCondition(d, agentsv1.DomainRouted, metav1.ConditionFalse, reason, message)
}

// routed reports whether d's Routed condition is True.
func routed(d *agentsv1.Domain) bool {
	return meta.IsStatusConditionTrue(d.Status.Conditions, agentsv1.DomainRouted)
}
