package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/csaupgrade"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// Ensure applies the agent's StatefulSet (server-side apply, field manager "agentplane"; an
// unchanged apply is a no-op on the server), makes sure the Service that governs it exists,
// and reports what the StatefulSet and its pod show.
func (r *Runtime) Ensure(ctx context.Context, agent *agentsv1.Agent, d runtime.Desired) (runtime.Observed, error) {
	o := r.opts
	if err := r.takeReservation(ctx, agent, d); err != nil {
		return runtime.Observed{}, err
	}
	sts, err := BuildStatefulSet(agent, d, o)
	if err != nil {
		return runtime.Observed{}, err
	}
	r.stampRendering(agent, d, &sts.Spec.Template)
	// The policy first: a new gateway pod starts isolated.
	if err := r.ensureNetworkPolicy(ctx, agent, d); err != nil {
		return runtime.Observed{}, err
	}
	var live appsv1.StatefulSet
	exists := false
	switch err := o.Client.Get(ctx, client.ObjectKeyFromObject(sts), &live); {
	case err == nil:
		exists = true
		keepClaims(sts, &live)
		// Immutable: an agent made by an earlier version keeps the Service of its own.
		sts.Spec.ServiceName = live.Spec.ServiceName
	case !apierrors.IsNotFound(err):
		return runtime.Observed{}, fmt.Errorf("get statefulset: %w", err)
	}
	svc, err := r.governingService(agent, sts)
	if err != nil {
		return runtime.Observed{}, err
	}
	applied, err := r.applyIfChanged(ctx, svc, sts, exists, &live)
	if err != nil {
		return runtime.Observed{}, err
	}
	pod, claimedFrom, err := r.agentPod(ctx, agent, d, &sts.Spec.Template)
	if err != nil {
		return runtime.Observed{}, err
	}
	outdated, err := r.settlePod(ctx, d, &sts.Spec.Template, pod)
	if err != nil {
		return runtime.Observed{}, err
	}
	obs := observe(applied, pod, r.nodeOf(ctx, pod), want{
		Hash:          ConfigHash(d),
		Image:         Image(o.Image, d.EngineVersion),
		Version:       d.EngineVersion,
		Endpoint:      Endpoint(agent, sts.Spec.ServiceName),
		ImageTemplate: o.Image,
		Stopped:       d.Stopped,
	})
	obs.ClaimedFrom = claimedFrom
	obs.Rendering, obs.RenderingOutdated = sts.Spec.Template.Annotations[AnnotationRendering], outdated
	return obs, nil
}

// applyIfChanged applies svc and sts unless the live StatefulSet (if it exists) or an apply
// of the same objects moments ago shows them, and returns the StatefulSet as applied.
func (r *Runtime) applyIfChanged(ctx context.Context, svc *corev1.Service, sts *appsv1.StatefulSet, exists bool, live *appsv1.StatefulSet) (*appsv1.StatefulSet, error) {
	// The fingerprint of what this pass builds, so it is the same on every pass until the
	// agent or the options change. The volume claim templates are left out: they are
	// immutable, so option changes to them apply to new agents only (keepClaims).
	noClaims := sts.DeepCopy()
	noClaims.Spec.VolumeClaimTemplates = nil
	fp, err := fingerprint(svc, noClaims)
	if err != nil {
		return nil, err
	}
	applied, key := live, client.ObjectKeyFromObject(sts)
	if exists && r.upToDate(ctx, fp, live, svc) {
		// The cache shows the apply: nothing to remember any more.
		r.recent.Delete(key)
	} else if recent := r.recentApply(key, fp); recent != nil {
		// This runtime applied the same objects moments ago; the cache has not caught up.
		applied = recent
	} else {
		if applied, err = r.applyAll(ctx, fp, svc, sts, exists, live); err != nil {
			return nil, err
		}
		// Kept as the cache keeps it: no pod template, no managedFields.
		kept, _ := trimStatefulSet(applied.DeepCopy())
		r.recent.Store(key, recentApply{fp: fp, at: r.opts.Clock.Now(), sts: kept.(*appsv1.StatefulSet)})
		r.sweepRecent()
	}
	return applied, nil
}

