package controllers_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	domainctrl "github.com/agentplane/agentplane/controllers/domain"
	"github.com/agentplane/agentplane/internal/adapters/dnsverify"
	"github.com/agentplane/agentplane/internal/adapters/dnsverify/dnstest"
	"github.com/agentplane/agentplane/internal/rules/admission"
	"github.com/agentplane/agentplane/internal/rules/quota"
)

const (
	domSystemNS = "domain-test-system"
	appsDomain  = "apps.test"
)

// The domain controller runs in its own manager (a RecordRouter, a DNS server on loopback and
// short check intervals) for the specs of this container.
var _ = Describe("Domain controller", Ordered, func() {
	var (
		dnsSrv   *dnstest.Server
		router   *domainctrl.RecordRouter
		tokenKey = []byte("0123456789abcdef0123456789abcdef")
		stop     context.CancelFunc
	)

	BeforeAll(func() {
		var err error
		dnsSrv, err = dnstest.Start()
		Expect(err).NotTo(HaveOccurred())
		if err := k8sClient.Create(ctx, namespace(domSystemNS)); !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
		mgr := newManager()
		router = &domainctrl.RecordRouter{}
		Expect((&domainctrl.Reconciler{
			Client:   mgr.GetClient(),
			Resolver: dnsverify.New([]string{dnsSrv.Addr}, 300*time.Millisecond), TokenKey: tokenKey,
			AppsDomain: appsDomain, Router: router,
			Admission: &admission.Admitter{
				Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), SystemNamespace: domSystemNS,
				Limiter: &quota.Limiter{Reader: mgr.GetAPIReader(), Writer: mgr.GetClient()},
			},
			CheckInterval: time.Second, MaxCheckInterval: 2 * time.Second,
		}).SetupWithManager(mgr)).To(Succeed())
		var mctx context.Context
		mctx, stop = context.WithCancel(ctx)
		go func() {
			defer GinkgoRecover()
			Expect(mgr.Start(mctx)).To(Succeed())
		}()
	})

	AfterAll(func() {
		stop()
		dnsSrv.Stop()
	})

	It("makes a subdomain active at once and claims its host", func() {
		ns := newWorkspaceNS("dom-sub")
		agent := newAgent(ns, "a1")
		d := newDomain(ns, "hello", agent.Name, func(d *agentsv1.Domain) { d.Spec.Subdomain = "hello" })
		got := eventuallyPhase(d, agentsv1.DomainActive)
		Expect(got.Status.Host).To(Equal("hello." + appsDomain))
		Expect(got.Status.Verification).To(BeNil())
		expectCondition(got, agentsv1.DomainVerified, metav1.ConditionTrue, agentsv1.ReasonNotRequired)
		routed := expectCondition(got, agentsv1.DomainRouted, metav1.ConditionTrue, agentsv1.ReasonRouted)
		Expect(routed.Message).To(ContainSubstring("recorded (local mode)"))
		Expect(got.Finalizers).To(ContainElement(domainctrl.Finalizer))
		Expect(got.OwnerReferences).To(ContainElement(HaveField("UID", agent.UID)))
		Expect(router.Routes()).To(HaveKeyWithValue(ns+"/hello", domainctrl.RecordedRoute{
			Host: "hello." + appsDomain, Namespace: ns, Agent: agent.Name, Port: domainctrl.DefaultTargetPort,
		}))

		lease := &coordinationv1.Lease{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: domSystemNS, Name: admission.ClaimName("hello." + appsDomain)}, lease)).To(Succeed())
		Expect(lease.Name).To(HaveLen(len("domain-") + 40))
		Expect(lease.Labels).To(HaveKeyWithValue(agentsv1.LabelClaim, admission.ClaimKindDomain))
		Expect(lease.Annotations).To(HaveKeyWithValue(agentsv1.AnnotationClaimHost, "hello."+appsDomain))
		Expect(lease.Annotations).To(HaveKeyWithValue(agentsv1.AnnotationClaimWorkspace, ns))
		Expect(lease.Annotations).To(HaveKeyWithValue(agentsv1.AnnotationClaimDomain, ns+"/hello"))
		Expect(reservations(ns, agent.Name)).To(ConsistOf("hello"))
	})

	It("walks a custom domain from pending_ownership to active as DNS catches up", func() {
		ns := newWorkspaceNS("dom-cust")
		agent := newAgent(ns, "a1")
		d := newDomain(ns, "docs", agent.Name, func(d *agentsv1.Domain) { d.Spec.CustomDomain = "docs.example.com" })
		record := "_agentplane-verify.docs.example.com"
		token := dnsverify.Token(tokenKey, ns, "docs.example.com")

		By("NXDOMAIN: not yet")
		got := eventuallyReason(d, agentsv1.ReasonNotChecked, string(dnsverify.Missing))
		Expect(got.Status.Phase).To(Equal(agentsv1.DomainPendingOwnership))
		Expect(got.Status.Verification).To(Equal(&agentsv1.DomainVerification{RecordName: record, Token: token}))
		Expect(got.Status.LastChecked).NotTo(BeNil())
		Expect(got.Status.NextCheck).NotTo(BeNil())
		Expect(got.Status.Checks).To(BeNumerically(">=", 1))
		expectCondition(got, agentsv1.DomainRouted, metav1.ConditionFalse, agentsv1.ReasonAwaitingOwnership)
		expectNoClaim("docs.example.com")

		By("a wrong value is not taken for the token")
		dnsSrv.SetTXT(record, "not-the-token")
		got = eventuallyReason(d, string(dnsverify.Mismatch))
		Expect(got.Status.Phase).To(Equal(agentsv1.DomainPendingOwnership))
		Expect(meta.FindStatusCondition(got.Status.Conditions, agentsv1.DomainVerified).Message).To(ContainSubstring("does not match"))

		By("DNS down: still pending, reported in the condition")
		dnsSrv.Stop()
		got = eventuallyReason(d, string(dnsverify.Unavailable))
		Expect(got.Status.Phase).To(Equal(agentsv1.DomainPendingOwnership))
		Expect(got.Status.Checks).To(BeNumerically(">=", 3))

		By("DNS back with the right token")
		dnsSrv.SetTXT(record, "not-the-token", token)
		Expect(dnsSrv.Restart()).To(Succeed())
		got = eventuallyPhase(d, agentsv1.DomainActive)
		expectCondition(got, agentsv1.DomainVerified, metav1.ConditionTrue, agentsv1.ReasonDomainVerified)
		Expect(got.Status.NextCheck).To(BeNil())
		held, err := admission.Lookup(ctx, k8sClient, domSystemNS, "docs.example.com")
		Expect(err).NotTo(HaveOccurred())
		Expect(held.Workspace).To(Equal(ns))

		By("once verified, DNS is not asked again")
		// Counted for this record only: other specs' pending domains share the server.
		queries := func() int64 { return dnsSrv.QueriesFor(record) }
		// A spec change makes a pass; the pass that acknowledges its generation read the
		// domain as verified (the change came after the verdict).
		repointed := func(port int32) {
			GinkgoHelper()
			cur := getDomain(d)
			patch := client.MergeFrom(cur.DeepCopy())
			cur.Spec.TargetPort = port
			Expect(k8sClient.Patch(ctx, cur, patch)).To(Succeed())
			Eventually(func() bool {
				got := getDomain(d)
				return got.Status.ObservedGeneration == cur.Generation
			}, domainWait).Should(BeTrue())
		}
		// Passes of one domain run one at a time: once the first change is acknowledged, a pass
		// queued before the verdict reached the cache has ended (and may have asked once).
		repointed(8081)
		before := queries()
		// The pass over the second change finds the domain verified: it asks DNS nothing.
		repointed(8082)
		Expect(queries()).To(Equal(before))
	})

	It("fails a name containing the brand", func() {
		ns := newWorkspaceNS("dom-banned")
		agent := newAgent(ns, "a1")
		d := newDomain(ns, "banned", agent.Name, func(d *agentsv1.Domain) { d.Spec.Subdomain = "my-agentplane-site" })
		got := eventuallyPhase(d, agentsv1.DomainFailed)
		expectCondition(got, agentsv1.DomainRouted, metav1.ConditionFalse, agentsv1.ReasonBannedName)
		expectNoClaim("my-agentplane-site." + appsDomain)
		Expect(router.Routes()).NotTo(HaveKey(ns + "/banned"))
	})

	It("gives a custom domain to the first workspace that proves ownership", func() {
		nsA, nsB := newWorkspaceNS("dom-shop-a"), newWorkspaceNS("dom-shop-b")
		a, b := newAgent(nsA, "a1"), newAgent(nsB, "b1")
		record := "_agentplane-verify.shop.example.com"
		first := newDomain(nsA, "shop", a.Name, func(d *agentsv1.Domain) { d.Spec.CustomDomain = "shop.example.com" })
		second := newDomain(nsB, "shop", b.Name, func(d *agentsv1.Domain) { d.Spec.CustomDomain = "shop.example.com" })
		Expect(eventuallyPhase(second, agentsv1.DomainPendingOwnership).Status.Verification.Token).
			NotTo(Equal(dnsverify.Token(tokenKey, nsA, "shop.example.com")), "tokens differ per workspace")

		dnsSrv.SetTXT(record, dnsverify.Token(tokenKey, nsA, "shop.example.com"))
		eventuallyPhase(first, agentsv1.DomainActive)
		dnsSrv.SetTXT(record, dnsverify.Token(tokenKey, nsA, "shop.example.com"), dnsverify.Token(tokenKey, nsB, "shop.example.com"))
		got := eventuallyPhase(second, agentsv1.DomainFailed)
		expectCondition(got, agentsv1.DomainVerified, metav1.ConditionTrue, agentsv1.ReasonDomainVerified)
		expectCondition(got, agentsv1.DomainRouted, metav1.ConditionFalse, agentsv1.ReasonHostTaken)
	})

	It("refuses a kubectl-created sixth domain on one agent and lets it in when a slot frees", func() {
		ns := newWorkspaceNS("dom-limit")
		agent := newAgent(ns, "a1")
		for i := range agentsv1.MaxDomainsPerAgent {
			d := newDomain(ns, fmt.Sprintf("d%d", i), agent.Name, func(d *agentsv1.Domain) { d.Spec.Subdomain = fmt.Sprintf("lim%d", i) })
			eventuallyPhase(d, agentsv1.DomainActive)
		}
		sixth := newDomain(ns, "d5", agent.Name, func(d *agentsv1.Domain) { d.Spec.Subdomain = "lim5" })
		got := eventuallyPhase(sixth, agentsv1.DomainFailed)
		expectCondition(got, agentsv1.DomainRouted, metav1.ConditionFalse, agentsv1.ReasonDomainLimitReached)
		expectNoClaim("lim5." + appsDomain)

		Expect(k8sClient.Delete(ctx, &agentsv1.Domain{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "d0"}})).To(Succeed())
		eventuallyPhase(sixth, agentsv1.DomainActive)
		Expect(reservations(ns, agent.Name)).To(ConsistOf("d1", "d2", "d3", "d4", "d5"))
	})

	It("frees slots of domains that were reserved but never created", func() {
		ns := newWorkspaceNS("dom-stale")
		agent := newAgent(ns, "a1")
		old := metav1.NewTime(time.Now().Add(-time.Hour))
		for i := range agentsv1.MaxDomainsPerAgent {
			agent.Status.DomainReservations = append(agent.Status.DomainReservations, agentsv1.Reservation{Name: fmt.Sprintf("ghost%d", i), Time: old})
		}
		Expect(k8sClient.Status().Update(ctx, agent)).To(Succeed())
		d := newDomain(ns, "real", agent.Name, func(d *agentsv1.Domain) { d.Spec.Subdomain = "stale-slots" })
		eventuallyPhase(d, agentsv1.DomainActive)
		Expect(reservations(ns, agent.Name)).To(ConsistOf("real"))
	})

	It("gives a subdomain to one workspace only and releases it on delete", func() {
		nsA, nsB := newWorkspaceNS("dom-race-a"), newWorkspaceNS("dom-race-b")
		a, b := newAgent(nsA, "a1"), newAgent(nsB, "b1")
		first := newDomain(nsA, "shared", a.Name, func(d *agentsv1.Domain) { d.Spec.Subdomain = "shared" })
		eventuallyPhase(first, agentsv1.DomainActive)
		second := newDomain(nsB, "shared", b.Name, func(d *agentsv1.Domain) { d.Spec.Subdomain = "shared" })
		got := eventuallyPhase(second, agentsv1.DomainFailed)
		expectCondition(got, agentsv1.DomainRouted, metav1.ConditionFalse, agentsv1.ReasonHostTaken)

		By("the finalizer releases claim, route and slot")
		Expect(k8sClient.Delete(ctx, first)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(first), &agentsv1.Domain{}))
		}).Should(BeTrue())
		expectNoClaim("shared." + appsDomain)
		Expect(router.Routes()).NotTo(HaveKey(nsA + "/shared"))
		Expect(reservations(nsA, a.Name)).To(BeEmpty())
		Expect(admission.ClaimHost(ctx, k8sClient, domSystemNS, "shared."+appsDomain, nsB, "other/claimant")).To(Succeed())
	})
})

