package facade_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/facade"
	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/platform"
	"github.com/agentplane/agentplane/internal/rules/auth"
)

// countingTransport counts the requests a replica makes to kube-apiserver, watches (the
// informers' long-lived streams) aside.
type countingTransport struct {
	next http.RoundTripper
	n    *atomic.Int64
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Query().Get("watch") != "true" {
		t.n.Add(1)
	}
	return t.next.RoundTrip(r)
}

var _ = Describe("Credentials bound to one agent", Ordered, func() {
	const ws = "bound"
	var tok, a, b, gwA string

	BeforeAll(func() {
		workspace(ws, agentsv1.PlanPro, agentsv1.WorkspaceMember{UserID: "owner", Role: agentsv1.RoleOwner})
		tok = token(ws, "owner", "", auth.ScopeAll)
		a = agentOf(call("POST", "/v0/agents", tok, map[string]any{"name": "Bound A"}))["id"].(string)
		b = agentOf(call("POST", "/v0/agents", tok, map[string]any{"name": "Bound B"}))["id"].(string)
		gwA = call("GET", "/v0/agents/"+a+"/gateway-token", tok, nil).Body["token"].(string)
	})

	It("lets a platform token minted with A's gateway token read A, and nothing of B (404)", func() {
		pt := call("POST", "/v0/agents/"+a+"/platform/token", gwA, nil)
		Expect(pt.Status).To(Equal(201), pt.Raw)
		p := pt.Body["token"].(string)
		Expect(call("GET", "/v0/agents/"+a+"/config", p, nil).Status).To(Equal(200))
		for _, path := range []string{"/v0/agents/" + b, "/v0/agents/" + b + "/config", "/v0/agents/" + b + "/tasks", "/v0/agents/" + b + "/snapshots"} {
			r := call("GET", path, p, nil)
			Expect(r.Status).To(Equal(404), "%s: %s", path, r.Raw)
			Expect(r.v0Error()).To(Equal("Agent not found"))
		}
		Expect(call("GET", "/v0/agents", p, nil).Status).To(Equal(403))
		Expect(call("GET", "/v3/files/public", p, nil).Status).To(Equal(403))
		Expect(call("PUT", "/v0/agents/"+a+"/config", p, map[string]any{"config": map[string]any{}}).Status).To(Equal(403), "a platform token reads only")
	})

	It("keeps A's gateway token off B's routes (404) and off domain and channel writes (403)", func() {
		for _, route := range []string{"GET /v0/agents/" + b + "/config", "POST /v0/agents/" + b + "/console/exec",
			"POST /v0/agents/" + b + "/platform/token", "POST /v0/agents/" + b + "/gateway-token/rotate", "GET /v0/agents/" + b + "/logs"} {
			method, path, _ := strings.Cut(route, " ")
			r := call(method, path, gwA, map[string]any{"command": "true"})
			Expect(r.Status).To(Equal(404), "%s: %s", route, r.Raw)
		}
		for _, route := range []string{"POST /v0/agents/" + a + "/domains", "POST /v0/agents/" + a + "/channels/telegram"} {
			method, path, _ := strings.Cut(route, " ")
			r := call(method, path, gwA, map[string]any{"subdomain": "bound-a", "botToken": "123456789:bound"})
			Expect(r.Status).To(Equal(403), "%s: %s", route, r.Raw)
		}
		Expect(call("GET", "/v0/agents/"+a+"/domains", gwA, nil).Status).To(Equal(200))
	})

	It("mints platform tokens without an object each, and revokes them with the gateway token's rotation", func() {
		count := func() int {
			var keys agentsv1.ApiKeyList
			Expect(k8sClient.List(ctx, &keys, client.InNamespace(ws))).To(Succeed())
			return len(keys.Items)
		}
		before := count()
		var last string
		for range 30 {
			r := call("POST", "/v0/agents/"+a+"/platform/token", gwA, nil)
			Expect(r.Status).To(Equal(201), r.Raw)
			last = r.Body["token"].(string)
		}
		Expect(count()).To(Equal(before), "ApiKeys after 30 mints")
		Expect(call("GET", "/v0/agents/"+a, last, nil).Status).To(Equal(200))
		fresh := call("POST", "/v0/agents/"+a+"/gateway-token/rotate", tok, nil)
		Expect(fresh.Status).To(Equal(200))
		gwA = fresh.Body["token"].(string)
		r := call("GET", "/v0/agents/"+a, last, nil)
		Expect(r.Status).To(Equal(401), r.Raw)
		Expect(r.v0Error()).To(Equal("Token revoked"))
	})
})

