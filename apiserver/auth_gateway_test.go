package apiserver

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

// gatewaySecret is agent's gateway-token Secret in namespace ns holding tok.
func gatewayTokenSecret(ns, agent, tok string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: agent + "-gateway-token", Labels: map[string]string{agentsv1.LabelGatewayTokenOf: agent}},
		Data:       map[string][]byte{agentsv1.GatewayTokenDataKey: []byte(tok)},
	}
}

// gatewayHashIndex is the manager's index of gateway-token Secrets by token hash
// (controllers.SetupIndexes registers the same).
func gatewayHashIndex(o client.Object) []string {
	sec := o.(*corev1.Secret)
	if tok := string(sec.Data[agentsv1.GatewayTokenDataKey]); tok != "" && sec.Labels[agentsv1.LabelGatewayTokenOf] != "" {
		return []string{auth.GatewayTokenHash(tok)}
	}
	return nil
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

// TestGatewayTokenResolvesFromTheCacheAlone: a gateway token is found through the cache's
// index on its hash, names its own agent whatever the path, and a token the cache does not
// hold is refused without a read of kube-apiserver, even one rotated a moment ago elsewhere.
func TestGatewayTokenResolvesFromTheCacheAlone(t *testing.T) {
	sch := scheme.New()
	ws := &agentsv1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: "ws"}}
	cache := fake.NewClientBuilder().WithScheme(sch).
		WithObjects(ws, gatewayTokenSecret("ws", "a1", "gw_old"), gatewayTokenSecret("ws", "a2", "gw_two")).
		WithIndex(&corev1.Secret{}, IndexGatewayTokenHash, gatewayHashIndex).Build()
	var liveReads atomic.Int64
	live := countingReader(fake.NewClientBuilder().WithScheme(sch).WithObjects(ws, gatewayTokenSecret("ws", "a1", "gw_new")).Build(), &liveReads)
	s := &Server{opts: Options{Deps: ops.Deps{Client: cache, APIReader: live}}}

	for _, tc := range []struct {
		name, token, agent string
	}{
		{"a1's token", "gw_old", "a1"},
		{"a2's token", "gw_two", "a2"},
		{"rotated elsewhere, cache behind: refused until the cache has it", "gw_new", ""},
		{"forged", "gw_forged", ""},
		{"a prefix of a real token", "gw_ol", ""},
		{"empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := s.callerFromGatewayToken(context.Background(), tc.token)
			if tc.agent == "" {
				if e := (*Error)(nil); !errors.As(err, &e) || e.Status != http.StatusUnauthorized {
					t.Fatalf("got %v, %v; want 401", c, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.GatewayAgent != tc.agent || c.Namespace != "ws" {
				t.Fatalf("caller bound to %s/%s, want ws/%s", c.Namespace, c.GatewayAgent, tc.agent)
			}
		})
	}
	if n := liveReads.Load(); n != 0 {
		t.Fatalf("resolving gateway tokens read kube-apiserver %d times, want 0", n)
	}
}

// TestBogusBearerTokensCostTheAPIServerNothing: 100 requests with bogus bearer tokens of
// every shape (gateway-like, JWT-like, JWTs signed by another key, a validly signed token
// whose user is missing) make no request to kube-apiserver; they are refused with 401.
func TestBogusBearerTokensCostTheAPIServerNothing(t *testing.T) {
	sch := scheme.New()
	ws := &agentsv1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: "ws"}}
	var reads atomic.Int64
	cache := fake.NewClientBuilder().WithScheme(sch).WithObjects(ws, gatewayTokenSecret("ws", "a1", "gw_real")).
		WithIndex(&corev1.Secret{}, IndexGatewayTokenHash, gatewayHashIndex).Build()
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

// TestAuthLookupsBoundLiveReads: a cache miss of a validly signed token reads kube-apiserver
// once per object, not again while the miss is remembered, and concurrent misses share one
// read.
func TestAuthLookupsBoundLiveReads(t *testing.T) {
	sch := scheme.New()
	var reads atomic.Int64
	cache := fake.NewClientBuilder().WithScheme(sch).Build()
	live := countingReader(fake.NewClientBuilder().WithScheme(sch).
		WithObjects(&agentsv1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: "fresh"}}).Build(), &reads)
	now := metav1.Now().Time
	o := Options{Deps: ops.Deps{Client: cache, APIReader: live, Now: func() time.Time { return now }}}
	var l authLookups

	got := &agentsv1.Workspace{}
	if err := l.get(context.Background(), o, client.ObjectKey{Name: "fresh"}, got); err != nil || got.Name != "fresh" {
		t.Fatalf("a workspace only kube-apiserver has yet: %v %q", err, got.Name)
	}
	for range 50 {
		if err := l.get(context.Background(), o, client.ObjectKey{Name: "gone"}, &agentsv1.Workspace{}); err == nil {
			t.Fatal("a missing workspace was found")
		}
	}
	if n := reads.Load(); n != 2 {
		t.Fatalf("%d live reads, want 2 (one hit, one remembered miss)", n)
	}
	now = now.Add(authMissTTL)
	_ = l.get(context.Background(), o, client.ObjectKey{Name: "gone"}, &agentsv1.Workspace{})
	if n := reads.Load(); n != 3 {
		t.Fatalf("%d live reads after the miss expired, want 3", n)
	}
}

// TestAuthLookupsShareConcurrentMisses: concurrent requests that miss the same object in the
// cache share one read of kube-apiserver.
func TestAuthLookupsShareConcurrentMisses(t *testing.T) {
	sch := scheme.New()
	var reads atomic.Int64
	slow := interceptor.NewClient(fake.NewClientBuilder().WithScheme(sch).Build(), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			reads.Add(1)
			time.Sleep(100 * time.Millisecond)
			return c.Get(ctx, key, obj, opts...)
		},
	})
	o := Options{Deps: ops.Deps{Client: fake.NewClientBuilder().WithScheme(sch).Build(), APIReader: slow, Now: time.Now}}
	var l authLookups
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = l.get(context.Background(), o, client.ObjectKey{Namespace: "ws", Name: "key-missing"}, &agentsv1.ApiKey{})
		}()
	}
	wg.Wait()
	if n := reads.Load(); n != 1 {
		t.Fatalf("50 concurrent misses made %d live reads, want 1", n)
	}
}
