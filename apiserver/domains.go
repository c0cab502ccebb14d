package apiserver

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/admission"
	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/dnsverify"
	"github.com/agentplane/agentplane/internal/dnsverify/hostclaim"
	"github.com/agentplane/agentplane/internal/ops"
)

// Domain messages. The contract fixes the statuses (400 both/neither names, banned name,
// limit reached; 403 custom domain on the free plan; 404 domain not on the agent; 409 custom
// domain registered and verified, subdomain of another tenant) and no text but these.
const (
	msgDomainNotFound    = "Domain not found"
	msgDomainLimit       = "Domain limit reached"
	msgDomainExactlyOne  = "Exactly one of subdomain and customDomain is required"
	msgDomainBanned      = "Domain name is not allowed"
	msgInvalidSubdomain  = "Invalid subdomain"
	msgInvalidDomain     = "Invalid domain name"
	msgInvalidTargetPort = "Invalid targetPort"
	msgHostImmutable     = "The host name of a domain cannot be changed"
	msgCustomDomainPlan  = "Custom domains require a paid plan"
	msgDomainRegistered  = "Domain already registered"
	msgSubdomainTaken    = "Subdomain already taken"
	defaultVerifyWait    = 10 * time.Second
	defaultDomainPort    = 18789
)

// DomainOptions configure the domain routes; they must agree with the domain controller's.
type DomainOptions struct {
	// Brand is refused in names and names the TXT record (default "agentplane").
	Brand string
	// AppsDomain is the parent of subdomains (default "agents.localhost").
	AppsDomain string
	// TokenKey derives verification tokens (shown before the controller reports them).
	TokenKey []byte
	// VerifyWait bounds how long POST .../verify waits for the controller's check (10s).
	VerifyWait time.Duration
}

func (s *Server) domainOpts() DomainOptions {
	o := s.opts.Domains
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

// domainRoutes registers the domain routes. Reads need agents:read, writes domains:write;
// the agent's gateway token is accepted on its own agent (with the scopes it carries).
func (s *Server) domainRoutes() {
	read := access{scope: auth.ScopeAgentsRead, perm: auth.PermRead, gateway: true}
	// Writes need a user's token: a domain widens the agent's reach (a public address).
	write := access{scope: auth.ScopeDomainsWrite, perm: auth.PermWrite}
	s.handle("GET /v0/agents/{agentId}/domains", read, s.listDomains)
	s.handle("POST /v0/agents/{agentId}/domains", write, s.createDomain)
	s.handle("GET /v0/agents/{agentId}/domains/{domainId}", read, s.getDomainRoute)
	s.handle("PATCH /v0/agents/{agentId}/domains/{domainId}", write, s.patchDomain)
	s.handle("DELETE /v0/agents/{agentId}/domains/{domainId}", write, s.deleteDomain)
	s.handle("POST /v0/agents/{agentId}/domains/{domainId}/verify", write, s.verifyDomain)
}

// domainRequest is the body of POST and PATCH. Pointers tell "absent" from "empty".
type domainRequest struct {
	Subdomain    *string `json:"subdomain"`
	CustomDomain *string `json:"customDomain"`
	TargetPort   *int64  `json:"targetPort"`
}

func given(p *string) bool { return p != nil && strings.TrimSpace(*p) != "" }

func (s *Server) listDomains(r *http.Request, c *Caller) (*Response, error) {
	agent, err := s.getAgent(r.Context(), c, r.PathValue("agentId"))
	if err != nil {
		return nil, err
	}
	var list agentsv1.DomainList
	if err := s.opts.APIReader.List(r.Context(), &list, client.InNamespace(c.Namespace), client.MatchingFields{agentsv1.IndexAgentRef: agent.Name}); err != nil {
		return nil, err
	}
	sort.Slice(list.Items, func(i, j int) bool {
		a, b := &list.Items[i], &list.Items[j]
		return a.CreationTimestamp.Before(&b.CreationTimestamp) || a.CreationTimestamp.Equal(&b.CreationTimestamp) && a.Name < b.Name
	})
	out := make([]domainView, 0, len(list.Items))
	for i := range list.Items {
		if d := &list.Items[i]; d.DeletionTimestamp == nil {
			out = append(out, s.viewDomain(d))
		}
	}
	return ok(map[string]any{"domains": out})
}

func (s *Server) createDomain(r *http.Request, c *Caller) (*Response, error) {
	ctx := r.Context()
	var req domainRequest
	if err := decodeJSON(r, &req, msgInvalidBody); err != nil {
		return nil, err
	}
	// Shape before lookups (domainFromRequest checks the rest against the agent).
	if given(req.Subdomain) == given(req.CustomDomain) {
		return nil, errorf(http.StatusBadRequest, msgDomainExactlyOne)
	}
	if _, err := domainPort(req.TargetPort); err != nil {
		return nil, err
	}
	agent, err := s.getAgent(ctx, c, r.PathValue("agentId"))
	if err != nil {
		return nil, err
	}
	d, err := s.domainFromRequest(ctx, c, agent, &req)
	if err != nil {
		return nil, err
	}
	o := s.domainOpts()
	host := hostclaim.Host(&d.Spec, o.AppsDomain)
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
		if err := s.opts.Admission.ClaimHost(ctx, d, host); err != nil {
			if errors.Is(err, admission.ErrHostTaken) {
				return nil, withCause(http.StatusConflict, msgSubdomainTaken, err)
			}
			return nil, err
		}
		claimed = true
	}
	releaseClaim := func() {
		if claimed {
			_ = s.opts.Admission.ReleaseHost(ctx, d, host)
		}
	}
	if err := s.reserveDomainSlot(ctx, agentKey, d.Name); err != nil {
		releaseClaim()
		return nil, err
	}
	if err := s.opts.Client.Create(ctx, d); err != nil {
		// Only a refused create gives the claim and the slot back: after a lost answer the
		// Domain may exist, and another Domain must not take its host or its slot (the
		// Recounter frees both if it never appears).
		if admission.Refused(err) {
			releaseClaim()
			_ = s.opts.Admission.ReleaseDomain(ctx, agentKey, d.Name)
		}
		return nil, err
	}
	if err := s.confirmDomain(ctx, d, agentKey, host, claimed); err != nil {
		return nil, err
	}
	return created(map[string]any{"domain": s.viewDomain(d)})
}

