package apiserver

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/secrets"
)

type attachSecretsRequest struct {
	SecretIDs []string `json:"secretIds"`
}

// secretRetry re-reads and re-applies on conflicts, like skillRetry: concurrent attaches and
// deletes and the controllers' status writes all bump the resourceVersions, more often than retry.DefaultRetry's five quick
// attempts absorb (an attach would answer a bare 409 Conflict).
var secretRetry = skillRetry

// errConflictingSecrets aborts an attach whose secrets share a provider.
var errConflictingSecrets = errorf(http.StatusConflict, msgConflictingSecrets)

// attachSecrets attaches workspace secrets to an agent: it writes the agent's spec.secrets
// (guarded by its resourceVersion, so concurrent attaches see each other's providers), then
// stamps each secret (AnnotationSecretAttachedAt), which moves its resourceVersion: a
// concurrent delete that checked the agents before the spec write fails its conditional
// delete, and one that deleted first is noticed here and the attach undone. The answer waits
// for the cache to hold the new spec (the model proxy authorizes from it), then briefly for
// the AgentSecret controller's status.attachedTo, which it derives from the agents' specs.
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
		if secrets.ReservedEnvError(sec) != nil {
			// Created before the name was reserved: the controllers would not inject it.
			return nil, errorf(http.StatusBadRequest, msgReservedEnvName)
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
	// Every requested secret is stamped, also one the agent already referenced: that reference
	// may be a concurrent attach's, of a secret deleted since, and a 200 must mean the secret
	// is there and attached.
	for _, id := range req.SecretIDs {
		if err := s.stampAttached(ctx, c.Namespace, id); err != nil {
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
	s.waitCached(ctx, agent)
	for _, id := range req.SecretIDs {
		s.waitAttachedTo(ctx, c.Namespace, id, agent.Name, true)
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

// stampAttached sets AnnotationSecretAttachedAt on the secret (a merge patch of one
// annotation, no read first): it fails NotFound once the secret is deleted.
func (s *Server) stampAttached(ctx context.Context, namespace, secretID string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		agentsv1.AnnotationSecretAttachedAt: s.opts.Now().UTC().Format(time.RFC3339Nano),
	}}})
	if err != nil {
		return err
	}
	sec := &agentsv1.AgentSecret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: secretID}}
	return s.opts.Client.Patch(ctx, sec, client.RawPatch(types.MergePatchType, patch))
}

// waitAttachedTo waits (briefly: the answer does not depend on it) until the AgentSecret
// controller shows agent in (or out of) the secret's status.attachedTo, so that a read after
// the answer sees the attachment.
func (s *Server) waitAttachedTo(ctx context.Context, namespace, secretID, agent string, attached bool) {
	ctx, cancel := context.WithTimeout(ctx, attachedToWait)
	defer cancel()
	sec := &agentsv1.AgentSecret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: secretID}}
	_ = s.waitFor(ctx, sec, func() (bool, error) {
		return slices.Contains(sec.Status.AttachedTo, agent) == attached, nil
	})
}

// attachedToWait bounds waitAttachedTo.
const attachedToWait = 10 * time.Second

// agentsAttaching lists (live) the agents of namespace whose spec.secrets name secretID.
func (s *Server) agentsAttaching(ctx context.Context, namespace, secretID string) ([]string, error) {
	var agents agentsv1.AgentList
	if err := s.opts.APIReader.List(ctx, &agents, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	var out []string
	for i := range agents.Items {
		if slices.ContainsFunc(agents.Items[i].Spec.Secrets, func(ref agentsv1.LocalObjectReference) bool { return ref.Name == secretID }) {
			out = append(out, agents.Items[i].Name)
		}
	}
	return out, nil
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
	s.waitCached(ctx, agent)
	s.waitAttachedTo(ctx, c.Namespace, id, agent.Name, false)
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