// agentPod is the agent's pod (nil: none, or not the agent's), bound to it first when the
// agent was adopted from a pool (claimedFrom: the pool member it came from; want: the
// agent's pod template).
func (r *Runtime) agentPod(ctx context.Context, agent *agentsv1.Agent, d runtime.Desired, want *corev1.PodTemplateSpec) (pod *corev1.Pod, claimedFrom string, err error) {
	pod = &corev1.Pod{}
	switch err := r.opts.Client.Get(ctx, types.NamespacedName{Namespace: agent.Namespace, Name: PodName(agent)}, pod); {
	case apierrors.IsNotFound(err):
		pod = nil
	case err != nil:
		return nil, "", fmt.Errorf("get pod: %w", err)
	}
	if adopted(agent) {
		if pod, claimedFrom, err = r.bindPod(ctx, agent, d, want, pod); err != nil {
			return nil, "", err
		}
	}
	if pod != nil && !ownedPod(pod, agent) {
		pod = nil
	}
	return pod, claimedFrom, nil
}

// nodeOf is the node of a pod that is not Ready (the cause may be its node), or nil: not
// needed, or not readable (observe then reports from the pod alone).
func (r *Runtime) nodeOf(ctx context.Context, pod *corev1.Pod) *corev1.Node {
	if pod == nil || pod.Spec.NodeName == "" {
		return nil
	}
	if c := podCondition(pod, corev1.PodReady); c != nil && c.Status == corev1.ConditionTrue {
		return nil
	}
	node := &corev1.Node{}
	if err := r.opts.Client.Get(ctx, client.ObjectKey{Name: pod.Spec.NodeName}, node); err != nil {
		return nil
	}
	return node
}

// recentApplyWindow is how long an apply of this runtime stands in for a cache that has not
// seen it yet. Cache lag is usually milliseconds; the window bounds how long an object
// deleted right after its apply goes unnoticed.
const recentApplyWindow = 5 * time.Second

// recentApply is what this runtime last applied for one agent.
type recentApply struct {
	fp  string
	at  time.Time
	sts *appsv1.StatefulSet
}

// sweepRecent drops, at most once per window, the remembered applies past the window: an
// agent whose cache caught up without another pass would otherwise keep its entry.
func (r *Runtime) sweepRecent() {
	now := r.opts.Clock.Now()
	last := r.recentSwept.Load()
	if now.Sub(time.Unix(0, last)) < recentApplyWindow || !r.recentSwept.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	r.recent.Range(func(k, v any) bool {
		if now.Sub(v.(recentApply).at) > recentApplyWindow {
			r.recent.Delete(k)
		}
		return true
	})
}

// recentApply returns the StatefulSet this runtime applied with fingerprint fp within the
// window, or nil: the pass that follows an apply (triggered by the objects it created)
// would otherwise apply everything again because the cache lags.
func (r *Runtime) recentApply(key client.ObjectKey, fp string) *appsv1.StatefulSet {
	v, ok := r.recent.Load(key)
	if !ok {
		return nil
	}
	m := v.(recentApply)
	if m.fp != fp || r.opts.Clock.Now().Sub(m.at) > recentApplyWindow {
		return nil
	}
	return m.sts.DeepCopy()
}

// governingService is the Service that governs sts: the namespace's GoverningService, or the
// agent's own for a StatefulSet made by an earlier version.
func (r *Runtime) governingService(agent *agentsv1.Agent, sts *appsv1.StatefulSet) (*corev1.Service, error) {
	if sts.Spec.ServiceName == GoverningService {
		return BuildGoverningService(agent.Namespace, r.opts)
	}
	return BuildService(agent, r.opts)
}

// applyAll makes sure the governing Service exists and applies the StatefulSet, marked with
// the fingerprint of the two, and returns the StatefulSet the server answered with. A
// StatefulSet the cache does not show is created rather than applied: a server-side apply
// costs the API server more than twice a create for an object this size, and a create is most
// of what thousands of new agents ask.
func (r *Runtime) applyAll(ctx context.Context, fp string, svc *corev1.Service, sts *appsv1.StatefulSet, exists bool, live *appsv1.StatefulSet) (*appsv1.StatefulSet, error) {
	if sts.Annotations == nil {
		sts.Annotations = map[string]string{}
	}
	sts.Annotations[agentsv1.AnnotationApplied] = fp
	if svc.Name == GoverningService {
		if err := r.ensureGoverning(ctx, svc); err != nil {
			return nil, fmt.Errorf("create service: %w", err)
		}
	} else if err := r.applyService(ctx, svc); err != nil {
		return nil, fmt.Errorf("apply service: %w", err)
	}
	if !exists {
		created := sts.DeepCopy()
		created.Annotations[agentsv1.AnnotationCreated] = "true"
		err := r.opts.Client.Create(ctx, created, client.FieldOwner(FieldManager))
		if err == nil {
			return created, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create statefulset: %w", err)
		}
		live = nil // made meanwhile, unseen by the cache: its fields may need adopting
	}
	if err := r.adoptCreated(ctx, client.ObjectKeyFromObject(sts), live); err != nil {
		return nil, fmt.Errorf("adopt statefulset fields: %w", err)
	}
	u, err := r.apply(ctx, sts)
	if err != nil {
		return nil, fmt.Errorf("apply statefulset: %w", err)
	}
	applied := &appsv1.StatefulSet{}
	if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructured(u.Object, applied); err != nil {
		return nil, fmt.Errorf("decode statefulset: %w", err)
	}
	return applied, nil
}

