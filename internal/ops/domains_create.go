package ops

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/dnsverify"
	"github.com/agentplane/agentplane/internal/rules/admission"
	"github.com/agentplane/agentplane/internal/rules/hostclaim"
)

// domainCreateBudget bounds a domain create from its claim to its answer.
const domainCreateBudget = 30 * time.Second

// CreateDomain validates f, builds the agent's Domain, claims its host (subdomains) and one of
// the agent's slots, and creates it. plan is the workspace's: custom domains need PlanPro.
func (o *Ops) CreateDomain(ctx context.Context, t Scope, plan agentsv1.Plan, agentID string, f DomainFields) (*agentsv1.Domain, error) {
	// Shape before lookups (domainFromRequest checks the rest against the agent).
	if _, err := f.checkShape(); err != nil {
		return nil, err
	}
	agent, err := o.Agent(ctx, t, agentID)
	if err != nil {
		return nil, err
	}
	d, err := o.domainFromRequest(ctx, t, plan, agent, f)
	if err != nil {
		return nil, err
	}
	host := hostclaim.Host(&d.Spec, o.d.Domains.WithDefaults().AppsDomain)
	agentKey := client.ObjectKeyFromObject(agent)
	// Once the host is claimed the request runs to its end whether or not the caller waits:
	// a create cut halfway leaves a claim and a slot whose Domain may or may not exist.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), domainCreateBudget)
	defer cancel()
	// A subdomain's host is claimed before one of the agent's slots is taken: of concurrent
	// claimants of one host only the winner takes a slot, so the losers (409) cannot fill the
	// agent's limit for a moment and make other requests answer `Domain limit reached`.
	claimed := false
	if d.Spec.Subdomain != "" {
		if err := o.d.Admission.ClaimHost(ctx, d, host); err != nil {
			if errors.Is(err, admission.ErrHostTaken) {
				return nil, Because(Conflict, MsgSubdomainTaken, err)
			}
			return nil, err // admission.ErrClaimUndecided classifies as Unavailable
		}
		claimed = true
	}
	stopRenewing := o.keepClaim(ctx, d.DeepCopy(), host, claimed) // Create writes into d meanwhile
	releaseClaim := func() {
		if claimed {
			_ = o.d.Admission.ReleaseHost(ctx, d, host)
		}
	}
	if err := o.reserveDomainSlot(ctx, agentKey, d.Name); err != nil {
		stopRenewing()
		releaseClaim()
		return nil, err
	}
	err = o.d.Client.Create(ctx, d)
	stopRenewing() // d exists (or never will): its claim is held, or confirmed below
	if err != nil {
		// Only a refused create gives the claim and the slot back: after a lost answer the
		// Domain may exist, and another Domain must not take its host or its slot (the
		// Recounter frees both if it never appears).
		if admission.Refused(err) {
			releaseClaim()
			_ = o.d.Admission.ReleaseDomain(ctx, agentKey, d.Name)
		}
		return nil, err
	}
	if err := o.confirmDomain(ctx, d, agentKey, host, claimed); err != nil {
		return nil, err
	}
	return o.expectStatus(d), nil
}

// keepClaim renews d's claim on host (when claimed) every third of admission.InFlightWait
// until the returned stop is called: while the request works its way from the claim to its
// Domain, however slowly, nobody takes the host over as a dead request's.
func (o *Ops) keepClaim(ctx context.Context, d *agentsv1.Domain, host string, claimed bool) (stop func()) {
	if !claimed {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(admission.InFlightWait / 3)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if err := o.d.Admission.RenewClaim(ctx, d, host); errors.Is(err, admission.ErrHostTaken) {
				return // taken over: the confirm finds out and backs off
			}
		}
	}()
	return func() { cancel(); <-done }
}

