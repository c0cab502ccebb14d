package controllers_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	agentctrl "github.com/agentplane/agentplane/controllers/agent"
	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/adapters/engine/openclaw"
	"github.com/agentplane/agentplane/internal/adapters/runtime/kube"
	"github.com/agentplane/agentplane/internal/rules/admission"
	"github.com/agentplane/agentplane/internal/rules/quota"
	"github.com/agentplane/agentplane/internal/rules/workspacens"
)

// startAgentManager runs the Agent controller on the kube runtime against envtest. There is
// no kubelet: tests play it by creating the pod and writing its status.
func startAgentManager() func() {
	mgr := newManager()
	rt := &countedRuntime{Runtime: kube.New(kube.Options{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), RESTConfig: mgr.GetConfig(),
		Scheme: mgr.GetScheme(), Engine: openclaw.New(),
	}), passes: map[types.NamespacedName]int{}}
	agentPasses = rt
	r := &agentctrl.Reconciler{
		Client: mgr.GetClient(), Runtime: rt,
		Admission: &admission.Admitter{
			Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Cache: mgr.GetClient(),
			Limiter:  &quota.Limiter{Reader: mgr.GetAPIReader(), Writer: mgr.GetClient()},
			Versions: admission.Versions{Default: engine.PinnedVersion, Available: []string{engine.PinnedVersion, "2026.9.7"}},
		},
		Env:        &agentctrl.SecretEnv{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), DerivedSecret: true, ModelProxy: testModelProxy{}},
		ModelProxy: testModelProxy{},
		Recorder:   mgr.GetEventRecorder("agent-test"),
	}
	Expect(r.SetupWithManager(mgr)).To(Succeed())
	return startManager(mgr)
}

// settlePasses waits until a pass of one object that began after this call has ended: touch
// makes the controller look at the object again (a change it does not act on) and passes
// counts the passes of it begun so far. It touches, waits for a pass to begin, then touches
// again and waits for the next, which begins only after the first ended (one object's passes
// run one at a time). countedRuntime.settle is this for the Agent controller.
func settlePasses(passes func() int, touch func()) {
	GinkgoHelper()
	for range 2 {
		n := passes()
		touch()
		Eventually(passes).Should(BeNumerically(">", n))
	}
}

// countedClient counts a reconciler's passes per object: every pass of the controllers that
// read through it (Snapshot, Skill) begins with one Get of its object from the cache.
type countedClient struct {
	client.Client
	mu   sync.Mutex
	gets map[string]int
}

func newCountedClient(c client.Client) *countedClient {
	return &countedClient{Client: c, gets: map[string]int{}}
}

func (c *countedClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.mu.Lock()
	c.gets[fmt.Sprintf("%T %s", obj, key)]++
	c.mu.Unlock()
	return c.Client.Get(ctx, key, obj, opts...)
}

// passes counts the passes of obj begun so far.
func (c *countedClient) passes(obj client.Object) func() int {
	k := fmt.Sprintf("%T %s", obj, client.ObjectKeyFromObject(obj))
	return func() int {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.gets[k]
	}
}

// passClock counts the passes of the rollout controllers (EngineUpgrade, RenderingRollout):
// each pass over the one rollout of a spec reads the time once (controllers.Rollout.Now).
type passClock struct {
	clock.PassiveClock
	n atomic.Int64
}

func (c *passClock) Now() time.Time {
	c.n.Add(1)
	return c.PassiveClock.Now()
}

func (c *passClock) passes() int { return int(c.n.Load()) }

// settle waits until a pass that began after this call has ended, poking agents (every
// rollout looks at every agent's change) to make passes.
func (c *passClock) settle(agents []*agentsv1.Agent) {
	GinkgoHelper()
	settlePasses(c.passes, func() { pokeAgents(agents) })
}

// testModelProxy serves anthropic at a made-up in-cluster address.
type testModelProxy struct{}

func (testModelProxy) BaseURL(provider string) (string, bool) {
	return "http://agentplane-api.agentplane-system.svc/llm/anthropic", provider == "anthropic"
}

