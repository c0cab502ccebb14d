package ops

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/rules/auth"
)

// Bounds of the live reads authentication may make.
const (
	// authMissTTL is how long an object kube-apiserver said is missing is not asked for
	// again (a key or agent created a moment ago through another replica is accepted once
	// this replica's cache has it, at most this much later).
	authMissTTL = 5 * time.Second
	// authMissMax bounds the remembered misses (expired ones are dropped first).
	authMissMax = 10000
	// authReadTimeout bounds one live read.
	authReadTimeout = 10 * time.Second
)

// AuthLookup is what authentication reads (auth.Lookup): ApiKeys, Workspaces, an agent and
// its gateway token from the informer cache, and a gateway token's agent through the cache's
// index on the token's hash. Only a token whose signature verified reads anything, and only
// on a cache miss does it read kube-apiserver: one request per object at a time
// (singleflight), and an object found missing is not asked for again for authMissTTL. A
// gateway token the cache does not hold is refused without a request to kube-apiserver: the
// replica that rotates a token waits until its own cache holds the new one
// (RotateGatewayToken); another replica accepts it once its watch delivers the change,
// typically within milliseconds.
func (o *Ops) AuthLookup() auth.Lookup { return &o.auth }

// authLookup implements AuthLookup over the operations' clients.
type authLookup struct {
	o       *Ops
	group   singleflight.Group
	mu      sync.Mutex
	missing map[string]time.Time
}

func (l *authLookup) ApiKey(ctx context.Context, namespace, name string) (*agentsv1.ApiKey, error) {
	return lookupObj(ctx, l, client.ObjectKey{Namespace: namespace, Name: name}, &agentsv1.ApiKey{})
}

func (l *authLookup) Agent(ctx context.Context, namespace, name string) (*agentsv1.Agent, error) {
	return lookupObj(ctx, l, client.ObjectKey{Namespace: namespace, Name: name}, &agentsv1.Agent{})
}

func (l *authLookup) Workspace(ctx context.Context, name string) (*agentsv1.Workspace, error) {
	return lookupObj(ctx, l, client.ObjectKey{Name: name}, &agentsv1.Workspace{})
}

func (l *authLookup) GatewayToken(ctx context.Context, a *agentsv1.Agent) (string, error) {
	sec, err := lookupObj(ctx, l, client.ObjectKey{Namespace: a.Namespace, Name: GatewaySecretName(a)}, &corev1.Secret{})
	if sec == nil || err != nil {
		return "", err
	}
	return string(sec.Data[agentsv1.GatewayTokenDataKey]), nil
}

// GatewayTokenOwner finds, in the informer cache alone, the gateway-token Secret holding tok.
func (l *authLookup) GatewayTokenOwner(ctx context.Context, tok string) (string, string, error) {
	if tok == "" {
		return "", "", nil
	}
	var cached corev1.SecretList
	if err := l.o.d.Client.List(ctx, &cached, client.MatchingFields{agentsv1.IndexGatewayTokenHash: auth.GatewayTokenHash(tok)}); err != nil {
		return "", "", err
	}
	for i := range cached.Items {
		sec := &cached.Items[i]
		agent, stored := sec.Labels[agentsv1.LabelGatewayTokenOf], string(sec.Data[agentsv1.GatewayTokenDataKey])
		if agent != "" && stored != "" && auth.TokensEqual(stored, tok) {
			return sec.Namespace, agent, nil
		}
	}
	return "", "", nil
}

// lookupObj reads key into obj through l.get: nil when it does not exist.
func lookupObj[T client.Object](ctx context.Context, l *authLookup, key client.ObjectKey, obj T) (T, error) {
	var none T
	if err := l.get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return none, nil
		}
		return none, err
	}
	return obj, nil
}

// get reads key into obj: the cache first, then (bounded) kube-apiserver.
func (l *authLookup) get(ctx context.Context, key client.ObjectKey, obj client.Object) error {
	d := &l.o.d
	err := d.Client.Get(ctx, key, obj)
	if !apierrors.IsNotFound(err) {
		return err
	}
	id := fmt.Sprintf("%T/%s", obj, key)
	now := d.Now()
	if l.knownMissing(id, now) {
		return err
	}
	v, liveErr, _ := l.group.Do(id, func() (any, error) {
		// Shared by every caller waiting on id: one caller going away does not fail the others.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), authReadTimeout)
		defer cancel()
		fresh := obj.DeepCopyObject().(client.Object)
		if err := d.APIReader.Get(rctx, key, fresh); err != nil {
			if apierrors.IsNotFound(err) {
				l.remember(id, now.Add(authMissTTL))
			}
			return nil, err
		}
		return fresh, nil
	})
	if liveErr != nil {
		return liveErr
	}
	reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(v.(client.Object).DeepCopyObject()).Elem())
	return nil
}

func (l *authLookup) knownMissing(id string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	until, ok := l.missing[id]
	if ok && !now.Before(until) {
		delete(l.missing, id)
		return false
	}
	return ok
}

func (l *authLookup) remember(id string, until time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.missing == nil {
		l.missing = map[string]time.Time{}
	}
	if len(l.missing) >= authMissMax {
		now := until.Add(-authMissTTL)
		for k, t := range l.missing {
			if !now.Before(t) {
				delete(l.missing, k)
			}
		}
		if len(l.missing) >= authMissMax {
			clear(l.missing)
		}
	}
	l.missing[id] = until
}
