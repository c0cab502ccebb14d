// Package domain is the Domain controller: it checks a custom domain's ownership (its TXT
// record), claims its host and routes it to the agent.
package domain

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/controllers"
	"github.com/agentplane/agentplane/internal/adapters/dnsverify"
	"github.com/agentplane/agentplane/internal/rules/admission"
	"github.com/agentplane/agentplane/internal/rules/hostclaim"
	"github.com/agentplane/agentplane/internal/watchfilter"
)

// Finalizer lets the controller release the host claim, the route and the agent's
// domain slot before a Domain goes away.
const Finalizer = agentsv1.DomainFinalizer

// Retry intervals of failed domains (nothing watched tells when they may succeed).
const (
	domainLimitRetry = time.Minute
	hostTakenRetry   = 5 * time.Minute
)

// Reconciler proves ownership of custom domains (a TXT record), claims each host
// cluster-wide, holds the agent's domain slot and routes the host to the agent:
// pending_ownership -> pending -> active, or failed.
type Reconciler struct {
	client.Client
	// Resolver looks TXT records up.
	Resolver dnsverify.Resolver
	// TokenKey derives verification tokens (dnsverify.Token).
	TokenKey []byte
	// Brand is refused in names and names the record `_<brand>-verify` (default "agentplane").
	Brand string
	// AppsDomain is the parent of subdomains (default "agents.localhost").
	AppsDomain string
	// Router sends hosts to agents.
	Router Router
	// Admission holds the agent's domain slots and the host claims, by the rules the REST
	// facade applies too.
	Admission *admission.Admitter
	// CheckInterval and MaxCheckInterval shape the delay between TXT look-ups (10s doubling
	// up to 10m by default).
	CheckInterval, MaxCheckInterval time.Duration
	// Recorder receives phase changes (nil: none).
	Recorder events.EventRecorder
	// Clock tells the time (default: the real clock).
	Clock clock.PassiveClock
}

// +kubebuilder:rbac:groups=agentplane.io,resources=domains,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=agentplane.io,resources=domains/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=agentplane.io,resources=domains/finalizers,verbs=update
// +kubebuilder:rbac:groups=agentplane.io,resources=agents,verbs=get;list;watch
// +kubebuilder:rbac:groups=agentplane.io,resources=agents/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile converges one Domain: a delete path and a normal path, the status computed in one
// place and written only when it changed.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, reterr error) {
	d := &agentsv1.Domain{}
	if err := r.Get(ctx, req.NamespacedName, d); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if d.DeletionTimestamp != nil {
		return ctrl.Result{}, r.reconcileDelete(ctx, d)
	}
	agent := &agentsv1.Agent{}
	agentErr := r.Get(ctx, client.ObjectKey{Namespace: d.Namespace, Name: d.Spec.AgentRef.Name}, agent)
	if agentErr != nil && !apierrors.IsNotFound(agentErr) {
		return ctrl.Result{}, agentErr
	}
	if agentErr != nil {
		agent = nil
	}
	if err := r.ensureMetadata(ctx, d, agent); err != nil {
		return ctrl.Result{}, err
	}

	before := d.DeepCopy()
	o := &domainOutcome{}
	defer func() {
		controllers.PatchStatus(ctx, r.Client, d, before, r.statusStep(ctx, d, before, o), &res, &reterr)
	}()
	return r.reconcileNormal(ctx, d, agent, o)
}

// ensureMetadata adds the finalizer and makes the agent an owner of d (deleting an agent
// deletes its domains).
func (r *Reconciler) ensureMetadata(ctx context.Context, d *agentsv1.Domain, agent *agentsv1.Agent) error {
	changed := controllerutil.AddFinalizer(d, Finalizer)
	if agent != nil && !slices.ContainsFunc(d.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == agent.UID }) {
		if err := controllerutil.SetOwnerReference(agent, d, r.Scheme()); err != nil {
			return err
		}
		changed = true
	}
	if !changed {
		return nil
	}
	return r.Update(ctx, d)
}

// reconcileNormal walks the domain through slot, name rules, ownership, claim and route,
// recording in o what it found (the conditions and the phase are computed from o).
func (r *Reconciler) reconcileNormal(ctx context.Context, d *agentsv1.Domain, agent *agentsv1.Agent, o *domainOutcome) (ctrl.Result, error) {
	d.Status.Host = hostclaim.Host(&d.Spec, r.appsDomain())
	custom := d.Spec.CustomDomain != ""
	if custom {
		d.Status.Verification = r.verification(d)
		o.verified = currentVerdict(d, agentsv1.DomainVerified, notChecked)
	} else {
		d.Status.Verification, d.Status.NextCheck = nil, nil
		o.verified = &verdict{metav1.ConditionTrue, agentsv1.ReasonNotRequired, "subdomains of the platform need no ownership proof"}
	}

	if agent == nil {
		return ctrl.Result{}, r.fail(ctx, d, o, agentsv1.ReasonAgentNotFound, fmt.Sprintf("agent %s does not exist", d.Spec.AgentRef.Name))
	}
	if ok, err := r.ensureSlot(ctx, d, agent, o); err != nil {
		return ctrl.Result{}, err
	} else if !ok {
		return ctrl.Result{RequeueAfter: domainLimitRetry}, nil
	}
	if hostclaim.Banned(hostclaim.ChosenName(&d.Spec), r.brand()) {
		return ctrl.Result{}, r.fail(ctx, d, o, agentsv1.ReasonBannedName, fmt.Sprintf("names containing %q are reserved", r.brand()))
	}
	if custom {
		v, wait := r.checkOwnership(ctx, d)
		o.verified = &v
		if v.status != metav1.ConditionTrue {
			o.routed = &verdict{metav1.ConditionFalse, agentsv1.ReasonAwaitingOwnership,
				"the host is routed once the TXT record " + d.Status.Verification.RecordName + " holds the token"}
			return ctrl.Result{RequeueAfter: wait}, nil
		}
	}

	if err := r.ensureClaim(ctx, d); err != nil {
		if !errors.Is(err, admission.ErrHostTaken) {
			return ctrl.Result{}, err
		}
		if err := r.fail(ctx, d, o, agentsv1.ReasonHostTaken, fmt.Sprintf("%s is already served by another domain", d.Status.Host)); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{RequeueAfter: hostTakenRetry}, nil
	}
	if err := r.Router.Route(ctx, d, agent); err != nil {
		o.routed = &verdict{metav1.ConditionFalse, agentsv1.ReasonRouteFailed, err.Error()}
		return ctrl.Result{}, fmt.Errorf("route %s: %w", d.Status.Host, err)
	}
	msg := "routed " + d.Status.Host
	if rd, ok := r.Router.(routeDescriber); ok {
		msg = rd.Describe(d)
	}
	o.routed = &verdict{metav1.ConditionTrue, agentsv1.ReasonRouted, msg}
	return ctrl.Result{}, nil
}

