package facade

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/ops"
	"github.com/agentplane/agentplane/internal/rules/auth"
	"github.com/agentplane/agentplane/internal/scheme"
)

// boundFixture is a facade over a fake cluster with workspace ws (pro plan) and agents a1
// (gateway token gw_one) and a2 (gw_two), and a platform token of a1 minted through a1's
// gateway token.
type boundFixture struct {
	s        *Server
	c        client.Client
	platform string
}

func newBoundFixture(t *testing.T) *boundFixture {
	t.Helper()
	agent := func(name string) *agentsv1.Agent {
		return &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: name, UID: types.UID("uid-" + name)}}
	}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).
		WithObjects(&agentsv1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: "ws"}, Spec: agentsv1.WorkspaceSpec{Plan: agentsv1.PlanPro}},
			agent("a1"), agent("a2"), gatewayTokenSecret("ws", "a1", "gw_one"), gatewayTokenSecret("ws", "a2", "gw_two")).
		WithIndex(&corev1.Secret{}, agentsv1.IndexGatewayTokenHash, auth.GatewayTokenIndex).Build()
	signer, _ := auth.NewSigner(bytes.Repeat([]byte("k"), 32))
	f := &boundFixture{c: c, s: New(Options{Deps: ops.Deps{Client: c}, Signer: signer, Log: logr.Discard()})}
	rec := f.call("POST", "/v0/agents/a1/platform/token", "gw_one")
	if rec.Code != http.StatusCreated {
		t.Fatalf("mint with the gateway token: %d %s", rec.Code, rec.Body)
	}
	var body struct{ Token, ExpiresAt string }
	_ = json.Unmarshal(rec.Body.Bytes(), &body)
	f.platform = body.Token
	return f
}

func (f *boundFixture) call(method, path, tok string) *httptest.ResponseRecorder {
	body := strings.NewReader("")
	if method == "POST" || method == "PATCH" {
		body = strings.NewReader(`{}`)
	}
	req := httptest.NewRequest(method, path, body)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	f.s.ServeHTTP(rec, req)
	return rec
}

// TestAgentBoundCredentials: a gateway token and a platform token open their own agent only.
// Another agent's routes answer 404 (as for a missing agent); routes that widen the agent's
// reach (domains, channels), workspace-wide routes and (for platform tokens) the /v3 files
// answer 403.
func TestAgentBoundCredentials(t *testing.T) {
	f := newBoundFixture(t)
	for _, cred := range []struct{ name, tok string }{{"gateway token", "gw_one"}, {"platform token", f.platform}} {
		for _, tc := range []struct {
			method, path string
			status       int
			message      string
		}{
			{"GET", "/v0/agents/a1", 200, ""},
			{"GET", "/v0/me", 200, ""},
			{"GET", "/v0/agents/a2", 404, ops.MsgAgentNotFound},
			{"GET", "/v0/agents/a2/config", 404, ops.MsgAgentNotFound},
			{"GET", "/v0/agents/a2/logs", 404, ops.MsgAgentNotFound},
			{"POST", "/v0/agents/a2/platform/token", 404, ops.MsgAgentNotFound},
			{"POST", "/v0/agents/a2/console/exec", 404, ops.MsgAgentNotFound},
			{"GET", "/v0/agents/a2/secrets", 404, ops.MsgAgentNotFound},
			{"DELETE", "/v0/agents/a2", 404, ops.MsgAgentNotFound},
			{"POST", "/v0/agents/a2/domains", 404, ops.MsgAgentNotFound},
			{"GET", "/v0/agents/missing", 404, ops.MsgAgentNotFound},
			{"POST", "/v0/agents/a1/domains", 403, msgForbidden},
			{"PATCH", "/v0/agents/a1/domains/d1", 403, msgForbidden},
			{"DELETE", "/v0/agents/a1/domains/d1", 403, msgForbidden},
			{"POST", "/v0/agents/a1/domains/d1/verify", 403, msgForbidden},
			{"POST", "/v0/agents/a1/channels/telegram", 403, msgForbidden},
			{"DELETE", "/v0/agents/a1/channels/telegram", 403, msgForbidden},
			{"POST", "/v0/agents/a1/secrets", 403, msgForbidden},
			{"GET", "/v0/agents/a1/gateway-token", 403, msgForbidden},
			{"DELETE", "/v0/agents/a1", 403, msgForbidden},
			{"GET", "/v0/agents", 403, msgForbidden},
			{"GET", "/v0/secrets", 403, msgForbidden},
			{"GET", "/v3/files/public", 403, msgForbidden},
		} {
			t.Run(cred.name+" "+tc.method+" "+tc.path, func(t *testing.T) {
				rec := f.call(tc.method, tc.path, cred.tok)
				if rec.Code != tc.status {
					t.Fatalf("%d %s, want %d", rec.Code, rec.Body, tc.status)
				}
				if tc.message != "" && !strings.Contains(rec.Body.String(), tc.message) {
					t.Fatalf("body %s, want %q", rec.Body, tc.message)
				}
			})
		}
	}
	// A platform token reads; it does not act.
	if rec := f.call("POST", "/v0/agents/a1/restart", f.platform); rec.Code != http.StatusForbidden {
		t.Fatalf("restart with a platform token: %d, want 403", rec.Code)
	}
}

