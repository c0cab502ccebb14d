package agent

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/rules/auth"
)

// ensureGatewayToken returns the agent's gateway token, creating its Secret the first time:
// with the token of a warm gateway reserved for the agent when warm (it can take one) and the
// runtime has one (runtime.GatewayReserver), otherwise with a random token.
func (r *Reconciler) ensureGatewayToken(ctx context.Context, agent *agentsv1.Agent, version string, warm bool) (string, string, error) {
	name := agentsv1.GatewayTokenSecretName(agent.Name)
	s := &corev1.Secret{}
	err := r.Get(ctx, client.ObjectKey{Namespace: agent.Namespace, Name: name}, s)
	if err == nil {
		if tok := string(s.Data[agentsv1.GatewayTokenDataKey]); tok != "" {
			return tok, name, nil
		}
		return "", "", fmt.Errorf("secret %s has no gateway token", name)
	}
	if !apierrors.IsNotFound(err) {
		return "", "", err
	}
	token, err := r.newGatewayToken(ctx, agent, version, warm)
	if err != nil {
		return "", "", err
	}
	s = auth.GatewayTokenSecret(agent, token)
	if err := controllerutil.SetControllerReference(agent, s, r.Scheme()); err != nil {
		return "", "", err
	}
	if err := r.Create(ctx, s); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// Created by an earlier pass the cache has not seen yet: read it next time.
			return "", "", fmt.Errorf("gateway token secret %s not yet in cache", name)
		}
		return "", "", err
	}
	return string(s.Data[agentsv1.GatewayTokenDataKey]), name, nil
}

// newGatewayToken is a new agent's first gateway token: a reserved warm gateway's when the
// agent can take one (warm: it needs no environment of its own; not created stopped or
// suspended) and the runtime reserves one for it, else a random one.
func (r *Reconciler) newGatewayToken(ctx context.Context, agent *agentsv1.Agent, version string, warm bool) (string, error) {
	if res, ok := r.Runtime.(runtime.GatewayReserver); ok && warm && !agent.Spec.Stopped && !agent.Spec.Suspended {
		token, reserved, err := res.ReserveGateway(ctx, agent, version)
		if err != nil {
			return "", fmt.Errorf("reserve a warm gateway: %w", err)
		}
		if reserved {
			return token, nil
		}
	}
	return auth.NewGatewayToken(), nil
}
