package facade_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// The two doors of agent creation: POST /v0/agents naming a template, and an Agent applied
// with kubectl naming it in spec.template. Both go through internal/rules/admission, so both agents
// get the same engine version, skills, identity and seeded files.
var _ = Describe("Templates: the REST and kubectl doors agree", Ordered, func() {
	const ws = "tpl-doors"
	var tok, skillCID, snapCID string

	BeforeAll(func() {
		tok = snapshotWorkspace(ws)
		publish("doors-skill", "1.0.0")
		r := installAt(baseURL, tok, "doors-skill", nil)
		Expect(r.Status).To(Equal(201), r.Raw)
		skillCID = skillOf(r)["cid"].(string)

		author := snapAgent(baseURL, tok, "Template author")
		execOK(baseURL, tok, author, `printf 'be brief\n' > SOUL.md && mkdir -p notes && printf 'n\n' > notes/1.md`)
		snapCID = syncOK(baseURL, tok, author)["cid"].(string)
		Expect(k8sClient.Create(ctx, &agentsv1.AgentTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: "tpl-doors"},
			Spec: agentsv1.AgentTemplateSpec{
				Slug: "doors", DisplayName: "Doorkeeper", AgentProfile: agentsv1.AgentProfile{Description: "keeps doors", Vibe: "calm", Emoji: "🚪"},
				// Not the platform's default (2026.9.6): the version must come from the template.
				EngineVersion: "2026.9.7", SnapshotCID: snapCID, State: agentsv1.TemplatePublished,
				Skills: []agentsv1.AgentSkill{{CID: skillCID}},
			},
		})).To(Succeed())
	})

	// settled reads the agent once it runs with the template's snapshot and skill in place.
	settled := func(id string) *agentsv1.Agent {
		a := &agentsv1.Agent{}
		EventuallyWithOffset(1, func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ws, Name: id}, a)).To(Succeed())
			g.Expect(a.Status.Phase).To(Equal(agentsv1.AgentRunning))
			g.Expect(a.Status.SnapshotCID).To(Equal(snapCID))
			g.Expect(a.Status.InstalledSkills).To(ConsistOf(skillCID))
		}).Should(Succeed())
		return a
	}

	It("gives both agents the same config, skills, identity and files", func() {
		r := call("POST", "/v0/agents", tok, map[string]any{"template": "doors", "name": "Twin"})
		Expect(r.Status).To(Equal(201), r.Raw)
		viaREST := agentOf(r)["id"].(string)
		Expect(k8sClient.Create(ctx, &agentsv1.Agent{
			ObjectMeta: metav1.ObjectMeta{Namespace: ws, Name: "kubectl-twin"},
			Spec:       agentsv1.AgentSpec{DisplayName: "Twin", Template: "tpl-doors"},
		})).To(Succeed())

		rest, kubectl := settled(viaREST), settled("kubectl-twin")
		Expect(kubectl.Spec.Engine).To(Equal(rest.Spec.Engine))
		Expect(kubectl.Spec.Engine.Version).To(Equal("2026.9.7"))
		Expect(kubectl.Status.EngineVersion).To(Equal(rest.Status.EngineVersion))
		Expect(kubectl.Spec.Skills).To(Equal(rest.Spec.Skills))
		Expect(kubectl.Spec.Skills).To(Equal([]agentsv1.AgentSkill{{CID: skillCID}}))
		for _, field := range []func(*agentsv1.Agent) string{
			func(a *agentsv1.Agent) string { return a.Spec.DisplayName },
			func(a *agentsv1.Agent) string { return a.Spec.Description },
			func(a *agentsv1.Agent) string { return a.Spec.Vibe },
			func(a *agentsv1.Agent) string { return a.Spec.Emoji },
			func(a *agentsv1.Agent) string { return a.Spec.Template },
			func(a *agentsv1.Agent) string { return a.Spec.DesiredSnapshot },
			func(a *agentsv1.Agent) string { return a.Annotations[agentsv1.AnnotationTemplateApplied] },
		} {
			Expect(field(kubectl)).To(Equal(field(rest)))
		}
		Expect(kubectl.Spec.Vibe).To(Equal("calm"))
		Expect(kubectl.Annotations).To(HaveKeyWithValue(agentsv1.AnnotationTemplateApplied, HavePrefix("tpl-doors@")))
		// The REST view shows them alike too.
		restView := call("GET", "/v0/agents/"+viaREST, tok, nil).Body["agent"].(map[string]any)
		kubectlView := call("GET", "/v0/agents/kubectl-twin", tok, nil).Body["agent"].(map[string]any)
		for _, k := range []string{"name", "description", "vibe", "emoji", "engineVersion", "template", "skills", "snapshotCid", "status"} {
			Expect(kubectlView[k]).To(Equal(restView[k]), k)
		}
		// The same files: the template's snapshot plus the unpacked skill.
		restTree := execOK(baseURL, tok, viaREST, treeCommand)
		Expect(restTree).To(ContainSubstring("SOUL.md"))
		Expect(restTree).To(ContainSubstring("skills/doors-skill"))
		Expect(execOK(baseURL, tok, "kubectl-twin", treeCommand)).To(Equal(restTree))
	})

	It("holds a kubectl Agent whose template is not published until it is", func() {
		Expect(k8sClient.Create(ctx, &agentsv1.AgentTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: "tpl-doors-later"},
			Spec: agentsv1.AgentTemplateSpec{
				Slug: "doors-later", DisplayName: "Later", AgentProfile: agentsv1.AgentProfile{Vibe: "patient"}, State: agentsv1.TemplateDraft,
				Skills: []agentsv1.AgentSkill{{CID: skillCID}},
			},
		})).To(Succeed())
		a := &agentsv1.Agent{
			ObjectMeta: metav1.ObjectMeta{Namespace: ws, Name: "kubectl-later"},
			Spec:       agentsv1.AgentSpec{DisplayName: "Later", Template: "tpl-doors-later"},
		}
		Expect(k8sClient.Create(ctx, a)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(a), a)).To(Succeed())
			c := meta.FindStatusCondition(a.Status.Conditions, agentsv1.AgentProvisioned)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(agentsv1.ReasonTemplateNotFound))
		}).Should(Succeed())
		Expect(a.Status.Phase).To(Equal(agentsv1.AgentNotRunning))
		Expect(a.Spec.Skills).To(BeEmpty())

		tpl := &agentsv1.AgentTemplate{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: "tpl-doors-later"}, tpl)).To(Succeed())
		tpl.Spec.State = agentsv1.TemplatePublished
		Expect(k8sClient.Update(ctx, tpl)).To(Succeed())
		// The next pass (here brought on by a label) expands it and starts the agent.
		patch := client.MergeFrom(a.DeepCopy())
		a.Labels = map[string]string{"test": "poke"}
		Expect(k8sClient.Patch(ctx, a, patch)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(a), a)).To(Succeed())
			g.Expect(a.Spec.Vibe).To(Equal("patient"))
			g.Expect(a.Spec.Skills).To(Equal([]agentsv1.AgentSkill{{CID: skillCID}}))
			g.Expect(a.Status.Phase).To(Equal(agentsv1.AgentRunning))
		}).Should(Succeed())
	})
})