// domainCreateBudget bounds a domain create from its claim to its answer.
const domainCreateBudget = 30 * time.Second

// confirmDomain checks, once d exists, that d still holds what was taken for it before: a
// request slower than admission.InFlightWait between its claim and its Domain may have lost the
// claim to another claimant, and one slower than the slots' stale age its slot to the recount
// (the slot is taken again then, which fails when the agent filled up meanwhile). When d lost,
// d and its slot go before the answer (a refusal takes nothing) and the answer is the other's.
// When d cannot be removed, the outcome is unknown to this request and it answers so (503):
// d stays, and may yet serve its host once the other lets go.
func (s *Server) confirmDomain(ctx context.Context, d *agentsv1.Domain, agentKey client.ObjectKey, host string, claimed bool) error {
	var refusal error
	if claimed {
		if err := s.opts.Admission.ConfirmClaim(ctx, d, host); err != nil {
			if !errors.Is(err, admission.ErrHostTaken) {
				return err
			}
			refusal = withCause(http.StatusConflict, msgSubdomainTaken, err)
		}
	}
	if refusal == nil {
		// A no-op read when d's slot is still held.
		if err := s.reserveDomainSlot(ctx, agentKey, d.Name); err != nil {
			if !errors.Is(err, admission.ErrLimitReached) {
				return err
			}
			refusal = err
		}
	}
	if refusal == nil {
		return nil
	}
	if err := client.IgnoreNotFound(s.opts.Client.Delete(ctx, d)); err != nil {
		return fmt.Errorf("remove domain %s that lost its host or slot: %w", d.Name, err)
	}
	if err := s.opts.Admission.ReleaseDomain(ctx, agentKey, d.Name); err != nil {
		s.log.Error(err, "release domain slot (the finalizer releases it)", "domain", d.Name)
	}
	return refusal
}

