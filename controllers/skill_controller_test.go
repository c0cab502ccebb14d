package controllers_test

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/agentplane/agentplane/internal/adapters/storage"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	skillctrl "github.com/agentplane/agentplane/controllers/skill"
	"github.com/agentplane/agentplane/internal/adapters/cid"
	"github.com/agentplane/agentplane/internal/adapters/storage/local"
)

var _ = Describe("Skill status", Ordered, func() {
	const ns = "skill-ctrl"
	var (
		store *flakyStore
		stop  context.CancelFunc
		// skillPasses counts the Skill controller's passes.
		skillPasses *countedClient
	)

	BeforeAll(func() {
		files, err := local.New(GinkgoT().TempDir())
		Expect(err).NotTo(HaveOccurred())
		store = &flakyStore{Store: files}
		mgr := newManager()
		skillPasses = newCountedClient(mgr.GetClient())
		Expect((&skillctrl.Reconciler{Client: skillPasses, Store: store, RetryAfter: time.Second}).SetupWithManager(mgr)).To(Succeed())
		var mctx context.Context
		mctx, stop = context.WithCancel(ctx)
		go func() {
			defer GinkgoRecover()
			Expect(mgr.Start(mctx)).To(Succeed())
		}()
		newWorkspaceNS(ns)
	})
	AfterAll(func() { stop() })

	cidOf := func(b []byte) string {
		c, _, err := cid.Compute(bytes.NewReader(b))
		Expect(err).NotTo(HaveOccurred())
		return c.String()
	}
	ready := func(name string) func() string {
		return func() string {
			sk := &agentsv1.Skill{}
			Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sk)).To(Succeed())
			if c := meta.FindStatusCondition(sk.Status.Conditions, agentsv1.ConditionReady); c != nil && c.ObservedGeneration == sk.Generation {
				return string(c.Status) + "/" + c.Reason
			}
			return ""
		}
	}
	attachedTo := func(name string) func() []string {
		return func() []string {
			sk := &agentsv1.Skill{}
			Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sk)).To(Succeed())
			return sk.Status.AttachedTo
		}
	}
	agentWith := func(name string, cids ...string) *agentsv1.Agent {
		a := &agentsv1.Agent{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       agentsv1.AgentSpec{DisplayName: name, Stopped: true},
		}
		for _, c := range cids {
			a.Spec.Skills = append(a.Spec.Skills, agentsv1.AgentSkill{CID: c})
		}
		Expect(k8sClient.Create(ctx, a)).To(Succeed())
		return a
	}

	It("reports a kubectl-applied skill whose bundle is not in storage, and Ready once it is", func() {
		bundle := []byte("a skill bundle that is not stored yet")
		sk := &agentsv1.Skill{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "weather"},
			Spec:       agentsv1.SkillSpec{Slug: "weather", Version: "1.0.0", CID: cidOf(bundle)},
		}
		Expect(k8sClient.Create(ctx, sk)).To(Succeed())
		Eventually(ready("weather")).Should(Equal("False/" + agentsv1.ReasonSkillBundleMissing))

		obj, err := store.Put(ctx, storage.SkillsSpace(ns), bytes.NewReader(bundle))
		Expect(err).NotTo(HaveOccurred())
		Expect(obj.CID).To(Equal(sk.Spec.CID))
		// A new version names the stored bundle: the spec change is looked at again. (A merge
		// patch: the controller may write the status between a read and an update.)
		Expect(k8sClient.Patch(ctx, sk, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"version":"1.0.1"}}`)))).To(Succeed())
		Eventually(ready("weather")).Should(Equal("True/" + agentsv1.ReasonSkillStored))
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(sk), sk)).To(Succeed())
		Expect(sk.Status.Size).To(Equal(int64(len(bundle))))
	})

	It("lists the agents that attach any of the skill's versions, and drops them when they detach or go", func() {
		old, cur := []byte("notes bundle v1"), []byte("notes bundle v2")
		for _, b := range [][]byte{old, cur} {
			_, err := store.Put(ctx, storage.SkillsSpace(ns), bytes.NewReader(b))
			Expect(err).NotTo(HaveOccurred())
		}
		sk := &agentsv1.Skill{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "notes",
				Annotations: map[string]string{agentsv1.AnnotationSkillPreviousCIDs: cidOf(old)}},
			Spec: agentsv1.SkillSpec{Slug: "notes", Version: "2.0.0", CID: cidOf(cur)},
		}
		Expect(k8sClient.Create(ctx, sk)).To(Succeed())
		Eventually(attachedTo("notes")).Should(BeEmpty())

		pinned := agentWith("pinned", cidOf(old))
		current := agentWith("current", cidOf(cur))
		agentWith("other", cidOf([]byte("someone else's skill")))
		Eventually(attachedTo("notes")).Should(Equal([]string{"current", "pinned"}))

		// Detach from one agent, delete the other.
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(current), current)).To(Succeed())
		current.Spec.Skills = nil
		Expect(k8sClient.Update(ctx, current)).To(Succeed())
		Eventually(attachedTo("notes")).Should(Equal([]string{"pinned"}))
		Expect(k8sClient.Delete(ctx, pinned)).To(Succeed())
		Eventually(attachedTo("notes")).Should(BeEmpty())
	})

	It("says storage is unreachable while it is down, recovers by itself, and does not rewrite an unchanged status", func() {
		bundle := []byte("search bundle")
		_, err := store.Put(ctx, storage.SkillsSpace(ns), bytes.NewReader(bundle))
		Expect(err).NotTo(HaveOccurred())
		store.down.Store(true)
		DeferCleanup(func() { store.down.Store(false) })
		sk := &agentsv1.Skill{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "search"},
			Spec:       agentsv1.SkillSpec{Slug: "search", Version: "1.0.0", CID: cidOf(bundle)},
		}
		Expect(k8sClient.Create(ctx, sk)).To(Succeed())
		Eventually(ready("search")).Should(Equal("False/" + agentsv1.ReasonStorageUnavailable))

		store.down.Store(false)
		Eventually(ready("search")).Should(Equal("True/" + agentsv1.ReasonSkillStored))

		// Settled: the controller keeps quiet (no status write per pass). Each touch (an
		// annotation: a pass, nothing the status depends on) is made on the resourceVersion
		// last seen, so a write since makes it conflict; once a pass that began after the first
		// touch has ended, the skill is as the last touch left it.
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(sk), sk)).To(Succeed())
		rv := sk.ResourceVersion
		touch := func() {
			t := &agentsv1.Skill{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sk.Name}}
			patch := fmt.Sprintf(`{"metadata":{"resourceVersion":%q,"annotations":{"test.agentplane.io/touch":%q}}}`, rv, rv)
			Expect(k8sClient.Patch(ctx, t, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed(), "the controller rewrote an unchanged status")
			rv = t.ResourceVersion
		}
		settlePasses(skillPasses.passes(sk), touch)
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(sk), sk)).To(Succeed())
		Expect(sk.ResourceVersion).To(Equal(rv), "the controller rewrote an unchanged status")
	})
})
