package apiserver

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

// authLookups reads what authentication needs (ApiKeys, Workspaces, an agent and its gateway
// token; gatewaySecretFor finds a gateway token's Secret) from the informer cache. Only a token whose signature verified gets here, and only
// on a cache miss does it read kube-apiserver: one request per object at a time
// (singleflight), and an object found missing is not asked for again for authMissTTL.
type authLookups struct {
	group   singleflight.Group
	mu      sync.Mutex
	missing map[string]time.Time
}

// get reads key into obj: the cache first, then (bounded) kube-apiserver.
func (l *authLookups) get(ctx context.Context, o Options, key client.ObjectKey, obj client.Object) error {
	err := o.Client.Get(ctx, key, obj)
	if !apierrors.IsNotFound(err) || o.APIReader == nil {
		return err
	}
	id := fmt.Sprintf("%T/%s", obj, key)
	now := o.Now()
	if l.knownMissing(id, now) {
		return err
	}
	v, liveErr, _ := l.group.Do(id, func() (any, error) {
		// Shared by every caller waiting on id: one caller going away does not fail the others.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), authReadTimeout)
		defer cancel()
		fresh := obj.DeepCopyObject().(client.Object)
		if err := o.APIReader.Get(rctx, key, fresh); err != nil {
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

func (l *authLookups) knownMissing(id string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	until, ok := l.missing[id]
	if ok && !now.Before(until) {
		delete(l.missing, id)
		return false
	}
	return ok
}

func (l *authLookups) remember(id string, until time.Time) {
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

// gatewaySecretFor finds, in the informer cache, the gateway-token Secret holding tok (nil
// when none does).
func (s *Server) gatewaySecretFor(ctx context.Context, tok string) (*corev1.Secret, error) {
	if tok == "" {
		return nil, nil
	}
	var cached corev1.SecretList
	if err := s.opts.Client.List(ctx, &cached, client.MatchingFields{IndexGatewayTokenHash: auth.GatewayTokenHash(tok)}); err != nil {
		return nil, err
	}
	for i := range cached.Items {
		sec := &cached.Items[i]
		stored := string(sec.Data[agentsv1.GatewayTokenDataKey])
		if sec.Labels[agentsv1.LabelGatewayTokenOf] != "" && stored != "" && auth.TokensEqual(stored, tok) {
			return sec, nil
		}
	}
	return nil, nil
}