// confirmDomain checks, once d exists, that d still holds what was taken for it before: a
// request slower than admission.InFlightWait between its claim and its Domain may have lost the
// claim to another claimant, and one slower than the slots' stale age its slot to the recount
// (the slot is taken again then, which fails when the agent filled up meanwhile). When d lost,
// d and its slot go before the answer (a refusal takes nothing) and the answer is the other's.
// When d cannot be removed, the outcome is unknown to this request and it answers so (503):
// d stays, and may yet serve its host once the other lets go.
func (o *Ops) confirmDomain(ctx context.Context, d *agentsv1.Domain, agentKey client.ObjectKey, host string, claimed bool) error {
	var refusal error
	if claimed {
		if err := o.d.Admission.ConfirmClaim(ctx, d, host); err != nil {
			if !errors.Is(err, admission.ErrHostTaken) {
				return err
			}
			refusal = Because(Conflict, MsgSubdomainTaken, err)
		}
	}
	if refusal == nil {
		// A no-op read when d's slot is still held.
		if err := o.reserveDomainSlot(ctx, agentKey, d.Name); err != nil {
			if !errors.Is(err, admission.ErrLimitReached) {
				return err
			}
			refusal = err
		}
	}
	if refusal == nil {
		return nil
	}
	if err := client.IgnoreNotFound(o.d.Client.Delete(ctx, d)); err != nil {
		return fmt.Errorf("remove domain %s that lost its host or slot: %w", d.Name, err)
	}
	if err := o.d.Admission.ReleaseDomain(ctx, agentKey, d.Name); err != nil {
		o.d.Log.Error(err, "release domain slot (the finalizer releases it)", "domain", d.Name)
	}
	return refusal
}

// reserveDomainSlot takes one of the agent's slots (admission frees slots whose Domain never
// appeared once before answering `Domain limit reached`).
func (o *Ops) reserveDomainSlot(ctx context.Context, agent client.ObjectKey, name string) error {
	err := o.d.Admission.ReserveDomain(ctx, agent, name)
	switch {
	case errors.Is(err, admission.ErrLimitReached):
		return Because(Invalid, MsgDomainLimit, err)
	case apierrors.IsNotFound(err):
		return Because(NotFound, MsgAgentNotFound, err)
	}
	return err
}

// domainFromRequest validates a create and builds the Domain (with the finalizer, so the
// controller always releases what the Domain holds, and owned by the agent).
func (o *Ops) domainFromRequest(ctx context.Context, t Scope, plan agentsv1.Plan, agent *agentsv1.Agent, f DomainFields) (*agentsv1.Domain, error) {
	opts := o.d.Domains.WithDefaults()
	port, err := f.checkShape()
	if err != nil {
		return nil, err
	}
	d := &agentsv1.Domain{
		ObjectMeta: metav1.ObjectMeta{
			Name: newDomainID(), Namespace: t.Namespace,
			Labels:     map[string]string{agentsv1.LabelAgent: agent.Name},
			Finalizers: []string{agentsv1.DomainFinalizer},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: agentsv1.GroupVersion.String(), Kind: agentsv1.KindAgent, Name: agent.Name, UID: agent.UID,
			}},
		},
		Spec: agentsv1.DomainSpec{AgentRef: agentsv1.LocalObjectReference{Name: agent.Name}, TargetPort: port},
	}
	if given(f.Subdomain) {
		name := strings.ToLower(strings.TrimSpace(*f.Subdomain))
		switch {
		case hostclaim.Banned(name, opts.Brand):
			return nil, Fail(Invalid, MsgDomainBanned)
		case !hostclaim.ValidLabel(name):
			return nil, Fail(Invalid, MsgInvalidSubdomain)
		}
		d.Spec.Subdomain = name
		return d, nil
	}
	if plan != agentsv1.PlanPro {
		return nil, Fail(Forbidden, MsgCustomDomainPlan)
	}
	name := dnsverify.CanonicalName(*f.CustomDomain)
	switch {
	case hostclaim.Banned(name, opts.Brand):
		return nil, Fail(Invalid, MsgDomainBanned)
	case !hostclaim.ValidHostname(name), hostclaim.UnderDomain(name, opts.AppsDomain):
		return nil, Fail(Invalid, MsgInvalidDomain)
	}
	d.Spec.CustomDomain = name
	if err := o.customDomainFree(ctx, t, name); err != nil {
		return nil, err
	}
	return d, nil
}

// customDomainFree refuses (Conflict) a custom domain verified by any workspace (it holds the
// host's claim) or already registered in the workspace's workspace.
func (o *Ops) customDomainFree(ctx context.Context, t Scope, host string) error {
	held, err := o.d.Admission.LookupClaim(ctx, host)
	if err != nil {
		return err
	}
	if held != nil {
		return Fail(Conflict, MsgDomainRegistered)
	}
	var list agentsv1.DomainList
	if err := o.d.APIReader.List(ctx, &list, client.InNamespace(t.Namespace)); err != nil {
		return err
	}
	for i := range list.Items {
		if list.Items[i].Spec.CustomDomain == host && list.Items[i].DeletionTimestamp == nil {
			return Fail(Conflict, MsgDomainRegistered)
		}
	}
	return nil
}

// newDomainID returns a random domain id (the Domain's object name).
func newDomainID() string { return newID("dom-", 10) }
