package controllers_test

import (
	"strconv"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/controllers"
)

// The mappers look objects up through the field indexes of the manager's cache: an agent
// wakes exactly its own objects, not those of another agent or of a namesake elsewhere.
var _ = Describe("Index-based mappers", Ordered, func() {
	var (
		mgr       ctrl.Manager
		stop      func()
		ns, other string
	)
	BeforeAll(func() {
		mgr = newManager()
		stop = startManager(mgr)
		ns, other = newWorkspaceNS("index-map"), newWorkspaceNS("index-map-other")
	})
	AfterAll(func() { stop() })

	reqs := func(namespace string, names ...string) []reconcile.Request {
		out := make([]reconcile.Request, 0, len(names))
		for _, n := range names {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: namespace, Name: n}})
		}
		return out
	}
	mapped := func(m handler.MapFunc, agent client.Object) func() []reconcile.Request {
		return func() []reconcile.Request { return m(ctx, agent) }
	}
	create := func(objs ...client.Object) {
		for _, o := range objs {
			Expect(k8sClient.Create(ctx, o)).To(Succeed())
		}
	}
	channel := func(namespace, name, agent string) *agentsv1.Channel {
		return &agentsv1.Channel{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Spec: agentsv1.ChannelSpec{
			AgentRef: agentsv1.LocalObjectReference{Name: agent}, Type: agentsv1.ChannelTelegram,
			BotTokenRef: &agentsv1.SecretKeyReference{Name: name, Key: "bot"},
		}}
	}
	domain := func(namespace, name, agent string) *agentsv1.Domain {
		return &agentsv1.Domain{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Spec: agentsv1.DomainSpec{
			AgentRef: agentsv1.LocalObjectReference{Name: agent}, Subdomain: name,
		}}
	}
	snapshot := func(namespace, name, agent string) *agentsv1.Snapshot {
		return &agentsv1.Snapshot{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Spec: agentsv1.SnapshotSpec{
			AgentRef: agentsv1.LocalObjectReference{Name: agent},
		}}
	}

	It("map an agent to exactly its Channels, Domains and Snapshots", func() {
		alpha := newAgent(ns, "alpha")
		newAgent(ns, "beta")
		create(
			channel(ns, "alpha-tg", "alpha"), channel(ns, "alpha-tg2", "alpha"), channel(ns, "beta-tg", "beta"),
			channel(other, "alpha-tg", "alpha"),
			domain(ns, "alpha-web", "alpha"), domain(ns, "beta-web", "beta"), domain(other, "alpha-docs", "alpha"),
			snapshot(ns, "alpha-1", "alpha"), snapshot(ns, "alpha-2", "alpha"), snapshot(ns, "beta-1", "beta"),
			snapshot(other, "alpha-3", "alpha"),
		)
		c := mgr.GetClient()
		Eventually(mapped(controllers.ChannelsOfAgent(c), alpha)).Should(ConsistOf(reqs(ns, "alpha-tg", "alpha-tg2")))
		Eventually(mapped(controllers.DomainsOfAgent(c), alpha)).Should(ConsistOf(reqs(ns, "alpha-web")))
		Eventually(mapped(controllers.SnapshotsOfAgent(c), alpha)).Should(ConsistOf(reqs(ns, "alpha-1", "alpha-2")))

		By("a deleted Channel no longer maps")
		Expect(k8sClient.Delete(ctx, channel(ns, "alpha-tg2", "alpha"))).To(Succeed())
		Eventually(mapped(controllers.ChannelsOfAgent(c), alpha)).Should(ConsistOf(reqs(ns, "alpha-tg")))
	})

	It("map an agent to the Skills it attaches (any of their versions) and those recorded on it", func() {
		// Well-formed CIDv0s (base58 has no 0): the index needs no bundle behind them.
		cid := func(i int) string { return "Qm" + strings.Repeat(strconv.Itoa(i), 44) }
		skill := func(name, c string) *agentsv1.Skill {
			return &agentsv1.Skill{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: agentsv1.SkillSpec{Slug: name, Version: "1.0.0", CID: c}}
		}
		current := skill("current", cid(1))
		upgraded := skill("upgraded", cid(2))
		upgraded.Annotations = map[string]string{agentsv1.AnnotationSkillPreviousCIDs: cid(3)}
		recorded := skill("recorded", cid(4))
		create(current, upgraded, recorded, skill("unrelated", cid(5)))
		recorded.Status.AttachedTo = []string{"gamma"}
		Expect(k8sClient.Status().Update(ctx, recorded)).To(Succeed())

		gamma := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gamma"}, Spec: agentsv1.AgentSpec{
			DisplayName: "gamma", Stopped: true, Skills: []agentsv1.AgentSkill{{CID: cid(1)}, {CID: cid(3)}},
		}}
		create(gamma)
		Eventually(mapped(controllers.SkillsOfAgent(mgr.GetClient()), gamma)).Should(ConsistOf(reqs(ns, "current", "upgraded", "recorded")))
	})
})
