package ops

import (
	"context"
	"errors"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/dnsverify"
	"github.com/agentplane/agentplane/internal/rules/hostclaim"
)

// Domain messages. The contract fixes the statuses (400 both/neither names, banned name,
// limit reached; 403 custom domain on the free plan; 404 domain not on the agent; 409 custom
// domain registered and verified, subdomain of another workspace) and no text but these.
const (
	MsgDomainNotFound    = "Domain not found"
	MsgDomainLimit       = "Domain limit reached"
	MsgDomainExactlyOne  = "Exactly one of subdomain and customDomain is required"
	MsgDomainBanned      = "Domain name is not allowed"
	MsgInvalidSubdomain  = "Invalid subdomain"
	MsgInvalidDomain     = "Invalid domain name"
	MsgInvalidTargetPort = "Invalid targetPort"
	MsgHostImmutable     = "The host name of a domain cannot be changed"
	MsgCustomDomainPlan  = "Custom domains require a paid plan"
	MsgDomainRegistered  = "Domain already registered"
	MsgSubdomainTaken    = "Subdomain already taken"
)

const (
	// DefaultDomainPort is a domain's targetPort when none is given: the gateway's port.
	DefaultDomainPort = 18789
	defaultVerifyWait = 10 * time.Second
)

// DomainOptions configure the domain operations; they must agree with the domain
// controller's.
type DomainOptions struct {
	// Brand is refused in names and names the TXT record (default "agentplane").
	Brand string
	// AppsDomain is the parent of subdomains (default "agents.localhost").
	AppsDomain string
	// TokenKey derives verification tokens (shown before the controller reports them).
	TokenKey []byte
	// VerifyWait bounds how long VerifyDomain waits for the controller's check (10s).
	VerifyWait time.Duration
}

// WithDefaults fills in the defaults of the fields left zero.
func (o DomainOptions) WithDefaults() DomainOptions {
	if o.Brand == "" {
		o.Brand = hostclaim.DefaultBrand
	}
	if o.AppsDomain == "" {
		o.AppsDomain = hostclaim.DefaultAppsDomain
	}
	if o.VerifyWait <= 0 {
		o.VerifyWait = defaultVerifyWait
	}
	return o
}

// DomainFields are the fields of a domain create or change. Pointers tell "absent" from
// "empty".
type DomainFields struct {
	Subdomain    *string
	CustomDomain *string
	TargetPort   *int64
}

func given(p *string) bool { return p != nil && strings.TrimSpace(*p) != "" }

// checkShape applies the rules of a create that need no lookup: exactly one name, a valid
// port.
func (f DomainFields) checkShape() (int32, error) {
	if given(f.Subdomain) == given(f.CustomDomain) {
		return 0, Fail(Invalid, MsgDomainExactlyOne)
	}
	return domainPort(f.TargetPort)
}

// domainPort validates targetPort (absent: the gateway's port).
func domainPort(p *int64) (int32, error) {
	if p == nil {
		return DefaultDomainPort, nil
	}
	if *p < 1 || *p > 65535 {
		return 0, Fail(Invalid, MsgInvalidTargetPort)
	}
	return int32(*p), nil
}

// Domains lists the agent's domains (live, oldest first), leaving out those being deleted.
func (o *Ops) Domains(ctx context.Context, t Scope, agentID string) ([]agentsv1.Domain, error) {
	agent, err := o.Agent(ctx, t, agentID)
	if err != nil {
		return nil, err
	}
	var list agentsv1.DomainList
	if err := o.d.APIReader.List(ctx, &list, client.InNamespace(t.Namespace), client.MatchingFields{agentsv1.IndexAgentRef: agent.Name}); err != nil {
		return nil, err
	}
	sort.Slice(list.Items, func(i, j int) bool {
		a, b := &list.Items[i], &list.Items[j]
		return a.CreationTimestamp.Before(&b.CreationTimestamp) || a.CreationTimestamp.Equal(&b.CreationTimestamp) && a.Name < b.Name
	})
	out := make([]agentsv1.Domain, 0, len(list.Items))
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp == nil {
			out = append(out, *o.expectStatus(&list.Items[i]))
		}
	}
	return out, nil
}

// Domain reads a domain of the workspace's agent; one on another agent (or workspace), or being
// deleted, is simply not found.
func (o *Ops) Domain(ctx context.Context, t Scope, agentID, id string) (*agentsv1.Domain, error) {
	agent, err := o.Agent(ctx, t, agentID)
	if err != nil {
		return nil, err
	}
	d := &agentsv1.Domain{}
	if err := o.d.APIReader.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: id}, d); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, Because(NotFound, MsgDomainNotFound, err)
		}
		return nil, err
	}
	if d.Spec.AgentRef.Name != agent.Name || d.DeletionTimestamp != nil {
		return nil, Fail(NotFound, MsgDomainNotFound)
	}
	return o.expectStatus(d), nil
}

