// Package consumer is a platform team's own controller, the kind of code the agentplane test
// kit is for: it turns every ConfigMap labelled agents.example.com/agent=true into an agentplane
// Agent of the same name in the same namespace (data keys displayName and description), owned
// by the ConfigMap so that deleting one deletes the other.
package consumer

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// AgentLabel marks the ConfigMaps that describe an agent.
const AgentLabel = "agents.example.com/agent"

// AgentFromConfigMap reconciles labelled ConfigMaps into Agents.
type AgentFromConfigMap struct {
	Client client.Client
}

// SetupWithManager watches the labelled ConfigMaps and the Agents they own.
func (r *AgentFromConfigMap) SetupWithManager(mgr ctrl.Manager) error {
	labelled, err := predicate.LabelSelectorPredicate(metav1.LabelSelector{MatchLabels: map[string]string{AgentLabel: "true"}})
	if err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("agent-from-configmap").
		For(&corev1.ConfigMap{}, builder.WithPredicates(labelled)).
		Owns(&agentsv1.Agent{}).
		Complete(r)
}

// Reconcile creates or updates the ConfigMap's Agent.
func (r *AgentFromConfigMap) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cm := &corev1.ConfigMap{}
	if err := r.Client.Get(ctx, req.NamespacedName, cm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	agent := &agentsv1.Agent{}
	agent.Namespace, agent.Name = cm.Namespace, cm.Name
	_, err := controllerutil.CreateOrUpdate(ctx, r.Client, agent, func() error {
		agent.Spec.DisplayName = cm.Data["displayName"]
		if agent.Spec.DisplayName == "" {
			agent.Spec.DisplayName = cm.Name
		}
		agent.Spec.Description = cm.Data["description"]
		return controllerutil.SetControllerReference(cm, agent, r.Client.Scheme())
	})
	if apierrors.IsConflict(err) {
		return ctrl.Result{Requeue: true}, nil
	}
	return ctrl.Result{}, err
}
