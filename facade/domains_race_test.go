package facade_test

import (
	"fmt"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/rules/auth"
)

// The race issue 21 found: an agent at its limit of 5 domains and an agent of another
// workspace POST the same free subdomain at once. Every serial order gives the name to the
// second agent (the full one answers `Domain limit reached` going first, or `Subdomain already
// taken` going second), so free's 201 is in every serializable outcome.
var _ = Describe("Domain limit vs subdomain race", Ordered, func() {
	var fullTok, freeTok string

	BeforeAll(func() {
		workspace("race-full", agentsv1.PlanPro, agentsv1.WorkspaceMember{UserID: "rita", Role: agentsv1.RoleOwner})
		workspace("race-free", agentsv1.PlanPro, agentsv1.WorkspaceMember{UserID: "sam", Role: agentsv1.RoleOwner})
		fullTok = token("race-full", "rita", "", auth.ScopeDomainsWrite, auth.ScopeAgentsRead)
		freeTok = token("race-free", "sam", "", auth.ScopeDomainsWrite, auth.ScopeAgentsRead)
		domainAgent("race-full", "agt-full")
		for i := range 5 {
			r := call("POST", "/v0/agents/agt-full/domains", fullTok, map[string]any{"subdomain": fmt.Sprintf("race-own-%d", i)})
			Expect(r.Status).To(Equal(201), r.Raw)
		}
	})

	It("answers a serializable outcome in every one of 20 tries", func() {
		var bad []string
		for try := range 20 {
			name := fmt.Sprintf("race-shared-%d", try)
			freeAgent := fmt.Sprintf("agt-free-%d", try) // room for the name every time
			domainAgent("race-free", freeAgent)
			var full, free reply
			var wg sync.WaitGroup
			start := make(chan struct{})
			wg.Add(2)
			go func() {
				defer wg.Done()
				defer GinkgoRecover()
				<-start
				full = call("POST", "/v0/agents/agt-full/domains", fullTok, map[string]any{"subdomain": name})
			}()
			go func() {
				defer wg.Done()
				defer GinkgoRecover()
				<-start
				free = call("POST", "/v0/agents/"+freeAgent+"/domains", freeTok, map[string]any{"subdomain": name})
			}()
			close(start)
			wg.Wait()
			fullOK := full.Status == 400 && full.v0Error() == "Domain limit reached" ||
				full.Status == 409 && full.v0Error() == "Subdomain already taken" // free went first
			if !fullOK || free.Status != 201 {
				bad = append(bad, fmt.Sprintf("%s: full %d %q, free %d %q", name, full.Status, full.v0Error(), free.Status, free.v0Error()))
			}
		}
		GinkgoWriter.Printf("domain race: %d of 20 tries not serializable\n", len(bad))
		Expect(bad).To(BeEmpty())
	})
})
