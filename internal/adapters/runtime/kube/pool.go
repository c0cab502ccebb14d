package kube

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/rules/auth"
)

// Warm pools on the kube runtime. A pool keeps Size members in each of its namespaces: a
// member is a StatefulSet `pool-<id>` (BuildMember) whose pod boots the gateway with a token
// of its own and waits. Everything a pool holds is read from the API server's objects (the
// manager's cache), so another manager, or this one restarted, sees the same pool; only the
// claim history, the failure count and the members created moments ago (which the cache may
// not show yet) are kept in this process.
var (
	_ runtime.Pooler          = (*Runtime)(nil)
	_ runtime.GatewayReserver = (*Runtime)(nil)
)

// ReservationTTL is how long a reserved member waits for its agent's first Ensure; then it
// is deleted (its token is the agent's: it is never handed to another).
const ReservationTTL = 5 * time.Minute

// Backoff of a pool whose members fail: the next member starts memberBackoff after the first
// failure, doubled with every failure in a row, at most maxMemberBackoff.
const (
	memberBackoff    = 10 * time.Second
	maxMemberBackoff = 5 * time.Minute
)

// pools is the process-local part of the warm pools.
type pools struct {
	mu    sync.Mutex
	byKey map[string]*kpool
	// reserved: agent UID -> the member reserved for it by this process.
	reserved map[types.UID]reservation
	// adopted: agent UID -> the member StatefulSet this process recorded on the agent (until
	// the agent is deleted), for passes whose cached Agent does not show the annotation yet.
	adopted map[types.UID]string
}

type reservation struct {
	member types.NamespacedName
	at     time.Time
}

// kpool is what this process keeps of one pool.
type kpool struct {
	spec     runtime.PoolSpec
	claimed  int64
	claims   []runtime.PoolClaim
	failures int32
	lastFail string
	retryAt  time.Time
	// recent: members this process created or deleted moments ago (the cache may not show
	// it yet): "<namespace>/<name>" -> when, and whether it was created.
	recent map[string]recentMember
}

type recentMember struct {
	at      time.Time
	created bool
}

func (r *Runtime) pool(name string) *kpool {
	r.pools.mu.Lock()
	defer r.pools.mu.Unlock()
	if r.pools.byKey == nil {
		r.pools.byKey = map[string]*kpool{}
	}
	p := r.pools.byKey[name]
	if p == nil {
		p = &kpool{recent: map[string]recentMember{}}
		r.pools.byKey[name] = p
	}
	return p
}

// member is a pool member as the cache shows it, with its pod (nil: none yet).
type member struct {
	sts *appsv1.StatefulSet
	pod *corev1.Pod
}

func (m member) key() string { return m.sts.Namespace + "/" + m.sts.Name }

func (m member) ready() bool { return m.pod != nil && podReady(m.pod) }

func (m member) reservedAt() (time.Time, bool) {
	if m.sts.Labels[LabelReservedFor] == "" {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, m.sts.Annotations[AnnotationReservedAt])
	return t, err == nil
}

// podReady: the pod is Ready (its gateway answers /readyz) and not going away.
func podReady(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil {
		return false
	}
	c := podCondition(pod, corev1.PodReady)
	gw := containerStatus(pod.Status.ContainerStatuses, ContainerGateway)
	return c != nil && c.Status == corev1.ConditionTrue && gw != nil && gw.Ready
}

// members lists the members of pool name that no agent adopted yet, in every namespace (or
// in ns only), not being deleted.
func (r *Runtime) members(ctx context.Context, name, ns string) ([]member, error) {
	opts := []client.ListOption{client.MatchingLabels{LabelPool: name}}
	if ns != "" {
		opts = append(opts, client.InNamespace(ns))
	}
	var sets appsv1.StatefulSetList
	if err := r.opts.Client.List(ctx, &sets, opts...); err != nil {
		return nil, fmt.Errorf("list pool members: %w", err)
	}
	var pods corev1.PodList
	if err := r.opts.Client.List(ctx, &pods, opts...); err != nil {
		return nil, fmt.Errorf("list pool pods: %w", err)
	}
	byName := map[string]*corev1.Pod{}
	for i := range pods.Items {
		p := &pods.Items[i]
		byName[p.Namespace+"/"+p.Name] = p
	}
	out := make([]member, 0, len(sets.Items))
	for i := range sets.Items {
		s := &sets.Items[i]
		if s.DeletionTimestamp != nil {
			continue
		}
		out = append(out, member{sts: s, pod: byName[s.Namespace+"/"+s.Name+"-0"]})
	}
	return out, nil
}