// reserveDomainSlot takes one of the agent's slots (admission frees slots whose Domain never
// appeared once before answering `Domain limit reached`).
func (s *Server) reserveDomainSlot(ctx context.Context, agent client.ObjectKey, name string) error {
	err := s.opts.Admission.ReserveDomain(ctx, agent, name)
	switch {
	case errors.Is(err, admission.ErrLimitReached):
		return withCause(http.StatusBadRequest, msgDomainLimit, err)
	case apierrors.IsNotFound(err):
		return withCause(http.StatusNotFound, ops.MsgAgentNotFound, err)
	}
	return err
}

// domainFromRequest validates a create body and builds the Domain (with the finalizer, so the
// controller always releases what the Domain holds, and owned by the agent).
func (s *Server) domainFromRequest(ctx context.Context, c *Caller, agent *agentsv1.Agent, req *domainRequest) (*agentsv1.Domain, error) {
	o := s.domainOpts()
	if given(req.Subdomain) == given(req.CustomDomain) {
		return nil, errorf(http.StatusBadRequest, msgDomainExactlyOne)
	}
	port, err := domainPort(req.TargetPort)
	if err != nil {
		return nil, err
	}
	d := &agentsv1.Domain{
		ObjectMeta: metav1.ObjectMeta{
			Name: newDomainID(), Namespace: c.Namespace,
			Labels:     map[string]string{agentsv1.LabelAgent: agent.Name},
			Finalizers: []string{agentsv1.DomainFinalizer},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: agentsv1.GroupVersion.String(), Kind: "Agent", Name: agent.Name, UID: agent.UID,
			}},
		},
		Spec: agentsv1.DomainSpec{AgentRef: agentsv1.LocalObjectReference{Name: agent.Name}, TargetPort: port},
	}
	if given(req.Subdomain) {
		name := strings.ToLower(strings.TrimSpace(*req.Subdomain))
		switch {
		case hostclaim.Banned(name, o.Brand):
			return nil, errorf(http.StatusBadRequest, msgDomainBanned)
		case !hostclaim.ValidLabel(name):
			return nil, errorf(http.StatusBadRequest, msgInvalidSubdomain)
		}
		d.Spec.Subdomain = name
		return d, nil
	}
	if c.Workspace == nil || c.Workspace.Spec.Plan != agentsv1.PlanPro {
		return nil, errorf(http.StatusForbidden, msgCustomDomainPlan)
	}
	name := dnsverify.CanonicalName(*req.CustomDomain)
	switch {
	case hostclaim.Banned(name, o.Brand):
		return nil, errorf(http.StatusBadRequest, msgDomainBanned)
	case !hostclaim.ValidHostname(name), hostclaim.UnderDomain(name, o.AppsDomain):
		return nil, errorf(http.StatusBadRequest, msgInvalidDomain)
	}
	d.Spec.CustomDomain = name
	if err := s.customDomainFree(ctx, c, name); err != nil {
		return nil, err
	}
	return d, nil
}

// customDomainFree answers 409 when the custom domain is verified by any workspace (it holds
// the host's claim) or already registered in the caller's workspace.
func (s *Server) customDomainFree(ctx context.Context, c *Caller, host string) error {
	held, err := s.opts.Admission.LookupClaim(ctx, host)
	if err != nil {
		return err
	}
	if held != nil {
		return errorf(http.StatusConflict, msgDomainRegistered)
	}
	var list agentsv1.DomainList
	if err := s.opts.APIReader.List(ctx, &list, client.InNamespace(c.Namespace)); err != nil {
		return err
	}
	for i := range list.Items {
		if list.Items[i].Spec.CustomDomain == host && list.Items[i].DeletionTimestamp == nil {
			return errorf(http.StatusConflict, msgDomainRegistered)
		}
	}
	return nil
}

// domainPort validates targetPort (absent: the gateway's port).
func domainPort(p *int64) (int32, error) {
	if p == nil {
		return defaultDomainPort, nil
	}
	if *p < 1 || *p > 65535 {
		return 0, errorf(http.StatusBadRequest, msgInvalidTargetPort)
	}
	return int32(*p), nil
}

