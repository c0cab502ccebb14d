package agent

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/controllers"
	"github.com/agentplane/agentplane/internal/rules/channels"
	"github.com/agentplane/agentplane/internal/watchfilter"
)

// addChannelEnv adds the tokens of agent's enabled Channels to env, read live from the
// referenced core Secrets, but those of channels the platform relays (their config holds a
// relay token instead; what their plugin reads from its environment, the relay's base, the
// runtime gives every gateway from its start: local.Options.GatewayEnv, so connecting such a
// channel changes no environment and restarts no gateway). A token whose Secret or key is
// missing is left out (the Channel controller reports it on the Channel): a broken channel
// never stops the agent.
func (e *SecretEnv) addChannelEnv(ctx context.Context, agent *agentsv1.Agent, env map[string]string) error {
	chans, err := channels.Effective(ctx, e.Client, agent)
	if err != nil {
		return fmt.Errorf("list channels: %w", err)
	}
	for t, ch := range chans {
		if !ch.IsEnabled() || relayed(e.ChannelRelay, t) {
			continue
		}
		botEnv, appEnv := controllers.ChannelTokenEnv(t)
		for _, tok := range []struct {
			name string
			ref  *agentsv1.SecretKeyReference
		}{{botEnv, ch.Spec.BotTokenRef}, {appEnv, ch.Spec.AppTokenRef}} {
			if tok.name == "" || tok.ref == nil {
				continue
			}
			v, err := channels.ReadSecretKey(ctx, e.APIReader, ch.Namespace, tok.ref)
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

// WatchChannels is an Reconciler builder hook: a Channel that is created, deleted,
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

// channelRenderInputChanged passes what controllers.ChannelChanged passes and a change of the
// PluginInstalled condition (a channel with an external plugin is rendered once it is in).
func channelRenderInputChanged() predicate.Predicate {
	return predicate.Or(controllers.ChannelChanged(), watchfilter.OnlyUpdates(func(o, n *agentsv1.Channel) bool {
		return watchfilter.ConditionFlipped(o.Status.Conditions, n.Status.Conditions, agentsv1.ChannelPluginInstalled)
	}))
}
