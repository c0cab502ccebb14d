package controllers

import (
	"context"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/secrets"
)

// AgentSecretReconciler keeps each AgentSecret's status true to the world: whether its value
// is usable, whether another secret of the workspace has its name, and which agents attach it.
type AgentSecretReconciler struct {
	client.Client
	// APIReader confirms attachments against the API server (never a stale cache).
	APIReader client.Reader
	Sealer    *secrets.Sealer
}

// +kubebuilder:rbac:groups=agentplane.io,resources=agentsecrets,verbs=get;list;watch
// +kubebuilder:rbac:groups=agentplane.io,resources=agentsecrets/status,verbs=get;update;patch

// Reconcile converges one AgentSecret's status.
func (r *AgentSecretReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	sec := &agentsv1.AgentSecret{}
	if err := r.Get(ctx, req.NamespacedName, sec); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := sec.Status.DeepCopy()
	attached, err := r.attachedAgents(ctx, sec)
	if err != nil {
		return ctrl.Result{}, err
	}
	sec.Status.AttachedTo = attached
	sec.Status.ObservedGeneration = sec.Generation
	meta.SetStatusCondition(&sec.Status.Conditions, r.computeReadyCondition(ctx, sec))
	dup, err := r.computeDuplicateCondition(ctx, sec)
	if err != nil {
		return ctrl.Result{}, err
	}
	meta.SetStatusCondition(&sec.Status.Conditions, dup)
	if equality.Semantic.DeepEqual(before, &sec.Status) {
		return ctrl.Result{}, nil
	}
	// Update (not patch): the resourceVersion guards against a concurrent attach, and every
	// write moves it, which is what a conditional delete of the secret relies on.
	return ctrl.Result{}, client.IgnoreNotFound(r.Status().Update(ctx, sec))
}

// attachedAgents are the agents whose spec references the secret, each confirmed with a live
// read (an attach writes the agent first, then the secret's status).
func (r *AgentSecretReconciler) attachedAgents(ctx context.Context, sec *agentsv1.AgentSecret) ([]string, error) {
	candidates := map[string]bool{}
	for _, a := range sec.Status.AttachedTo {
		candidates[a] = true
	}
	var agents agentsv1.AgentList
	if err := r.List(ctx, &agents, client.InNamespace(sec.Namespace)); err != nil {
		return nil, err
	}
	for i := range agents.Items {
		if referencesSecret(&agents.Items[i], sec.Name) {
			candidates[agents.Items[i].Name] = true
		}
	}
	out := []string{}
	for name := range candidates {
		a := &agentsv1.Agent{}
		err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: sec.Namespace, Name: name}, a)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if referencesSecret(a, sec.Name) && a.DeletionTimestamp == nil {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

func referencesSecret(a *agentsv1.Agent, secret string) bool {
	return slices.ContainsFunc(a.Spec.Secrets, func(ref agentsv1.LocalObjectReference) bool { return ref.Name == secret })
}

// computeReadyCondition: the value opens under the platform key, or the referenced core
// Secret holds the key.
func (r *AgentSecretReconciler) computeReadyCondition(ctx context.Context, sec *agentsv1.AgentSecret) metav1.Condition {
	c := metav1.Condition{Type: agentsv1.ConditionReady, ObservedGeneration: sec.Generation, Status: metav1.ConditionTrue, Reason: agentsv1.ReasonValueAvailable, Message: "the value is available to agents"}
	if _, err := SecretValue(ctx, r.APIReader, r.Sealer, sec); err != nil {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, "ValueUnavailable", err.Error()
	}
	return c
}

// computeDuplicateCondition: another AgentSecret of the workspace (an older one) has the same
// name. The REST facade cannot create duplicates; objects applied with kubectl can.
func (r *AgentSecretReconciler) computeDuplicateCondition(ctx context.Context, sec *agentsv1.AgentSecret) (metav1.Condition, error) {
	c := metav1.Condition{Type: agentsv1.SecretDuplicate, ObservedGeneration: sec.Generation, Status: metav1.ConditionFalse, Reason: agentsv1.ReasonUnique, Message: "no other secret has this name"}
	var list agentsv1.AgentSecretList
	if err := r.List(ctx, &list, client.InNamespace(sec.Namespace)); err != nil {
		return c, err
	}
	for i := range list.Items {
		o := &list.Items[i]
		if o.Name != sec.Name && o.Spec.Name == sec.Spec.Name &&
			(o.CreationTimestamp.Before(&sec.CreationTimestamp) || o.CreationTimestamp.Equal(&sec.CreationTimestamp) && o.Name < sec.Name) {
			c.Status, c.Reason, c.Message = metav1.ConditionTrue, "NameTaken", "secret "+o.Name+" already has the name "+sec.Spec.Name
		}
	}
	return c, nil
}

// SecretValue returns a secret's plaintext: opened with the platform key, or read from the
// referenced core Secret.
func SecretValue(ctx context.Context, reader client.Reader, sealer *secrets.Sealer, sec *agentsv1.AgentSecret) ([]byte, error) {
	if ref := sec.Spec.SecretRef; ref != nil {
		core := &corev1.Secret{}
		if err := reader.Get(ctx, types.NamespacedName{Namespace: sec.Namespace, Name: ref.Name}, core); err != nil {
			return nil, err
		}
		v, ok := core.Data[ref.Key]
		if !ok {
			return nil, apierrors.NewNotFound(corev1.Resource("secrets"), ref.Name+"["+ref.Key+"]")
		}
		return v, nil
	}
	if sec.Spec.EncryptedValue == nil {
		return nil, secrets.ErrDecrypt
	}
	if sealer == nil {
		return nil, secrets.ErrNotConfigured
	}
	return sealer.Open(ctx, sec.Namespace, sec.Name, sec.Spec.EncryptedValue)
}

// SetupWithManager registers the controller: AgentSecrets, and Agents (which change who
// attaches what).
func (r *AgentSecretReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&agentsv1.AgentSecret{}).
		Watches(&agentsv1.Agent{}, handler.EnqueueRequestsFromMapFunc(r.secretsOfAgent)).
		Named("agentsecret").
		Complete(r)
}

// secretsOfAgent maps an agent to the secrets it references or is recorded on.
func (r *AgentSecretReconciler) secretsOfAgent(ctx context.Context, o client.Object) []reconcile.Request {
	a, ok := o.(*agentsv1.Agent)
	if !ok {
		return nil
	}
	names := map[string]bool{}
	for _, ref := range a.Spec.Secrets {
		names[ref.Name] = true
	}
	var list agentsv1.AgentSecretList
	if err := r.List(ctx, &list, client.InNamespace(a.Namespace)); err == nil {
		for i := range list.Items {
			if slices.Contains(list.Items[i].Status.AttachedTo, a.Name) {
				names[list.Items[i].Name] = true
			}
		}
	}
	out := make([]reconcile.Request, 0, len(names))
	for n := range names {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: a.Namespace, Name: n}})
	}
	return out
}