// PatchDomain changes a domain's targetPort; its host name is immutable (naming the same one
// again is allowed).
func (o *Ops) PatchDomain(ctx context.Context, t Scope, agentID, id string, f DomainFields) (*agentsv1.Domain, error) {
	d, err := o.Domain(ctx, t, agentID, id)
	if err != nil {
		return nil, err
	}
	if f.Subdomain != nil && strings.ToLower(strings.TrimSpace(*f.Subdomain)) != d.Spec.Subdomain ||
		f.CustomDomain != nil && dnsverify.CanonicalName(*f.CustomDomain) != d.Spec.CustomDomain {
		return nil, Fail(Invalid, MsgHostImmutable)
	}
	if f.TargetPort == nil {
		return d, nil
	}
	port, err := domainPort(f.TargetPort)
	if err != nil {
		return nil, err
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &agentsv1.Domain{}
		if err := o.d.APIReader.Get(ctx, client.ObjectKeyFromObject(d), cur); err != nil {
			return err
		}
		if cur.Spec.TargetPort != port {
			cur.Spec.TargetPort = port
			if err := o.d.Client.Update(ctx, cur); err != nil {
				return err
			}
		}
		d = cur
		return nil
	})
	if apierrors.IsNotFound(err) {
		return nil, Because(NotFound, MsgDomainNotFound, err)
	}
	if err != nil {
		return nil, err
	}
	return o.expectStatus(d), nil
}

// DeleteDomain deletes the Domain; the controller's finalizer takes the route away and
// releases the claim. The agent's slot is released at once so the limit frees up immediately
// (the finalizer's release is then a no-op). It waits until the Domain is gone, so once it
// reports deleted the name is free to claim again; deleted is false when the wait ended
// first.
func (o *Ops) DeleteDomain(ctx context.Context, t Scope, agentID, id string) (d *agentsv1.Domain, deleted bool, err error) {
	d, err = o.Domain(ctx, t, agentID, id)
	if err != nil {
		return nil, false, err
	}
	if err := o.d.Client.Delete(ctx, d); err != nil && !apierrors.IsNotFound(err) {
		return nil, false, err
	}
	if err := o.d.Admission.ReleaseDomain(ctx, client.ObjectKey{Namespace: d.Namespace, Name: d.Spec.AgentRef.Name}, d.Name); err != nil {
		o.d.Log.Error(err, "release domain slot (the controller retries)", "domain", d.Name)
	}
	wctx, cancel := context.WithTimeout(ctx, o.ProvisionWait())
	defer cancel()
	if err := o.WaitForDeletion(wctx, d.DeepCopy(), func() (bool, error) { return false, nil }); err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return d, false, nil
		}
		return nil, false, err
	}
	return d, true, nil
}

// VerifyDomain asks the controller to look the TXT record up now (annotation
// agentplane.io/verify-requested-at) and waits up to VerifyWait for that check. It returns the
// domain as checked (checked true), or as it stands when the check has not happened yet.
// Subdomains and verified domains are returned at once, checked.
func (o *Ops) VerifyDomain(ctx context.Context, t Scope, agentID, id string) (d *agentsv1.Domain, checked bool, err error) {
	d, err = o.Domain(ctx, t, agentID, id)
	if err != nil {
		return nil, false, err
	}
	if d.Spec.CustomDomain == "" || meta.IsStatusConditionTrue(d.Status.Conditions, agentsv1.DomainVerified) {
		return d, true, nil
	}
	requested := o.d.Now().UTC()
	orig := d.DeepCopy()
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	// A value of its own (to the nanosecond) per request: the patch always changes the Domain,
	// and the controller records which request its look-up answered.
	d.Annotations[agentsv1.AnnotationVerifyRequested] = requested.Format(time.RFC3339Nano)
	if err := o.d.Client.Patch(ctx, d, client.MergeFrom(orig)); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, false, Because(NotFound, MsgDomainNotFound, err)
		}
		return nil, false, err
	}
	wctx, cancel := context.WithTimeout(ctx, o.d.Domains.WithDefaults().VerifyWait)
	defer cancel()
	err = o.WaitFor(wctx, d, func() (bool, error) {
		return answers(d.Status.VerifyRequestAnswered, requested) || meta.IsStatusConditionTrue(d.Status.Conditions, agentsv1.DomainVerified), nil
	})
	switch {
	case err == nil:
		return o.expectStatus(d), true, nil
	case ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
		return o.expectStatus(d), false, nil
	}
	return nil, false, err
}

// expectStatus fills in d, where the Domain controller has not written them yet, the host and
// the ownership TXT record it writes into the status (controllers/domain, from the same
// options and functions), so that an answer given before the controller's first pass shows
// them too. The operations never write status: this is the copy they answer with.
func (o *Ops) expectStatus(d *agentsv1.Domain) *agentsv1.Domain {
	opts := o.d.Domains.WithDefaults()
	if d.Status.Host == "" {
		d.Status.Host = hostclaim.Host(&d.Spec, opts.AppsDomain)
	}
	if d.Spec.CustomDomain != "" && d.Status.Verification == nil && len(opts.TokenKey) > 0 {
		d.Status.Verification = &agentsv1.DomainVerification{
			RecordName: dnsverify.RecordName(opts.Brand, d.Spec.CustomDomain),
			Token:      dnsverify.Token(opts.TokenKey, d.Namespace, d.Spec.CustomDomain),
		}
	}
	return d
}

// answers tells whether a look-up that answered the verify request of value answered (a
// time) also answers a request made at requested: it was asked for then or later.
func answers(answered string, requested time.Time) bool {
	t, err := time.Parse(time.RFC3339Nano, answered)
	return err == nil && !t.Before(requested)
}
