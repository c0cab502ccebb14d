package kube

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// Adoption of a reserved pool member by its agent, in the agent's first Ensure:
//
//  1. takeReservation records the member's StatefulSet on the Agent (AnnotationGatewaySet):
//     from then on every path of the runtime names the member's objects.
//  2. Ensure applies the agent's StatefulSet over the member's (adoptedShape: the member's
//     selector, OnDelete): the agent becomes its controller, its labels and template replace
//     the pool's, its home is retained when the StatefulSet is deleted (the member's went with
//     it); the pod keeps running.
//  3. bindPod writes the agent's initial engine config (its identity) into the home, which the
//     gateway reloads by itself, and gives the live pod the agent's labels (the Services,
//     NetworkPolicy and Domains select pods by them) and the agent's config hash, rendering
//     and pod settings, since the pod serves what the agent's template describes: the same
//     token, no environment.
//
// Each step is idempotent and the next Ensure resumes a manager that died between them.

// takeReservation starts the adoption of the member reserved for agent, if any (step 1). A
// reservation the agent cannot use as it is (claimable) is discarded: the member is deleted
// (its token is the agent's now) and the agent starts cold.
func (r *Runtime) takeReservation(ctx context.Context, agent *agentsv1.Agent, d runtime.Desired) error {
	if adopted(agent) {
		return nil
	}
	r.pools.mu.Lock()
	name, recorded := r.pools.adopted[agent.UID]
	r.pools.mu.Unlock()
	if recorded {
		// Recorded by this process; the cache the agent came from has not caught up.
		agent.Annotations = maps.Clone(agent.Annotations)
		if agent.Annotations == nil {
			agent.Annotations = map[string]string{}
		}
		agent.Annotations[AnnotationGatewaySet] = name
		return nil
	}
	sts, err := r.reservationOf(ctx, agent)
	if err != nil || sts == nil {
		return err
	}
	if !claimable(agent, d, r.opts) {
		r.forgetReservation(agent.UID)
		err := r.opts.Client.Delete(ctx, sts, client.Preconditions{UID: &sts.UID}, client.PropagationPolicy(metav1.DeletePropagationBackground))
		return client.IgnoreNotFound(err)
	}
	cur := agent.DeepCopy()
	patch := client.MergeFrom(cur.DeepCopy())
	if cur.Annotations == nil {
		cur.Annotations = map[string]string{}
	}
	cur.Annotations[AnnotationGatewaySet] = sts.Name
	if err := r.opts.Client.Patch(ctx, cur, patch); err != nil {
		return fmt.Errorf("record the adopted pool member on the agent: %w", err)
	}
	// The caller's agent shows the write (its status stays what the pass computed).
	agent.Annotations, agent.ResourceVersion = cur.Annotations, cur.ResourceVersion
	r.pools.mu.Lock()
	if r.pools.adopted == nil {
		r.pools.adopted = map[types.UID]string{}
	}
	r.pools.adopted[agent.UID] = sts.Name
	r.pools.mu.Unlock()
	return nil
}

// bindPod finishes the adoption with the live pod (step 3) when it is still the member's, and
// returns the pod (nil: none to report) and whether this call bound it. A member pod that does
// not run is deleted instead: the StatefulSet makes the agent's own.
func (r *Runtime) bindPod(ctx context.Context, agent *agentsv1.Agent, d runtime.Desired, want *corev1.PodTemplateSpec, pod *corev1.Pod) (*corev1.Pod, string, error) {
	id := memberID(StatefulSetName(agent))
	if pod == nil || pod.Labels[LabelPoolMember] != id || pod.Labels[agentsv1.LabelAgent] != "" {
		return pod, "", nil
	}
	if !gatewayRunning(pod) {
		err := r.opts.Client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID})
		return nil, "", client.IgnoreNotFound(err)
	}
	cfg, err := r.opts.Engine.InitialConfig(d.Identity, "")
	if err != nil {
		return nil, "", fmt.Errorf("initial config: %w", err)
	}
	stderr := newCapped(64 << 10)
	err = r.exec(ctx, pod.Namespace, pod.Name, writeCommand(r.home, r.layout.ConfigPath), bytes.NewReader(cfg), io.Discard, stderr)
	if code, err := exitCode(err); err != nil {
		return nil, "", fmt.Errorf("write the agent's config into the adopted gateway: %w", streamError(err))
	} else if code != 0 {
		return nil, "", commandFailed("write the agent's config into the adopted gateway", code, stderr.Bytes())
	}
	pool := pod.Labels[LabelPool]
	base := pod.DeepCopy()
	pod.Labels = agentLabels(pod.Labels, agent, r.opts)
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	for _, k := range []string{agentsv1.AnnotationConfigHash, AnnotationRendering, AnnotationPodSettings} {
		pod.Annotations[k] = want.Annotations[k]
	}
	if err := r.opts.Client.Patch(ctx, pod, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return nil, "", fmt.Errorf("label the adopted pod: %w", err)
	}
	if err := r.relabelHome(ctx, agent, id); err != nil {
		return nil, "", err
	}
	took := time.Duration(0)
	if since := r.reservedSince(agent.UID); !since.IsZero() {
		took = r.opts.Clock.Now().Sub(since)
	}
	r.forgetReservation(agent.UID)
	if pool != "" {
		r.recordClaim(pool, StatefulSetName(agent), types.NamespacedName{Namespace: agent.Namespace, Name: agent.Name}, took)
	}
	return pod, pool + "/" + StatefulSetName(agent), nil
}

