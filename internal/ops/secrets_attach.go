package ops

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/rules/secrets"
)

// attachedToWait bounds waitAttachedTo.
const attachedToWait = 10 * time.Second

// AttachSecrets attaches workspace secrets to an agent: it writes the agent's spec.secrets
// (guarded by its resourceVersion, so concurrent attaches see each other's providers), then
// stamps each secret (AnnotationSecretAttachedAt), which moves its resourceVersion: a
// concurrent delete that checked the agents before the spec write fails its conditional
// delete, and one that deleted first is noticed here and the attach undone. It returns once
// the cache holds the new spec (the model proxy authorizes from it), after waiting briefly
// for the AgentSecret controller's status.attachedTo, which it derives from the agents'
// specs.
func (o *Ops) AttachSecrets(ctx context.Context, t Scope, agentID string, ids []string) (*agentsv1.Agent, error) {
	if len(ids) == 0 {
		return nil, Fail(Invalid, MsgSecretIDsRequired)
	}
	agent, err := o.Agent(ctx, t, agentID)
	if err != nil {
		return nil, err
	}
	wanted := map[string]*agentsv1.AgentSecret{}
	for _, id := range ids {
		sec, err := o.Secret(ctx, t, id)
		if err != nil {
			return nil, err
		}
		if secrets.ReservedEnvError(sec) != nil {
			// Created before the name was reserved: the controllers would not inject it.
			return nil, Fail(Invalid, MsgReservedEnvName)
		}
		wanted[id] = sec
	}
	agent, added, err := o.addSecrets(ctx, t, agent, ids, wanted)
	if err != nil {
		return nil, err
	}
	// Every requested secret is stamped, also one the agent already referenced: that reference
	// may be a concurrent attach's, of a secret deleted since, and success must mean the
	// secret is there and attached.
	for _, id := range ids {
		if err := o.stampAttached(ctx, t.Namespace, id); err != nil {
			// The secret went away meanwhile: undo the attach rather than leave a dangling
			// reference.
			undo := added
			if apierrors.IsNotFound(err) && !slices.Contains(undo, id) {
				undo = append(slices.Clone(added), id)
			}
			_ = o.removeSecrets(context.WithoutCancel(ctx), agent, undo...)
			if apierrors.IsNotFound(err) {
				return nil, Fail(NotFound, MsgSecretNotFound)
			}
			return nil, err
		}
	}
	o.WaitCached(ctx, agent)
	for _, id := range ids {
		o.waitAttachedTo(ctx, t.Namespace, id, agent.Name, true)
	}
	return agent, nil
}

// addSecrets adds the references ids lacks to the agent's spec.secrets, on the live object,
// and returns it with the ids it added.
func (o *Ops) addSecrets(ctx context.Context, t Scope, agent *agentsv1.Agent, ids []string, wanted map[string]*agentsv1.AgentSecret) (*agentsv1.Agent, []string, error) {
	var added []string
	err := retry.RetryOnConflict(specRetry, func() error {
		cur := &agentsv1.Agent{}
		if err := o.d.APIReader.Get(ctx, client.ObjectKeyFromObject(agent), cur); err != nil {
			return err
		}
		if err := o.checkProviders(ctx, t, cur, wanted); err != nil {
			return err
		}
		added = added[:0]
		for _, id := range ids {
			if !slices.ContainsFunc(cur.Spec.Secrets, func(ref agentsv1.LocalObjectReference) bool { return ref.Name == id }) {
				cur.Spec.Secrets = append(cur.Spec.Secrets, agentsv1.LocalObjectReference{Name: id})
				added = append(added, id)
			}
		}
		if len(added) > 0 {
			if err := o.d.Client.Update(ctx, cur); err != nil {
				return err
			}
		}
		agent = cur
		return nil
	})
	return agent, added, err
}

