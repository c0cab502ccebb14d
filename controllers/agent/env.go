package agent

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/rules/secrets"
)

// SecretEnv resolves an agent's attached secrets, and the tokens of its enabled Channels
// (channels.go), into environment variables; a model provider's key that the model proxy
// serves is never among them. With DerivedSecret set (kube runtime) it also
// keeps a core Secret `<agent>-env` holding them, owned by the agent, for the pod's envFrom:
// only while there is something to hold (an agent without secrets or channels has none).
type SecretEnv struct {
	Client        client.Client
	APIReader     client.Reader
	Sealer        *secrets.Sealer
	DerivedSecret bool
	// ModelProxy keeps the keys of the providers it serves out of the environment (the
	// agent's config points those providers at the proxy instead).
	ModelProxy ModelProxy
	// ChannelRelay keeps the tokens of the channels it relays out of the environment.
	ChannelRelay ChannelRelay
}

// Resolve implements EnvResolver.
func (e *SecretEnv) Resolve(ctx context.Context, agent *agentsv1.Agent) (map[string]string, string, error) {
	env := map[string]string{}
	for _, ref := range agent.Spec.Secrets {
		sec := &agentsv1.AgentSecret{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: agent.Namespace, Name: ref.Name}, sec); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, "", fmt.Errorf("secret %s not found", ref.Name)
			}
			return nil, "", err
		}
		if proxied(e.ModelProxy, sec) {
			continue
		}
		if err := secrets.ReservedEnvError(sec); err != nil {
			// A secret created before its name was reserved (the REST door and the CRD refuse
			// new ones): never injected; its Ready condition says why (ReservedEnvName).
			log.FromContext(ctx).Info("not giving the agent a secret with a reserved environment name", "secret", ref.Name, "reason", err.Error())
			continue
		}
		v, err := secrets.Value(ctx, e.APIReader, e.Sealer, sec)
		if err != nil {
			return nil, "", fmt.Errorf("secret %s: %w", ref.Name, err)
		}
		env[secrets.EnvNameOf(sec)] = string(v)
	}
	// Channel tokens (fixed names, after attached secrets so they win).
	if err := e.addChannelEnv(ctx, agent, env); err != nil {
		return nil, "", err
	}
	if !e.DerivedSecret {
		return env, "", nil
	}
	name := agentsv1.EnvSecretName(agent.Name)
	if len(env) == 0 {
		return env, "", e.deleteDerived(ctx, agent, name)
	}
	if err := e.writeDerived(ctx, agent, name, env); err != nil {
		return nil, "", err
	}
	return env, name, nil
}

// writeDerived creates or updates the derived Secret. It reads the manager's cache (which holds
// agentplane's own Secrets), so a pass that changes nothing costs no round trip.
func (e *SecretEnv) writeDerived(ctx context.Context, agent *agentsv1.Agent, name string, env map[string]string) error {
	data := make(map[string][]byte, len(env))
	for k, v := range env {
		data[k] = []byte(v)
	}
	cur := &corev1.Secret{}
	err := e.Client.Get(ctx, client.ObjectKey{Namespace: agent.Namespace, Name: name}, cur)
	if apierrors.IsNotFound(err) {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: agent.Namespace, Labels: map[string]string{
				"app.kubernetes.io/part-of": "agentplane", "app.kubernetes.io/instance": agent.Name,
			}},
			Type: corev1.SecretTypeOpaque,
			Data: data,
		}
		if err := controllerutil.SetControllerReference(agent, s, e.Client.Scheme()); err != nil {
			return err
		}
		if err = e.Client.Create(ctx, s); !apierrors.IsAlreadyExists(err) {
			return err
		}
		// Created by an earlier pass the cache has not seen yet: update the live object.
		err = e.APIReader.Get(ctx, client.ObjectKeyFromObject(s), cur)
	}
	if err != nil {
		return err
	}
	if equality.Semantic.DeepEqual(cur.Data, data) {
		return nil
	}
	cur.Data = data
	return e.Client.Update(ctx, cur)
}

// deleteDerived deletes the derived Secret the agent no longer needs, when the cache shows one
// of its own (a pass that finds none costs no round trip).
func (e *SecretEnv) deleteDerived(ctx context.Context, agent *agentsv1.Agent, name string) error {
	cur := &corev1.Secret{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: agent.Namespace, Name: name}, cur); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(cur, agent) {
		return nil
	}
	return client.IgnoreNotFound(e.Client.Delete(ctx, cur, client.Preconditions{UID: &cur.UID}))
}
