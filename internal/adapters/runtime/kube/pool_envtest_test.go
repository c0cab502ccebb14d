package kube_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/runtime/kube"
	"github.com/agentplane/agentplane/internal/devtools/testenv/kubeenv"
)

// execCall is one command run in a pod by the fake exec.
type execCall struct {
	ns, pod string
	cmd     []string
	stdin   string
}

// poolFixture is a kube runtime with a fake clock and a fake exec (envtest has no kubelet).
type poolFixture struct {
	t     *testing.T
	ctx   context.Context
	r     *kube.Runtime
	clock *clocktesting.FakeClock
	mu    sync.Mutex
	calls []execCall
}

func newPoolFixture(t *testing.T, namespaces ...string) *poolFixture {
	t.Helper()
	f := &poolFixture{t: t, ctx: context.Background(), clock: clocktesting.NewFakeClock(time.Now())}
	f.r = f.runtime()
	for _, ns := range namespaces {
		if err := env.Client.Create(f.ctx, kubeenv.Namespace(ns)); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// runtime is another runtime on the same API server (a second manager, or worker).
func (f *poolFixture) runtime() *kube.Runtime {
	r := newRuntime(kube.Options{Clock: f.clock})
	kube.SetExec(r, func(_ context.Context, ns, pod string, cmd []string, stdin io.Reader, _, _ io.Writer) error {
		var in []byte
		if stdin != nil {
			in, _ = io.ReadAll(stdin)
		}
		f.mu.Lock()
		f.calls = append(f.calls, execCall{ns: ns, pod: pod, cmd: cmd, stdin: string(in)})
		f.mu.Unlock()
		return nil
	})
	return r
}

func (f *poolFixture) pool(name string, replicas int32, workspaces ...string) *agentsv1.GatewayPool {
	f.t.Helper()
	gp := &agentsv1.GatewayPool{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: agentsv1.GatewayPoolSpec{Replicas: replicas, Workspaces: workspaces}}
	if err := env.Client.Create(f.ctx, gp); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = env.Client.Delete(context.Background(), gp) })
	return gp
}

func (f *poolFixture) setPool(name string, size int, namespaces ...string) {
	f.t.Helper()
	if err := f.r.SetPool(f.ctx, name, runtime.PoolSpec{Version: engine.PinnedVersion, Size: size, Namespaces: namespaces}); err != nil {
		f.t.Fatalf("SetPool: %v", err)
	}
}

// members are the pool's unadopted member StatefulSets in ns.
func (f *poolFixture) members(pool, ns string) []appsv1.StatefulSet {
	f.t.Helper()
	var l appsv1.StatefulSetList
	if err := env.Client.List(f.ctx, &l, client.InNamespace(ns), client.MatchingLabels{kube.LabelPool: pool}); err != nil {
		f.t.Fatal(err)
	}
	var out []appsv1.StatefulSet
	for _, s := range l.Items {
		if s.DeletionTimestamp == nil {
			out = append(out, s)
		}
	}
	return out
}

// boot does what the StatefulSet controller and the kubelet would: the member's pod from its
// template, Ready (or crashing).
func (f *poolFixture) boot(sts appsv1.StatefulSet, ready bool) *corev1.Pod {
	f.t.Helper()
	pod := &corev1.Pod{ObjectMeta: *sts.Spec.Template.ObjectMeta.DeepCopy(), Spec: *sts.Spec.Template.Spec.DeepCopy()}
	pod.Name, pod.Namespace = sts.Name+"-0", sts.Namespace
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: kube.VolumeHome,
		VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	if err := env.Client.Create(f.ctx, pod); err != nil {
		f.t.Fatal(err)
	}
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	st := corev1.PodStatus{Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: kube.ContainerGateway, Ready: true, Image: "ghcr.io/openclaw/openclaw:" + engine.PinnedVersion,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}}
	if !ready {
		st.Conditions[0].Status = corev1.ConditionFalse
		st.ContainerStatuses[0].Ready = false
		st.ContainerStatuses[0].RestartCount = 3
		st.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
	}
	setPodStatus(f.t, f.ctx, pod, st)
	return pod
}

func (f *poolFixture) agent(ns, name string) *agentsv1.Agent {
	f.t.Helper()
	a := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: agentsv1.AgentSpec{DisplayName: "Agent " + name}}
	if err := env.Client.Create(f.ctx, a); err != nil {
		f.t.Fatal(err)
	}
	return a
}

