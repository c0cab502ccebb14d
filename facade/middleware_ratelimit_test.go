package facade

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/ops"
	"github.com/agentplane/agentplane/internal/rules/auth"
	"github.com/agentplane/agentplane/internal/scheme"
)

// limitedServer is a facade over a fake cache holding workspace ws and the gateway tokens
// gw_one (agent a1) and gw_two (agent a2).
func limitedServer(t *testing.T, o RateLimitOptions) *Server {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(scheme.New()).
		WithObjects(&agentsv1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: "ws"}},
			gatewayTokenSecret("ws", "a1", "gw_one"), gatewayTokenSecret("ws", "a2", "gw_two")).
		WithIndex(&corev1.Secret{}, agentsv1.IndexGatewayTokenHash, auth.GatewayTokenIndex).Build()
	signer, _ := auth.NewSigner(bytes.Repeat([]byte("k"), 32))
	return New(Options{Deps: ops.Deps{Client: c}, Signer: signer, Log: logr.Discard(), RateLimits: o})
}

func serve(s *Server, method, path, addr, tok string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, nil)
	req.RemoteAddr = addr
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	return rec
}

// TestRateLimitPerAddress: unauthenticated requests from one address meet its limit before
// any lookup and get 429 with Retry-After in the route family's envelope; another address,
// and the public routes, are not affected.
func TestRateLimitPerAddress(t *testing.T) {
	s := limitedServer(t, RateLimitOptions{PerAddress: RateLimit{PerSecond: 0.5, Burst: 2}, PerToken: RateLimit{PerSecond: -1}})
	const attacker = "203.0.113.7:40000"
	for i := range 2 {
		if rec := serve(s, "GET", "/v0/agents", attacker, "gw_bogus"); rec.Code != http.StatusUnauthorized {
			t.Fatalf("request %d: %d, want 401", i, rec.Code)
		}
	}
	for _, tc := range []struct{ path, body string }{
		{"/v0/agents", `{"error":"Too many requests"}`},
		{"/v3/files/public", `{"error":{"code":429,"message":"Too many requests"}}`},
	} {
		rec := serve(s, "GET", tc.path, "203.0.113.7:40001", "")
		if rec.Code != http.StatusTooManyRequests {
			t.Fatalf("%s over the limit: %d, want 429", tc.path, rec.Code)
		}
		if secs, err := strconv.Atoi(rec.Header().Get("Retry-After")); err != nil || secs < 1 || secs > 2 {
			t.Fatalf("Retry-After %q, want the seconds until a request fits (1-2)", rec.Header().Get("Retry-After"))
		}
		var got, want any
		_ = json.Unmarshal(rec.Body.Bytes(), &got)
		_ = json.Unmarshal([]byte(tc.body), &want)
		if !sameJSON(got, want) {
			t.Fatalf("%s: body %s, want %s", tc.path, rec.Body, tc.body)
		}
	}
	if rec := serve(s, "GET", "/v0/agents", "198.51.100.1:1", ""); rec.Code != http.StatusUnauthorized {
		t.Fatalf("another address: %d, want 401", rec.Code)
	}
	if rec := serve(s, "GET", "/healthz", attacker, ""); rec.Code != http.StatusOK {
		t.Fatalf("/healthz: %d, want 200 (public routes are not limited)", rec.Code)
	}
}

// TestRateLimitPerToken: one credential's requests meet its limit; another credential from
// the same address is not affected.
func TestRateLimitPerToken(t *testing.T) {
	s := limitedServer(t, RateLimitOptions{PerToken: RateLimit{PerSecond: 0.5, Burst: 3}})
	const addr = "192.0.2.1:5000"
	for i := range 3 {
		if rec := serve(s, "GET", "/v0/me", addr, "gw_one"); rec.Code != http.StatusOK {
			t.Fatalf("request %d: %d %s, want 200", i, rec.Code, rec.Body)
		}
	}
	rec := serve(s, "GET", "/v0/me", addr, "gw_one")
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("over the token's limit: %d (Retry-After %q), want 429 with Retry-After", rec.Code, rec.Header().Get("Retry-After"))
	}
	if rec := serve(s, "GET", "/v0/me", addr, "gw_two"); rec.Code != http.StatusOK {
		t.Fatalf("another token: %d, want 200", rec.Code)
	}
}

// TestRateLimitDefaults: the limits are on unless turned off, and the defaults let a burst
// of several hundred requests through.
func TestRateLimitDefaults(t *testing.T) {
	if newKeyedLimiter(RateLimit{}, DefaultRateLimitPerToken) == nil {
		t.Fatal("the zero options turn the limit off, want the default")
	}
	if newKeyedLimiter(RateLimit{PerSecond: -1}, DefaultRateLimitPerToken) != nil {
		t.Fatal("a negative rate does not turn the limit off")
	}
	if l := newKeyedLimiter(RateLimit{PerSecond: 10}, DefaultRateLimitPerToken); l.burst != 20 {
		t.Fatalf("burst %d, want twice the rate", l.burst)
	}
	s := limitedServer(t, RateLimitOptions{})
	for i := range 300 {
		if rec := serve(s, "GET", "/v0/me", "192.0.2.1:5000", "gw_one"); rec.Code != http.StatusOK {
			t.Fatalf("request %d of a burst of 300: %d, want 200", i, rec.Code)
		}
	}
}