// TestPlatformTokensAreStateless: minting creates no object, and a platform token dies with
// its agent (another UID under the same name) and with the rotation of the gateway token.
func TestPlatformTokensAreStateless(t *testing.T) {
	f := newBoundFixture(t)
	ctx := context.Background()
	for range 30 {
		if rec := f.call("POST", "/v0/agents/a1/platform/token", "gw_one"); rec.Code != http.StatusCreated {
			t.Fatalf("mint: %d %s", rec.Code, rec.Body)
		}
	}
	var keys agentsv1.ApiKeyList
	if err := f.c.List(ctx, &keys); err != nil || len(keys.Items) != 0 {
		t.Fatalf("31 mints left %d ApiKeys (%v), want 0", len(keys.Items), err)
	}
	if rec := f.call("GET", "/v0/agents/a1", f.platform); rec.Code != http.StatusOK {
		t.Fatalf("before rotation: %d", rec.Code)
	}

	sec := &corev1.Secret{}
	_ = f.c.Get(ctx, client.ObjectKey{Namespace: "ws", Name: "a1-gateway-token"}, sec)
	sec.Data[agentsv1.GatewayTokenDataKey] = []byte("gw_rotated")
	if err := f.c.Update(ctx, sec); err != nil {
		t.Fatal(err)
	}
	if rec := f.call("GET", "/v0/agents/a1", f.platform); rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), "Token revoked") {
		t.Fatalf("after rotation: %d %s, want 401 Token revoked", rec.Code, rec.Body)
	}
	if rec := f.call("GET", "/v0/agents/a1", "gw_one"); rec.Code != http.StatusUnauthorized {
		t.Fatalf("the rotated gateway token: %d, want 401", rec.Code)
	}

	rec := f.call("POST", "/v0/agents/a1/platform/token", "gw_rotated")
	var body struct{ Token string }
	_ = json.Unmarshal(rec.Body.Bytes(), &body)
	if rec := f.call("GET", "/v0/agents/a1", body.Token); rec.Code != http.StatusOK {
		t.Fatalf("a token minted under the new gateway token: %d %s", rec.Code, rec.Body)
	}
	a := &agentsv1.Agent{}
	_ = f.c.Get(ctx, client.ObjectKey{Namespace: "ws", Name: "a1"}, a)
	_ = f.c.Delete(ctx, a)
	again := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "a1", UID: "uid-a1-again"}}
	if err := f.c.Create(ctx, again); err != nil {
		t.Fatal(err)
	}
	if rec := f.call("GET", "/v0/agents/a1", body.Token); rec.Code != http.StatusUnauthorized {
		t.Fatalf("a platform token of a deleted agent, on its successor of the same name: %d, want 401", rec.Code)
	}
}