var _ = Describe("Host claims", func() {
	BeforeEach(func() {
		_ = k8sClient.Create(ctx, namespace(domSystemNS))
	})

	It("lets exactly one of 20 concurrent claimants from two workspaces win", func() {
		host := "race.example.com"
		for _, ws := range []string{"race-ws-a", "race-ws-b"} {
			_ = k8sClient.Create(ctx, namespace(ws))
		}
		var wg sync.WaitGroup
		results := make([]error, 20)
		for i := range results {
			wg.Add(1)
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				// What the facade does: claim, create the Domain, confirm the claim.
				ws := []string{"race-ws-a", "race-ws-b"}[i%2]
				d := &agentsv1.Domain{
					ObjectMeta: metav1.ObjectMeta{Namespace: ws, Name: fmt.Sprintf("dom-%d", i)},
					Spec:       agentsv1.DomainSpec{AgentRef: agentsv1.LocalObjectReference{Name: "agt"}, Subdomain: fmt.Sprintf("race-%d", i)},
				}
				if results[i] = admission.ClaimHost(ctx, k8sClient, domSystemNS, host, ws, admission.DomainKey(d)); results[i] != nil {
					return
				}
				Expect(k8sClient.Create(ctx, d)).To(Succeed())
				results[i] = admission.ConfirmClaim(ctx, k8sClient, domSystemNS, host, d)
			}()
		}
		wg.Wait()
		wins, taken := 0, 0
		for _, err := range results {
			switch {
			case err == nil:
				wins++
			case errors.Is(err, admission.ErrHostTaken):
				taken++
			default:
				Fail("unexpected error: " + err.Error())
			}
		}
		Expect(wins).To(Equal(1))
		Expect(taken).To(Equal(19))
	})

	It("is idempotent for its holder and released only by it", func() {
		host := "idem.example.com"
		_ = k8sClient.Create(ctx, namespace("ws-a"))
		Expect(k8sClient.Create(ctx, &agentsv1.Domain{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ws-a", Name: "d1"},
			Spec:       agentsv1.DomainSpec{AgentRef: agentsv1.LocalObjectReference{Name: "agt"}, Subdomain: "idem-d1"},
		})).To(Succeed())
		Expect(admission.ClaimHost(ctx, k8sClient, domSystemNS, host, "ws-a", "ws-a/d1")).To(Succeed())
		Expect(admission.ClaimHost(ctx, k8sClient, domSystemNS, host, "ws-a", "ws-a/d1")).To(Succeed())
		Expect(admission.ClaimHost(ctx, k8sClient, domSystemNS, host, "ws-a", "ws-a/d2")).To(MatchError(admission.ErrHostTaken))
		Expect(admission.ReleaseHost(ctx, k8sClient, domSystemNS, host, "ws-a/d2")).To(Succeed())
		held, err := admission.Lookup(ctx, k8sClient, domSystemNS, host)
		Expect(err).NotTo(HaveOccurred())
		Expect(held.Domain).To(Equal("ws-a/d1"))
		Expect(admission.ReleaseHost(ctx, k8sClient, domSystemNS, host, "ws-a/d1")).To(Succeed())
		expectNoClaim(host)
	})

	It("waits for a claim whose domain never appeared, then takes it over; its owner then backs off", func() {
		host := "stale.example.com"
		gone := &agentsv1.Domain{ObjectMeta: metav1.ObjectMeta{Namespace: "ws-gone", Name: "never-created"}}
		Expect(admission.ClaimHost(ctx, k8sClient, domSystemNS, host, "ws-gone", admission.DomainKey(gone))).To(Succeed())
		start := time.Now()
		Expect(admission.ClaimHost(ctx, k8sClient, domSystemNS, host, "ws-b", "ws-b/d")).To(Succeed())
		Expect(time.Since(start)).To(BeNumerically(">=", admission.InFlightWait-time.Second), "the young claim was waited for")
		held, err := admission.Lookup(ctx, k8sClient, domSystemNS, host)
		Expect(err).NotTo(HaveOccurred())
		Expect(held.Workspace).To(Equal("ws-b"))
		// The first claimant, slow, now confirms: it lost the name.
		Expect(admission.ConfirmClaim(ctx, k8sClient, domSystemNS, host, gone)).To(MatchError(admission.ErrHostTaken))
	})

	It("a confirmed claim is not taken over by a claimant that read it before", func() {
		host := "fenced.example.com"
		d := &agentsv1.Domain{ObjectMeta: metav1.ObjectMeta{Namespace: "ws-a", Name: "fenced"}}
		Expect(admission.ClaimHost(ctx, k8sClient, domSystemNS, host, "ws-a", admission.DomainKey(d))).To(Succeed())
		stale := &coordinationv1.Lease{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: domSystemNS, Name: admission.ClaimName(host)}, stale)).To(Succeed())
		Expect(admission.ConfirmClaim(ctx, k8sClient, domSystemNS, host, d)).To(Succeed())
		// A takeover decided on the read before the confirmation is refused by the API server.
		stale.Spec.HolderIdentity = ptr.To("ws-b/late")
		Expect(apierrors.IsConflict(k8sClient.Update(ctx, stale))).To(BeTrue())
	})
})