// adoptCreated hands the fields a plain create set (owned by FieldManager's update entry) to
// FieldManager's apply entry, so that an apply leaving a field out removes it, as if the
// StatefulSet had been applied from the start (client-go's csaupgrade). Only a StatefulSet
// marked AnnotationCreated needs it (live, from the cache: nil when unknown); the apply that
// follows drops the mark.
func (r *Runtime) adoptCreated(ctx context.Context, key client.ObjectKey, live *appsv1.StatefulSet) error {
	if live != nil && live.Annotations[agentsv1.AnnotationCreated] == "" {
		return nil
	}
	cur := &appsv1.StatefulSet{}
	if err := r.opts.APIReader.Get(ctx, key, cur); err != nil {
		return client.IgnoreNotFound(err)
	}
	patch, err := csaupgrade.UpgradeManagedFieldsPatch(cur, sets.New(FieldManager), FieldManager)
	if err != nil || patch == nil {
		return err
	}
	return r.opts.Client.Patch(ctx, cur, client.RawPatch(types.JSONPatchType, patch))
}

// ensureGoverning creates namespace svc.Namespace's GoverningService when the cache does not
// show it and this runtime has not made it moments ago: one write per namespace, not per agent.
// It is created, never applied: nothing of it depends on an agent, and a Service someone
// changed by hand is left as it is.
func (r *Runtime) ensureGoverning(ctx context.Context, svc *corev1.Service) error {
	now := r.opts.Clock.Now()
	if at, ok := r.governing.Load(svc.Namespace); ok && now.Sub(at.(time.Time)) < recentApplyWindow {
		return nil
	}
	if r.exists(ctx, client.ObjectKeyFromObject(svc)) {
		return nil
	}
	err := r.opts.Client.Create(ctx, svc, client.FieldOwner(FieldManager))
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	r.governing.Store(svc.Namespace, now)
	return nil
}

// applyService applies the Service of its own of an agent made by an earlier version. A Service made by an earlier version with a
// ClusterIP cannot become headless in place (the address is immutable): it is replaced.
func (r *Runtime) applyService(ctx context.Context, svc *corev1.Service) error {
	_, err := r.apply(ctx, svc)
	if !apierrors.IsInvalid(err) {
		return err
	}
	old := &corev1.Service{}
	if err := r.opts.APIReader.Get(ctx, client.ObjectKeyFromObject(svc), old); err != nil {
		return err
	}
	if old.Spec.ClusterIP == corev1.ClusterIPNone || old.Labels[agentsv1.LabelAgent] != svc.Labels[agentsv1.LabelAgent] {
		return err
	}
	if err := r.opts.Client.Delete(ctx, old, client.Preconditions{UID: ptrUID(old.UID)}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	_, err = r.apply(ctx, svc)
	return err
}

// upToDate reports whether the live StatefulSet (from the cache) carries the fingerprint of
// what this pass would apply and its governing Service exists: then the applies would change
// nothing and are skipped.
func (r *Runtime) upToDate(ctx context.Context, fp string, live *appsv1.StatefulSet, svc *corev1.Service) bool {
	if live.Annotations[agentsv1.AnnotationApplied] != fp || live.DeletionTimestamp != nil {
		return false
	}
	return r.exists(ctx, client.ObjectKeyFromObject(svc))
}

// exists reports whether the cache shows the Service key, not being deleted. Its existence is
// all that is read: the cache holds Services' metadata only (SetupWatches).
func (r *Runtime) exists(ctx context.Context, key client.ObjectKey) bool {
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Service"))
	err := r.opts.Client.Get(ctx, key, meta)
	return err == nil && meta.GetDeletionTimestamp() == nil
}

// fingerprint hashes the objects as they would be applied.
func fingerprint(objs ...client.Object) (string, error) {
	h := sha256.New()
	for _, obj := range objs {
		u, err := applyObject(obj)
		if err != nil {
			return "", err
		}
		raw, err := json.Marshal(u.Object)
		if err != nil {
			return "", err
		}
		h.Write(raw)
	}
	return hex.EncodeToString(h.Sum(nil))[:32], nil
}

// keepClaims keeps the live volume claim templates when ours differ: they are immutable, so a
// changed storage size or class applies to new agents only.
func keepClaims(desired, live *appsv1.StatefulSet) {
	if len(live.Spec.VolumeClaimTemplates) == 0 || len(desired.Spec.VolumeClaimTemplates) != len(live.Spec.VolumeClaimTemplates) {
		return
	}
	for i, want := range desired.Spec.VolumeClaimTemplates {
		have := live.Spec.VolumeClaimTemplates[i]
		same := want.Name == have.Name &&
			equality.Semantic.DeepEqual(want.Spec.Resources, have.Spec.Resources) &&
			equality.Semantic.DeepEqual(want.Spec.AccessModes, have.Spec.AccessModes) &&
			equality.Semantic.DeepEqual(want.Spec.StorageClassName, have.Spec.StorageClassName) &&
			equality.Semantic.DeepEqual(want.Labels, have.Labels)
		if !same {
			have.Status = corev1.PersistentVolumeClaimStatus{}
			desired.Spec.VolumeClaimTemplates[i] = have
		}
	}
}

// ownedPod tells the agent's pod from an unrelated pod with the same name.
func ownedPod(pod *corev1.Pod, agent *agentsv1.Agent) bool {
	return pod.Labels[agentsv1.LabelAgent] == agent.Name && pod.Labels[agentsv1.LabelAppManagedBy] == agentsv1.ManagedBy
}

// apply server-side applies obj and returns the object the server answered with.
func (r *Runtime) apply(ctx context.Context, obj client.Object) (*unstructured.Unstructured, error) {
	u, err := applyObject(obj)
	if err != nil {
		return nil, err
	}
	err = r.opts.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner(FieldManager), client.ForceOwnership)
	return u, err
}

