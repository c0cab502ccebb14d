package facade_test

import (
	"fmt"
	"os"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/dnsverify"
	"github.com/agentplane/agentplane/internal/adapters/dnsverify/dnstest"
	"github.com/agentplane/agentplane/internal/rules/auth"
)

// testDNS answers the platform's TXT look-ups: it starts before the suite's platform, which
// takes its nameservers from $AGENTPLANE_DNS_NAMESERVERS.
var testDNS = func() *dnstest.Server {
	s, err := dnstest.Start()
	if err != nil {
		panic(err)
	}
	if err := os.Setenv(dnsverify.NameserversEnv, s.Addr); err != nil {
		panic(err)
	}
	return s
}()

// domainAgent creates a stopped agent in ns (no runtime is needed for domains).
func domainAgent(ns, name string) *agentsv1.Agent {
	a := &agentsv1.Agent{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       agentsv1.AgentSpec{DisplayName: name, Stopped: true},
	}
	Expect(k8sClient.Create(ctx, a)).To(Succeed())
	return a
}

// domainOf is the "domain" member of an answer.
func (r reply) domainOf() map[string]any {
	d, _ := r.Body["domain"].(map[string]any)
	return d
}

var _ = Describe("Domains", Ordered, func() {
	var proTok, freeTok, otherTok, readTok, viewerTok string

	BeforeAll(func() {
		workspace("dom-pro", agentsv1.PlanPro, agentsv1.WorkspaceMember{UserID: "alice", Role: agentsv1.RoleOwner},
			agentsv1.WorkspaceMember{UserID: "vic", Role: agentsv1.RoleViewer})
		workspace("dom-free", agentsv1.PlanFree, agentsv1.WorkspaceMember{UserID: "bob", Role: agentsv1.RoleOwner})
		workspace("dom-other", agentsv1.PlanPro, agentsv1.WorkspaceMember{UserID: "carol", Role: agentsv1.RoleOwner})
		proTok = token("dom-pro", "alice", "", auth.ScopeDomainsWrite, auth.ScopeAgentsRead)
		readTok = token("dom-pro", "alice", "", auth.ScopeAgentsRead)
		viewerTok = token("dom-pro", "vic", "", auth.ScopeDomainsWrite, auth.ScopeAgentsRead)
		freeTok = token("dom-free", "bob", "", auth.ScopeDomainsWrite, auth.ScopeAgentsRead)
		otherTok = token("dom-other", "carol", "", auth.ScopeDomainsWrite, auth.ScopeAgentsRead)
		domainAgent("dom-pro", "agt-web")
		domainAgent("dom-pro", "agt-two")
		domainAgent("dom-pro", "agt-limit")
		domainAgent("dom-free", "agt-free")
		domainAgent("dom-other", "agt-other")
	})

	post := func(tok, agent string, body any) reply {
		return call("POST", "/v0/agents/"+agent+"/domains", tok, body)
	}

	It("creates a subdomain that becomes active, and lists and reads it", func() {
		r := post(proTok, "agt-web", map[string]any{"subdomain": "Hello"})
		Expect(r.Status).To(Equal(201), r.Raw)
		d := r.domainOf()
		id, _ := d["id"].(string)
		Expect(id).To(HavePrefix("dom-"))
		Expect(d).To(HaveKeyWithValue("agentId", "agt-web"))
		Expect(d).To(HaveKeyWithValue("subdomain", "hello"))
		Expect(d).To(HaveKeyWithValue("host", "hello.agents.localhost"))
		Expect(d).To(HaveKeyWithValue("targetPort", BeNumerically("==", 18789)))
		Expect(d).NotTo(HaveKey("verification"))
		Expect(d).To(HaveKey("createdAt"))

		Eventually(func() any {
			return call("GET", "/v0/agents/agt-web/domains/"+id, readTok, nil).domainOf()["status"]
		}).Should(Equal("active"))
		got := call("GET", "/v0/agents/agt-web/domains/"+id, readTok, nil).domainOf()
		Expect(got).To(HaveKeyWithValue("verified", true))

		list := call("GET", "/v0/agents/agt-web/domains", readTok, nil)
		Expect(list.Status).To(Equal(200), list.Raw)
		Expect(list.Body["domains"]).To(ContainElement(HaveKeyWithValue("id", id)))
		Expect(call("GET", "/v0/agents/agt-two/domains", readTok, nil).Body["domains"]).To(BeEmpty())
	})

	DescribeTable("refuses invalid bodies with 400",
		func(body any, message string) {
			r := post(proTok, "agt-web", body)
			Expect(r.Status).To(Equal(400), r.Raw)
			Expect(r.v0Error()).To(Equal(message))
		},
		Entry("both names", map[string]any{"subdomain": "a", "customDomain": "a.example.com"}, "Exactly one of subdomain and customDomain is required"),
		Entry("neither name", map[string]any{"targetPort": 80}, "Exactly one of subdomain and customDomain is required"),
		Entry("empty names", map[string]any{"subdomain": "", "customDomain": " "}, "Exactly one of subdomain and customDomain is required"),
		Entry("a subdomain with the brand", map[string]any{"subdomain": "my-AgentPlane"}, "Domain name is not allowed"),
		Entry("a custom domain with the brand", map[string]any{"customDomain": "agentplane.example.com"}, "Domain name is not allowed"),
		Entry("a subdomain with a dot", map[string]any{"subdomain": "a.b"}, "Invalid subdomain"),
		Entry("a subdomain with an underscore", map[string]any{"subdomain": "a_b"}, "Invalid subdomain"),
		Entry("a subdomain starting with a hyphen", map[string]any{"subdomain": "-ab"}, "Invalid subdomain"),
		Entry("a subdomain of 64 characters", map[string]any{"subdomain": fmt.Sprintf("%064d", 0)}, "Invalid subdomain"),
		Entry("a custom domain without a dot", map[string]any{"customDomain": "localhost"}, "Invalid domain name"),
		Entry("a custom domain with a space", map[string]any{"customDomain": "ex ample.com"}, "Invalid domain name"),
		Entry("a custom domain under the apps domain", map[string]any{"customDomain": "x.agents.localhost"}, "Invalid domain name"),
		Entry("targetPort 0", map[string]any{"subdomain": "port0", "targetPort": 0}, "Invalid targetPort"),
		Entry("targetPort 70000", map[string]any{"subdomain": "port7", "targetPort": 70000}, "Invalid targetPort"),
		Entry("malformed JSON", `{"subdomain":`, "Invalid request body"),
		Entry("a name of the wrong type", map[string]any{"subdomain": 7}, "Invalid request body"),
	)

	It("refuses custom domains on the free plan with 403 and allows subdomains", func() {
		r := post(freeTok, "agt-free", map[string]any{"customDomain": "free.example.com"})
		Expect(r.Status).To(Equal(403), r.Raw)
		Expect(r.v0Error()).To(Equal("Custom domains require a paid plan"))
		Expect(post(freeTok, "agt-free", map[string]any{"subdomain": "free-sub"}).Status).To(Equal(201))
	})

	It("answers 404 for other workspaces' agents and for domains not on the agent", func() {
		r := post(proTok, "agt-other", map[string]any{"subdomain": "xws"})
		Expect(r.Status).To(Equal(404), r.Raw)
		Expect(r.v0Error()).To(Equal("Agent not found"))
		Expect(call("GET", "/v0/agents/agt-other/domains", proTok, nil).v0Error()).To(Equal("Agent not found"))

		created := post(proTok, "agt-web", map[string]any{"subdomain": "only-web"})
		Expect(created.Status).To(Equal(201), created.Raw)
		id := created.domainOf()["id"].(string)
		for _, path := range []string{"/v0/agents/agt-two/domains/" + id, "/v0/agents/agt-web/domains/dom-missing"} {
			for _, m := range []string{"GET", "PATCH", "DELETE"} {
				r := call(m, path, proTok, map[string]any{"targetPort": 80})
				Expect(r.Status).To(Equal(404), m+" "+path+" "+r.Raw)
				Expect(r.v0Error()).To(Equal("Domain not found"))
			}
			Expect(call("POST", path+"/verify", proTok, nil).v0Error()).To(Equal("Domain not found"))
		}
		r = call("GET", "/v0/agents/agt-other/domains/"+id, otherTok, nil)
		Expect(r.Status).To(Equal(404), r.Raw)
	})

	It("checks scopes and roles", func() {
		r := post(readTok, "agt-web", map[string]any{"subdomain": "scoped"})
		Expect(r.Status).To(Equal(403), r.Raw)
		r = post(viewerTok, "agt-web", map[string]any{"subdomain": "viewer"})
		Expect(r.Status).To(Equal(403), r.Raw)
		Expect(r.v0Error()).To(Equal("Permission denied"))
		Expect(call("GET", "/v0/agents/agt-web/domains", viewerTok, nil).Status).To(Equal(200))
		Expect(call("GET", "/v0/agents/agt-web/domains", "", nil).Status).To(Equal(401))
	})

	It("answers 409 for a subdomain another tenant holds", func() {
		Expect(post(otherTok, "agt-other", map[string]any{"subdomain": "taken"}).Status).To(Equal(201))
		r := post(proTok, "agt-web", map[string]any{"subdomain": "taken"})
		Expect(r.Status).To(Equal(409), r.Raw)
		Expect(r.v0Error()).To(Equal("Subdomain already taken"))
	})

	It("proves a custom domain through DNS and verify, then refuses it elsewhere with 409", func() {
		r := post(otherTok, "agt-other", map[string]any{"customDomain": "Shop.Example.com.", "targetPort": 8080})
		Expect(r.Status).To(Equal(201), r.Raw)
		d := r.domainOf()
		id := d["id"].(string)
		Expect(d).To(HaveKeyWithValue("customDomain", "shop.example.com"))
		Expect(d).To(HaveKeyWithValue("status", "pending_ownership"))
		Expect(d).To(HaveKeyWithValue("targetPort", BeNumerically("==", 8080)))
		v, _ := d["verification"].(map[string]any)
		Expect(v).To(HaveKeyWithValue("type", "TXT"))
		Expect(v).To(HaveKeyWithValue("name", "_agentplane-verify.shop.example.com"))
		tokenValue, _ := v["value"].(string)
		Expect(tokenValue).To(HaveLen(64))
		verify := func() map[string]any {
			r := call("POST", "/v0/agents/agt-other/domains/"+id+"/verify", otherTok, nil)
			Expect(r.Status).To(Equal(200), r.Raw)
			return r.domainOf()
		}

		By("no record yet")
		got := verify()
		Expect(got).To(HaveKeyWithValue("status", "pending_ownership"))
		Expect(got).To(HaveKeyWithValue("statusReason", "RecordNotFound"))
		Expect(got).To(HaveKey("lastChecked"))
		Expect(got).To(HaveKey("nextCheck"))

		By("a wrong value")
		testDNS.SetTXT("_agentplane-verify.shop.example.com", "wrong")
		got = verify()
		Expect(got).To(HaveKeyWithValue("statusReason", "TokenMismatch"))
		Expect(got["statusMessage"]).To(ContainSubstring("does not match"))

		By("the right value")
		testDNS.SetTXT("_agentplane-verify.shop.example.com", "wrong", tokenValue)
		got = verify()
		Expect(got).To(HaveKeyWithValue("verified", true))
		Expect(got).To(HaveKeyWithValue("status", "active"))
		Expect(got).NotTo(HaveKey("nextCheck"))

		By("another workspace cannot register it any more")
		r = post(proTok, "agt-web", map[string]any{"customDomain": "shop.example.com"})
		Expect(r.Status).To(Equal(409), r.Raw)
		Expect(r.v0Error()).To(Equal("Domain already registered"))
	})

	It("lets PATCH change targetPort only", func() {
		r := post(proTok, "agt-two", map[string]any{"subdomain": "patchme"})
		Expect(r.Status).To(Equal(201), r.Raw)
		path := "/v0/agents/agt-two/domains/" + r.domainOf()["id"].(string)

		r = call("PATCH", path, proTok, map[string]any{"targetPort": 3000})
		Expect(r.Status).To(Equal(200), r.Raw)
		Expect(r.domainOf()).To(HaveKeyWithValue("targetPort", BeNumerically("==", 3000)))
		Expect(call("GET", path, proTok, nil).domainOf()).To(HaveKeyWithValue("targetPort", BeNumerically("==", 3000)))

		Expect(call("PATCH", path, proTok, map[string]any{"subdomain": "patchme", "targetPort": 3001}).Status).To(Equal(200))
		for _, body := range []map[string]any{{"subdomain": "renamed"}, {"customDomain": "x.example.com"}} {
			r = call("PATCH", path, proTok, body)
			Expect(r.Status).To(Equal(400), r.Raw)
			Expect(r.v0Error()).To(Equal("The host name of a domain cannot be changed"))
		}
		r = call("PATCH", path, proTok, map[string]any{"targetPort": -1})
		Expect(r.v0Error()).To(Equal("Invalid targetPort"))
	})

	It("allows exactly 5 domains per agent under 20 concurrent creates", func() {
		var wg sync.WaitGroup
		replies := make([]reply, 20)
		for i := range replies {
			wg.Add(1)
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				replies[i] = post(proTok, "agt-limit", map[string]any{"subdomain": fmt.Sprintf("lim-%d", i)})
			}()
		}
		wg.Wait()
		created, refused := 0, 0
		for _, r := range replies {
			switch {
			case r.Status == 201:
				created++
			case r.Status == 400 && r.v0Error() == "Domain limit reached":
				refused++
			default:
				Fail("unexpected answer: " + r.Raw)
			}
		}
		Expect(created).To(Equal(5))
		Expect(refused).To(Equal(15))
		list := call("GET", "/v0/agents/agt-limit/domains", proTok, nil).Body["domains"]
		Expect(list).To(HaveLen(5))

		By("a delete frees a slot at once")
		first := list.([]any)[0].(map[string]any)
		r := call("DELETE", "/v0/agents/agt-limit/domains/"+first["id"].(string), proTok, nil)
		Expect(r.Status).To(Equal(200), r.Raw)
		Expect(r.Body).To(HaveKeyWithValue("deleted", true))
		Expect(post(proTok, "agt-limit", map[string]any{"subdomain": "lim-after"}).Status).To(Equal(201))
		Expect(post(proTok, "agt-limit", map[string]any{"subdomain": "lim-over"}).v0Error()).To(Equal("Domain limit reached"))
	})

	It("releases a deleted subdomain for other tenants", func() {
		r := post(proTok, "agt-two", map[string]any{"subdomain": "handover"})
		Expect(r.Status).To(Equal(201), r.Raw)
		path := "/v0/agents/agt-two/domains/" + r.domainOf()["id"].(string)
		Expect(post(otherTok, "agt-other", map[string]any{"subdomain": "handover"}).Status).To(Equal(409))
		Expect(call("DELETE", path, proTok, nil).Status).To(Equal(200))
		Expect(call("GET", path, proTok, nil).Status).To(Equal(404))
		Eventually(func() int {
			return post(otherTok, "agt-other", map[string]any{"subdomain": "handover"}).Status
		}).Should(Equal(201))
	})
})
