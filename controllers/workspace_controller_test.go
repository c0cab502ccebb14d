package controllers_test

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	workspacectrl "github.com/agentplane/agentplane/controllers/workspace"
	"github.com/agentplane/agentplane/internal/rules/quota"
)

// The Workspace controller gives a workspace its namespace and keeps the status users read
// (namespace, phase, Ready, agent count and limit) and the agent reservations true.
var _ = Describe("Workspace controller", Ordered, func() {
	var (
		stop    func()
		clk     *testingclock.FakeClock
		limiter *quota.Limiter
		// cached reads what the controller's passes read.
		cached client.Reader
	)
	BeforeAll(func() {
		mgr := newManager()
		cached = mgr.GetClient()
		// The Limiter's fake clock dates the reservations and judges their age: stale
		// without waiting.
		clk = testingclock.NewFakeClock(time.Now())
		limiter = &quota.Limiter{Reader: mgr.GetAPIReader(), Writer: mgr.GetClient(), Clock: clk}
		Expect((&workspacectrl.Reconciler{Client: mgr.GetClient(), Limiter: limiter}).SetupWithManager(mgr)).To(Succeed())
		stop = startManager(mgr)
	})
	AfterAll(func() { stop() })

	createWorkspace := func(name string, limit int32) *agentsv1.Workspace {
		ws := &agentsv1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: agentsv1.WorkspaceSpec{AgentLimit: ptr.To(limit)}}
		Expect(k8sClient.Create(ctx, ws)).To(Succeed())
		return ws
	}
	status := func(name string) func() agentsv1.WorkspaceStatus {
		return func() agentsv1.WorkspaceStatus {
			ws := &agentsv1.Workspace{}
			Expect(k8sClient.Get(ctx, client.ObjectKey{Name: name}, ws)).To(Succeed())
			return ws.Status
		}
	}
	reserved := func(name string) func() []string {
		return func() []string {
			var out []string
			for _, r := range status(name)().AgentSlots.Pending {
				out = append(out, r.Name)
			}
			return out
		}
	}
	// patch changes a Workspace without its resourceVersion (the controller writes its status
	// meanwhile).
	patch := func(name string, mut func(*agentsv1.Workspace)) {
		ws := &agentsv1.Workspace{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: name}, ws)).To(Succeed())
		orig := ws.DeepCopy()
		mut(ws)
		Expect(k8sClient.Patch(ctx, ws, client.MergeFrom(orig))).To(Succeed())
	}
	setLimit := func(name string, limit int32) {
		patch(name, func(ws *agentsv1.Workspace) { ws.Spec.AgentLimit = ptr.To(limit) })
	}
	// handled changes the Workspace's display name (nothing the controller acts on) and waits
	// for the pass that acknowledges that generation: it saw the Workspace as it was before.
	handled := func(name string) {
		GinkgoHelper()
		ws := &agentsv1.Workspace{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: name}, ws)).To(Succeed())
		orig := ws.DeepCopy()
		ws.Spec.DisplayName = fmt.Sprintf("touched at generation %d", ws.Generation)
		Expect(k8sClient.Patch(ctx, ws, client.MergeFrom(orig))).To(Succeed())
		Eventually(status(name)).Should(HaveField("ObservedGeneration", ws.Generation))
	}

	It("creates the workspace's namespace and reports the workspace Active and Ready", func() {
		ws := createWorkspace("ws-own", 3)
		ns := &corev1.Namespace{}
		Eventually(func() error { return k8sClient.Get(ctx, client.ObjectKey{Name: "ws-own"}, ns) }).Should(Succeed())
		Expect(ns.Labels).To(HaveKeyWithValue(agentsv1.LabelWorkspace, "ws-own"))
		owner := metav1.GetControllerOf(ns)
		Expect(owner).NotTo(BeNil(), "the Workspace owns its namespace (deleting it deletes the namespace)")
		Expect(owner.UID).To(Equal(ws.UID))

		Eventually(status("ws-own")).Should(And(
			HaveField("Namespace", "ws-own"), HaveField("Phase", workspacectrl.Active),
			HaveField("AgentLimit", int32(3)), HaveField("ObservedGeneration", ws.Generation)))
		ready := meta.FindStatusCondition(status("ws-own")().Conditions, agentsv1.ConditionReady)
		Expect(ready).NotTo(BeNil())
		Expect(ready.Status).To(Equal(metav1.ConditionTrue))

		By("a new limit shows in the status")
		setLimit("ws-own", 5)
		Eventually(status("ws-own")).Should(HaveField("AgentLimit", int32(5)))
	})

	It("adopts a namespace that already exists by labelling it", func() {
		Expect(k8sClient.Create(ctx, namespace("ws-preexisting"))).To(Succeed())
		createWorkspace("ws-preexisting", 1)
		Eventually(func() map[string]string {
			ns := &corev1.Namespace{}
			Expect(k8sClient.Get(ctx, client.ObjectKey{Name: "ws-preexisting"}, ns)).To(Succeed())
			return ns.Labels
		}).Should(HaveKeyWithValue(agentsv1.LabelWorkspace, "ws-preexisting"))
		Eventually(status("ws-preexisting")).Should(HaveField("Phase", workspacectrl.Active))
	})

	It("counts the workspace's agents as they come and go", func() {
		createWorkspace("ws-count", 5)
		Eventually(status("ws-count")).Should(HaveField("Phase", workspacectrl.Active))
		a := newAgent("ws-count", "one")
		newAgent("ws-count", "two")
		Eventually(status("ws-count")).Should(HaveField("Agents", int32(2)))
		deleteAgent(a)
		Eventually(status("ws-count")).Should(HaveField("Agents", int32(1)))
	})

	It("releases a reservation whose agent never appeared once it is stale, and only then", func() {
		createWorkspace("ws-reserve", 5)
		Eventually(status("ws-reserve")).Should(HaveField("Phase", workspacectrl.Active))
		// A caller reserved two slots; only one agent was created (the other caller died).
		Expect(limiter.ReserveAgent(ctx, "ws-reserve", "kept")).To(Succeed())
		Expect(limiter.ReserveAgent(ctx, "ws-reserve", "ghost")).To(Succeed())
		newAgent("ws-reserve", "kept")

		// A pass that sees the new limit has seen both reservations: the fresh one stays.
		setLimit("ws-reserve", 6)
		Eventually(status("ws-reserve")).Should(And(HaveField("AgentLimit", int32(6)), HaveField("Agents", int32(1))))
		Expect(reserved("ws-reserve")()).To(ConsistOf("kept", "ghost"))

		By("past quota.DefaultStaleAfter the ghost's slot is freed, the agent's kept")
		clk.Step(quota.DefaultStaleAfter + time.Second)
		setLimit("ws-reserve", 7)
		Eventually(reserved("ws-reserve")).Should(ConsistOf("kept"))
	})

	// bind does what the Agent controller does once the agent's slot is reserved.
	bind := func(a *agentsv1.Agent) {
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(a), a)).To(Succeed())
		a.Status.HoldsSlot = true
		Expect(k8sClient.Status().Update(ctx, a)).To(Succeed())
	}

	It("counts a bound agent's slot as used, and gives it back once however often it is released", func() {
		createWorkspace("ws-slots", 2)
		Eventually(status("ws-slots")).Should(HaveField("Phase", workspacectrl.Active))
		Expect(limiter.ReserveAgent(ctx, "ws-slots", "a1")).To(Succeed())
		Expect(limiter.ReserveAgent(ctx, "ws-slots", "a1")).To(Succeed(), "a second reservation while pending is a no-op")
		a := newAgent("ws-slots", "a1")
		bind(a)
		By("the bound agent's slot is counted once no slot moved for quota.SettleQuiet")
		// Once the controller's cache holds the bound agent, a pass that began after saw it.
		Eventually(func() bool {
			got := &agentsv1.Agent{}
			return cached.Get(ctx, client.ObjectKeyFromObject(a), got) == nil && got.Status.HoldsSlot
		}).Should(BeTrue())
		handled("ws-slots")
		Expect(status("ws-slots")()).To(HaveField("AgentSlots.Used", int32(0)))
		clk.Step(quota.SettleQuiet)
		Eventually(status("ws-slots")).Should(HaveField("AgentSlots", agentsv1.AgentSlots{Used: 1}))

		By("the last slot is taken by a create in flight, and a third agent finds none")
		Expect(limiter.ReserveAgent(ctx, "ws-slots", "a2")).To(Succeed())
		Expect(limiter.ReserveAgent(ctx, "ws-slots", "a3")).To(MatchError(quota.ErrLimitReached))

		By("a retried release of the bound agent counts once, and is forgotten when the agent is gone")
		for range 2 {
			Expect(limiter.ReleaseAgent(ctx, "ws-slots", "a1", a.UID, true)).To(Succeed())
		}
		s := status("ws-slots")().AgentSlots
		Expect(s.Used).To(BeZero())
		Expect(s.Releasing).To(ConsistOf(HaveField("UID", a.UID)))
		Expect(s.Taken()).To(Equal(1), "a2's slot is still pending")
		deleteAgent(a)
		clk.Step(quota.SettleQuiet)
		Eventually(func() []agentsv1.Reservation { return status("ws-slots")().AgentSlots.Releasing }).Should(BeEmpty())
		Expect(limiter.ReserveAgent(ctx, "ws-slots", "a3")).To(Succeed())
	})

	It("recounts a count that disagrees with the agents", func() {
		createWorkspace("ws-recount", 5)
		Eventually(status("ws-recount")).Should(HaveField("Phase", workspacectrl.Active))
		for _, name := range []string{"b1", "b2"} {
			Expect(limiter.ReserveAgent(ctx, "ws-recount", name)).To(Succeed())
			bind(newAgent("ws-recount", name))
		}
		clk.Step(quota.SettleQuiet)
		Eventually(status("ws-recount")).Should(HaveField("AgentSlots.Used", int32(2)))

		By("a write lost the count (another writer's bug, a restore from an old backup)")
		// The controller writes this status too: the lost write retries on a conflict, as
		// any writer would.
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			ws := &agentsv1.Workspace{}
			if err := k8sClient.Get(ctx, client.ObjectKey{Name: "ws-recount"}, ws); err != nil {
				return err
			}
			ws.Status.AgentSlots.Used = 4
			return k8sClient.Status().Update(ctx, ws)
		})).To(Succeed())
		Eventually(status("ws-recount")).Should(HaveField("AgentSlots.Used", int32(2)))
	})

	It("recounts a storage quota holding a stale reservation from its objects", func() {
		const name = "ws-storage"
		createWorkspace(name, 3)
		Eventually(func() error { return k8sClient.Get(ctx, client.ObjectKey{Name: name}, &corev1.Namespace{}) }).Should(Succeed())
		for i, f := range []struct {
			size     int64
			reserved string
		}{{100, "settle-lost"}, {50, ""}} {
			file := &agentsv1.File{
				ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: fmt.Sprintf("private-f%d", i)},
				Spec: agentsv1.FileSpec{
					Network: agentsv1.NetworkPrivate, CID: "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy",
					Size: f.size, CreatedAt: "2026-01-01T00:00:00.000Z",
				},
			}
			if f.reserved != "" {
				file.Annotations = map[string]string{agentsv1.AnnotationStorageReservation: f.reserved}
			}
			Expect(k8sClient.Create(ctx, file)).To(Succeed())
		}
		// A settle that was lost (its File exists), a write that died (no File), a count that
		// drifted (a free that was lost), and an upload that died.
		Expect(limiter.ReserveStorage(ctx, name, agentsv1.StorageFiles, "settle-lost", 100)).To(Succeed())
		Expect(limiter.ReserveStorage(ctx, name, agentsv1.StorageFiles, "died", 70)).To(Succeed())
		Expect(limiter.ReserveStorage(ctx, name, agentsv1.StorageFiles, "drift", 999)).To(Succeed())
		Expect(limiter.SettleStorage(ctx, name, agentsv1.StorageFiles, "drift", 999)).To(Succeed())
		Expect(limiter.ReserveStorage(ctx, name, agentsv1.StorageUploads, "upload-died", 5)).To(Succeed())
		// A pass over the Workspace with these reservations keeps the fresh ones.
		handled(name)
		Expect(len(status(name)().Storage.Files.Pending)).To(Equal(2))

		clk.Step(quota.StorageStaleAfter + time.Minute)
		Expect(limiter.ReserveStorage(ctx, name, agentsv1.StorageFiles, "fresh", 1)).To(Succeed())
		Eventually(func() agentsv1.StorageCount { return status(name)().Storage.Files }).Should(
			HaveField("Pending", HaveExactElements(HaveField("Name", "fresh"))))
		files := status(name)().Storage.Files
		Expect([]int64{files.Bytes, files.Objects}).To(Equal([]int64{150, 2}))
		Eventually(func() int { return len(status(name)().Storage.Uploads.Pending) }).Should(BeZero())
	})

	It("reports a workspace being deleted as Terminating", func() {
		ws := createWorkspace("ws-delete", 1)
		Eventually(status("ws-delete")).Should(HaveField("Phase", workspacectrl.Active))
		// A finalizer of the test's keeps the Workspace visible while it is being deleted.
		const hold = "test.agentplane.io/hold"
		patch("ws-delete", func(ws *agentsv1.Workspace) { controllerutil.AddFinalizer(ws, hold) })
		Expect(k8sClient.Delete(ctx, ws)).To(Succeed())
		Eventually(status("ws-delete")).Should(HaveField("Phase", workspacectrl.Terminating))
		patch("ws-delete", func(ws *agentsv1.Workspace) { controllerutil.RemoveFinalizer(ws, hold) })
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Name: "ws-delete"}, &agentsv1.Workspace{}))
		}).Should(BeTrue())
	})
})

// deleteAgent deletes a and removes the finalizer the API server gave it (config/policy): no
// Agent controller runs in these specs to remove it once the agent is stopped.
func deleteAgent(a *agentsv1.Agent) {
	Expect(k8sClient.Delete(ctx, a)).To(Succeed())
	Expect(client.IgnoreNotFound(k8sClient.Patch(ctx, a, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))))).To(Succeed())
}