// SetPool implements runtime.Pooler: each of spec.Namespaces keeps spec.Size unreserved
// members of spec.Version. Members of another version, of a namespace no longer named, beyond
// the size, whose pod crashed, or reserved past ReservationTTL are deleted; missing ones are
// created (not before the backoff after failures).
func (r *Runtime) SetPool(ctx context.Context, name string, spec runtime.PoolSpec) error {
	spec.Size = max(spec.Size, 0)
	spec.Namespaces = slices.Compact(slices.Sorted(slices.Values(spec.Namespaces)))
	p := r.pool(name)
	r.pools.mu.Lock()
	if !slices.Equal(p.spec.Namespaces, spec.Namespaces) || p.spec.Version != spec.Version {
		p.failures, p.retryAt, p.lastFail = 0, time.Time{}, ""
	}
	p.spec = spec
	r.pools.mu.Unlock()
	all, err := r.members(ctx, name, "")
	if err != nil {
		return err
	}
	now := r.opts.Clock.Now()
	keep, errs := r.sortMembers(ctx, p, all, spec, now)
	if len(spec.Namespaces) == 0 {
		return errors.Join(append(errs, runtime.ErrPoolNoNamespaces)...)
	}
	var gp *agentsv1.GatewayPool
	for _, ns := range spec.Namespaces {
		have := keep[ns]
		have = append(have, r.recentlyCreated(p, ns, have, now)...)
		if len(have) > spec.Size {
			// Booting ones go first: the ready ones are what the pool is for.
			slices.SortStableFunc(have, func(a, b member) int { return boolCmp(a.ready(), b.ready()) })
			for _, m := range have[:len(have)-spec.Size] {
				if m.sts.UID != "" { // one created moments ago is removed once the cache shows it
					errs = append(errs, r.deleteMember(ctx, p, m))
				}
			}
			continue
		}
		for i := len(have); i < spec.Size; i++ {
			r.pools.mu.Lock()
			wait := now.Before(p.retryAt)
			r.pools.mu.Unlock()
			if wait {
				break
			}
			if gp == nil {
				gp = &agentsv1.GatewayPool{}
				if err := r.opts.Client.Get(ctx, client.ObjectKey{Name: name}, gp); err != nil {
					return errors.Join(append(errs, fmt.Errorf("get gateway pool: %w", err))...)
				}
			}
			if err := r.createMember(ctx, p, gp, ns, spec.Version); err != nil {
				errs = append(errs, err)
				break
			}
		}
	}
	return errors.Join(errs...)
}

// sortMembers deletes the pool's members that are reserved (once their reservation is
// older than ReservationTTL), outside its namespaces or version, or crashed, and returns the
// others by namespace with the errors of the deletes. A ready member clears the pool's
// failures.
func (r *Runtime) sortMembers(ctx context.Context, p *kpool, all []member, spec runtime.PoolSpec, now time.Time) (map[string][]member, []error) {
	keep := map[string][]member{}
	var errs []error
	for _, m := range all {
		if r.recentlyDeleted(p, m.key(), now) {
			continue
		}
		r.pools.mu.Lock()
		if p.recent[m.key()].created {
			delete(p.recent, m.key()) // the cache shows it
		}
		r.pools.mu.Unlock()
		if at, reserved := m.reservedAt(); reserved || m.sts.Labels[LabelReservedFor] != "" {
			if !reserved || now.Sub(at) > ReservationTTL {
				errs = append(errs, r.deleteMember(ctx, p, m))
			}
			continue
		}
		if !slices.Contains(spec.Namespaces, m.sts.Namespace) || m.sts.Labels[LabelPoolVersion] != spec.Version {
			errs = append(errs, r.deleteMember(ctx, p, m))
			continue
		}
		if m.pod != nil {
			if c, bad := crashed(m.pod); bad {
				r.memberFailed(p, m, c.Reason+": "+c.Message, now)
				errs = append(errs, r.deleteMember(ctx, p, m))
				continue
			}
		}
		if m.ready() {
			r.pools.mu.Lock()
			p.failures, p.retryAt, p.lastFail = 0, time.Time{}, ""
			r.pools.mu.Unlock()
		}
		keep[m.sts.Namespace] = append(keep[m.sts.Namespace], m)
	}
	return keep, errs
}