var _ = Describe("The front door", Ordered, func() {
	const ws = "front-door"
	var (
		url      string
		requests atomic.Int64
		tok      string
	)

	BeforeAll(func() {
		workspace(ws, agentsv1.PlanPro, agentsv1.WorkspaceMember{UserID: "owner", Role: agentsv1.RoleOwner})
		tok = token(ws, "owner", "", auth.ScopeAll)
		// An API-only replica whose every request to kube-apiserver is counted, with a tight
		// per-token limit.
		cfg := rest.CopyConfig(env.Config)
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{next: rt, n: &requests} })
		rctx, stop := context.WithCancel(ctx)
		var done <-chan struct{}
		_, url, done = startPlatformWith(rctx, cfg, platform.Options{
			APIOnly: true, Runtime: platform.RuntimeOptions{Name: platform.RuntimeLocal, DefaultVersion: engine.PinnedVersion},
			RateLimits: facade.RateLimitOptions{PerToken: facade.RateLimit{PerSecond: 0.2, Burst: 5}},
		})
		DeferCleanup(func() { stop(); <-done })
		Eventually(func() int { return callURL(url, "GET", "/v0/me", tok, nil).Status }).Should(Equal(200))
	})

	It("makes no API-server request for 100 bogus bearer tokens", func() {
		other, err := auth.NewSigner([]byte(strings.Repeat("x", 32)))
		Expect(err).NotTo(HaveOccurred())
		forgedJWT, _ := other.Mint(auth.Claims{Workspace: ws})
		forgedPlatform, _, _ := other.MintPlatform(auth.PlatformToken{Workspace: ws, Agent: "a", AgentUID: "u", GatewayToken: "gw_x"})
		bogus := []string{auth.NewGatewayToken(), "not.a.jwt", forgedJWT, forgedPlatform, tok[:len(tok)-2] + "xx"}
		start := requests.Load()
		for i := range 100 {
			path := []string{"/v0/agents", "/v0/agents/x/config", "/v3/files/public", "/v0/me"}[i%4]
			r := callURL(url, "GET", path, bogus[i%len(bogus)], nil)
			Expect(r.Status).To(Equal(401), "%s: %s", path, r.Raw)
		}
		Expect(requests.Load()-start).To(BeZero(), "API-server requests for 100 bogus tokens")

		// The counter sees what the replica does: listing agents reads kube-apiserver.
		Expect(callURL(url, "GET", "/v0/agents", tok, nil).Status).To(Equal(200))
		Expect(requests.Load() - start).To(BeNumerically(">", 0))
	})

	It("reads kube-apiserver at most once for a validly signed token whose key is missing", func() {
		missing, _ := plat.Signer.Mint(auth.Claims{Workspace: ws})
		start := requests.Load()
		for range 50 {
			Expect(callURL(url, "GET", "/v0/me", missing, nil).Status).To(Equal(401))
		}
		Expect(requests.Load() - start).To(BeNumerically("<=", 1))
	})

	It("answers 429 with Retry-After past a token's limit", func() {
		limited := token(ws, "owner", "", auth.ScopeAll)
		var last reply
		for range 10 {
			if last = callURL(url, "GET", "/v0/me", limited, nil); last.Status == 429 {
				break
			}
		}
		Expect(last.Status).To(Equal(429), last.Raw)
		Expect(last.v0Error()).To(Equal("Too many requests"))
		secs, err := strconv.Atoi(last.Header.Get("Retry-After"))
		Expect(err).NotTo(HaveOccurred())
		Expect(secs).To(BeNumerically(">=", 1))
		code, msg := sendTo(url, "GET", "/v3/files/public", limited, "", nil).v3Error()
		Expect(code).To(BeEquivalentTo(429))
		Expect(msg).To(Equal("Too many requests"))
	})
})
