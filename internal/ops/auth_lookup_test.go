package ops

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/rules/auth"
	"github.com/agentplane/agentplane/internal/scheme"
)

// tokenSecret is agent's gateway-token Secret in namespace ns holding tok.
func tokenSecret(ns, agent, tok string) *corev1.Secret {
	return auth.GatewayTokenSecret(&agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: agent}}, tok)
}

// liveReads is a reader standing for kube-apiserver over objs that counts its reads into n
// (the lookups only Get from it); before each it calls gate (nil: none).
func liveReads(n *atomic.Int64, gate func(), objs ...client.Object) client.Reader {
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).Build()
	return interceptor.NewClient(c, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if n.Add(1); gate != nil {
				gate()
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
}

// TestGatewayTokenResolvesFromTheCacheAlone: a gateway token is found through the cache's
// index on its hash and names its own agent, and a token the cache does not hold is refused
// without a read of kube-apiserver, even one rotated a moment ago elsewhere.
func TestGatewayTokenResolvesFromTheCacheAlone(t *testing.T) {
	ws := &agentsv1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: "ws"}}
	cache := fake.NewClientBuilder().WithScheme(scheme.New()).
		WithObjects(ws, tokenSecret("ws", "a1", "gw_old"), tokenSecret("ws", "a2", "gw_two")).
		WithIndex(&corev1.Secret{}, agentsv1.IndexGatewayTokenHash, auth.GatewayTokenIndex).Build()
	var reads atomic.Int64
	o := New(Deps{Client: cache, APIReader: liveReads(&reads, nil, ws, tokenSecret("ws", "a1", "gw_new"))})

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
			id, err := auth.Authenticate(context.Background(), o.AuthLookup(), nil, time.Now(), tc.token, true)
			if tc.agent == "" {
				if !errors.Is(err, auth.ErrTokenInvalid) {
					t.Fatalf("got %+v, %v; want invalid", id, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if id.BoundAgent != tc.agent || id.Workspace.Name != "ws" {
				t.Fatalf("bound to %s/%s, want ws/%s", id.Workspace.Name, id.BoundAgent, tc.agent)
			}
		})
	}
	if n := reads.Load(); n != 0 {
		t.Fatalf("resolving gateway tokens read kube-apiserver %d times, want 0", n)
	}
}

// TestAuthLookupsBoundLiveReads: a cache miss reads kube-apiserver once per object, not
// again while the miss is remembered, and again once it expired.
func TestAuthLookupsBoundLiveReads(t *testing.T) {
	var reads atomic.Int64
	now := metav1.Now().Time
	o := New(Deps{
		Client:    fake.NewClientBuilder().WithScheme(scheme.New()).Build(),
		APIReader: liveReads(&reads, nil, &agentsv1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: "fresh"}}),
		Now:       func() time.Time { return now },
	})
	l, ctx := o.AuthLookup(), context.Background()

	if got, err := l.Workspace(ctx, "fresh"); err != nil || got == nil || got.Name != "fresh" {
		t.Fatalf("a workspace only kube-apiserver has yet: %v %v", got, err)
	}
	for range 50 {
		if got, err := l.Workspace(ctx, "gone"); got != nil || err != nil {
			t.Fatalf("a missing workspace: %v %v, want nil, nil", got, err)
		}
	}
	if n := reads.Load(); n != 2 {
		t.Fatalf("%d live reads, want 2 (one hit, one remembered miss)", n)
	}
	now = now.Add(authMissTTL)
	_, _ = l.Workspace(ctx, "gone")
	if n := reads.Load(); n != 3 {
		t.Fatalf("%d live reads after the miss expired, want 3", n)
	}
}

// TestAuthLookupsShareConcurrentMisses: concurrent lookups that miss the same object in the
// cache share one read of kube-apiserver. The read is held until every lookup has missed the
// cache, and then answers that the object is missing (remembered for whoever comes after).
func TestAuthLookupsShareConcurrentMisses(t *testing.T) {
	const callers = 50
	var reads, misses atomic.Int64
	allMissed := make(chan struct{})
	cache := interceptor.NewClient(fake.NewClientBuilder().WithScheme(scheme.New()).Build(), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			err := c.Get(ctx, key, obj, opts...)
			if misses.Add(1) == callers {
				close(allMissed)
			}
			return err
		},
	})
	o := New(Deps{Client: cache, APIReader: liveReads(&reads, func() { <-allMissed })})
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = o.AuthLookup().ApiKey(context.Background(), "ws", "key-missing")
		}()
	}
	wg.Wait()
	if n := reads.Load(); n != 1 {
		t.Fatalf("%d concurrent misses made %d live reads, want 1", callers, n)
	}
}
