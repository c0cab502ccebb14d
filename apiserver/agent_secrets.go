package apiserver

import (
	"context"
	"net/http"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

type attachSecretsRequest struct {
	SecretIDs []string `json:"secretIds"`
}

// secretRetry re-reads and re-applies on conflicts, like skillRetry: concurrent attaches and
// deletes, the AgentSecret controller's writes of attachedTo and the Agent controller's status
// writes all bump the resourceVersions, more often than retry.DefaultRetry's five quick
// attempts absorb (an attach would answer a bare 409 Conflict).
var secretRetry = skillRetry

// errConflictingSecrets aborts an attach whose secrets share a provider.
var errConflictingSecrets = errorf(http.StatusConflict, msgConflictingSecrets)

// attachSecrets attaches workspace secrets to an agent. The agent's spec is written first
// (guarded by its resourceVersion, so concurrent attaches see each other's providers), then
// each secret records the agent in status.attachedTo (guarded by the secret's
// resourceVersion, so a concurrent delete either fails or is noticed here and undone).
func (s *Server) attachSecrets(r *http.Request, c *Caller) (*Response, error) {
	var req attachSecretsRequest
	if err := decodeJSON(r, &req, msgInvalidBody); err != nil {
		return nil, err
	}
	if len(req.SecretIDs) == 0 {
		return nil, errorf(http.StatusBadRequest, msgSecretIDsRequired)
	}
	ctx := r.Context()
	agent, err := s.getAgent(ctx, c, r.PathValue("agentId"))
	if err != nil {
		return nil, err
	}
	wanted := map[string]*agentsv1.AgentSecret{}
	for _, id := range req.SecretIDs {
		sec, err := s.getSecretLive(ctx, c, id)
		if err != nil {
			return nil, err
		}
		wanted[id] = sec
	}
	var added []string
	err = retry.RetryOnConflict(secretRetry, func() error {
		cur := &agentsv1.Agent{}
		if err := s.opts.APIReader.Get(ctx, client.ObjectKeyFromObject(agent), cur); err != nil {
			return err
		}
		if err := s.checkProviders(ctx, c, cur, wanted); err != nil {
			return err
		}
		added = added[:0]
		for _, id := range req.SecretIDs {
			if !slices.ContainsFunc(cur.Spec.Secrets, func(ref agentsv1.LocalObjectReference) bool { return ref.Name == id }) {
				cur.Spec.Secrets = append(cur.Spec.Secrets, agentsv1.LocalObjectReference{Name: id})
				added = append(added, id)
			}
		}
		if len(added) == 0 {
			agent = cur
			return nil
		}
		if err := s.opts.Client.Update(ctx, cur); err != nil {
			return err
		}
		agent = cur
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Every requested secret records the agent, also one the agent already referenced: that
	// reference may be a concurrent attach's, of a secret deleted since, and a 200 must mean
	// the secret is there and attached.
	for _, id := range req.SecretIDs {
		if err := s.markAttached(ctx, c.Namespace, id, agent.Name, true); err != nil {
			// The secret went away meanwhile: undo the attach rather than leave a dangling
			// reference.
			undo := added
			if apierrors.IsNotFound(err) && !slices.Contains(undo, id) {
				undo = append(slices.Clone(added), id)
			}
			_ = s.removeFromAgent(context.WithoutCancel(ctx), agent, undo...)
			if apierrors.IsNotFound(err) {
				return nil, errorf(http.StatusNotFound, msgSecretNotFound)
			}
			return nil, err
		}
	}
	return ok(map[string]any{"agent": viewAgent(agent)})
}

// checkProviders refuses two different secrets of one provider on one agent.
func (s *Server) checkProviders(ctx context.Context, c *Caller, agent *agentsv1.Agent, wanted map[string]*agentsv1.AgentSecret) error {
	byProvider := map[string]string{}
	note := func(id, provider string) error {
		if provider == "" {
			return nil
		}
		if prev, ok := byProvider[provider]; ok && prev != id {
			return errConflictingSecrets
		}
		byProvider[provider] = id
		return nil
	}
	for _, ref := range agent.Spec.Secrets {
		if w, ok := wanted[ref.Name]; ok {
			if err := note(ref.Name, w.Spec.Provider); err != nil {
				return err
			}
			continue
		}
		sec := &agentsv1.AgentSecret{}
		if err := s.opts.APIReader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: ref.Name}, sec); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return err
		}
		if err := note(ref.Name, sec.Spec.Provider); err != nil {
			return err
		}
	}
	for id, sec := range wanted {
		if err := note(id, sec.Spec.Provider); err != nil {
			return err
		}
	}
	return nil
}

// markAttached adds (or removes) agent in the secret's status.attachedTo.
func (s *Server) markAttached(ctx context.Context, namespace, secretID, agent string, attached bool) error {
	return retry.RetryOnConflict(secretRetry, func() error {
		sec := &agentsv1.AgentSecret{}
		if err := s.opts.APIReader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: secretID}, sec); err != nil {
			return err
		}
		has := slices.Contains(sec.Status.AttachedTo, agent)
		switch {
		case attached && !has:
			sec.Status.AttachedTo = append(sec.Status.AttachedTo, agent)
		case !attached && has:
			sec.Status.AttachedTo = slices.DeleteFunc(sec.Status.AttachedTo, func(a string) bool { return a == agent })
		default:
			return nil
		}
		return s.opts.Client.Status().Update(ctx, sec)
	})
}

// removeFromAgent drops secret references from the agent's spec.
func (s *Server) removeFromAgent(ctx context.Context, agent *agentsv1.Agent, ids ...string) error {
	return retry.RetryOnConflict(secretRetry, func() error {
		cur := &agentsv1.Agent{}
		if err := s.opts.APIReader.Get(ctx, client.ObjectKeyFromObject(agent), cur); err != nil {
			return err
		}
		n := len(cur.Spec.Secrets)
		cur.Spec.Secrets = slices.DeleteFunc(cur.Spec.Secrets, func(ref agentsv1.LocalObjectReference) bool {
			return slices.Contains(ids, ref.Name)
		})
		if len(cur.Spec.Secrets) == n {
			*agent = *cur
			return nil
		}
		if err := s.opts.Client.Update(ctx, cur); err != nil {
			return err
		}
		*agent = *cur
		return nil
	})
}

func (s *Server) detachSecret(r *http.Request, c *Caller) (*Response, error) {
	ctx := r.Context()
	agent, err := s.getAgent(ctx, c, r.PathValue("agentId"))
	if err != nil {
		return nil, err
	}
	id := r.PathValue("secretId")
	if !slices.ContainsFunc(agent.Spec.Secrets, func(ref agentsv1.LocalObjectReference) bool { return ref.Name == id }) {
		return nil, errorf(http.StatusNotFound, msgSecretNotFound)
	}
	if err := s.removeFromAgent(ctx, agent, id); err != nil {
		return nil, err
	}
	if err := s.markAttached(ctx, c.Namespace, id, agent.Name, false); err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	return ok(map[string]any{"agent": viewAgent(agent)})
}

func (s *Server) listAgentSecrets(r *http.Request, c *Caller) (*Response, error) {
	agent, err := s.getAgent(r.Context(), c, r.PathValue("agentId"))
	if err != nil {
		return nil, err
	}
	out := []secretView{}
	for _, ref := range agent.Spec.Secrets {
		sec := &agentsv1.AgentSecret{}
		err := s.opts.APIReader.Get(r.Context(), client.ObjectKey{Namespace: c.Namespace, Name: ref.Name}, sec)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, viewSecret(sec))
	}
	return ok(map[string]any{"secrets": out})
}
