package kube

import (
	"context"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

var _ runtime.Inventory = (*Runtime)(nil)

// Homes implements runtime.Inventory: the agents' home volumes, read live.
func (r *Runtime) Homes(ctx context.Context) ([]runtime.Home, error) {
	return ListHomes(ctx, r.opts.APIReader)
}

// ListHomes lists the agents' home volumes in every namespace: the PersistentVolumeClaims
// labelled with their agent (made from an agent's StatefulSet, or an adopted warm pool
// member's the adoption relabelled), and those of the warm pool members an agent adopted
// (named after the agent's StatefulSet, which carries its label). A claim outlives its
// StatefulSet (which retains it) until the agent is deleted; the home is where the claim is.
func ListHomes(ctx context.Context, c client.Reader) ([]runtime.Home, error) {
	managed := client.MatchingLabels{agentsv1.LabelAppManagedBy: agentsv1.ManagedBy}
	hasAgent := client.HasLabels{agentsv1.LabelAgent}
	var claims corev1.PersistentVolumeClaimList
	if err := c.List(ctx, &claims, managed); err != nil {
		return nil, err
	}
	var sets appsv1.StatefulSetList
	if err := c.List(ctx, &sets, managed, hasAgent); err != nil {
		return nil, err
	}
	agentOf := map[client.ObjectKey]string{} // claim -> agent
	for _, s := range sets.Items {
		agentOf[client.ObjectKey{Namespace: s.Namespace, Name: VolumeHome + "-" + s.Name + "-0"}] = s.Labels[agentsv1.LabelAgent]
	}
	var homes []runtime.Home
	for _, pvc := range claims.Items {
		name := pvc.Labels[agentsv1.LabelAgent]
		if a := agentOf[client.ObjectKeyFromObject(&pvc)]; a != "" {
			name = a
		}
		if name == "" || pvc.DeletionTimestamp != nil {
			continue // no agent's (a warm pool member's not adopted), or going away
		}
		homes = append(homes, runtime.Home{Namespace: pvc.Namespace, Name: name, Location: "pvc/" + pvc.Name})
	}
	sort.Slice(homes, func(i, j int) bool {
		if homes[i].Namespace != homes[j].Namespace {
			return homes[i].Namespace < homes[j].Namespace
		}
		return homes[i].Name < homes[j].Name
	})
	return homes, nil
}