// TestRateLimitTableEvictsTheLeastRecentlyUsed: a table full of keys drops the one used least
// recently, never all of them: a caller over its limit stays over it however many new keys
// (addresses, bogus credentials) flood the table meanwhile.
func TestRateLimitTableEvictsTheLeastRecentlyUsed(t *testing.T) {
	defer func(n int) { limiterMaxItems = n }(limiterMaxItems)
	limiterMaxItems = 3
	now := time.Now()
	l := newKeyedLimiter(RateLimit{PerSecond: 0.001, Burst: 1}, DefaultRateLimitPerToken)
	if l.delay("hot", now) != 0 || l.delay("hot", now) == 0 {
		t.Fatal("the hot key's second request was not limited")
	}
	for i := range 10 {
		l.delay("new-"+strconv.Itoa(i), now)
		if l.delay("hot", now) == 0 {
			t.Fatalf("after %d new keys the hot key's limit was reset", i+1)
		}
	}
	if n := l.buckets.Len(); n > limiterMaxItems {
		t.Fatalf("the table holds %d keys, more than %d", n, limiterMaxItems)
	}
	if _, kept := l.buckets.Get("new-0"); kept {
		t.Fatal("the least recently used key was kept")
	}
}

// TestRateLimitSharedAddressIsFair is what the local agents and the operator, all on
// 127.0.0.1, need: one caller flooding the facade with refused credentials (or none) uses up
// the address's limit for refused requests, and another caller at that address whose
// credential is good is served, limited by its own credential alone.
func TestRateLimitSharedAddressIsFair(t *testing.T) {
	s := limitedServer(t, RateLimitOptions{PerAddress: RateLimit{PerSecond: 0.001, Burst: 2}, PerToken: RateLimit{PerSecond: 0.001, Burst: 3}})
	const loopback = "127.0.0.1:40000"
	for i := range 2 {
		if rec := serve(s, "GET", "/v0/me", loopback, "gw_bogus"); rec.Code != http.StatusUnauthorized {
			t.Fatalf("refused credential %d: %d, want 401", i, rec.Code)
		}
	}
	if rec := serve(s, "GET", "/v0/me", loopback, "gw_bogus"); rec.Code != http.StatusTooManyRequests {
		t.Fatalf("refused credentials over the address's limit: %d, want 429", rec.Code)
	}
	if rec := serve(s, "GET", "/v0/me", loopback, ""); rec.Code != http.StatusTooManyRequests {
		t.Fatalf("no credential over the address's limit: %d, want 429", rec.Code)
	}
	for i := range 3 {
		if rec := serve(s, "GET", "/v0/me", loopback, "gw_one"); rec.Code != http.StatusOK {
			t.Fatalf("another agent's good credential at the same address, request %d: %d %s, want 200", i, rec.Code, rec.Body)
		}
	}
	if rec := serve(s, "GET", "/v0/me", loopback, "gw_one"); rec.Code != http.StatusTooManyRequests {
		t.Fatalf("past its own credential's limit: %d, want 429", rec.Code)
	}
	if rec := serve(s, "GET", "/v0/me", loopback, "gw_two"); rec.Code != http.StatusOK {
		t.Fatalf("a third agent at the same address: %d, want 200", rec.Code)
	}
}

// TestRateLimitModelProxyRefusals: the model proxy's refusals (401, 403) spend the address's
// limit for refused requests, and past it a request without a credential gets 429 before the
// proxy sees it, while an agent with a good credential at the same address is served.
func TestRateLimitModelProxyRefusals(t *testing.T) {
	proxied := 0
	proxy := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied++
		if r.Header.Get("Authorization") != "Bearer good" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	c := fake.NewClientBuilder().WithScheme(scheme.New()).Build()
	signer, _ := auth.NewSigner(bytes.Repeat([]byte("k"), 32))
	s := New(Options{Deps: ops.Deps{Client: c}, Signer: signer, Log: logr.Discard(), ModelProxy: proxy,
		RateLimits: RateLimitOptions{PerAddress: RateLimit{PerSecond: 0.001, Burst: 2}}})
	const addr = "127.0.0.1:5000"
	for i := range 2 {
		if rec := serve(s, "POST", "/llm/openai/v1/chat/completions", addr, "bad"); rec.Code != http.StatusUnauthorized {
			t.Fatalf("refused call %d: %d, want 401", i, rec.Code)
		}
	}
	before := proxied
	rec := serve(s, "POST", "/llm/openai/v1/chat/completions", addr, "")
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" || proxied != before {
		t.Fatalf("no credential past the address's limit: %d (Retry-After %q, proxied %d more), want 429 before the proxy", rec.Code, rec.Header().Get("Retry-After"), proxied-before)
	}
	if rec := serve(s, "POST", "/llm/openai/v1/chat/completions", addr, "good"); rec.Code != http.StatusOK {
		t.Fatalf("a good credential at the same address: %d, want 200", rec.Code)
	}
}

func sameJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}