// getDomain reads a domain of the caller's agent; one on another agent (or workspace) is
// simply not found.
func (s *Server) getDomain(ctx context.Context, c *Caller, agentID, id string) (*agentsv1.Domain, error) {
	agent, err := s.getAgent(ctx, c, agentID)
	if err != nil {
		return nil, err
	}
	d := &agentsv1.Domain{}
	if err := s.opts.APIReader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: id}, d); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, withCause(http.StatusNotFound, msgDomainNotFound, err)
		}
		return nil, err
	}
	if d.Spec.AgentRef.Name != agent.Name || d.DeletionTimestamp != nil {
		return nil, errorf(http.StatusNotFound, msgDomainNotFound)
	}
	return d, nil
}

func (s *Server) getDomainRoute(r *http.Request, c *Caller) (*Response, error) {
	d, err := s.getDomain(r.Context(), c, r.PathValue("agentId"), r.PathValue("domainId"))
	if err != nil {
		return nil, err
	}
	return ok(map[string]any{"domain": s.viewDomain(d)})
}

// patchDomain changes targetPort; the host name is immutable.
func (s *Server) patchDomain(r *http.Request, c *Caller) (*Response, error) {
	ctx := r.Context()
	var req domainRequest
	if err := decodeJSON(r, &req, msgInvalidBody); err != nil {
		return nil, err
	}
	d, err := s.getDomain(ctx, c, r.PathValue("agentId"), r.PathValue("domainId"))
	if err != nil {
		return nil, err
	}
	if req.Subdomain != nil && strings.ToLower(strings.TrimSpace(*req.Subdomain)) != d.Spec.Subdomain ||
		req.CustomDomain != nil && dnsverify.CanonicalName(*req.CustomDomain) != d.Spec.CustomDomain {
		return nil, errorf(http.StatusBadRequest, msgHostImmutable)
	}
	if req.TargetPort == nil {
		return ok(map[string]any{"domain": s.viewDomain(d)})
	}
	port, err := domainPort(req.TargetPort)
	if err != nil {
		return nil, err
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &agentsv1.Domain{}
		if err := s.opts.APIReader.Get(ctx, client.ObjectKeyFromObject(d), cur); err != nil {
			return err
		}
		if cur.Spec.TargetPort == port {
			d = cur
			return nil
		}
		cur.Spec.TargetPort = port
		if err := s.opts.Client.Update(ctx, cur); err != nil {
			return err
		}
		d = cur
		return nil
	})
	if apierrors.IsNotFound(err) {
		return nil, withCause(http.StatusNotFound, msgDomainNotFound, err)
	}
	if err != nil {
		return nil, err
	}
	return ok(map[string]any{"domain": s.viewDomain(d)})
}

// deleteDomain deletes the Domain; the controller's finalizer takes the route away and
// releases the claim. The agent's slot is released at once so the limit frees up
// immediately (the finalizer's release is then a no-op). The handler waits until the Domain
// is gone, so after a 200 its name is free to claim again; 202 when the wait ends first.
func (s *Server) deleteDomain(r *http.Request, c *Caller) (*Response, error) {
	ctx := r.Context()
	d, err := s.getDomain(ctx, c, r.PathValue("agentId"), r.PathValue("domainId"))
	if err != nil {
		return nil, err
	}
	if err := s.opts.Client.Delete(ctx, d); err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	if err := s.opts.Admission.ReleaseDomain(ctx, client.ObjectKey{Namespace: d.Namespace, Name: d.Spec.AgentRef.Name}, d.Name); err != nil {
		s.log.Error(err, "release domain slot (the controller retries)", "domain", d.Name)
	}
	wctx, cancel := context.WithTimeout(ctx, s.provisionWait())
	defer cancel()
	if err := s.ops.WaitForDeletion(wctx, d.DeepCopy(), func() (bool, error) { return false, nil }); err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return &Response{Status: http.StatusAccepted, Body: map[string]any{"id": d.Name, "deleted": false}}, nil
		}
		return nil, err
	}
	return ok(map[string]any{"id": d.Name, "deleted": true})
}

// newDomainID returns a random domain id (the Domain's object name).
func newDomainID() string {
	b := make([]byte, 10)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return "dom-" + agentIDEncoding.EncodeToString(b)
}