func desiredFor(a *agentsv1.Agent, token string) runtime.Desired {
	return runtime.Desired{EngineVersion: engine.PinnedVersion, GatewayToken: token, GatewayTokenSecret: a.Name + "-gateway-token",
		Identity: engine.Identity{Name: a.Spec.DisplayName}}
}

func memberToken(t *testing.T, ctx context.Context, sts *appsv1.StatefulSet) string {
	t.Helper()
	sec := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: sts.Namespace, Name: sts.Name + "-token"}, sec); err != nil {
		t.Fatal(err)
	}
	return string(sec.Data[kube.TokenKey])
}

// TestPoolMembers: a pool keeps its size in each of its namespaces, counts ready and booting
// members, replaces a crashed one after a backoff, shrinks booting ones first, keeps none
// without namespaces and removes its members.
func TestPoolMembers(t *testing.T) {
	f := newPoolFixture(t, "pool-a", "pool-b")
	gp := f.pool("members", 2, "pool-a", "pool-b")
	f.setPool("members", 2, "pool-a", "pool-b")
	f.setPool("members", 2, "pool-a", "pool-b") // idempotent
	for _, ns := range []string{"pool-a", "pool-b"} {
		ms := f.members("members", ns)
		if len(ms) != 2 {
			t.Fatalf("%s: %d members, want 2", ns, len(ms))
		}
		for _, m := range ms {
			if !strings.HasPrefix(m.Name, "pool-") || m.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType ||
				m.Spec.ServiceName != kube.GoverningService || m.Labels[agentsv1.LabelAgent] != "" ||
				m.Spec.Selector.MatchLabels[kube.LabelPoolMember] != strings.TrimPrefix(m.Name, "pool-") {
				t.Errorf("member %s: strategy %s, service %s, labels %v, selector %v", m.Name, m.Spec.UpdateStrategy.Type,
					m.Spec.ServiceName, m.Labels, m.Spec.Selector.MatchLabels)
			}
			if refs := m.OwnerReferences; len(refs) != 1 || refs[0].UID != gp.UID || refs[0].Kind != "GatewayPool" {
				t.Errorf("member %s owners %+v: the pool", m.Name, refs)
			}
			tok := memberToken(t, f.ctx, &m)
			if len(tok) < 32 {
				t.Errorf("member %s token %d bytes", m.Name, len(tok))
			}
			env := m.Spec.Template.Spec.Containers[0].Env
			if last := env[len(env)-1]; last.Value != "" || last.ValueFrom.SecretKeyRef.Name != m.Name+"-token" {
				t.Errorf("member %s token env %+v: from its Secret", m.Name, last)
			}
		}
	}
	if st := f.r.PoolStatus("members"); st.Size != 4 || st.Ready != 0 || st.Booting != 4 {
		t.Errorf("status %+v: 4 booting of 4", st)
	}
	a := f.members("members", "pool-a")
	f.boot(a[0], true)
	f.boot(a[1], false)
	if st := f.r.PoolStatus("members"); st.Ready != 1 || st.Booting != 3 {
		t.Errorf("status %+v: 1 ready, 3 booting", st)
	}

	// The crashed member is deleted; its replacement waits for the backoff.
	f.setPool("members", 2, "pool-a", "pool-b")
	if ms := f.members("members", "pool-a"); len(ms) != 1 || ms[0].Name != a[0].Name {
		t.Fatalf("after the crash: %d members", len(ms))
	}
	st := f.r.PoolStatus("members")
	if st.Failures != 1 || !strings.Contains(st.LastFailure, "CrashLoopBackOff") || st.RetryAt.IsZero() {
		t.Errorf("status after a crash %+v", st)
	}
	f.clock.Step(11 * time.Second)
	f.setPool("members", 2, "pool-a", "pool-b")
	if ms := f.members("members", "pool-a"); len(ms) != 2 {
		t.Errorf("after the backoff: %d members, want 2", len(ms))
	}

	// Shrinking keeps the ready member.
	f.setPool("members", 1, "pool-a", "pool-b")
	if ms := f.members("members", "pool-a"); len(ms) != 1 || ms[0].Name != a[0].Name {
		t.Errorf("after shrinking: %v", ms)
	}
	// A namespace no longer named loses its members; none named: none kept.
	f.setPool("members", 1, "pool-a")
	if ms := f.members("members", "pool-b"); len(ms) != 0 {
		t.Errorf("pool-b keeps %d members", len(ms))
	}
	if err := f.r.SetPool(f.ctx, "members", runtime.PoolSpec{Version: engine.PinnedVersion, Size: 1}); !errors.Is(err, runtime.ErrPoolNoNamespaces) {
		t.Errorf("SetPool without namespaces: %v", err)
	}
	if ms := f.members("members", "pool-a"); len(ms) != 0 {
		t.Errorf("pool-a keeps %d members without namespaces", len(ms))
	}
	f.setPool("members", 1, "pool-a")
	f.r.RemovePool("members")
	if ms := f.members("members", "pool-a"); len(ms) != 0 {
		t.Errorf("RemovePool left %d members", len(ms))
	}
}