// gatewayRunning: the pod's gateway container runs and the pod is not going away.
func gatewayRunning(pod *corev1.Pod) bool {
	cs := containerStatus(pod.Status.ContainerStatuses, ContainerGateway)
	return pod.DeletionTimestamp == nil && pod.Status.Phase == corev1.PodRunning && cs != nil && cs.State.Running != nil
}

// agentLabels are a member's labels turned into the agent's: the agent's own set, the
// StatefulSet controller's kept, the pool's removed.
func agentLabels(have map[string]string, agent *agentsv1.Agent, o Options) map[string]string {
	out := maps.Clone(have)
	delete(out, LabelPool)
	delete(out, LabelPoolVersion)
	maps.Copy(out, Labels(agent, o.Engine.Name()))
	return out
}

// relabelHome gives the home volume of member id, which the agent adopted, the agent's labels
// (Delete checks them). A claim of that name that is not the member's is left alone.
func (r *Runtime) relabelHome(ctx context.Context, agent *agentsv1.Agent, id string) error {
	pvc := &corev1.PersistentVolumeClaim{}
	err := r.opts.APIReader.Get(ctx, client.ObjectKey{Namespace: agent.Namespace, Name: PVCName(agent)}, pvc)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get the adopted home volume: %w", err)
	}
	if pvc.Labels[agentsv1.LabelAgent] != "" || pvc.Labels[LabelPoolMember] != id {
		return nil // the agent's already, or not the member's
	}
	base := pvc.DeepCopy()
	pvc.Labels = agentLabels(pvc.Labels, agent, r.opts)
	if err := r.opts.Client.Patch(ctx, pvc, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("label the adopted home volume: %w", err)
	}
	return nil
}

// ownAdoptedHome makes the home of the member the agent adopted the agent's (relabelHome)
// before Delete, when bindPod has not: the member's pod did not run, or was gone, when the
// agent adopted it, or a manager died before binding it. The home is the member's when the
// StatefulSet the agent names is that member (its id) and is the agent's or reserved for it.
func (r *Runtime) ownAdoptedHome(ctx context.Context, agent *agentsv1.Agent) error {
	if !adopted(agent) {
		return nil
	}
	sts := &appsv1.StatefulSet{}
	err := r.opts.APIReader.Get(ctx, client.ObjectKey{Namespace: agent.Namespace, Name: StatefulSetName(agent)}, sts)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get the adopted pool member: %w", err)
	}
	id := memberID(sts.Name)
	ours := sts.Labels[agentsv1.LabelAgent] == agent.Name || sts.Labels[LabelReservedFor] == string(agent.UID)
	if !ours || sts.Labels[LabelPoolMember] != id {
		return nil
	}
	return r.relabelHome(ctx, agent, id)
}

// dropReservations deletes what is reserved for (or adopted by) the agent under its UID:
// a member it never adopted, or an adoption a dead manager left half done.
func (r *Runtime) dropReservations(ctx context.Context, agent *agentsv1.Agent) error {
	r.forgetReservation(agent.UID)
	r.pools.mu.Lock()
	delete(r.pools.adopted, agent.UID)
	r.pools.mu.Unlock()
	var sets appsv1.StatefulSetList
	if err := r.opts.APIReader.List(ctx, &sets, client.InNamespace(agent.Namespace),
		client.MatchingLabels{LabelReservedFor: string(agent.UID)}); err != nil {
		return fmt.Errorf("list reserved pool members: %w", err)
	}
	for i := range sets.Items {
		s := &sets.Items[i]
		if err := r.opts.Client.Delete(ctx, s, client.Preconditions{UID: &s.UID},
			client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete reserved pool member %s: %w", s.Name, err)
		}
	}
	return nil
}
