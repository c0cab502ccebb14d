package facade

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/ops"
	"github.com/agentplane/agentplane/internal/rules/auth"
	"github.com/agentplane/agentplane/internal/scheme"
)

// gatewayTokenSecret is agent's gateway-token Secret in namespace ns holding tok.
func gatewayTokenSecret(ns, agent, tok string) *corev1.Secret {
	return auth.GatewayTokenSecret(&agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: agent}}, tok)
}

// countingReader counts every request a reader makes (it stands for kube-apiserver).
func countingReader(c client.WithWatch, n *atomic.Int64) client.WithWatch {
	return interceptor.NewClient(c, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			n.Add(1)
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			n.Add(1)
			return c.List(ctx, list, opts...)
		},
	})
}

// TestBogusBearerTokensCostTheAPIServerNothing: 100 requests with bogus bearer tokens of
// every shape (gateway-like, JWT-like, JWTs signed by another key, a validly signed token
// whose user is missing) make no request to kube-apiserver; they are refused with 401.
func TestBogusBearerTokensCostTheAPIServerNothing(t *testing.T) {
	sch := scheme.New()
	ws := &agentsv1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: "ws"}}
	var reads atomic.Int64
	cache := fake.NewClientBuilder().WithScheme(sch).WithObjects(ws, gatewayTokenSecret("ws", "a1", "gw_real")).
		WithIndex(&corev1.Secret{}, agentsv1.IndexGatewayTokenHash, auth.GatewayTokenIndex).Build()
	live := countingReader(fake.NewClientBuilder().WithScheme(sch).WithObjects(ws).Build(), &reads)
	signer, _ := auth.NewSigner(bytes.Repeat([]byte("k"), 32))
	other, _ := auth.NewSigner(bytes.Repeat([]byte("o"), 32))
	s := New(Options{Deps: ops.Deps{Client: cache, APIReader: live}, Signer: signer, Log: logr.Discard()})

	forged := func(i int) string {
		switch i % 4 {
		case 0:
			return auth.NewGatewayToken()
		case 1:
			return "not.a.jwt" + strings.Repeat("x", i)
		case 2:
			tok, _ := other.Mint(auth.Claims{Workspace: "ws"})
			return tok
		default:
			tok, _, _ := other.MintPlatform(auth.PlatformToken{Workspace: "ws", Agent: "a1", AgentUID: "u", GatewayToken: "gw_real"})
			return tok
		}
	}
	for i := range 100 {
		for _, path := range []string{"/v0/agents", "/v0/agents/a1/config", "/v3/files/public"} {
			req := httptest.NewRequest("GET", path, nil)
			req.Header.Set("Authorization", "Bearer "+forged(i))
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, req)
			if rec.Code != http.StatusUnauthorized {
				t.Fatalf("%s with a bogus token: %d %s, want 401", path, rec.Code, rec.Body)
			}
		}
	}
	if n := reads.Load(); n != 0 {
		t.Fatalf("300 requests with bogus tokens made %d API-server requests, want 0", n)
	}
}