// TestPoolClaim: a reserved member is adopted by its agent's first Ensure: the annotation,
// the owner, the labels of the StatefulSet and of the live pod, the endpoint and the exec
// target are the member's; the identity is written into its home; the pool refills; a later
// configuration change restarts the pod; deleting the agent deletes its StatefulSet and home.
func TestPoolClaim(t *testing.T) {
	f := newPoolFixture(t, "claim")
	f.pool("claim", 1, "claim")
	f.setPool("claim", 1, "claim")
	m := f.members("claim", "claim")[0]
	f.boot(m, true)
	pvc := homeClaim(t, f.ctx, &m)
	a := f.agent("claim", "a1")
	tok, ok, err := f.r.ReserveGateway(f.ctx, a, engine.PinnedVersion)
	if err != nil || !ok || tok != memberToken(t, f.ctx, &m) {
		t.Fatalf("reserve: ok %v, err %v, the member's token %v", ok, err, tok == memberToken(t, f.ctx, &m))
	}
	if again, ok, err := f.r.ReserveGateway(f.ctx, a, engine.PinnedVersion); err != nil || !ok || again != tok {
		t.Errorf("a second reservation for the agent: ok %v err %v same %v", ok, err, again == tok)
	}
	// Another manager sees the reservation too.
	if again, ok, err := f.runtime().ReserveGateway(f.ctx, a, engine.PinnedVersion); err != nil || !ok || again != tok {
		t.Errorf("the reservation from another manager: ok %v err %v same %v", ok, err, again == tok)
	}
	if st := f.r.PoolStatus("claim"); st.Ready != 0 {
		t.Errorf("a reserved member counts as ready: %+v", st)
	}

	o := ensure(t, f.ctx, f.r, a, desiredFor(a, tok))
	if o.ClaimedFrom != "claim/"+m.Name || o.Phase != runtime.PhaseRunning ||
		o.Endpoint != "http://"+m.Name+"-0.agentplane-gateways.claim.svc:18789" {
		t.Errorf("claim observed %+v", o)
	}
	stored := &agentsv1.Agent{}
	if err := env.Client.Get(f.ctx, client.ObjectKeyFromObject(a), stored); err != nil || stored.Annotations[kube.AnnotationGatewaySet] != m.Name {
		t.Fatalf("agent annotations %v (%v)", stored.Annotations, err)
	}
	sts := &appsv1.StatefulSet{}
	if err := env.Client.Get(f.ctx, client.ObjectKeyFromObject(&m), sts); err != nil {
		t.Fatal(err)
	}
	if refs := sts.OwnerReferences; len(refs) != 1 || refs[0].UID != a.UID || refs[0].Controller == nil || !*refs[0].Controller {
		t.Errorf("adopted owners %+v", refs)
	}
	if sts.Labels[agentsv1.LabelAgent] != "a1" || sts.Labels[kube.LabelPool] != "" || sts.Spec.Template.Labels[agentsv1.LabelAgent] != "a1" ||
		sts.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType {
		t.Errorf("adopted labels %v, template labels %v, strategy %s", sts.Labels, sts.Spec.Template.Labels, sts.Spec.UpdateStrategy.Type)
	}
	pod := &corev1.Pod{}
	if err := env.Client.Get(f.ctx, client.ObjectKey{Namespace: "claim", Name: m.Name + "-0"}, pod); err != nil {
		t.Fatal(err)
	}
	for k, v := range agentsv1.GatewayPodSelector("a1") {
		if pod.Labels[k] != v {
			t.Errorf("pod label %s=%q, want %q (the agent's Services select it)", k, pod.Labels[k], v)
		}
	}
	if pod.Labels[kube.LabelPool] != "" {
		t.Errorf("the adopted pod keeps the pool label: %v", pod.Labels)
	}
	if err := env.Client.Get(f.ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil || pvc.Labels[agentsv1.LabelAgent] != "a1" {
		t.Errorf("home labels %v (%v)", pvc.Labels, err)
	}
	f.mu.Lock()
	if len(f.calls) != 1 || f.calls[0].pod != m.Name+"-0" || !strings.Contains(f.calls[0].stdin, "Agent a1") {
		t.Errorf("identity write: %+v", f.calls)
	}
	f.mu.Unlock()
	if _, err := f.r.Exec(f.ctx, stored, runtime.ExecRequest{Argv: []string{"true"}}); err != nil {
		t.Errorf("exec: %v", err)
	}
	f.mu.Lock()
	if last := f.calls[len(f.calls)-1]; last.pod != m.Name+"-0" {
		t.Errorf("exec ran in %s", last.pod)
	}
	f.mu.Unlock()
	// The claim is counted and the pool refills.
	if st := f.r.PoolStatus("claim"); st.Claimed != 1 || len(st.Claims) != 1 || st.Claims[0].Member != m.Name {
		t.Errorf("claims %+v", st)
	}
	f.setPool("claim", 1, "claim")
	if ms := f.members("claim", "claim"); len(ms) != 1 || ms[0].Name == m.Name {
		t.Errorf("refill: %d members", len(ms))
	}

	// The same desired state again changes nothing; a restart (or a new configuration) replaces the pod.
	if o := ensure(t, f.ctx, f.r, stored, desiredFor(a, tok)); o.Phase != runtime.PhaseRunning || o.ClaimedFrom != "" {
		t.Errorf("second Ensure %+v", o)
	}
	d := desiredFor(a, tok)
	d.RestartNonce = "restart-2" // a new pod, as any change of the config hash
	if o := ensure(t, f.ctx, f.r, stored, d); o.Phase != runtime.PhaseStarting {
		t.Errorf("after a config change %+v", o)
	}
	if err := env.Client.Get(f.ctx, client.ObjectKeyFromObject(pod), pod); !apierrors.IsNotFound(err) && pod.DeletionTimestamp == nil {
		t.Errorf("the outdated pod still runs (%v)", err)
	}

	if err := f.r.Delete(f.ctx, stored); err != nil {
		t.Fatal(err)
	}
	for _, obj := range []client.Object{sts, pvc} {
		if err := env.Client.Get(f.ctx, client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) && obj.GetDeletionTimestamp() == nil {
			t.Errorf("%T %s not deleted (%v)", obj, obj.GetName(), err)
		}
	}
}

// TestPoolReservationRace: 20 agents created at once against a pool of 5, reserved by two
// managers: 5 get a member each, 15 start cold, no member is handed out twice.
func TestPoolReservationRace(t *testing.T) {
	f := newPoolFixture(t, "race")
	f.pool("race", 5, "race")
	f.setPool("race", 5, "race")
	for _, m := range f.members("race", "race") {
		f.boot(m, true)
	}
	managers := []*kube.Runtime{f.r, f.runtime()}
	agents := make([]*agentsv1.Agent, 20)
	for i := range agents {
		agents[i] = f.agent("race", "r"+string(rune('a'+i)))
	}
	tokens := make([]string, len(agents))
	var wg sync.WaitGroup
	for i, a := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok, ok, err := managers[i%2].ReserveGateway(f.ctx, a, engine.PinnedVersion)
			if err != nil {
				t.Errorf("reserve %s: %v", a.Name, err)
			}
			if ok {
				tokens[i] = tok
			}
		}()
	}
	wg.Wait()
	byToken := map[string]string{}
	for i, tok := range tokens {
		if tok == "" {
			continue
		}
		if other, dup := byToken[tok]; dup {
			t.Errorf("agents %s and %s got the same gateway", other, agents[i].Name)
		}
		byToken[tok] = agents[i].Name
	}
	if len(byToken) != 5 {
		t.Errorf("%d agents got a gateway, want 5", len(byToken))
	}
	reservedFor := map[string]bool{}
	for _, m := range f.members("race", "race") {
		uid := m.Labels[kube.LabelReservedFor]
		if uid == "" || reservedFor[uid] {
			t.Errorf("member %s reserved for %q", m.Name, uid)
		}
		reservedFor[uid] = true
	}
	// The 15 others start cold: their Ensure makes StatefulSets of their own.
	cold := 0
	for i, a := range agents {
		if tokens[i] != "" {
			continue
		}
		if o := ensure(t, f.ctx, managers[i%2], a, desiredFor(a, "cold-"+a.Name)); o.ClaimedFrom != "" {
			t.Errorf("%s claimed %s without a reservation", a.Name, o.ClaimedFrom)
		}
		if err := env.Client.Get(f.ctx, client.ObjectKey{Namespace: "race", Name: a.Name}, &appsv1.StatefulSet{}); err == nil {
			cold++
		}
	}
	if cold != 15 {
		t.Errorf("%d cold StatefulSets, want 15", cold)
	}
}