func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// createMember makes a new member of pool gp in ns: its token Secret first (the pod needs
// it to start) and its NetworkPolicy (the pod starts isolated), the namespace's governing
// Service, the StatefulSet; then the Secret and the policy are handed to the StatefulSet (so
// they live as long as the member's pod, adopted or not).
func (r *Runtime) createMember(ctx context.Context, p *kpool, gp *agentsv1.GatewayPool, ns, version string) error {
	sts, err := BuildMember(gp, ns, newMemberID(), version, r.opts)
	if err != nil {
		return err
	}
	sec := BuildMemberToken(gp, sts, auth.NewGatewayToken())
	c := r.opts.Client
	if err := c.Create(ctx, sec, client.FieldOwner(FieldManager)); err != nil {
		return fmt.Errorf("create member token: %w", err)
	}
	deps := []client.Object{sec}
	if r.opts.Network.Enabled {
		np, err := BuildMemberNetworkPolicy(gp, sts, r.opts)
		if err != nil {
			return err
		}
		if err := c.Create(ctx, np, client.FieldOwner(FieldManager)); err != nil {
			return fmt.Errorf("create member network policy: %w", err)
		}
		deps = append(deps, np)
	}
	svc, err := BuildGoverningService(ns, r.opts)
	if err != nil {
		return err
	}
	if err := r.ensureGoverning(ctx, svc); err != nil {
		return fmt.Errorf("create service: %w", err)
	}
	if err := c.Create(ctx, sts, client.FieldOwner(FieldManager)); err != nil {
		for _, d := range deps {
			_ = c.Delete(ctx, d)
		}
		return fmt.Errorf("create member: %w", err)
	}
	r.pools.mu.Lock()
	p.recent[ns+"/"+sts.Name] = recentMember{at: r.opts.Clock.Now(), created: true}
	r.pools.mu.Unlock()
	owner := []metav1.OwnerReference{*metav1.NewControllerRef(sts, appsv1.SchemeGroupVersion.WithKind("StatefulSet"))}
	for _, d := range deps {
		patch := client.MergeFrom(d.DeepCopyObject().(client.Object))
		d.SetOwnerReferences(owner)
		if err := c.Patch(ctx, d, patch); err != nil {
			return fmt.Errorf("hand %s to its member: %w", d.GetName(), err)
		}
	}
	return nil
}

// deleteMember deletes a member unless it changed since it was read (a reservation or an
// adoption wins), and its pod (no garbage collector needed to free the pool's slot).
func (r *Runtime) deleteMember(ctx context.Context, p *kpool, m member) error {
	err := r.opts.Client.Delete(ctx, m.sts, client.Preconditions{UID: &m.sts.UID, ResourceVersion: &m.sts.ResourceVersion},
		client.PropagationPolicy("Background"))
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete member %s: %w", m.key(), err)
	}
	r.pools.mu.Lock()
	p.recent[m.key()] = recentMember{at: r.opts.Clock.Now()}
	r.pools.mu.Unlock()
	if m.pod != nil {
		_ = client.IgnoreNotFound(r.opts.Client.Delete(ctx, m.pod, client.Preconditions{UID: &m.pod.UID}))
	}
	return nil
}

// memberFailed counts a crashed member and sets the backoff before the next one.
func (r *Runtime) memberFailed(p *kpool, m member, what string, now time.Time) {
	r.pools.mu.Lock()
	defer r.pools.mu.Unlock()
	p.failures++
	p.lastFail = fmt.Sprintf("%s: %s", m.sts.Name, what)
	wait := memberBackoff << min(p.failures-1, 10)
	p.retryAt = now.Add(min(wait, maxMemberBackoff))
}

// recentlyDeleted reports a member this process deleted moments ago (the cache still shows it).
func (r *Runtime) recentlyDeleted(p *kpool, key string, now time.Time) bool {
	r.pools.mu.Lock()
	defer r.pools.mu.Unlock()
	m, ok := p.recent[key]
	return ok && !m.created && now.Sub(m.at) < recentApplyWindow
}