func agentWorkspace(name string, limit int32) string {
	ws := &agentsv1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: agentsv1.WorkspaceSpec{AgentLimit: ptr.To(limit)}}
	Expect(workspacens.EnsureWorkspace(ctx, k8sClient, ws)).To(Succeed())
	return name
}

func createAgent(ns, name string, mut ...func(*agentsv1.Agent)) *agentsv1.Agent {
	a := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: agentsv1.AgentSpec{DisplayName: name}}
	for _, m := range mut {
		m(a)
	}
	Expect(k8sClient.Create(ctx, a)).To(Succeed())
	return a
}

func getAgent(a *agentsv1.Agent) *agentsv1.Agent {
	got := &agentsv1.Agent{}
	Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(a), got)).To(Succeed())
	return got
}

func condition(a *agentsv1.Agent, t string) metav1.Condition {
	if c := meta.FindStatusCondition(a.Status.Conditions, t); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// playKubelet creates (or replaces) the agent's pod with the StatefulSet's template hash and
// the given container state.
func playKubelet(a *agentsv1.Agent, state corev1.ContainerState, ready bool, restarts int32) {
	sts := &appsv1.StatefulSet{}
	Eventually(func() error { return k8sClient.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: a.Name}, sts) }).Should(Succeed())
	pod := &corev1.Pod{}
	key := client.ObjectKey{Namespace: a.Namespace, Name: a.Name + "-0"}
	if err := k8sClient.Get(ctx, key, pod); apierrors.IsNotFound(err) {
		pod = &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: a.Namespace, Name: a.Name + "-0", Labels: sts.Spec.Template.Labels, Annotations: sts.Spec.Template.Annotations},
			Spec:       *sts.Spec.Template.Spec.DeepCopy(),
		}
		// The StatefulSet controller mounts each claim template's PVC; stand in with emptyDirs.
		for _, t := range sts.Spec.VolumeClaimTemplates {
			pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: t.Name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		}
		Expect(k8sClient.Create(ctx, pod)).To(Succeed())
	} else {
		Expect(err).NotTo(HaveOccurred())
	}
	readyStatus := corev1.ConditionFalse
	if ready {
		readyStatus = corev1.ConditionTrue
	}
	pod.Status = corev1.PodStatus{
		Phase:      corev1.PodRunning,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: readyStatus, LastTransitionTime: metav1.Now()}},
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: kube.ContainerGateway, Ready: ready, RestartCount: restarts, State: state,
			Image: sts.Spec.Template.Spec.Containers[0].Image,
		}},
	}
	Expect(k8sClient.Status().Update(ctx, pod)).To(Succeed())
}