// checkProviders refuses two different secrets of one provider on one agent.
func (o *Ops) checkProviders(ctx context.Context, t Scope, agent *agentsv1.Agent, wanted map[string]*agentsv1.AgentSecret) error {
	byProvider := map[string]string{}
	note := func(id, provider string) error {
		if provider == "" {
			return nil
		}
		if prev, ok := byProvider[provider]; ok && prev != id {
			return Fail(Conflict, MsgConflictingSecrets)
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
		if err := o.d.APIReader.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: ref.Name}, sec); err != nil {
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
func (o *Ops) stampAttached(ctx context.Context, namespace, secretID string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		agentsv1.AnnotationSecretAttachedAt: o.d.Now().UTC().Format(time.RFC3339Nano),
	}}})
	if err != nil {
		return err
	}
	sec := &agentsv1.AgentSecret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: secretID}}
	return o.d.Client.Patch(ctx, sec, client.RawPatch(types.MergePatchType, patch))
}

// waitAttachedTo waits (briefly: the answer does not depend on it) until the AgentSecret
// controller shows agent in (or out of) the secret's status.attachedTo, so that a read after
// the answer sees the attachment.
func (o *Ops) waitAttachedTo(ctx context.Context, namespace, secretID, agent string, attached bool) {
	ctx, cancel := context.WithTimeout(ctx, attachedToWait)
	defer cancel()
	sec := &agentsv1.AgentSecret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: secretID}}
	_ = o.WaitFor(ctx, sec, func() (bool, error) {
		return slices.Contains(sec.Status.AttachedTo, agent) == attached, nil
	})
}

// agentsAttaching lists (live) the agents of namespace whose spec.secrets name secretID.
func (o *Ops) agentsAttaching(ctx context.Context, namespace, secretID string) ([]string, error) {
	var agents agentsv1.AgentList
	if err := o.d.APIReader.List(ctx, &agents, client.InNamespace(namespace)); err != nil {
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

// removeSecrets drops secret references from the agent's spec.
func (o *Ops) removeSecrets(ctx context.Context, agent *agentsv1.Agent, ids ...string) error {
	return retry.RetryOnConflict(specRetry, func() error {
		cur := &agentsv1.Agent{}
		if err := o.d.APIReader.Get(ctx, client.ObjectKeyFromObject(agent), cur); err != nil {
			return err
		}
		n := len(cur.Spec.Secrets)
		cur.Spec.Secrets = slices.DeleteFunc(cur.Spec.Secrets, func(ref agentsv1.LocalObjectReference) bool {
			return slices.Contains(ids, ref.Name)
		})
		if len(cur.Spec.Secrets) != n {
			if err := o.d.Client.Update(ctx, cur); err != nil {
				return err
			}
		}
		*agent = *cur
		return nil
	})
}

// DetachSecret removes a secret from the agent's spec.secrets (`Secret not found` when the
// agent does not attach it) and returns once the cache holds the change.
func (o *Ops) DetachSecret(ctx context.Context, t Scope, agentID, id string) (*agentsv1.Agent, error) {
	agent, err := o.Agent(ctx, t, agentID)
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(agent.Spec.Secrets, func(ref agentsv1.LocalObjectReference) bool { return ref.Name == id }) {
		return nil, Fail(NotFound, MsgSecretNotFound)
	}
	if err := o.removeSecrets(ctx, agent, id); err != nil {
		return nil, err
	}
	o.WaitCached(ctx, agent)
	o.waitAttachedTo(ctx, t.Namespace, id, agent.Name, false)
	return agent, nil
}

// AgentSecrets lists the secrets the agent attaches that exist (live).
func (o *Ops) AgentSecrets(ctx context.Context, t Scope, agentID string) ([]agentsv1.AgentSecret, error) {
	agent, err := o.Agent(ctx, t, agentID)
	if err != nil {
		return nil, err
	}
	var out []agentsv1.AgentSecret
	for _, ref := range agent.Spec.Secrets {
		sec := &agentsv1.AgentSecret{}
		err := o.d.APIReader.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: ref.Name}, sec)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if t.OnlyAgent != "" {
			// A credential bound to one agent sees no other agent: of the agents a secret is
			// attached to, only its own.
			sec.Status.AttachedTo = slices.DeleteFunc(sec.Status.AttachedTo, func(a string) bool { return a != t.OnlyAgent })
		}
		out = append(out, *sec)
	}
	return out, nil
}
