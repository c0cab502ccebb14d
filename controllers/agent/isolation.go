package agent

import (
	"context"
	"sort"

	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/rules/channels"
)

// runtimeClassName is the RuntimeClass of agent's gateway pod: its own spec.runtimeClassName,
// else its workspace's ("" leaves the runtime's default). The Workspace comes from the cache.
func (r *Reconciler) runtimeClassName(ctx context.Context, agent *agentsv1.Agent) (string, error) {
	if agent.Spec.RuntimeClassName != "" {
		return agent.Spec.RuntimeClassName, nil
	}
	ws := &agentsv1.Workspace{}
	if err := r.Get(ctx, client.ObjectKey{Name: agent.Namespace}, ws); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	return ws.Spec.RuntimeClassName, nil
}

// egressNames are what agent talks to outside the cluster (runtime.Desired.Egress): the
// providers of its attached secrets that the model proxy does not serve (the agent holds
// those keys and calls the provider itself; a proxied provider is reached through the
// proxy) and the types of its enabled Channels that the platform does not relay (a relayed
// channel is reached through the relay). Sorted, without duplicates; read from the
// cache.
func (r *Reconciler) egressNames(ctx context.Context, agent *agentsv1.Agent) ([]string, error) {
	set := map[string]bool{}
	for _, ref := range agent.Spec.Secrets {
		sec := &agentsv1.AgentSecret{}
		if err := r.Get(ctx, client.ObjectKey{Namespace: agent.Namespace, Name: ref.Name}, sec); err != nil {
			if err := client.IgnoreNotFound(err); err != nil {
				return nil, err
			}
			continue
		}
		if sec.Spec.Provider != "" && !proxied(r.ModelProxy, sec) {
			set[sec.Spec.Provider] = true
		}
	}
	chans, err := channels.Effective(ctx, r.Client, agent)
	if err != nil {
		return nil, err
	}
	for t, ch := range chans {
		if ch.IsEnabled() && !relayed(r.ChannelRelay, t) {
			set[string(t)] = true
		}
	}
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}