// ensureSlot takes one of the agent's domain slots (a no-op when d holds one). It reports
// false, with d marked failed, when no slot is free.
func (r *Reconciler) ensureSlot(ctx context.Context, d *agentsv1.Domain, agent *agentsv1.Agent, o *domainOutcome) (bool, error) {
	if slices.ContainsFunc(agent.Status.DomainReservations, func(res agentsv1.Reservation) bool { return res.Name == d.Name }) {
		return true, nil
	}
	key := client.ObjectKeyFromObject(agent)
	// Slots of callers that reserved and never created their Domain are freed, then retried.
	err := r.Admission.ReserveDomain(ctx, key, d.Name)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, admission.ErrLimitReached):
		msg := fmt.Sprintf("agent %s already has %d domains", agent.Name, agentsv1.MaxDomainsPerAgent)
		return false, r.fail(ctx, d, o, agentsv1.ReasonDomainLimitReached, msg)
	case apierrors.IsNotFound(err):
		return false, r.fail(ctx, d, o, agentsv1.ReasonAgentNotFound, fmt.Sprintf("agent %s does not exist", agent.Name))
	default:
		return false, err
	}
}

// ensureClaim makes d the holder of its host (read live; created only when not yet held).
func (r *Reconciler) ensureClaim(ctx context.Context, d *agentsv1.Domain) error {
	return r.Admission.EnsureClaim(ctx, d, d.Status.Host)
}

// fail records why d cannot be served (a failed phase) and takes a route it had away.
func (r *Reconciler) fail(ctx context.Context, d *agentsv1.Domain, o *domainOutcome, reason, message string) error {
	o.routed = &verdict{metav1.ConditionFalse, reason, message}
	if routed(d) {
		return r.Router.Unroute(ctx, d)
	}
	return nil
}

// reconcileDelete takes the route away, releases the claim and the slot, and lets d go.
func (r *Reconciler) reconcileDelete(ctx context.Context, d *agentsv1.Domain) error {
	if !controllerutil.ContainsFinalizer(d, Finalizer) {
		return nil
	}
	if err := r.Router.Unroute(ctx, d); err != nil {
		return fmt.Errorf("unroute: %w", err)
	}
	host := hostclaim.Host(&d.Spec, r.appsDomain())
	if err := r.Admission.ReleaseHost(ctx, d, host); err != nil {
		return fmt.Errorf("release claim: %w", err)
	}
	if err := r.Admission.ReleaseDomain(ctx, client.ObjectKey{Namespace: d.Namespace, Name: d.Spec.AgentRef.Name}, d.Name); err != nil {
		return fmt.Errorf("release slot: %w", err)
	}
	r.event(d, corev1.EventTypeNormal, "Deleted", "Delete", "%s released", host)
	controllerutil.RemoveFinalizer(d, Finalizer)
	return client.IgnoreNotFound(r.Update(ctx, d))
}

func (r *Reconciler) event(d *agentsv1.Domain, typ, reason, action, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(d, nil, typ, reason, action, note, args...)
	}
}

func (r *Reconciler) brand() string {
	if r.Brand != "" {
		return r.Brand
	}
	return hostclaim.DefaultBrand
}

func (r *Reconciler) appsDomain() string {
	if r.AppsDomain != "" {
		return r.AppsDomain
	}
	return hostclaim.DefaultAppsDomain
}

// SetupWithManager registers the controller: Domains, their agents (created, deleted, spec
// changed or a domain slot freed) and what the Router makes for them (Ingresses, HTTPRoutes).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, extra ...func(*ctrl.Builder) *ctrl.Builder) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&agentsv1.Domain{}).
		Watches(&agentsv1.Agent{}, handler.EnqueueRequestsFromMapFunc(controllers.DomainsOfAgent(r.Client)),
			builder.WithPredicates(agentChangedForDomains)).
		Named("domain")
	if o, ok := r.Router.(interface{ Owned() []client.Object }); ok {
		for _, kind := range o.Owned() {
			b = b.Owns(kind)
		}
	}
	for _, f := range extra {
		b = f(b)
	}
	return b.Complete(r)
}

// agentChangedForDomains lets through agents created or deleted, spec changes, and freed
// domain slots (a domain waiting for one then proceeds at once).
var agentChangedForDomains = watchfilter.Updates(func(o, n *agentsv1.Agent) bool {
	return o.Generation != n.Generation || len(n.Status.DomainReservations) < len(o.Status.DomainReservations)
})
