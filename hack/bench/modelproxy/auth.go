package main

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/modelproxy/kubeaccess"
	"github.com/agentplane/agentplane/internal/rules/auth"
	"github.com/agentplane/agentplane/internal/rules/secrets"
)

// cacheReader serves Gets from objects in memory and hands out deep copies, as the manager's
// informer cache does (controller-runtime copies on every read by default).
type cacheReader map[client.ObjectKey]client.Object

func (c cacheReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	src, ok := c[key]
	if !ok || reflect.TypeOf(src) != reflect.TypeOf(obj) {
		return apierrors.NewNotFound(schema.GroupResource{Resource: fmt.Sprintf("%T", obj)}, key.Name)
	}
	reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(src.DeepCopyObject()).Elem())
	return nil
}

func (c cacheReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("bench: List is not served")
}

func (c cacheReader) add(objs ...client.Object) {
	for _, o := range objs {
		c[client.ObjectKeyFromObject(o)] = o
	}
}

type staticKey []byte

func (k staticKey) Key(context.Context) ([]byte, error) { return k, nil }

// realAuthorizer is the platform's Authorizer (internal/adapters/modelproxy/kubeaccess) over an in-memory cache
// holding one agent, its gateway token Secret, its attached sealed openai key (opened with
// AES-GCM on every request, as in the manager) and its workspace; it returns the agent's
// proxy credential.
func realAuthorizer(ctx context.Context, providerKey string) (*kubeaccess.Authorizer, string, error) {
	const ns, name, gatewayToken = "bench", "a", "gw-token-0123456789abcdef0123456789abcdef"
	sealer := &secrets.Sealer{Keys: staticKey([]byte("0123456789abcdef0123456789abcdef"))}
	sealed, err := sealer.Seal(ctx, ns, "openai-key", []byte(providerKey))
	if err != nil {
		return nil, "", err
	}
	agent := &agentsv1.Agent{}
	agent.Namespace, agent.Name = ns, name
	agent.Spec.Secrets = []agentsv1.LocalObjectReference{{Name: "openai-key"}}
	agent.Spec.Budget = &agentsv1.ModelBudget{TokensPerDay: 1 << 50} // reservations on the path
	agent.Status.GatewayTokenSecret = name + "-gateway"
	agent.Status.Usage = &agentsv1.ModelUsage{Day: time.Now().UTC().Format(time.DateOnly), Requests: 1, InputTokens: 10}
	tok := &corev1.Secret{Data: map[string][]byte{agentsv1.GatewayTokenDataKey: []byte(gatewayToken)}}
	tok.Namespace, tok.Name = ns, agent.Status.GatewayTokenSecret
	sec := &agentsv1.AgentSecret{}
	sec.Namespace, sec.Name = ns, "openai-key"
	sec.Spec.Provider = "openai"
	sec.Spec.EncryptedValue = sealed
	ws := &agentsv1.Workspace{}
	ws.Name = ns
	cache := cacheReader{}
	cache.add(agent, tok, sec, ws)
	a := &kubeaccess.Authorizer{Cache: cache, APIReader: cache, Sealer: sealer}
	return a, auth.NewModelCredential(ns, name, gatewayToken), nil
}

// authorizeCost is the real Authorizer's time per call, measured alone.
func authorizeCost(ctx context.Context, a *kubeaccess.Authorizer, cred string) (time.Duration, error) {
	const n = 20000
	start := time.Now()
	for range n {
		if _, err := a.Authorize(ctx, "openai", cred); err != nil {
			return 0, err
		}
	}
	return time.Since(start) / n, nil
}
