package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// Environment variables that carry channel tokens to the gateway. The engine config's
// SecretRefs name the same variables, so no token is ever written into the config.
const (
	EnvTelegramBotToken = "AGENTPLANE_TELEGRAM_BOT_TOKEN"
	EnvSlackBotToken    = "AGENTPLANE_SLACK_BOT_TOKEN"
	EnvSlackAppToken    = "AGENTPLANE_SLACK_APP_TOKEN"
	EnvDiscordBotToken  = "AGENTPLANE_DISCORD_BOT_TOKEN"
)

// ChannelTokenEnv names the variables holding the bot and app tokens of a channel type (""
// for a token the type does not use).
func ChannelTokenEnv(t agentsv1.ChannelType) (bot, app string) {
	switch t {
	case agentsv1.ChannelTelegram:
		return EnvTelegramBotToken, ""
	case agentsv1.ChannelSlack:
		return EnvSlackBotToken, EnvSlackAppToken
	case agentsv1.ChannelDiscord:
		return EnvDiscordBotToken, ""
	}
	return "", ""
}

// channelEnabled is spec.enabled (default true).
func channelEnabled(ch *agentsv1.Channel) bool { return ch.Spec.Enabled == nil || *ch.Spec.Enabled }

// effectiveChannels returns, per type, the Channel of agent that counts: the oldest one not
// being deleted (a younger Channel of the same type is a duplicate and ignored).
func effectiveChannels(ctx context.Context, c client.Reader, agent *agentsv1.Agent) (map[agentsv1.ChannelType]*agentsv1.Channel, error) {
	out, _, err := agentChannels(ctx, c, agent)
	return out, err
}

// agentChannels returns the effective Channels of agent (effectiveChannels) and those being
// deleted.
func agentChannels(ctx context.Context, c client.Reader, agent *agentsv1.Agent) (map[agentsv1.ChannelType]*agentsv1.Channel, []*agentsv1.Channel, error) {
	var list agentsv1.ChannelList
	if err := c.List(ctx, &list, client.InNamespace(agent.Namespace), client.MatchingFields{agentsv1.IndexAgentRef: agent.Name}); err != nil {
		return nil, nil, err
	}
	out := map[agentsv1.ChannelType]*agentsv1.Channel{}
	var deleting []*agentsv1.Channel
	for i := range list.Items {
		ch := &list.Items[i]
		if ch.DeletionTimestamp != nil {
			deleting = append(deleting, ch)
			continue
		}
		if cur, ok := out[ch.Spec.Type]; !ok || olderChannel(ch, cur) {
			out[ch.Spec.Type] = ch
		}
	}
	return out, deleting, nil
}

// olderChannel orders Channels by creation time, then name.
func olderChannel(a, b *agentsv1.Channel) bool {
	return a.CreationTimestamp.Before(&b.CreationTimestamp) ||
		a.CreationTimestamp.Equal(&b.CreationTimestamp) && a.Name < b.Name
}

// addChannelEnv adds the tokens of agent's enabled Channels to env, read live from the
// referenced core Secrets. A token whose Secret or key is missing is left out (the Channel
// controller reports it on the Channel): a broken channel never stops the agent.
func (e *SecretEnv) addChannelEnv(ctx context.Context, agent *agentsv1.Agent, env map[string]string) error {
	chans, err := effectiveChannels(ctx, e.Client, agent)
	if err != nil {
		return fmt.Errorf("list channels: %w", err)
	}
	for t, ch := range chans {
		if !channelEnabled(ch) {
			continue
		}
		botEnv, appEnv := ChannelTokenEnv(t)
		for _, tok := range []struct {
			name string
			ref  *agentsv1.SecretKeyReference
		}{{botEnv, ch.Spec.BotTokenRef}, {appEnv, ch.Spec.AppTokenRef}} {
			if tok.name == "" || tok.ref == nil {
				continue
			}
			v, err := readSecretKey(ctx, e.APIReader, ch.Namespace, tok.ref)
			if err != nil {
				return fmt.Errorf("channel %s: %w", ch.Name, err)
			}
			if v != "" {
				env[tok.name] = v
			}
		}
	}
	return nil
}

// readSecretKey reads one key of a core Secret live ("" when the Secret or key is missing).
func readSecretKey(ctx context.Context, r client.Reader, namespace string, ref *agentsv1.SecretKeyReference) (string, error) {
	sec := &corev1.Secret{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, sec); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return "", err
	}
	return string(sec.Data[ref.Key]), nil
}

// WatchChannels is an AgentReconciler builder hook: a Channel that is created, deleted,
// changes its spec or gets its plugin installed reconciles its agent (its environment holds
// the current tokens, a change restarts the gateway; its config holds the channels), and so
// does a change of a token Secret made for a channel (labelled with the agent).
func WatchChannels(b *ctrl.Builder) *ctrl.Builder {
	return b.Watches(&agentsv1.Channel{}, handler.EnqueueRequestsFromMapFunc(channelToAgent),
		builder.WithPredicates(channelRenderInputChanged())).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(tokensToAgent))
}

// channelToAgent maps a Channel to its agent.
func channelToAgent(_ context.Context, o client.Object) []reconcile.Request {
	ch, ok := o.(*agentsv1.Channel)
	if !ok || ch.Spec.AgentRef.Name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ch.Namespace, Name: ch.Spec.AgentRef.Name}}}
}

// tokensToAgent maps a channel's token Secret (agentsv1.LabelChannelTokensOf, with
// agentsv1.LabelAgent) to its agent.
func tokensToAgent(_ context.Context, o client.Object) []reconcile.Request {
	l := o.GetLabels()
	if l[agentsv1.LabelChannelTokensOf] == "" || l[agentsv1.LabelAgent] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: l[agentsv1.LabelAgent]}}}
}

// channelChanged passes creations, deletions and updates that change the spec or start the
// deletion; status writes do not pass.
func channelChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			if e.ObjectOld == nil || e.ObjectNew == nil {
				return true
			}
			return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() ||
				(e.ObjectOld.GetDeletionTimestamp() == nil) != (e.ObjectNew.GetDeletionTimestamp() == nil)
		},
	}
}

// channelRenderInputChanged passes what channelChanged passes and a change of the
// PluginInstalled condition (a channel with an external plugin is rendered once it is in).
func channelRenderInputChanged() predicate.Predicate {
	return predicate.Or(channelChanged(), predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(*agentsv1.Channel)
			n, ok2 := e.ObjectNew.(*agentsv1.Channel)
			return ok1 && ok2 && meta.IsStatusConditionTrue(o.Status.Conditions, agentsv1.ChannelPluginInstalled) !=
				meta.IsStatusConditionTrue(n.Status.Conditions, agentsv1.ChannelPluginInstalled)
		},
	})
}