// recentlyCreated are the members of ns this process created moments ago that seen does not
// include (the cache has not caught up); expired entries are dropped.
func (r *Runtime) recentlyCreated(p *kpool, ns string, seen []member, now time.Time) []member {
	r.pools.mu.Lock()
	defer r.pools.mu.Unlock()
	var out []member
	for key, m := range p.recent {
		if now.Sub(m.at) >= recentApplyWindow {
			delete(p.recent, key)
			continue
		}
		namespace, name, _ := strings.Cut(key, "/")
		if !m.created || namespace != ns || slices.ContainsFunc(seen, func(s member) bool { return s.key() == key }) {
			continue
		}
		out = append(out, member{sts: &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}})
	}
	return out
}

// RemovePool implements runtime.Pooler: the pool's unreserved members are deleted (reserved
// ones are their agents' until they expire; the garbage collector removes the members of a
// deleted GatewayPool anyway).
func (r *Runtime) RemovePool(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := r.pool(name)
	if all, err := r.members(ctx, name, ""); err == nil {
		for _, m := range all {
			if m.sts.Labels[LabelReservedFor] == "" {
				_ = r.deleteMember(ctx, p, m)
			}
		}
	}
	r.pools.mu.Lock()
	delete(r.pools.byKey, name)
	r.pools.mu.Unlock()
}

// PoolStatus implements runtime.Pooler from the cache: Ready and Booting count the unreserved
// members of the pool's version in its namespaces, Size is spec.Size per namespace. RetryAt
// is the next time the pool needs a look: the end of a backoff or the first reservation to
// expire.
func (r *Runtime) PoolStatus(name string) runtime.PoolStatus {
	r.pools.mu.Lock()
	p := r.pools.byKey[name]
	r.pools.mu.Unlock()
	if p == nil {
		return runtime.PoolStatus{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	all, _ := r.members(ctx, name, "")
	now := r.opts.Clock.Now()
	r.pools.mu.Lock()
	spec := p.spec
	st := runtime.PoolStatus{
		Version: spec.Version, Size: spec.Size * len(spec.Namespaces), Claimed: p.claimed,
		Failures: p.failures, LastFailure: p.lastFail, Claims: slices.Clone(p.claims),
	}
	if now.Before(p.retryAt) {
		st.RetryAt = p.retryAt
	}
	r.pools.mu.Unlock()
	seen := map[string][]member{}
	for _, m := range all {
		if at, reserved := m.reservedAt(); reserved {
			if exp := at.Add(ReservationTTL); st.RetryAt.IsZero() || exp.Before(st.RetryAt) {
				st.RetryAt = exp
			}
			continue
		}
		if m.sts.Labels[LabelReservedFor] != "" || m.sts.Labels[LabelPoolVersion] != spec.Version ||
			!slices.Contains(spec.Namespaces, m.sts.Namespace) || r.recentlyDeleted(p, m.key(), now) {
			continue
		}
		seen[m.sts.Namespace] = append(seen[m.sts.Namespace], m)
		if m.ready() {
			st.Ready++
		} else {
			st.Booting++
		}
	}
	for _, ns := range spec.Namespaces {
		st.Booting += len(r.recentlyCreated(p, ns, seen[ns], now))
	}
	return st
}

// recordClaim counts a member adopted by agent in this process.
func (r *Runtime) recordClaim(pool, member string, agent types.NamespacedName, took time.Duration) {
	p := r.pool(pool)
	r.pools.mu.Lock()
	defer r.pools.mu.Unlock()
	delete(p.recent, agent.Namespace+"/"+member) // no longer the pool's
	p.claimed++
	p.claims = append(p.claims, runtime.PoolClaim{Seq: p.claimed, Member: member, Agent: agent, At: r.opts.Clock.Now(), Latency: took})
	if n := len(p.claims) - runtime.PoolClaimsKept; n > 0 {
		p.claims = slices.Delete(p.claims, 0, n)
	}
}

// SetupPoolWatches implements runtime.Pooler: a member's StatefulSet or pod re-queues its pool
// (booted, crashed, reserved, adopted: an update is mapped from the old object too, so the
// adoption that removes the pool label refills the pool).
func (r *Runtime) SetupPoolWatches(b *builder.Builder) *builder.Builder {
	toPool := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		if name := o.GetLabels()[LabelPool]; name != "" {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: name}}}
		}
		return nil
	})
	return b.Watches(&appsv1.StatefulSet{}, toPool).Watches(&corev1.Pod{}, toPool)
}
