// Package agentsecret is the AgentSecret controller: it reports whether each secret's value
// is usable, whether another secret of the workspace has its name, and which agents attach it.
package agentsecret

import (
	"context"
	"sort"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/controllers"
	"github.com/agentplane/agentplane/internal/rules/secrets"
)

// Reconciler keeps each AgentSecret's status true to the world: whether its value
// is usable, whether another secret of the workspace has its name, and which agents attach it
// (derived from the Agents whose spec.secrets name it: the controller is the only writer of
// this status).
type Reconciler struct {
	client.Client
	// APIReader reads the core Secrets a secret may reference (the cache does not hold them).
	APIReader client.Reader
	Sealer    *secrets.Sealer
}

// +kubebuilder:rbac:groups=agentplane.io,resources=agentsecrets,verbs=get;list;watch
// +kubebuilder:rbac:groups=agentplane.io,resources=agentsecrets/status,verbs=get;update;patch

// Reconcile converges one AgentSecret's status in the form of every reconciler here
// (controllers/doc.go). An AgentSecret holds no finalizer.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, reterr error) {
	sec := &agentsv1.AgentSecret{}
	if err := r.Get(ctx, req.NamespacedName, sec); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := sec.DeepCopy()
	defer func() { controllers.PatchStatus(ctx, r.Client, sec, before, statusStep(sec), &res, &reterr) }()
	return ctrl.Result{}, r.reconcileNormal(ctx, sec)
}

// reconcileNormal computes which agents use the secret, its Ready and Duplicate conditions.
func (r *Reconciler) reconcileNormal(ctx context.Context, sec *agentsv1.AgentSecret) error {
	attached, err := r.attachedAgents(ctx, sec)
	if err != nil {
		return err
	}
	sec.Status.AttachedTo = attached
	meta.SetStatusCondition(&sec.Status.Conditions, r.computeReadyCondition(ctx, sec))
	dup, err := r.computeDuplicateCondition(ctx, sec)
	if err != nil {
		return err
	}
	meta.SetStatusCondition(&sec.Status.Conditions, dup)
	return nil
}

// statusStep: a pass that converged acknowledges the generation and writes the status when
// it changed; a pass that failed writes nothing (its conditions are half computed).
func statusStep(sec *agentsv1.AgentSecret) controllers.StatusStep {
	return controllers.StatusStep{Compute: func(passOK bool) bool {
		if passOK {
			sec.Status.ObservedGeneration = sec.Generation
		}
		return passOK
	}}
}

// attachedAgents are the agents (not being deleted) whose spec.secrets name the secret
// (IndexAgentSecret), sorted; nil when there are none.
func (r *Reconciler) attachedAgents(ctx context.Context, sec *agentsv1.AgentSecret) ([]string, error) {
	var agents agentsv1.AgentList
	if err := r.List(ctx, &agents, client.InNamespace(sec.Namespace), client.MatchingFields{agentsv1.IndexAgentSecret: sec.Name}); err != nil {
		return nil, err
	}
	var out []string
	for i := range agents.Items {
		if a := &agents.Items[i]; a.DeletionTimestamp == nil {
			out = append(out, a.Name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// computeReadyCondition: the value opens under the platform key, or the referenced core
// Secret holds the key; and its environment name is not reserved.
func (r *Reconciler) computeReadyCondition(ctx context.Context, sec *agentsv1.AgentSecret) metav1.Condition {
	c := metav1.Condition{Type: agentsv1.ConditionReady, ObservedGeneration: sec.Generation, Status: metav1.ConditionTrue, Reason: agentsv1.ReasonValueAvailable, Message: "the value is available to agents"}
	if err := secrets.ReservedEnvError(sec); err != nil {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, agentsv1.ReasonReservedEnvName, err.Error()+"; agents are not given it"
		return c
	}
	if _, err := secrets.Value(ctx, r.APIReader, r.Sealer, sec); err != nil {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, agentsv1.ReasonValueUnavailable, err.Error()
	}
	return c
}

// computeDuplicateCondition: another AgentSecret of the workspace (an older one) has the same
// name. The REST facade cannot create duplicates; objects applied with kubectl can.
func (r *Reconciler) computeDuplicateCondition(ctx context.Context, sec *agentsv1.AgentSecret) (metav1.Condition, error) {
	c := metav1.Condition{Type: agentsv1.SecretDuplicate, ObservedGeneration: sec.Generation, Status: metav1.ConditionFalse, Reason: agentsv1.ReasonUnique, Message: "no other secret has this name"}
	var list agentsv1.AgentSecretList
	if err := r.List(ctx, &list, client.InNamespace(sec.Namespace)); err != nil {
		return c, err
	}
	for i := range list.Items {
		o := &list.Items[i]
		if o.Name != sec.Name && o.Spec.Name == sec.Spec.Name &&
			(o.CreationTimestamp.Before(&sec.CreationTimestamp) || o.CreationTimestamp.Equal(&sec.CreationTimestamp) && o.Name < sec.Name) {
			c.Status, c.Reason, c.Message = metav1.ConditionTrue, agentsv1.ReasonNameTaken, "secret "+o.Name+" already has the name "+sec.Spec.Name
		}
	}
	return c, nil
}

// SetupWithManager registers the controller: AgentSecrets, and Agents (which change who
// attaches what: an agent's event enqueues the secrets its old and its new spec name, so a
// detach reaches the secret it left).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&agentsv1.AgentSecret{}).
		Watches(&agentsv1.Agent{}, handler.Funcs{
			CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				enqueueSecretsOf(q, e.Object)
			},
			UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				enqueueSecretsOf(q, e.ObjectOld, e.ObjectNew)
			},
			DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				enqueueSecretsOf(q, e.Object)
			},
		}).
		Named("agentsecret").
		Complete(r)
}

// enqueueSecretsOf enqueues the secrets the agents' spec.secrets name.
func enqueueSecretsOf(q workqueue.TypedRateLimitingInterface[reconcile.Request], agents ...client.Object) {
	for _, o := range agents {
		a, ok := o.(*agentsv1.Agent)
		if !ok {
			continue
		}
		for _, ref := range a.Spec.Secrets {
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: a.Namespace, Name: ref.Name}})
		}
	}
}