// TestPoolReservationExpiry: an unused reservation expires and its member is deleted; the
// agent then starts cold. An agent that cannot use its reservation discards it.
func TestPoolReservationExpiry(t *testing.T) {
	f := newPoolFixture(t, "expiry")
	f.pool("expiry", 2, "expiry")
	f.setPool("expiry", 2, "expiry")
	ms := f.members("expiry", "expiry")
	for _, m := range ms {
		f.boot(m, true)
	}
	a, b := f.agent("expiry", "late"), f.agent("expiry", "withenv")
	tokA, ok, err := f.r.ReserveGateway(f.ctx, a, engine.PinnedVersion)
	if err != nil || !ok {
		t.Fatalf("reserve: %v %v", ok, err)
	}
	if st := f.r.PoolStatus("expiry"); st.RetryAt.IsZero() || st.RetryAt.After(f.clock.Now().Add(kube.ReservationTTL)) {
		t.Errorf("RetryAt %v: when the reservation expires", st.RetryAt)
	}
	f.clock.Step(kube.ReservationTTL + time.Second)
	f.setPool("expiry", 2, "expiry")
	for _, m := range f.members("expiry", "expiry") {
		if m.Labels[kube.LabelReservedFor] == string(a.UID) {
			t.Errorf("expired reservation kept: %s", m.Name)
		}
	}
	if o := ensure(t, f.ctx, f.r, a, desiredFor(a, tokA)); o.ClaimedFrom != "" {
		t.Errorf("claimed an expired reservation: %+v", o)
	}
	if err := env.Client.Get(f.ctx, client.ObjectKey{Namespace: "expiry", Name: "late"}, &appsv1.StatefulSet{}); err != nil {
		t.Errorf("no cold StatefulSet after the expiry: %v", err)
	}

	tokB, ok, err := f.r.ReserveGateway(f.ctx, b, engine.PinnedVersion)
	if err != nil || !ok {
		t.Fatalf("reserve: %v %v", ok, err)
	}
	d := desiredFor(b, tokB)
	d.Env, d.EnvSecret = map[string]string{"OPENAI_API_KEY": "sk"}, "withenv-env"
	if o := ensure(t, f.ctx, f.r, b, d); o.ClaimedFrom != "" {
		t.Errorf("an agent with environment claimed: %+v", o)
	}
	var l appsv1.StatefulSetList
	if err := env.Client.List(f.ctx, &l, client.InNamespace("expiry"), client.MatchingLabels{kube.LabelReservedFor: string(b.UID)}); err != nil {
		t.Fatal(err)
	}
	for _, s := range l.Items {
		if s.DeletionTimestamp == nil {
			t.Errorf("the unusable reservation %s is kept", s.Name)
		}
	}
}

// TestPoolMemberIsolated: with NetworkPolicies on, a member's pod starts isolated by a policy
// of its own, which goes with its StatefulSet.
func TestPoolMemberIsolated(t *testing.T) {
	f := newPoolFixture(t, "isolated")
	f.r = newRuntime(kube.Options{Clock: f.clock, Network: kube.NetworkOptions{Enabled: true}})
	f.pool("isolated", 1, "isolated")
	f.setPool("isolated", 1, "isolated")
	m := f.members("isolated", "isolated")[0]
	np := &networkingv1.NetworkPolicy{}
	if err := env.Client.Get(f.ctx, client.ObjectKey{Namespace: "isolated", Name: m.Name}, np); err != nil {
		t.Fatal(err)
	}
	if sel := np.Spec.PodSelector.MatchLabels; len(sel) != 1 || sel[kube.LabelPoolMember] != strings.TrimPrefix(m.Name, "pool-") ||
		len(np.Spec.PolicyTypes) != 2 {
		t.Errorf("member policy selector %v, types %v", sel, np.Spec.PolicyTypes)
	}
	if refs := np.OwnerReferences; len(refs) != 1 || refs[0].UID != m.UID {
		t.Errorf("member policy owners %+v: its StatefulSet", refs)
	}
}
