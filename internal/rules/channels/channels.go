// Package channels reads what an agent's chat channels are made of: the Channel that counts
// for each type and the tokens its Secrets hold. The Agent controller (which renders channels
// into the engine config), the Channel controller (which reports on each Channel) and the
// channel relay (which swaps an agent's stand-in token for the real one) read them the same
// way here.
package channels

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// Of returns, per type, the Channel of agent that counts (the oldest one not being deleted: a
// younger Channel of the same type is a duplicate and ignored), and the Channels being
// deleted. r must have the agentsv1.IndexAgentRef field index.
func Of(ctx context.Context, r client.Reader, agent *agentsv1.Agent) (map[agentsv1.ChannelType]*agentsv1.Channel, []*agentsv1.Channel, error) {
	var list agentsv1.ChannelList
	if err := r.List(ctx, &list, client.InNamespace(agent.Namespace), client.MatchingFields{agentsv1.IndexAgentRef: agent.Name}); err != nil {
		return nil, nil, fmt.Errorf("list the channels of %s/%s: %w", agent.Namespace, agent.Name, err)
	}
	out, deleting := list.Effective()
	return out, deleting, nil
}

// Effective is Of without the Channels being deleted.
func Effective(ctx context.Context, r client.Reader, agent *agentsv1.Agent) (map[agentsv1.ChannelType]*agentsv1.Channel, error) {
	out, _, err := Of(ctx, r, agent)
	return out, err
}

// ReadSecretKey reads one key of a core Secret ("" when the Secret or key is missing). Users'
// Secrets are not in the manager's cache: r is a live reader.
func ReadSecretKey(ctx context.Context, r client.Reader, namespace string, ref *agentsv1.SecretKeyReference) (string, error) {
	sec := &corev1.Secret{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, sec); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return "", fmt.Errorf("read secret %s/%s: %w", namespace, ref.Name, err)
	}
	return string(sec.Data[ref.Key]), nil
}

// Tokens are the bot and app tokens of a channel ("" for one it does not set or whose Secret
// or key is missing).
type Tokens struct{ Bot, App string }

// EnabledTokens returns the tokens of agent's enabled channel of type t, and the Channel (nil,
// with no tokens, when agent has no such channel or it is disabled). cache lists the Channels;
// apiReader reads their Secrets.
func EnabledTokens(ctx context.Context, cache, apiReader client.Reader, agent *agentsv1.Agent, t agentsv1.ChannelType) (*agentsv1.Channel, Tokens, error) {
	chans, err := Effective(ctx, cache, agent)
	if err != nil {
		return nil, Tokens{}, err
	}
	ch := chans[t]
	if ch == nil || !ch.IsEnabled() {
		return nil, Tokens{}, nil
	}
	var toks Tokens
	for _, tok := range []struct {
		ref *agentsv1.SecretKeyReference
		out *string
	}{{ch.Spec.BotTokenRef, &toks.Bot}, {ch.Spec.AppTokenRef, &toks.App}} {
		if tok.ref == nil {
			continue
		}
		if *tok.out, err = ReadSecretKey(ctx, apiReader, ch.Namespace, tok.ref); err != nil {
			return nil, Tokens{}, err
		}
	}
	return ch, toks, nil
}