// applyObject converts a built object into an apply configuration: it leaves out status and
// the empty creation timestamps a typed object carries, so we claim only the fields we set.
func applyObject(obj client.Object) (*unstructured.Unstructured, error) {
	m, err := k8sruntime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	delete(m, "status")
	prune(m)
	return &unstructured.Unstructured{Object: m}, nil
}

// prune drops null creation timestamps and PVC statuses anywhere in the object.
func prune(v any) {
	switch v := v.(type) {
	case map[string]any:
		if md, ok := v["metadata"].(map[string]any); ok && md["creationTimestamp"] == nil {
			delete(md, "creationTimestamp")
		}
		if claims, ok := v["volumeClaimTemplates"].([]any); ok {
			for _, c := range claims {
				if c, ok := c.(map[string]any); ok {
					delete(c, "status")
				}
			}
		}
		for _, x := range v {
			prune(x)
		}
	case []any:
		for _, x := range v {
			prune(x)
		}
	}
}

// Delete scales the gateway to zero and deletes the agent's objects, its pod and its home
// volume. Owner references garbage-collect the others on a real cluster too; deleting them
// here makes Delete complete without a garbage collector. The home goes only here: the
// StatefulSet retains it (buildStatefulSet), so an Agent lost without a user deleting it
// loses no files.
func (r *Runtime) Delete(ctx context.Context, agent *agentsv1.Agent) error {
	if err := r.ownAdoptedHome(ctx, agent); err != nil {
		return err
	}
	r.recent.Delete(client.ObjectKey{Namespace: agent.Namespace, Name: StatefulSetName(agent)})
	r.recent.Delete(policyKey{Namespace: agent.Namespace, Name: NetworkPolicyName(agent)})
	c := r.opts.Client
	ns := agent.Namespace
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: StatefulSetName(agent)}}
	scale := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":0}}`))
	if err := c.Patch(ctx, sts, scale, client.FieldOwner(FieldManager)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("scale statefulset to zero: %w", err)
	}
	objs := []client.Object{
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: StatefulSetName(agent)}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: PodName(agent)}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ServiceName(agent)}},
		// The seed ConfigMap of agents made before the seed config moved into the pod spec.
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: legacySeedConfigMapName(agent)}},
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: PVCName(agent)}},
	}
	if r.opts.Network.Enabled {
		objs = append(objs, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: NetworkPolicyName(agent)}})
	}
	for _, obj := range objs {
		if err := r.opts.APIReader.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return fmt.Errorf("get %T %s: %w", obj, obj.GetName(), err)
		}
		if obj.GetLabels()[agentsv1.LabelAgent] != agent.Name {
			continue // same name, not ours: leave it alone
		}
		err := c.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground),
			client.Preconditions{UID: ptrUID(obj.GetUID())})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete %T %s: %w", obj, obj.GetName(), err)
		}
	}
	return r.dropReservations(ctx, agent)
}

func ptrUID(u types.UID) *types.UID { return &u }
