package controllers_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	agentctrl "github.com/agentplane/agentplane/controllers/agent"
	snapshotctrl "github.com/agentplane/agentplane/controllers/snapshot"
	"github.com/agentplane/agentplane/internal/adapters/snapshotstore"
	"github.com/agentplane/agentplane/internal/adapters/storage"
	"github.com/agentplane/agentplane/internal/adapters/storage/local"
	"github.com/agentplane/agentplane/internal/rules/admission"
	"github.com/agentplane/agentplane/internal/rules/quota"
	"github.com/agentplane/agentplane/internal/rules/workspacens"
)

const snapWait = 20 * time.Second

// The Snapshot controller and the Agent controller (restores) run in their own manager,
// limited to this container's namespaces, on a directory runtime and a switchable local store.
var _ = Describe("Snapshots", Ordered, func() {
	var (
		rt    *dirRuntime
		store *flakyStore
		stop  context.CancelFunc
		// snapPasses counts the Snapshot controller's passes.
		snapPasses *countedClient
	)
	nsA, nsB, nsQ, nsL := "snap-a", "snap-b", "snap-q", "snap-l"

	BeforeAll(func() {
		rt = &dirRuntime{root: GinkgoT().TempDir()}
		files, err := local.New(GinkgoT().TempDir())
		Expect(err).NotTo(HaveOccurred())
		store = &flakyStore{Store: files}
		for _, ns := range []string{nsA, nsB, nsQ, nsL} {
			Expect(workspacens.EnsureWorkspace(ctx, k8sClient, &agentsv1.Workspace{
				ObjectMeta: metav1.ObjectMeta{Name: ns},
				Spec:       agentsv1.WorkspaceSpec{Plan: agentsv1.PlanPro, AgentLimit: ptr.To[int32](20)},
			})).To(Succeed())
		}
		mgr := newManager(func(o *ctrl.Options) {
			o.Cache = cache.Options{DefaultNamespaces: map[string]cache.Config{nsA: {}, nsB: {}, nsQ: {}, nsL: {}}}
		})
		snapPasses = newCountedClient(mgr.GetClient())
		Expect((&snapshotctrl.Reconciler{
			Client: snapPasses, APIReader: mgr.GetAPIReader(), Runtime: rt, Store: store, Retention: 2,
			RetryMin: 100 * time.Millisecond, RetryMax: 300 * time.Millisecond,
			Quota: &quota.Limiter{Reader: mgr.GetAPIReader(), Writer: mgr.GetClient()},
		}).SetupWithManager(mgr)).To(Succeed())
		Expect((&agentctrl.Reconciler{
			Client: mgr.GetClient(), Runtime: rt,
			Admission: &admission.Admitter{
				Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Cache: mgr.GetClient(),
				Limiter:  &quota.Limiter{Reader: mgr.GetAPIReader(), Writer: mgr.GetClient()},
				Versions: admission.Versions{Default: "1.0.0", Available: []string{"1.0.0"}},
			},
			Snapshots: store, SnapshotReader: mgr.GetAPIReader(),
		}).SetupWithManager(mgr)).To(Succeed())
		var mctx context.Context
		mctx, stop = context.WithCancel(ctx)
		go func() {
			defer GinkgoRecover()
			Expect(mgr.Start(mctx)).To(Succeed())
		}()
	})

	// Leave nothing with a finalizer behind for other containers' managers.
	AfterAll(func() {
		for _, ns := range []string{nsA, nsB, nsQ, nsL} {
			Expect(k8sClient.DeleteAllOf(ctx, &agentsv1.Snapshot{}, client.InNamespace(ns))).To(Succeed())
			Expect(k8sClient.DeleteAllOf(ctx, &agentsv1.Agent{}, client.InNamespace(ns))).To(Succeed())
			Eventually(func() int {
				var snaps agentsv1.SnapshotList
				var agents agentsv1.AgentList
				Expect(k8sClient.List(ctx, &snaps, client.InNamespace(ns))).To(Succeed())
				Expect(k8sClient.List(ctx, &agents, client.InNamespace(ns))).To(Succeed())
				return len(snaps.Items) + len(agents.Items)
			}, snapWait).Should(BeZero())
		}
		Expect(k8sClient.DeleteAllOf(ctx, &agentsv1.AgentTemplate{}, client.MatchingLabels{"test": "snapshots"})).To(Succeed())
		stop()
	})

	agent := func(ns, name string, mut ...func(*agentsv1.Agent)) types.NamespacedName {
		a := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: agentsv1.AgentSpec{DisplayName: name}}
		for _, m := range mut {
			m(a)
		}
		Expect(k8sClient.Create(ctx, a)).To(Succeed())
		key := client.ObjectKeyFromObject(a)
		Eventually(func() string { return agentAt(key).Status.EngineVersion }, snapWait).ShouldNot(BeEmpty())
		return key
	}
	snapshot := func(key types.NamespacedName) *agentsv1.Snapshot {
		s := &agentsv1.Snapshot{
			ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, GenerateName: key.Name + "-"},
			Spec:       agentsv1.SnapshotSpec{AgentRef: agentsv1.LocalObjectReference{Name: key.Name}},
		}
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		return s
	}
	completed := func(s *agentsv1.Snapshot) *agentsv1.Snapshot {
		var got *agentsv1.Snapshot
		EventuallyWithOffset(1, func() agentsv1.SnapshotPhase {
			got = getSnapshot(s)
			return got.Status.Phase
		}, snapWait, 50*time.Millisecond).Should(Equal(agentsv1.SnapshotCompleted))
		return got
	}
	// settled waits until a pass of s that began after this call has ended: each touch (an
	// annotation) makes a pass.
	settled := func(s *agentsv1.Snapshot) {
		GinkgoHelper()
		settlePasses(snapPasses.passes(s), func() {
			Expect(k8sClient.Patch(ctx, s, client.RawPatch(types.MergePatchType,
				[]byte(fmt.Sprintf(`{"metadata":{"annotations":{"poke":%q}}}`, time.Now().Format(time.RFC3339Nano)))))).To(Succeed())
		})
	}
	blob := func(ns, c string) (string, error) {
		rc, _, err := store.Get(ctx, storage.SnapshotSpace(ns), c)
		if err != nil {
			return "", err
		}
		defer rc.Close()
		raw, err := io.ReadAll(rc)
		return string(raw), err
	}

	It("archives a Snapshot once, with its CID, size, owner and Ready condition", func() {
		key := agent(nsA, "once")
		files := map[string]string{"notes/a.md": "alpha\n", "b.txt": "bravo"}
		rt.write(key, files)
		got := completed(snapshot(key))
		Expect(got.Status.CID).To(Equal(cidOf(files)))
		Expect(got.Status.Size).To(BeNumerically(">", 1024))
		Expect(got.Status.CompletedAt).NotTo(BeNil())
		Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		c := meta.FindStatusCondition(got.Status.Conditions, agentsv1.ConditionReady)
		Expect(c).NotTo(BeNil())
		Expect(c.Status).To(Equal(metav1.ConditionTrue))
		Expect(c.Reason).To(Equal(agentsv1.ReasonArchived))
		Expect(c.ObservedGeneration).To(Equal(got.Generation))
		Expect(got.OwnerReferences).To(ContainElement(HaveField("Name", "once")))
		Expect(got.Finalizers).To(ContainElement(agentsv1.SnapshotFinalizer))
		_, err := blob(nsA, got.Status.CID)
		Expect(err).NotTo(HaveOccurred())

		// Never archived again: a later change of the workspace and of the object changes nothing
		// (a pass over the changed object has ended).
		archives := rt.archives.Load()
		rt.write(key, map[string]string{"c.txt": "changed"})
		settled(got.DeepCopy())
		Expect(getSnapshot(got).Status.CID).To(Equal(cidOf(files)))
		Expect(rt.archives.Load()).To(Equal(archives))

		// The same content again gives the same CID.
		rt.write(key, files)
		Expect(completed(snapshot(key)).Status.CID).To(Equal(got.Status.CID))
	})

	It("waits while storage is unreachable and completes once it answers", func() {
		key := agent(nsA, "outage")
		rt.write(key, map[string]string{"x": "during the outage"})
		store.down.Store(true)
		DeferCleanup(func() { store.down.Store(false) })
		s := snapshot(key)
		Eventually(func() string {
			c := meta.FindStatusCondition(getSnapshot(s).Status.Conditions, agentsv1.ConditionReady)
			if c == nil {
				return ""
			}
			return c.Reason
		}, snapWait).Should(Equal(agentsv1.ReasonStorageUnavailable))
		Expect(getSnapshot(s).Status.Phase).To(Equal(agentsv1.SnapshotPending))
		store.down.Store(false)
		Expect(completed(s).Status.CID).To(Equal(cidOf(map[string]string{"x": "during the outage"})))
	})

	It("fails a Snapshot whose archive fails or whose agent does not exist", func() {
		key := agent(nsA, "broken")
		rt.failArchives(errors.New("tar exploded"))
		DeferCleanup(func() { rt.failArchives(nil) })
		s := snapshot(key)
		Eventually(func() agentsv1.SnapshotPhase { return getSnapshot(s).Status.Phase }, snapWait).Should(Equal(agentsv1.SnapshotFailed))
		c := meta.FindStatusCondition(getSnapshot(s).Status.Conditions, agentsv1.ConditionReady)
		Expect(c.Reason).To(Equal(agentsv1.ReasonArchiveFailed))
		Expect(c.Message).To(ContainSubstring("tar exploded"))

		ghost := snapshot(types.NamespacedName{Namespace: nsA, Name: "no-such-agent"})
		Eventually(func() agentsv1.SnapshotPhase { return getSnapshot(ghost).Status.Phase }, snapWait).Should(Equal(agentsv1.SnapshotFailed))
		Expect(meta.FindStatusCondition(getSnapshot(ghost).Status.Conditions, agentsv1.ConditionReady).Reason).To(Equal(agentsv1.ReasonAgentNotFound))
	})

	It("keeps the newest snapshots per agent and deletes archives nothing references", func() {
		key := agent(nsA, "retained")
		contents := []map[string]string{{"v": "A"}, {"v": "B"}, {"v": "B"}, {"v": "C"}, {"v": "D"}}
		cidA := cidOf(contents[0])
		Expect(k8sClient.Create(ctx, &agentsv1.AgentTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: "retained-tpl", Labels: map[string]string{"test": "snapshots"}},
			Spec:       agentsv1.AgentTemplateSpec{Slug: "retained-tpl", DisplayName: "T", SnapshotCID: cidA},
		})).To(Succeed())
		var snaps []*agentsv1.Snapshot
		for _, files := range contents {
			rt.write(key, files)
			snaps = append(snaps, completed(snapshot(key)))
		}
		for _, s := range snaps[:3] {
			Eventually(func() bool {
				return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(s), &agentsv1.Snapshot{}))
			}, snapWait).Should(BeTrue(), s.Name)
		}
		for _, s := range snaps[3:] {
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(s), &agentsv1.Snapshot{})).To(Succeed())
		}
		_, err := blob(nsA, cidA)
		Expect(err).NotTo(HaveOccurred(), "an archive a template names is kept")
		_, err = blob(nsA, snaps[1].Status.CID)
		Expect(err).To(MatchError(storage.ErrNotFound), "an archive nothing names any more is deleted")
		for _, s := range snaps[3:] {
			_, err := blob(nsA, s.Status.CID)
			Expect(err).NotTo(HaveOccurred())
		}
	})

	It("deletes the snapshots of a deleted agent, and their archives", func() {
		key := agent(nsA, "leaving")
		rt.write(key, map[string]string{"only": "this agent has it"})
		s := completed(snapshot(key))
		Expect(k8sClient.Delete(ctx, agentAt(key))).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(s), &agentsv1.Snapshot{}))
		}, snapWait).Should(BeTrue())
		_, err := blob(nsA, s.Status.CID)
		Expect(err).To(MatchError(storage.ErrNotFound))
	})

	It("restores spec.desiredSnapshot into the workspace and records status.snapshotCid", func() {
		key := agent(nsA, "restored")
		files := map[string]string{"keep/me.md": "original\n", "top.txt": "top"}
		rt.write(key, files)
		s := completed(snapshot(key))
		rt.write(key, map[string]string{"keep/me.md": "changed", "new.txt": "new"})
		setDesired(key, s.Status.CID)
		Eventually(func() string { return agentAt(key).Status.SnapshotCID }, snapWait).Should(Equal(s.Status.CID))
		Expect(rt.read(key)).To(Equal(files))
		c := meta.FindStatusCondition(agentAt(key).Status.Conditions, agentsv1.AgentSnapshotRestored)
		Expect(c.Status).To(Equal(metav1.ConditionTrue))
		Expect(c.Reason).To(Equal(agentsv1.ReasonRestored))

		By("spec.restoreRequestedAt later than status.lastRestoreAt restores the same CID again")
		rt.write(key, map[string]string{"keep/me.md": "changed again"})
		a := agentAt(key)
		patch := client.MergeFrom(a.DeepCopy())
		stamp := metav1.Unix(time.Now().Unix(), 0)
		a.Spec.RestoreRequestedAt = &stamp
		Expect(k8sClient.Patch(ctx, a, patch)).To(Succeed())
		Eventually(func() bool {
			got := agentAt(key)
			c := meta.FindStatusCondition(got.Status.Conditions, agentsv1.AgentSnapshotRestored)
			return got.Status.LastRestoreAt != nil && got.Status.LastRestoreAt.Equal(&stamp) &&
				c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == got.Generation &&
				got.Status.ObservedGeneration == got.Generation
		}, snapWait).Should(BeTrue())
		Expect(rt.read(key)).To(Equal(files))
	})

	It("refuses a CID that is no snapshot of the agent, and retries while storage is down", func() {
		other := agent(nsA, "other")
		rt.write(other, map[string]string{"secret": "of another agent"})
		foreign := completed(snapshot(other))
		key := agent(nsA, "picky")
		rt.write(key, map[string]string{"mine": "1"})
		setDesired(key, foreign.Status.CID)
		Eventually(func() string { return restoreReason(key) }, snapWait).Should(Equal(agentsv1.ReasonSnapshotNotFound))
		Expect(rt.read(key)).To(Equal(map[string]string{"mine": "1"}))

		own := completed(snapshot(key))
		store.down.Store(true)
		DeferCleanup(func() { store.down.Store(false) })
		rt.write(key, map[string]string{"mine": "2"})
		setDesired(key, own.Status.CID)
		Eventually(func() string { return restoreReason(key) }, snapWait).Should(Equal(agentsv1.ReasonStorageUnavailable))
		store.down.Store(false)
		Eventually(func() string { return agentAt(key).Status.SnapshotCID }, snapWait).Should(Equal(own.Status.CID))
		Expect(rt.read(key)).To(Equal(map[string]string{"mine": "1"}))
	})

	It("seeds an agent from its template's snapshot taken in another workspace", func() {
		author := agent(nsA, "author")
		files := map[string]string{"SOUL.md": "be kind\n"}
		rt.write(author, files)
		s := completed(snapshot(author))
		Expect(k8sClient.Create(ctx, &agentsv1.AgentTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: "kind-tpl", Labels: map[string]string{"test": "snapshots"}},
			Spec: agentsv1.AgentTemplateSpec{
				Slug: "kind-tpl", DisplayName: "Kind", State: agentsv1.TemplatePublished, SnapshotCID: s.Status.CID,
			},
		})).To(Succeed())
		locator := snapshotstore.Locator{Reader: k8sClient, Store: store}
		Expect(locator.Exists(ctx, nsB, s.Status.CID)).To(BeTrue())
		Expect(locator.Exists(ctx, nsB, cidOf(map[string]string{"nowhere": "x"}))).To(BeFalse())
		key := agent(nsB, "seeded", func(a *agentsv1.Agent) {
			a.Spec.Template, a.Spec.DesiredSnapshot = "kind-tpl", s.Status.CID
		})
		Eventually(func() string { return agentAt(key).Status.SnapshotCID }, snapWait).Should(Equal(s.Status.CID))
		Expect(rt.read(key)).To(Equal(files))
	})

	It("fails a Snapshot over the workspace's snapshot quota clearly, stores nothing of it, and frees on delete and retention", func() {
		setSnapshotQuota(nsQ, 1<<30, 100)
		key := agent(nsQ, "quota")
		rt.write(key, map[string]string{"a.txt": "small"})
		first := completed(snapshot(key))
		size := first.Status.Size
		Eventually(func() [3]int64 { return snapshotUsage(nsQ) }, snapWait).Should(Equal([3]int64{size, 1, 0}))

		// Bytes: an archive larger than the room left is cut off while it streams.
		setSnapshotQuota(nsQ, size+size/2, 100)
		rt.write(key, map[string]string{"a.txt": "small", "big.bin": strings.Repeat("x", 64<<10)})
		big := snapshot(key)
		Eventually(func() agentsv1.SnapshotPhase { return getSnapshot(big).Status.Phase }, snapWait).Should(Equal(agentsv1.SnapshotFailed))
		reason, msg := readyOf(big)
		Expect(reason).To(Equal(agentsv1.ReasonQuotaExceeded))
		Expect(msg).To(ContainSubstring("snapshot quota (spec.quotas.snapshots) is full"))
		Expect(getSnapshot(big).Status.CID).To(BeEmpty())
		Expect(storedCIDs(store, nsQ)).To(ConsistOf(first.Status.CID))
		Expect(snapshotUsage(nsQ)).To(Equal([3]int64{size, 1, 0}))
		// Failed for good: a pass that began after the failure leaves it so.
		settled(big.DeepCopy())
		Expect(getSnapshot(big).Status.Phase).To(Equal(agentsv1.SnapshotFailed))

		// Objects: refused before anything is archived.
		setSnapshotQuota(nsQ, 1<<30, 1)
		rt.write(key, map[string]string{"a.txt": "other"})
		archives := rt.archives.Load()
		counted := snapshot(key)
		Eventually(func() agentsv1.SnapshotPhase { return getSnapshot(counted).Status.Phase }, snapWait).Should(Equal(agentsv1.SnapshotFailed))
		reason, msg = readyOf(counted)
		Expect(reason).To(Equal(agentsv1.ReasonQuotaExceeded))
		Expect(msg).To(ContainSubstring("1 of 1 snapshots"))
		Expect(rt.archives.Load()).To(Equal(archives))

		// Deleting gives the room back.
		Expect(k8sClient.Delete(ctx, first)).To(Succeed())
		Eventually(func() [3]int64 { return snapshotUsage(nsQ) }, snapWait).Should(Equal([3]int64{0, 0, 0}))
		Expect(completed(snapshot(key)).Status.Size).To(BeNumerically(">", 0))

		// Retention (2 per agent here) frees what it deletes: three snapshots leave two counted.
		setSnapshotQuota(nsQ, 1<<30, 4)
		var kept []int64
		for _, v := range []string{"one", "two", "three"} {
			rt.write(key, map[string]string{"v": v})
			kept = append(kept, completed(snapshot(key)).Status.Size)
		}
		Eventually(func() int64 { return snapshotUsage(nsQ)[1] }, snapWait).Should(Equal(int64(2)))
		Expect(snapshotUsage(nsQ)[0]).To(Equal(kept[1] + kept[2]))
	})

	It("records in storage whose each archive is, and relinks an archive of a lost Snapshot without archiving or deleting anything", func() {
		links := func() []snapshotstore.Link {
			l, err := snapshotstore.ReadLinks(ctx, store, nsL)
			Expect(err).NotTo(HaveOccurred())
			return l
		}
		key := agent(nsL, "linked")
		rt.write(key, map[string]string{"l.txt": "linked"})
		got := completed(snapshot(key))
		Expect(links()).To(ConsistOf(snapshotstore.LinkOf(got)))
		Expect(snapshotstore.LinkOf(got).Agent).To(Equal(key.Name))
		Expect(k8sClient.Delete(ctx, got)).To(Succeed())
		Eventually(links, snapWait).Should(BeEmpty())

		// An archive a restore lost the Snapshot of comes back under that Snapshot's name.
		lost, err := store.Put(ctx, storage.SnapshotSpace(nsL), strings.NewReader("the archive of a lost snapshot"))
		Expect(err).NotTo(HaveOccurred())
		archives := rt.archives.Load()
		link := snapshotstore.Link{Namespace: nsL, Snapshot: "lost-1", Agent: key.Name, CID: lost.CID, RequestedAt: "2026-01-02T03:04:05Z"}
		Expect(k8sClient.Create(ctx, snapshotstore.Relinked(link))).To(Succeed())
		relinked := completed(snapshotstore.Relinked(link))
		Expect(relinked.Status.CID).To(Equal(lost.CID))
		Expect(relinked.Status.Size).To(Equal(lost.Size))
		Expect(relinked.OwnerReferences).To(ContainElement(HaveField("Name", key.Name)))
		_, msg := readyOf(relinked)
		Expect(msg).To(HavePrefix("relinked"))
		Expect(rt.archives.Load()).To(Equal(archives))
		Expect(links()).To(ContainElement(HaveField("Snapshot", "lost-1")))
		Eventually(func() [3]int64 { return snapshotUsage(nsL) }, snapWait).Should(Equal([3]int64{lost.Size, 1, 0}))

		// An archive storage does not hold fails the Snapshot; one over the quota fails it and
		// stays in storage.
		missing := snapshotstore.Relinked(snapshotstore.Link{Namespace: nsL, Snapshot: "lost-2", Agent: key.Name, CID: cidOf(map[string]string{"never": "stored"})})
		Expect(k8sClient.Create(ctx, missing)).To(Succeed())
		Eventually(func() string { r, _ := readyOf(missing); return r }, snapWait).Should(Equal(agentsv1.ReasonArchiveMissing))
		setSnapshotQuota(nsL, 1<<30, 1)
		over, err := store.Put(ctx, storage.SnapshotSpace(nsL), strings.NewReader("another lost archive"))
		Expect(err).NotTo(HaveOccurred())
		full := snapshotstore.Relinked(snapshotstore.Link{Namespace: nsL, Snapshot: "lost-3", Agent: key.Name, CID: over.CID})
		Expect(k8sClient.Create(ctx, full)).To(Succeed())
		Eventually(func() string { r, _ := readyOf(full); return r }, snapWait).Should(Equal(agentsv1.ReasonQuotaExceeded))
		Expect(storedCIDs(store, nsL)).To(ConsistOf(lost.CID, over.CID))
	})
})

func getSnapshot(s *agentsv1.Snapshot) *agentsv1.Snapshot {
	got := &agentsv1.Snapshot{}
	ExpectWithOffset(1, k8sClient.Get(ctx, client.ObjectKeyFromObject(s), got)).To(Succeed())
	return got
}

func agentAt(key types.NamespacedName) *agentsv1.Agent {
	got := &agentsv1.Agent{}
	ExpectWithOffset(1, k8sClient.Get(ctx, key, got)).To(Succeed())
	return got
}

func setDesired(key types.NamespacedName, c string) {
	a := agentAt(key)
	patch := client.MergeFrom(a.DeepCopy())
	a.Spec.DesiredSnapshot = c
	ExpectWithOffset(1, k8sClient.Patch(ctx, a, patch)).To(Succeed())
}

func restoreReason(key types.NamespacedName) string {
	if c := meta.FindStatusCondition(agentAt(key).Status.Conditions, agentsv1.AgentSnapshotRestored); c != nil {
		return c.Reason
	}
	return ""
}
