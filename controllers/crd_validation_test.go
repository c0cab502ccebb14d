package controllers_test

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

const validCID = "bafkreih5aznjvttude6c3wbvqeebb6rlx5wkbzyppv7garjiubll2ceym4"

// Each case is one validation rule of the CRD schema: the API server itself must refuse the
// object, with a message that names the rule, so kubectl users get the same answer as REST.
var _ = Describe("CRD validation", func() {
	const ns = "validation"

	BeforeEach(func() {
		err := k8sClient.Create(ctx, namespace(ns))
		if err != nil && !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
	})

	agent := func(mut func(*agentsv1.Agent)) client.Object {
		a := &agentsv1.Agent{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "a-", Namespace: ns},
			Spec:       agentsv1.AgentSpec{DisplayName: "ok"},
		}
		mut(a)
		return a
	}
	domain := func(mut func(*agentsv1.Domain)) client.Object {
		d := &agentsv1.Domain{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "d-", Namespace: ns},
			Spec:       agentsv1.DomainSpec{AgentRef: agentsv1.LocalObjectReference{Name: "a"}, Subdomain: "ok"},
		}
		mut(d)
		return d
	}
	channel := func(mut func(*agentsv1.Channel)) client.Object {
		c := &agentsv1.Channel{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "c-", Namespace: ns},
			Spec: agentsv1.ChannelSpec{
				AgentRef:    agentsv1.LocalObjectReference{Name: "a"},
				Type:        agentsv1.ChannelTelegram,
				BotTokenRef: &agentsv1.SecretKeyReference{Name: "s", Key: "k"},
			},
		}
		mut(c)
		return c
	}
	file := func(mut func(*agentsv1.File)) client.Object {
		f := &agentsv1.File{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "f-", Namespace: ns},
			Spec: agentsv1.FileSpec{
				Network: agentsv1.NetworkPublic, CID: validCID, Size: 1,
				CreatedAt: "2026-11-22T03:00:00.000Z",
			},
		}
		mut(f)
		return f
	}
	skills := func(n int) []agentsv1.AgentSkill {
		out := make([]agentsv1.AgentSkill, n)
		for i := range out {
			// distinct, well-formed CIDv1 strings
			out[i].CID = validCID[:len(validCID)-1] + string(rune('a'+i))
		}
		return out
	}

	DescribeTable("accepts valid objects",
		func(obj client.Object) {
			Expect(k8sClient.Create(ctx, obj)).To(Succeed())
		},
		Entry("agent", agent(func(*agentsv1.Agent) {})),
		Entry("agent with a runtime class", agent(func(a *agentsv1.Agent) { a.Spec.RuntimeClassName = "gvisor.sandbox-1" })),
		Entry("workspace with a runtime class", &agentsv1.Workspace{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "w-"}, Spec: agentsv1.WorkspaceSpec{RuntimeClassName: "kata"}}),
		Entry("agent with a 100-character unicode name", agent(func(a *agentsv1.Agent) { a.Spec.DisplayName = strings.Repeat("é", 100) })),
		Entry("agent with 10 skills", agent(func(a *agentsv1.Agent) { a.Spec.Skills = skills(10) })),
		Entry("agent with its own cpu and memory", agent(func(a *agentsv1.Agent) {
			a.Spec.Resources = &agentsv1.AgentResources{
				Requests: corev1.ResourceList{"cpu": resource.MustParse("250m"), "memory": resource.MustParse("3Gi")},
				Limits:   corev1.ResourceList{"memory": resource.MustParse("4Gi")},
			}
		})),
		Entry("subdomain", domain(func(*agentsv1.Domain) {})),
		Entry("custom domain", domain(func(d *agentsv1.Domain) { d.Spec.Subdomain = ""; d.Spec.CustomDomain = "docs.example.com" })),
		Entry("slack channel with app token", channel(func(c *agentsv1.Channel) {
			c.Spec.Type = agentsv1.ChannelSlack
			c.Spec.AppTokenRef = &agentsv1.SecretKeyReference{Name: "s", Key: "app"}
		})),
		Entry("whatsapp channel without tokens", channel(func(c *agentsv1.Channel) { c.Spec.Type = agentsv1.ChannelWhatsApp; c.Spec.BotTokenRef = nil })),
		Entry("private file", file(func(f *agentsv1.File) { f.Spec.Network = agentsv1.NetworkPrivate })),
	)

	DescribeTable("refuses invalid objects with the rule's message",
		func(obj client.Object, message string) {
			err := k8sClient.Create(ctx, obj)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			Expect(err.Error()).To(ContainSubstring(message))
		},
		Entry("agent without a name", agent(func(a *agentsv1.Agent) { a.Spec.DisplayName = "" }), "spec.displayName"),
		// The pod's runtimeClassName is a DNS-1123 subdomain: the CRD refuses what the pod would.
		Entry("agent runtime class with capitals", agent(func(a *agentsv1.Agent) { a.Spec.RuntimeClassName = "gVisor" }), "spec.runtimeClassName"),
		Entry("agent runtime class ending in a dash", agent(func(a *agentsv1.Agent) { a.Spec.RuntimeClassName = "kata-" }), "spec.runtimeClassName"),
		Entry("agent runtime class of 254 characters", agent(func(a *agentsv1.Agent) { a.Spec.RuntimeClassName = strings.Repeat("a", 254) }), "spec.runtimeClassName"),
		Entry("workspace runtime class with an underscore", &agentsv1.Workspace{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "w-"}, Spec: agentsv1.WorkspaceSpec{RuntimeClassName: "run_sc"}}, "spec.runtimeClassName"),
		Entry("agent name of 101 characters", agent(func(a *agentsv1.Agent) { a.Spec.DisplayName = strings.Repeat("x", 101) }), "may not be more than 100"),
		Entry("agent name with <", agent(func(a *agentsv1.Agent) { a.Spec.DisplayName = "<script>" }), "spec.displayName"),
		Entry("agent name with a control character", agent(func(a *agentsv1.Agent) { a.Spec.DisplayName = "bad\x07bell" }), "spec.displayName"),
		Entry("blank agent name", agent(func(a *agentsv1.Agent) { a.Spec.DisplayName = "   " }), "name must not be blank"),
		Entry("agent with 11 skills", agent(func(a *agentsv1.Agent) { a.Spec.Skills = skills(11) }), "must have at most 10 items"),
		Entry("agent resources other than cpu and memory", agent(func(a *agentsv1.Agent) {
			a.Spec.Resources = &agentsv1.AgentResources{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}
		}), "only cpu and memory can be set"),
		Entry("unknown engine", agent(func(a *agentsv1.Agent) { a.Spec.Engine.Name = "hermes" }), "supported values: \"openclaw\""),
		Entry("domain with both names", domain(func(d *agentsv1.Domain) { d.Spec.CustomDomain = "docs.example.com" }), "exactly one of subdomain and customDomain must be set"),
		Entry("domain with neither name", domain(func(d *agentsv1.Domain) { d.Spec.Subdomain = "" }), "exactly one of subdomain and customDomain must be set"),
		Entry("domain target port 0", domain(func(d *agentsv1.Domain) { d.Spec.TargetPort = -1 }), "spec.targetPort"),
		Entry("domain target port 70000", domain(func(d *agentsv1.Domain) { d.Spec.TargetPort = 70000 }), "spec.targetPort"),
		Entry("subdomain with a dot", domain(func(d *agentsv1.Domain) { d.Spec.Subdomain = "a.b" }), "spec.subdomain"),
		Entry("custom domain without a dot", domain(func(d *agentsv1.Domain) { d.Spec.Subdomain = ""; d.Spec.CustomDomain = "localhost" }), "spec.customDomain"),
		Entry("custom domain in capitals", domain(func(d *agentsv1.Domain) { d.Spec.Subdomain = ""; d.Spec.CustomDomain = "Docs.Example.com" }), "spec.customDomain"),
		Entry("unknown channel type", channel(func(c *agentsv1.Channel) { c.Spec.Type = "irc" }), "supported values"),
		Entry("slack without app token", channel(func(c *agentsv1.Channel) { c.Spec.Type = agentsv1.ChannelSlack }), "slack needs appTokenRef"),
		Entry("telegram without bot token", channel(func(c *agentsv1.Channel) { c.Spec.BotTokenRef = nil }), "botTokenRef is required"),
		Entry("file on an unknown network", file(func(f *agentsv1.File) { f.Spec.Network = "ipfs" }), "supported values: \"public\", \"private\""),
		Entry("file with a malformed CID", file(func(f *agentsv1.File) { f.Spec.CID = "not-a-cid" }), "spec.cid"),
		Entry("file with a date without milliseconds", file(func(f *agentsv1.File) { f.Spec.CreatedAt = "2026-11-22T03:00:00Z" }), "spec.createdAt"),
		Entry("secret with neither value nor reference", &agentsv1.AgentSecret{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "s-", Namespace: ns},
			Spec:       agentsv1.AgentSecretSpec{Name: "X"},
		}, "exactly one of encryptedValue and secretRef must be set"),
		Entry("workspace on an unknown plan", &agentsv1.Workspace{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "w-"},
			Spec:       agentsv1.WorkspaceSpec{Plan: "enterprise"},
		}, "supported values: \"free\", \"pro\""),
		Entry("workspace with a negative agent limit", &agentsv1.Workspace{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "w-"},
			Spec:       agentsv1.WorkspaceSpec{AgentLimit: ptr.To[int32](-1)},
		}, "spec.agentLimit"),
		Entry("template with a bad slug", &agentsv1.AgentTemplate{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "t-"},
			Spec:       agentsv1.AgentTemplateSpec{Slug: "Bad Slug", DisplayName: "x"},
		}, "spec.slug"),
	)

	It("keeps a domain's host name immutable", func() {
		d := domain(func(*agentsv1.Domain) {}).(*agentsv1.Domain)
		Expect(k8sClient.Create(ctx, d)).To(Succeed())
		d.Spec.Subdomain = "other"
		err := k8sClient.Update(ctx, d)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
		Expect(err.Error()).To(ContainSubstring("the host name is immutable"))
	})

	It("keeps a file's CID and creation date immutable", func() {
		f := file(func(*agentsv1.File) {}).(*agentsv1.File)
		Expect(k8sClient.Create(ctx, f)).To(Succeed())
		f.Spec.CreatedAt = "2027-01-01T00:00:00.000Z"
		err := k8sClient.Update(ctx, f)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
		Expect(err.Error()).To(ContainSubstring("createdAt is immutable"))
	})

	It("defaults the engine, plan, DM policy and target port", func() {
		a := agent(func(*agentsv1.Agent) {}).(*agentsv1.Agent)
		Expect(k8sClient.Create(ctx, a)).To(Succeed())
		Expect(a.Spec.Engine.Name).To(Equal(agentsv1.EngineOpenClaw))

		d := domain(func(*agentsv1.Domain) {}).(*agentsv1.Domain)
		Expect(k8sClient.Create(ctx, d)).To(Succeed())
		Expect(d.Spec.TargetPort).To(Equal(int32(18789)))

		c := channel(func(*agentsv1.Channel) {}).(*agentsv1.Channel)
		Expect(k8sClient.Create(ctx, c)).To(Succeed())
		Expect(c.Spec.DMPolicy).To(Equal(agentsv1.DMPolicy("pairing")))
		Expect(*c.Spec.Enabled).To(BeTrue())

		w := &agentsv1.Workspace{ObjectMeta: metav1.ObjectMeta{GenerateName: "w-"}}
		Expect(k8sClient.Create(ctx, w)).To(Succeed())
		Expect(w.Spec.Plan).To(Equal(agentsv1.PlanFree))
		Expect(w.EffectiveAgentLimit()).To(Equal(agentsv1.DefaultFreeAgentLimit))
	})

	It("writes status only through the status subresource", func() {
		a := agent(func(*agentsv1.Agent) {}).(*agentsv1.Agent)
		Expect(k8sClient.Create(ctx, a)).To(Succeed())
		a.Status.Phase = agentsv1.AgentRunning
		Expect(k8sClient.Update(ctx, a)).To(Succeed())
		got := &agentsv1.Agent{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(a), got)).To(Succeed())
		Expect(got.Status.Phase).To(BeEmpty(), "a main-resource update must not change status")

		got.Status.Phase = agentsv1.AgentRunning
		Expect(k8sClient.Status().Update(ctx, got)).To(Succeed())
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(a), got)).To(Succeed())
		Expect(got.Status.Phase).To(Equal(agentsv1.AgentRunning))
	})
})
