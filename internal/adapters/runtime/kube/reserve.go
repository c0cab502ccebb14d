package kube

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// ReserveGateway implements runtime.GatewayReserver: it takes a ready, unreserved member of
// the version in the agent's namespace with an optimistic-concurrency patch of its
// StatefulSet (LabelReservedFor with the resourceVersion it read: of two managers or workers
// that read the same member, one gets a conflict and tries the next), and returns the
// member's token. An agent with resources of its own starts cold (its pod differs); one that
// adopted a member or holds a reservation gets that one.
func (r *Runtime) ReserveGateway(ctx context.Context, agent *agentsv1.Agent, version string) (string, bool, error) {
	if adopted(agent) || agent.Spec.Resources != nil {
		return "", false, nil
	}
	held, err := r.reservationOf(ctx, agent)
	if err != nil {
		return "", false, err
	}
	if held != nil {
		tok, err := r.memberToken(ctx, held)
		return tok, err == nil, err
	}
	unreserved, err := labels.NewRequirement(LabelReservedFor, selection.DoesNotExist, nil)
	if err != nil {
		return "", false, err
	}
	inPool, _ := labels.NewRequirement(LabelPool, selection.Exists, nil)
	ofVersion, _ := labels.NewRequirement(LabelPoolVersion, selection.Equals, []string{version})
	var sets appsv1.StatefulSetList
	if err := r.opts.Client.List(ctx, &sets, client.InNamespace(agent.Namespace),
		client.MatchingLabelsSelector{Selector: labels.NewSelector().Add(*unreserved, *inPool, *ofVersion)}); err != nil {
		return "", false, fmt.Errorf("list pool members: %w", err)
	}
	// From a random start, so that concurrent reservations mostly try different members.
	n := len(sets.Items)
	start := 0
	if n > 0 {
		start = rand.IntN(n)
	}
	for i := range n {
		sts := &sets.Items[(start+i)%n]
		if sts.DeletionTimestamp != nil || !r.memberPodReady(ctx, sts) {
			continue
		}
		now := r.opts.Clock.Now()
		base := sts.DeepCopy()
		sts.Labels[LabelReservedFor] = string(agent.UID)
		if sts.Annotations == nil {
			sts.Annotations = map[string]string{}
		}
		sts.Annotations[AnnotationReservedAt] = now.UTC().Format(time.RFC3339Nano)
		err := r.opts.Client.Patch(ctx, sts, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}),
			client.FieldOwner(FieldManager))
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			continue // another reservation, a deletion or a stale cache: the next one
		}
		if err != nil {
			return "", false, fmt.Errorf("reserve pool member %s: %w", sts.Name, err)
		}
		r.pools.mu.Lock()
		if r.pools.reserved == nil {
			r.pools.reserved = map[types.UID]reservation{}
		}
		r.pools.reserved[agent.UID] = reservation{member: client.ObjectKeyFromObject(sts), at: now}
		r.pools.mu.Unlock()
		tok, err := r.memberToken(ctx, sts)
		if err != nil {
			return "", false, err
		}
		return tok, true, nil
	}
	return "", false, nil
}

// memberPodReady reports whether the member's pod (from the cache) is Ready.
func (r *Runtime) memberPodReady(ctx context.Context, sts *appsv1.StatefulSet) bool {
	pod := &corev1.Pod{}
	if err := r.opts.Client.Get(ctx, client.ObjectKey{Namespace: sts.Namespace, Name: sts.Name + "-0"}, pod); err != nil {
		return false
	}
	return pod.Labels[LabelPoolMember] == sts.Labels[LabelPoolMember] && podReady(pod)
}

// memberToken reads the member's gateway token from its Secret (from the API server: the
// manager's cache need not hold it).
func (r *Runtime) memberToken(ctx context.Context, sts *appsv1.StatefulSet) (string, error) {
	sec := &corev1.Secret{}
	if err := r.opts.APIReader.Get(ctx, client.ObjectKey{Namespace: sts.Namespace, Name: memberTokenSecret(sts.Name)}, sec); err != nil {
		return "", fmt.Errorf("read the token of pool member %s: %w", sts.Name, err)
	}
	tok := string(sec.Data[TokenKey])
	if tok == "" {
		return "", fmt.Errorf("pool member %s has no token", sts.Name)
	}
	return tok, nil
}

// reservationOf is the StatefulSet reserved for (or adopted by) agent, or nil: the one this
// process reserved (read from the API server when the cache does not show it yet), else one
// the cache shows labelled for the agent's UID.
func (r *Runtime) reservationOf(ctx context.Context, agent *agentsv1.Agent) (*appsv1.StatefulSet, error) {
	r.pools.mu.Lock()
	res, mine := r.pools.reserved[agent.UID]
	r.pools.mu.Unlock()
	if mine {
		sts := &appsv1.StatefulSet{}
		err := r.opts.Client.Get(ctx, res.member, sts)
		if apierrors.IsNotFound(err) || (err == nil && sts.Labels[LabelReservedFor] != string(agent.UID)) {
			err = r.opts.APIReader.Get(ctx, res.member, sts) // the cache may lag behind the reservation
		}
		switch {
		case err == nil && sts.Labels[LabelReservedFor] == string(agent.UID) && sts.DeletionTimestamp == nil:
			return sts, nil
		case err == nil || apierrors.IsNotFound(err):
			r.forgetReservation(agent.UID) // expired and deleted, or taken back
		default:
			return nil, fmt.Errorf("get reserved pool member: %w", err)
		}
	}
	if agent.Status.GatewayTokenSecret != "" {
		// Past its first Ensure (the controller records the token Secret after it): an agent
		// that took no reservation then never has one, so its passes list nothing.
		return nil, nil
	}
	var sets appsv1.StatefulSetList
	if err := r.opts.Client.List(ctx, &sets, client.InNamespace(agent.Namespace),
		client.MatchingLabels{LabelReservedFor: string(agent.UID)}); err != nil {
		return nil, fmt.Errorf("list reserved pool members: %w", err)
	}
	for i := range sets.Items {
		if sets.Items[i].DeletionTimestamp == nil {
			return &sets.Items[i], nil
		}
	}
	return nil, nil
}

func (r *Runtime) forgetReservation(uid types.UID) {
	r.pools.mu.Lock()
	delete(r.pools.reserved, uid)
	r.pools.mu.Unlock()
}

// reservedSince is when this process reserved a member for the agent (zero: not known here).
func (r *Runtime) reservedSince(uid types.UID) time.Time {
	r.pools.mu.Lock()
	defer r.pools.mu.Unlock()
	return r.pools.reserved[uid].at
}