var _ = Describe("Agent controller (kube runtime)", Ordered, func() {
	var stop context.CancelFunc
	BeforeAll(func() { stop = startAgentManager() })
	AfterAll(func() { stop() })

	It("builds owned objects, then follows the pod from starting to running to a crash", func() {
		ns := agentWorkspace("agents-kube", 5)
		a := createAgent(ns, "agt-one")
		Eventually(func() agentsv1.AgentPhase { return getAgent(a).Status.Phase }).Should(Equal(agentsv1.AgentStarting))
		got := getAgent(a)
		Expect(got.Finalizers).To(ContainElement(agentsv1.AgentFinalizer))
		Expect(condition(got, agentsv1.AgentProvisioned).Status).To(Equal(metav1.ConditionTrue))
		Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))

		// The namespace's headless Service names every gateway pod; it is no agent's.
		gov := &corev1.Service{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: kube.GoverningService}, gov)).To(Succeed())
		Expect(gov.OwnerReferences).To(BeEmpty())
		Expect(got.Status.Endpoint).To(Equal("http://agt-one-0.agentplane-gateways." + ns + ".svc:18789"))
		for _, obj := range []client.Object{&appsv1.StatefulSet{}, &corev1.Secret{}} {
			name := a.Name
			if _, ok := obj.(*corev1.Secret); ok {
				name = agentsv1.GatewayTokenSecretName(a.Name)
			}
			Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj)).To(Succeed())
			Expect(obj.GetOwnerReferences()).To(ContainElement(And(HaveField("UID", got.UID), HaveField("Controller", ptr.To(true)))), "%T", obj)
		}

		playKubelet(a, corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}, true, 0)
		Eventually(func() agentsv1.AgentPhase { return getAgent(a).Status.Phase }).Should(Equal(agentsv1.AgentRunning))
		got = getAgent(a)
		Expect(condition(got, agentsv1.AgentGatewayReady).Status).To(Equal(metav1.ConditionTrue))
		Expect(got.Status.Endpoint).To(ContainSubstring(":18789"))
		Expect(got.Status.EngineVersion).To(Equal(engine.PinnedVersion))

		playKubelet(a, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 40s restarting failed container"}}, false, 3)
		Eventually(func() agentsv1.AgentPhase { return getAgent(a).Status.Phase }).Should(Equal(agentsv1.AgentNotRunning))
		got = getAgent(a)
		ready := condition(got, agentsv1.AgentGatewayReady)
		Expect(ready.Reason).To(Equal("CrashLoopBackOff"))
		Expect(got.Status.Restarts).To(Equal(int32(3)))
		// The crashes are a Warning event (the fleet view's errors of the last hour).
		Eventually(eventReasons(agentsv1.KindAgent, a.Name)).Should(ContainElement(agentsv1.EventGatewayCrashed))

		By("not rewriting status while nothing changes (no hot loop)")
		// Every pass for the last pod update has ended once a pass that began after it has
		// ended; then three more passes on an unchanged world write nothing.
		agentPasses.settle(a)
		rv := getAgent(a).ResourceVersion
		for range 3 {
			agentPasses.settle(a)
		}
		Expect(getAgent(a).ResourceVersion).To(Equal(rv), "the controller rewrote an unchanged agent")
	})

	It("refuses a version the platform does not offer and an agent beyond the workspace limit", func() {
		ns := agentWorkspace("agents-kube-limit", 1)
		first := createAgent(ns, "agt-first")
		Eventually(func() agentsv1.AgentPhase { return getAgent(first).Status.Phase }).Should(Equal(agentsv1.AgentStarting))
		second := createAgent(ns, "agt-second")
		Eventually(func() string { return condition(getAgent(second), agentsv1.AgentProvisioned).Reason }).Should(Equal(agentsv1.ReasonAgentLimitReached))
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: second.Name}, &appsv1.StatefulSet{})).NotTo(Succeed())

		ns2 := agentWorkspace("agents-kube-version", 5)
		old := createAgent(ns2, "agt-old", func(a *agentsv1.Agent) { a.Spec.Engine.Version = "1999.1.1" })
		Eventually(func() string { return condition(getAgent(old), agentsv1.AgentProvisioned).Reason }).Should(Equal("InvalidVersion"))
		Expect(getAgent(old).Status.Phase).To(Equal(agentsv1.AgentNotRunning))
	})

	It("rolls the pod when the agent's secrets change", func() {
		ns := agentWorkspace("agents-kube-env", 5)
		core := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team-key"}, StringData: map[string]string{"k": "v1"}}
		Expect(k8sClient.Create(ctx, core)).To(Succeed())
		Expect(k8sClient.Create(ctx, &agentsv1.AgentSecret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team-key"},
			Spec:       agentsv1.AgentSecretSpec{Name: "TEAM_KEY", SecretRef: &agentsv1.SecretKeyReference{Name: "team-key", Key: "k"}},
		})).To(Succeed())
		// A model provider's key the proxy serves never reaches the pod's environment.
		Expect(k8sClient.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ant-key"}, StringData: map[string]string{"k": "sk-ant-kube"}})).To(Succeed())
		Expect(k8sClient.Create(ctx, &agentsv1.AgentSecret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ant-key"},
			Spec:       agentsv1.AgentSecretSpec{Name: "ANTHROPIC_API_KEY", Provider: "anthropic", SecretRef: &agentsv1.SecretKeyReference{Name: "ant-key", Key: "k"}},
		})).To(Succeed())
		a := createAgent(ns, "agt-env", func(a *agentsv1.Agent) {
			a.Spec.Secrets = []agentsv1.LocalObjectReference{{Name: "team-key"}, {Name: "ant-key"}}
		})
		hash := func() string {
			sts := &appsv1.StatefulSet{}
			if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: a.Name}, sts); err != nil {
				return ""
			}
			return sts.Spec.Template.Annotations[agentsv1.AnnotationConfigHash]
		}
		Eventually(hash).ShouldNot(BeEmpty())
		before := hash()
		env := &corev1.Secret{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: agentsv1.EnvSecretName(a.Name)}, env)).To(Succeed())
		Expect(env.Data).To(HaveKeyWithValue("TEAM_KEY", []byte("v1")))
		Expect(env.Data).NotTo(HaveKey("ANTHROPIC_API_KEY"))
		Expect(fmt.Sprint(env.Data)).NotTo(ContainSubstring("sk-ant-kube"))

		core.StringData = map[string]string{"k": "v2"}
		Expect(k8sClient.Update(ctx, core)).To(Succeed())
		// Referenced core Secrets are not watched; an agent change triggers the pass here.
		patch := client.MergeFrom(getAgent(a))
		fresh := getAgent(a)
		fresh.Spec.Description = "touch"
		Expect(k8sClient.Patch(ctx, fresh, patch)).To(Succeed())
		Eventually(hash).ShouldNot(Equal(before))

		By("without secrets the agent has no env Secret and the pod reads none")
		patch = client.MergeFrom(getAgent(a))
		fresh = getAgent(a)
		fresh.Spec.Secrets = nil
		Expect(k8sClient.Patch(ctx, fresh, patch)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: agentsv1.EnvSecretName(a.Name)}, &corev1.Secret{}))
		}).Should(BeTrue())
		Eventually(func() []corev1.EnvFromSource {
			sts := &appsv1.StatefulSet{}
			Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: a.Name}, sts)).To(Succeed())
			return sts.Spec.Template.Spec.Containers[0].EnvFrom
		}).Should(BeEmpty())
	})

	It("cleans up through its finalizer and frees the slot", func() {
		ns := agentWorkspace("agents-kube-delete", 1)
		a := createAgent(ns, "agt-gone")
		Eventually(func() agentsv1.AgentPhase { return getAgent(a).Status.Phase }).Should(Equal(agentsv1.AgentStarting))
		Expect(k8sClient.Delete(ctx, getAgent(a))).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(a), &agentsv1.Agent{}))
		}).Should(BeTrue())
		Expect(apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: a.Name}, &appsv1.StatefulSet{}))).To(BeTrue())
		ws := &agentsv1.Workspace{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: ns}, ws)).To(Succeed())
		Expect(ws.Status.AgentSlots.Taken()).To(BeZero(), "the deleted agent's slot is free: %+v", ws.Status.AgentSlots)
		next := createAgent(ns, "agt-next")
		Eventually(func() agentsv1.AgentPhase { return getAgent(next).Status.Phase }).Should(Equal(agentsv1.AgentStarting))
	})

	It("gets its finalizer from the API server's admission policy at creation, and from the controller where it lacks one", func() {
		ns := agentWorkspace("agents-kube-finalizer", 2)
		By("the policy of config/policy (installed with the CRDs) adds it to the created object: no request of the controller")
		a := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agt-admitted"}, Spec: agentsv1.AgentSpec{DisplayName: "admitted"}}
		Expect(k8sClient.Create(ctx, a)).To(Succeed())
		Expect(a.Finalizers).To(ConsistOf(agentsv1.AgentFinalizer), "the create's answer")
		Eventually(func() agentsv1.AgentPhase { return getAgent(a).Status.Phase }).Should(Equal(agentsv1.AgentStarting))
		for _, m := range getAgent(a).ManagedFields {
			Expect(m.Subresource == "" && m.Operation == metav1.ManagedFieldsOperationUpdate && m.Time.After(a.CreationTimestamp.Time) &&
				m.FieldsV1 != nil && strings.Contains(m.FieldsV1.GetRawString(), "f:finalizers")).To(BeFalse(), "a later write of the finalizers: %+v", m)
		}

		By("an Agent created with finalizers of its own gets the controller's added to them")
		b := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agt-own-finalizer", Finalizers: []string{"example.com/keep"}},
			Spec: agentsv1.AgentSpec{DisplayName: "own"}}
		Expect(k8sClient.Create(ctx, b)).To(Succeed())
		Expect(b.Finalizers).To(ConsistOf("example.com/keep", agentsv1.AgentFinalizer))

		By("an Agent without it (created before the policy, or on a cluster without it) gets it from the controller's next pass")
		// Without the finalizer and with an annotation changed, which makes a pass (a change of
		// metadata alone does not).
		touched := getAgent(a)
		Expect(k8sClient.Patch(ctx, touched, client.RawPatch(types.MergePatchType,
			[]byte(`{"metadata":{"finalizers":null,"annotations":{"example.com/touched":"1"}}}`)))).To(Succeed())
		Expect(touched.Finalizers).To(BeEmpty(), "the patch's answer")
		Eventually(func() []string { return getAgent(a).Finalizers }).Should(ConsistOf(agentsv1.AgentFinalizer))

		for _, x := range []*agentsv1.Agent{a, b} {
			Expect(k8sClient.Delete(ctx, getAgent(x))).To(Succeed())
		}
		Expect(k8sClient.Patch(ctx, getAgent(b), client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers/0"}]`)))).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(a), &agentsv1.Agent{})) &&
				apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(b), &agentsv1.Agent{}))
		}).Should(BeTrue())
	})

	It("converges without duplicates when the manager restarts mid-provisioning", func() {
		ns := agentWorkspace("agents-kube-restart", 5)
		var agents []*agentsv1.Agent
		for i := range 5 {
			agents = append(agents, createAgent(ns, fmt.Sprintf("agt-r%d", i)))
		}
		// Stop once the first pass has begun (an agent holds the finalizer, its first write),
		// then start a fresh manager.
		Eventually(func() bool {
			for _, a := range agents {
				if controllerutil.ContainsFinalizer(getAgent(a), agentsv1.AgentFinalizer) {
					return true
				}
			}
			return false
		}).Should(BeTrue())
		stop()
		stop = startAgentManager()
		for _, a := range agents {
			Eventually(func() agentsv1.AgentPhase { return getAgent(a).Status.Phase }).Should(Equal(agentsv1.AgentStarting))
		}
		tokens := map[string]string{}
		for _, a := range agents {
			s := &corev1.Secret{}
			Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: agentsv1.GatewayTokenSecretName(a.Name)}, s)).To(Succeed())
			tokens[a.Name] = string(s.Data["token"])
		}
		var sets appsv1.StatefulSetList
		Expect(k8sClient.List(ctx, &sets, client.InNamespace(ns))).To(Succeed())
		Expect(sets.Items).To(HaveLen(5))
		ws := &agentsv1.Workspace{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: ns}, ws)).To(Succeed())
		Expect(ws.Status.AgentSlots.Taken()).To(Equal(5), "one slot per agent, none twice: %+v", ws.Status.AgentSlots)
		// Another restart changes nothing: same tokens, same objects. A pass of the new manager
		// reaches the runtime only once it has the agent's gateway token (ensureGatewayToken).
		stop()
		stop = startAgentManager()
		for _, a := range agents {
			Eventually(func() int { return agentPasses.count(client.ObjectKeyFromObject(a)) }).Should(BeNumerically(">=", 1), a.Name)
		}
		out := map[string]string{}
		for _, a := range agents {
			s := &corev1.Secret{}
			_ = k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: agentsv1.GatewayTokenSecretName(a.Name)}, s)
			out[a.Name] = string(s.Data["token"])
		}
		Expect(out).To(Equal(tokens))
	})
})
