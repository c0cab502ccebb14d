// Package kubeaccess connects the model proxy (its parent, internal/adapters/modelproxy) to the
// cluster as the proxy's Authorizer and Recorder: it authorizes an agent's proxy credential
// against the Agent, its gateway token and its attached secrets, and it records the proxy's
// usage in the status of Agents and Workspaces.
package kubeaccess

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/modelproxy"
	"github.com/agentplane/agentplane/internal/rules/auth"
	"github.com/agentplane/agentplane/internal/rules/secrets"
)

// Authorizer implements modelproxy.Authorizer from the manager's cache: a credential is good
// while its agent exists (and is not being deleted), the credential matches the agent's
// current gateway token, and the agent has a secret of that provider attached. Detaching the
// secret, rotating the token or deleting the agent refuses the next request (as soon as the
// cache sees the change; the facade's own writes wait for it).
type Authorizer struct {
	// Cache reads Agents, AgentSecrets, Workspaces and the platform's Secrets.
	Cache client.Reader
	// APIReader reads a secretRef's core Secret (users' Secrets are not cached).
	APIReader client.Reader
	Sealer    *secrets.Sealer
	Clock     clock.PassiveClock
}

var _ modelproxy.Authorizer = (*Authorizer)(nil)

// Authorize implements modelproxy.Authorizer.
func (a *Authorizer) Authorize(ctx context.Context, provider, credential string) (modelproxy.Grant, error) {
	ns, name, ok := auth.ParseModelCredential(credential)
	if !ok {
		return modelproxy.Grant{}, modelproxy.ErrUnauthorized
	}
	agent := &agentsv1.Agent{}
	if err := a.Cache.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, agent); err != nil {
		return modelproxy.Grant{}, unauthorizedIfMissing(err)
	}
	if agent.DeletionTimestamp != nil || agent.Status.GatewayTokenSecret == "" {
		return modelproxy.Grant{}, modelproxy.ErrUnauthorized
	}
	tok := &corev1.Secret{}
	if err := a.Cache.Get(ctx, client.ObjectKey{Namespace: ns, Name: agent.Status.GatewayTokenSecret}, tok); err != nil {
		return modelproxy.Grant{}, unauthorizedIfMissing(err)
	}
	if !auth.VerifyModelCredential(credential, ns, name, string(tok.Data[agentsv1.GatewayTokenDataKey])) {
		return modelproxy.Grant{}, modelproxy.ErrUnauthorized
	}
	sec, err := a.attached(ctx, agent, provider)
	if err != nil {
		return modelproxy.Grant{}, err
	}
	key, err := secrets.Value(ctx, a.APIReader, a.Sealer, sec)
	if err != nil {
		return modelproxy.Grant{}, fmt.Errorf("the key of secret %s/%s: %w", ns, sec.Name, err)
	}
	ws := &agentsv1.Workspace{}
	if err := a.Cache.Get(ctx, client.ObjectKey{Name: ns}, ws); err != nil && !apierrors.IsNotFound(err) {
		return modelproxy.Grant{}, err
	}
	g := modelproxy.Grant{
		Agent: ns + "/" + name, Workspace: ns, Key: key,
		AgentBudget: budget(agent.Spec.Budget), WorkspaceBudget: budget(ws.Spec.Budget),
		Day: a.now().UTC().Format(time.DateOnly),
	}
	g.AgentTokens, g.AgentCostMicros = spentOn(agent.Status.Usage, g.Day)
	g.WorkspaceTokens, g.WorkspaceCostMicros = spentOn(ws.Status.Usage, g.Day)
	return g, nil
}

// attached is the agent's attached secret of provider (at most one: admission refuses two).
func (a *Authorizer) attached(ctx context.Context, agent *agentsv1.Agent, provider string) (*agentsv1.AgentSecret, error) {
	for _, ref := range agent.Spec.Secrets {
		sec := &agentsv1.AgentSecret{}
		err := a.Cache.Get(ctx, client.ObjectKey{Namespace: agent.Namespace, Name: ref.Name}, sec)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, err
		case sec.Spec.Provider == provider && sec.DeletionTimestamp == nil:
			return sec, nil
		}
	}
	return nil, modelproxy.ErrUnauthorized
}

func (a *Authorizer) now() time.Time {
	if a.Clock == nil {
		return time.Now()
	}
	return a.Clock.Now()
}

func unauthorizedIfMissing(err error) error {
	if apierrors.IsNotFound(err) {
		return modelproxy.ErrUnauthorized
	}
	return err
}

func budget(b *agentsv1.ModelBudget) modelproxy.Budget {
	if b == nil {
		return modelproxy.Budget{}
	}
	return modelproxy.Budget{RequestsPerMinute: b.RequestsPerMinute, TokensPerDay: b.TokensPerDay, CostMicrosPerDay: b.CostMicrosPerDay}
}

// spentOn is the tokens and cost u counts on day (0 for another day's usage).
func spentOn(u *agentsv1.ModelUsage, day string) (int64, int64) {
	if u == nil || u.Day != day {
		return 0, 0
	}
	return u.Tokens(), u.CostMicros
}
