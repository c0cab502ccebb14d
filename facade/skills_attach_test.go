package facade_test

import (
	"fmt"
	"sort"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/rules/auth"
)

var _ = Describe("Skills: attached to agents", Ordered, func() {
	const ws = "skills-attach"
	var tok string
	cids := map[string]string{} // slug -> CID of its installed bundle

	// installed publishes and installs slug@1.0.0 (once) and returns its CID.
	installed := func(slug string) string {
		if c, ok := cids[slug]; ok {
			return c
		}
		z := publish(slug, "1.0.0")
		r := installAt(baseURL, tok, slug, nil)
		Expect(r.Status).To(Equal(201), r.Raw)
		cids[slug] = cidOf(z)
		return cids[slug]
	}
	newAgent := func(name string) string {
		r := call("POST", "/v0/agents", tok, map[string]any{"name": name})
		Expect(r.Status).To(Equal(201), r.Raw)
		return agentOf(r)["id"].(string)
	}
	attach := func(agent string, cids ...string) reply {
		return call("POST", "/v0/agents/"+agent+"/skills", tok, map[string]any{"skillCids": cids})
	}
	sh := func(agent, command string) (string, float64) {
		r := call("POST", "/v0/agents/"+agent+"/console/exec", tok, map[string]string{"command": command})
		Expect(r.Status).To(Equal(200), r.Raw)
		return r.Body["stdout"].(string), r.Body["exitCode"].(float64)
	}
	specSkills := func(agent string) []agentsv1.AgentSkill {
		a := &agentsv1.Agent{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ws, Name: agent}, a)).To(Succeed())
		return a.Spec.Skills
	}

	BeforeAll(func() {
		w := workspace(ws, agentsv1.PlanPro, agentsv1.WorkspaceMember{UserID: "amy", Role: agentsv1.RoleOwner})
		patch := client.MergeFrom(w.DeepCopy())
		w.Spec.AgentLimit = ptr.To[int32](10)
		Expect(k8sClient.Patch(ctx, w, patch)).To(Succeed())
		tok = token(ws, "amy", "", auth.ScopeAll)
	})

	It("unpacks an attached skill into the workspace and removes it on detach", func() {
		id := installed("forecast")
		agent := newAgent("Forecaster")
		r := attach(agent, id)
		Expect(r.Status).To(Equal(200), r.Raw)
		Expect(agentOf(r)["skills"]).To(ConsistOf(id))

		// The answer waited for the controller: the files are there right away.
		out, code := sh(agent, "cat skills/forecast/SKILL.md")
		Expect(code).To(BeZero())
		Expect(out).To(ContainSubstring("name: forecast"))
		out, _ = sh(agent, "cat skills/forecast/notes/version.txt")
		Expect(out).To(Equal("1.0.0"))
		a := &agentsv1.Agent{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ws, Name: agent}, a)).To(Succeed())
		Expect(a.Status.InstalledSkills).To(ConsistOf(id))
		list := call("GET", "/v0/agents/"+agent+"/skills", tok, nil)
		Expect(list.Status).To(Equal(200), list.Raw)
		Expect(list.Body["skills"]).To(ConsistOf(And(HaveKeyWithValue("slug", "forecast"), HaveKeyWithValue("installed", true))))

		By("attaching it again changes nothing")
		Expect(attach(agent, id).Status).To(Equal(200))
		Expect(specSkills(agent)).To(HaveLen(1))

		By("unknown CIDs and malformed ones are not installed skills")
		other := publish("not-installed", "1.0.0")
		for _, bad := range []string{cidOf(other), "not-a-cid"} {
			r := attach(agent, bad)
			Expect(r.Status).To(Equal(404), r.Raw)
			Expect(r.v0Error()).To(Equal("Skill not found"))
		}
		Expect(attach("agt-nope", id).v0Error()).To(Equal("Agent not found"))
		Expect(call("POST", "/v0/agents/"+agent+"/skills", tok, map[string]any{}).Status).To(Equal(400))

		By("detaching by the Skill's id removes its directory")
		d := call("DELETE", "/v0/agents/"+agent+"/skills/forecast", tok, nil)
		Expect(d.Status).To(Equal(200), d.Raw)
		Expect(agentOf(d)["skills"]).To(BeEmpty())
		_, code = sh(agent, "test -e skills/forecast")
		Expect(code).NotTo(BeZero())
		Expect(call("DELETE", "/v0/agents/"+agent+"/skills/forecast", tok, nil).Status).To(Equal(404))

		By("attaching through the object (kubectl) unpacks too")
		Eventually(func() error {
			a := &agentsv1.Agent{}
			if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ws, Name: agent}, a); err != nil {
				return err
			}
			a.Spec.Skills = []agentsv1.AgentSkill{{CID: id}}
			return k8sClient.Update(ctx, a)
		}).Should(Succeed())
		Eventually(func() string { out, _ := sh(agent, "cat skills/forecast/notes/version.txt 2>&1"); return out }).
			WithTimeout(30 * time.Second).Should(Equal("1.0.0"))
	})

	It("refuses an 11th skill with the contract's exact 400", func() {
		agent := newAgent("Collector")
		var ten []string
		for i := 1; i <= 10; i++ {
			ten = append(ten, installed(fmt.Sprintf("bulk-%02d", i)))
		}
		eleventh := installed("bulk-11")
		r := attach(agent, append(ten, eleventh)...)
		Expect(r.Status).To(Equal(400), r.Raw)
		Expect(r.v0Error()).To(Equal("Validation failed: skills exceeds maximum of 10"))
		Expect(specSkills(agent)).To(BeEmpty())

		Expect(attach(agent, ten...).Status).To(Equal(200))
		r = attach(agent, eleventh)
		Expect(r.Status).To(Equal(400), r.Raw)
		Expect(r.v0Error()).To(Equal("Validation failed: skills exceeds maximum of 10"))
		Expect(specSkills(agent)).To(HaveLen(10))
		out, _ := sh(agent, "ls skills | wc -l")
		Expect(out).To(Equal("10\n"))
	})

	It("keeps 10 concurrent attaches to an agent that has 5 within the limit", func() {
		agent := newAgent("Concurrent")
		var first, rest []string
		for i := 1; i <= 15; i++ {
			id := installed(fmt.Sprintf("bulk-%02d", i))
			if i <= 5 {
				first = append(first, id)
			} else {
				rest = append(rest, id)
			}
		}
		Expect(attach(agent, first...).Status).To(Equal(200))
		var wg sync.WaitGroup
		answers := make(chan reply, len(rest))
		for _, id := range rest {
			wg.Add(1)
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				answers <- attach(agent, id)
			}()
		}
		wg.Wait()
		close(answers)
		codes := map[int]int{}
		for r := range answers {
			codes[r.Status]++
			if r.Status == 400 {
				Expect(r.v0Error()).To(Equal("Validation failed: skills exceeds maximum of 10"))
			}
		}
		Expect(codes).To(Equal(map[int]int{200: 5, 400: 5}))
		Expect(specSkills(agent)).To(HaveLen(10))
	})

	It("updates a skill: a stale expectedVersion and the loser of a race get 409", func() {
		v1 := installed("digest")
		agent := newAgent("Updater")
		Expect(attach(agent, v1).Status).To(Equal(200))
		v2 := cidOf(publish("digest", "2.0.0"))
		v3 := cidOf(publish("digest", "3.0.0"))
		update := func(body any) reply {
			return call("POST", "/v0/agents/"+agent+"/skills/digest/update", tok, body)
		}

		r := update(map[string]string{"expectedVersion": "0.9.0"})
		Expect(r.Status).To(Equal(409), r.Raw)
		Expect(r.v0Error()).To(Equal("Skill version conflict"))
		Expect(call("POST", "/v0/agents/"+agent+"/skills/nope/update", tok, nil).v0Error()).To(Equal("Skill not found"))

		By("two concurrent updates from 1.0.0: exactly one wins")
		var wg sync.WaitGroup
		answers := make([]reply, 2)
		for i := range answers {
			wg.Add(1)
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				answers[i] = update(map[string]string{"version": "2.0.0", "expectedVersion": "1.0.0"})
			}()
		}
		wg.Wait()
		statuses := []int{answers[0].Status, answers[1].Status}
		sort.Ints(statuses)
		Expect(statuses).To(Equal([]int{200, 409}), answers[0].Raw+answers[1].Raw)
		winner := answers[0]
		if winner.Status != 200 {
			winner = answers[1]
		}
		Expect(skillOf(winner)).To(HaveKeyWithValue("version", "2.0.0"))
		Expect(skillOf(winner)).To(HaveKeyWithValue("cid", v2))
		Expect(specSkills(agent)).To(Equal([]agentsv1.AgentSkill{{CID: v2}}))
		out, _ := sh(agent, "cat skills/digest/notes/version.txt")
		Expect(out).To(Equal("2.0.0"))

		By("updating without a version takes the latest")
		r = update(nil)
		Expect(r.Status).To(Equal(200), r.Raw)
		Expect(skillCIDs(r)).To(Equal([]string{v3}))
		Expect(specSkills(agent)).To(Equal([]agentsv1.AgentSkill{{CID: v3}}))
		out, _ = sh(agent, "cat skills/digest/notes/version.txt; ls skills")
		Expect(out).To(Equal("3.0.0digest\n"))
		sk := &agentsv1.Skill{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ws, Name: "digest"}, sk)).To(Succeed())
		Expect(sk.Spec.Version).To(Equal("3.0.0"))
	})
})