var _ = Describe("IngressRouter", func() {
	It("creates an Ingress owned by the Domain that sends the host to the agent's Service", func() {
		ns := newWorkspaceNS("dom-ingress")
		agent := newAgent(ns, "a1")
		d := newDomain(ns, "web", agent.Name, func(d *agentsv1.Domain) {
			d.Spec.CustomDomain = "web.example.com"
			d.Spec.TargetPort = 8080
		})
		d.Status.Host = "web.example.com"
		r := &domainctrl.IngressRouter{Client: k8sClient, Scheme: env.Scheme, ClassName: "nginx", ClusterIssuer: "letsencrypt",
			Annotations: map[string]string{"nginx.ingress.kubernetes.io/proxy-read-timeout": "3600"}}
		Expect(r.Route(ctx, d, agent)).To(Succeed())
		Expect(r.Route(ctx, d, agent)).To(Succeed(), "idempotent")

		ing := &networkingv1.Ingress{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, ing)).To(Succeed())
		Expect(ing.OwnerReferences).To(ConsistOf(And(HaveField("UID", d.UID), HaveField("Controller", ptr.To(true)))))
		Expect(ing.Spec.IngressClassName).To(Equal(ptr.To("nginx")))
		Expect(ing.Spec.Rules).To(HaveLen(1))
		Expect(ing.Spec.Rules[0].Host).To(Equal("web.example.com"))
		backend := ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service
		Expect(backend.Name).To(Equal(domainctrl.ServiceName(d)))
		Expect(backend.Port.Number).To(Equal(int32(8080)))

		By("the Domain's own Service sends the target port to the agent's gateway pod")
		svc := &corev1.Service{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: backend.Name}, svc)).To(Succeed())
		Expect(svc.OwnerReferences).To(ConsistOf(And(HaveField("UID", d.UID), HaveField("Controller", ptr.To(true)))))
		Expect(svc.Spec.Selector).To(Equal(agentsv1.GatewayPodSelector(agent.Name)))
		Expect(svc.Spec.Ports).To(ConsistOf(And(HaveField("Port", int32(8080)), HaveField("TargetPort", intstr.FromInt32(8080)))))
		Expect(svc.Labels).To(HaveKeyWithValue(agentsv1.LabelAppManagedBy, agentsv1.ManagedBy))
		Expect(ing.Annotations).To(HaveKeyWithValue(domainctrl.ClusterIssuerAnnotation, "letsencrypt"))
		Expect(ing.Annotations).To(HaveKeyWithValue("nginx.ingress.kubernetes.io/proxy-read-timeout", "3600"))
		Expect(ing.Spec.TLS).To(ConsistOf(networkingv1.IngressTLS{Hosts: []string{"web.example.com"}, SecretName: "web-tls"}))

		By("without an issuer there is no TLS")
		r.ClusterIssuer = ""
		Expect(r.Route(ctx, d, agent)).To(Succeed())
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, ing)).To(Succeed())
		Expect(ing.Spec.TLS).To(BeEmpty())
		Expect(ing.Annotations).NotTo(HaveKey(domainctrl.ClusterIssuerAnnotation))

		By("a new target port moves the Service's port")
		d.Spec.TargetPort = 3000
		Expect(r.Route(ctx, d, agent)).To(Succeed())
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: backend.Name}, svc)).To(Succeed())
		Expect(svc.Spec.Ports).To(ConsistOf(HaveField("Port", int32(3000))))

		Expect(r.Unroute(ctx, d)).To(Succeed())
		Expect(apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, ing))).To(BeTrue())
		Expect(apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: backend.Name}, svc))).To(BeTrue())
		Expect(r.Unroute(ctx, d)).To(Succeed(), "idempotent")
	})
})

var _ = Describe("Domain verification key", func() {
	It("is created once and shared by concurrent callers", func() {
		const ns = "domain-key-system"
		keys := make([][]byte, 10)
		var wg sync.WaitGroup
		for i := range keys {
			wg.Add(1)
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				k, err := dnsverify.EnsureKey(ctx, k8sClient, ns)
				Expect(err).NotTo(HaveOccurred())
				keys[i] = k
			}()
		}
		wg.Wait()
		Expect(keys[0]).To(HaveLen(32))
		for _, k := range keys {
			Expect(k).To(Equal(keys[0]))
		}
		again, err := dnsverify.EnsureKey(ctx, k8sClient, ns)
		Expect(err).NotTo(HaveOccurred())
		Expect(again).To(Equal(keys[0]))
	})
})
