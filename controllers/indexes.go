package controllers

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/rules/auth"
)

// fieldIndex is one field index of the manager's cache.
type fieldIndex struct {
	obj   client.Object
	field string
	value client.IndexerFunc
}

// fieldIndexes are every index the controllers and the REST facade look objects up by.
var fieldIndexes = []fieldIndex{
	{&agentsv1.Channel{}, agentsv1.IndexAgentRef, func(o client.Object) []string {
		return nonEmpty(o.(*agentsv1.Channel).Spec.AgentRef.Name)
	}},
	{&agentsv1.Domain{}, agentsv1.IndexAgentRef, func(o client.Object) []string {
		return nonEmpty(o.(*agentsv1.Domain).Spec.AgentRef.Name)
	}},
	{&agentsv1.Snapshot{}, agentsv1.IndexAgentRef, func(o client.Object) []string {
		return nonEmpty(o.(*agentsv1.Snapshot).Spec.AgentRef.Name)
	}},
	{&agentsv1.Agent{}, agentsv1.IndexAgentSkillCID, func(o client.Object) []string {
		var out []string
		for _, s := range o.(*agentsv1.Agent).Spec.Skills {
			out = append(out, nonEmpty(s.CID)...)
		}
		return out
	}},
	{&agentsv1.Agent{}, agentsv1.IndexAgentSecret, func(o client.Object) []string {
		var out []string
		for _, ref := range o.(*agentsv1.Agent).Spec.Secrets {
			out = append(out, nonEmpty(ref.Name)...)
		}
		return out
	}},
	{&agentsv1.Skill{}, agentsv1.IndexSkillCID, func(o client.Object) []string {
		var out []string
		for _, c := range o.(*agentsv1.Skill).CIDs() {
			out = append(out, nonEmpty(c)...)
		}
		return out
	}},
	{&agentsv1.Skill{}, agentsv1.IndexSkillAttachedTo, func(o client.Object) []string {
		return o.(*agentsv1.Skill).Status.AttachedTo
	}},
	{&corev1.Secret{}, agentsv1.IndexGatewayAgent, func(o client.Object) []string {
		return nonEmpty(o.GetLabels()[agentsv1.LabelGatewayTokenOf])
	}},
	{&corev1.Secret{}, agentsv1.IndexGatewayTokenHash, auth.GatewayTokenIndex},
}

// SetupIndexes registers the field indexes (agentsv1.Index*) with the manager's cache. The
// platform calls it before any controller or the facade reads; tests call it on their
// managers.
func SetupIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	for _, ix := range fieldIndexes {
		if err := indexer.IndexField(ctx, ix.obj, ix.field, ix.value); err != nil {
			return fmt.Errorf("index %T by %s: %w", ix.obj, ix.field, err)
		}
	}
	return nil
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// requestsFor lists the objects of list in namespace whose index field holds value (from the
// cache: the index must be registered) and returns them as reconcile requests.
func requestsFor(ctx context.Context, c client.Reader, list client.ObjectList, namespace, field, value string) ([]reconcile.Request, error) {
	if err := c.List(ctx, list, client.InNamespace(namespace), client.MatchingFields{field: value}); err != nil {
		return nil, err
	}
	var out []reconcile.Request
	err := apimeta.EachListItem(list, func(o k8sruntime.Object) error {
		if m, ok := o.(client.Object); ok {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(m)})
		}
		return nil
	})
	return out, err
}

// The mappers from an Agent to the objects of its kinds that name it, for the controllers'
// watches of Agents.
var (
	ChannelsOfAgent  = agentRefMapper[agentsv1.ChannelList]
	DomainsOfAgent   = agentRefMapper[agentsv1.DomainList]
	SnapshotsOfAgent = agentRefMapper[agentsv1.SnapshotList]
)

// agentRefMapper maps an Agent to the objects of list type L (Channels, Domains, Snapshots)
// whose spec.agentRef names it, through IndexAgentRef.
func agentRefMapper[L any, PL interface {
	*L
	client.ObjectList
}](c client.Reader) handler.MapFunc {
	return func(ctx context.Context, agent client.Object) []reconcile.Request {
		reqs, err := requestsFor(ctx, c, PL(new(L)), agent.GetNamespace(), agentsv1.IndexAgentRef, agent.GetName())
		if err != nil {
			log.FromContext(ctx).Error(err, "look up the objects of an agent", "kind", fmt.Sprintf("%T", PL(nil)), "agent", agent.GetName())
		}
		return reqs
	}
}

// SkillsOfAgent maps an agent to the skills it is recorded on (IndexSkillAttachedTo) or
// attaches (IndexSkillCID of each of its spec.skills).
func SkillsOfAgent(c client.Reader) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		a, ok := o.(*agentsv1.Agent)
		if !ok {
			return nil
		}
		lookups := [][2]string{{agentsv1.IndexSkillAttachedTo, a.Name}}
		for _, s := range a.Spec.Skills {
			lookups = append(lookups, [2]string{agentsv1.IndexSkillCID, s.CID})
		}
		var out []reconcile.Request
		for _, l := range lookups {
			reqs, err := requestsFor(ctx, c, &agentsv1.SkillList{}, a.Namespace, l[0], l[1])
			if err != nil {
				log.FromContext(ctx).Error(err, "look up the skills of an agent", "agent", a.Name)
			}
			for _, req := range reqs {
				if !slices.Contains(out, req) {
					out = append(out, req)
				}
			}
		}
		return out
	}
}
