package domain

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/dnsverify"
)

// Defaults of the ownership check's growing delay.
const (
	DefaultCheckInterval    = 10 * time.Second
	DefaultMaxCheckInterval = 10 * time.Minute
	// checkTimeout bounds one ownership check (all nameservers).
	checkTimeout = 15 * time.Second
)

// checkDelay is the wait after the n-th check: CheckInterval doubling up to MaxCheckInterval.
func (r *Reconciler) checkDelay(n int32) time.Duration {
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
func (r *Reconciler) verification(d *agentsv1.Domain) *agentsv1.DomainVerification {
	return &agentsv1.DomainVerification{
		RecordName: dnsverify.RecordName(r.brand(), d.Spec.CustomDomain),
		Token:      dnsverify.Token(r.TokenKey, d.Namespace, d.Spec.CustomDomain),
	}
}

// checkOwnership finds the Verified verdict of custom domain d: once True it stays True (the
// host is immutable); otherwise the TXT record is looked up when the next check is due (or a
// check was requested), never earlier. It returns the verdict (the pass computes the
// condition from it) and, if not verified, when to look again.
func (r *Reconciler) checkOwnership(ctx context.Context, d *agentsv1.Domain) (verdict, time.Duration) {
	if c := meta.FindStatusCondition(d.Status.Conditions, agentsv1.DomainVerified); c != nil && c.Status == metav1.ConditionTrue {
		d.Status.NextCheck = nil
		return verdict{c.Status, c.Reason, c.Message}, 0
	}
	now := r.Clock.Now()
	request, forced := pendingRequest(d)
	if next := d.Status.NextCheck; next != nil && now.Before(next.Time) && !forced {
		return *currentVerdict(d, agentsv1.DomainVerified, notChecked), next.Sub(now)
	}
	if forced {
		d.Status.Checks = 0 // a requested check restarts the growing delay
		d.Status.VerifyRequestAnswered = request
	}
	v := d.Status.Verification
	cctx, cancel := context.WithTimeout(ctx, checkTimeout)
	res := dnsverify.Check(cctx, r.Resolver, v.RecordName, v.Token)
	cancel()

	checked := metav1.NewTime(now).Rfc3339Copy()
	d.Status.LastChecked = &checked
	d.Status.Checks++
	if res.Outcome == dnsverify.Verified {
		d.Status.NextCheck = nil
		return verdict{metav1.ConditionTrue, agentsv1.ReasonDomainVerified, res.Message}, 0
	}
	delay := r.checkDelay(d.Status.Checks)
	// Status times have second precision: round the next check up so it is never "due" early.
	next := metav1.NewTime(now.Add(delay + time.Second - 1).Truncate(time.Second))
	d.Status.NextCheck = &next
	return verdict{metav1.ConditionFalse, string(res.Outcome), res.Message}, next.Sub(now)
}

// pendingRequest is the value of d's verify request and whether it is yet to be answered: a
// request (a time, agentplane.io/verify-requested-at) is answered once, by the look-up that
// records it in status.verifyRequestAnswered. A value that is no time asks for nothing.
func pendingRequest(d *agentsv1.Domain) (string, bool) {
	v := d.Annotations[agentsv1.AnnotationVerifyRequested]
	if _, err := time.Parse(time.RFC3339Nano, v); err != nil {
		return "", false
	}
	return v, v != d.Status.VerifyRequestAnswered
}
