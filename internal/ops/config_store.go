package ops

import (
	"context"
	"encoding/json"
	"errors"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// managedChannelTypes are the channel types the platform renders into the agent's config:
// those of its Channels and those its last render wrote.
func (o *Ops) managedChannelTypes(ctx context.Context, a *agentsv1.Agent) ([]string, error) {
	var out []string
	if a.Status.Config != nil {
		for _, rc := range a.Status.Config.Channels {
			out = append(out, string(rc.Type))
		}
	}
	var list agentsv1.ChannelList
	if err := o.d.APIReader.List(ctx, &list, client.InNamespace(a.Namespace), client.MatchingFields{agentsv1.IndexAgentRef: a.Name}); err != nil {
		return nil, err
	}
	for _, ch := range list.Items {
		out = append(out, string(ch.Spec.Type))
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// storeConfig writes user into the Secret `<agent>-config` (owned by the agent) and points
// spec.configRef at it.
func (o *Ops) storeConfig(ctx context.Context, a *agentsv1.Agent, user []byte) error {
	name := agentsv1.ConfigSecretName(a.Name)
	err := retry.OnError(retry.DefaultRetry, conflictOrExists, func() error {
		sec := &corev1.Secret{}
		err := o.d.APIReader.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: name}, sec)
		if apierrors.IsNotFound(err) {
			sec = &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: a.Namespace, Labels: map[string]string{
					agentsv1.LabelAppPartOf: "agentplane", agentsv1.LabelAgent: a.Name, agentsv1.LabelConfigOf: a.Name,
				}},
				Type: corev1.SecretTypeOpaque,
				Data: map[string][]byte{agentsv1.ConfigDataKey: user},
			}
			if err := controllerutil.SetControllerReference(a, sec, o.d.Client.Scheme()); err != nil {
				return err
			}
			return o.d.Client.Create(ctx, sec)
		}
		if err != nil {
			return err
		}
		sec.Data = map[string][]byte{agentsv1.ConfigDataKey: user}
		return o.d.Client.Update(ctx, sec)
	})
	if err != nil {
		return err
	}
	want := agentsv1.SecretKeyReference{Name: name, Key: agentsv1.ConfigDataKey}
	if ref := a.Spec.ConfigRef; ref != nil && *ref == want {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"configRef": want}})
	if err != nil {
		return err
	}
	return o.d.Client.Patch(ctx, a, client.RawPatch(types.MergePatchType, patch))
}

// awaitRender waits until the Agent controller rendered (or could not render) the config
// with hash sourceHash on a's generation (the one that names it), or the wait ends; it
// returns the agent as last seen.
func (o *Ops) awaitRender(ctx context.Context, a *agentsv1.Agent, sourceHash string) (*agentsv1.Agent, error) {
	wctx, cancel := context.WithTimeout(ctx, o.ProvisionWait())
	defer cancel()
	got := a.DeepCopy()
	err := o.WaitFor(wctx, got, func() (bool, error) {
		applied := meta.FindStatusCondition(got.Status.Conditions, agentsv1.AgentConfigApplied)
		return got.Status.Config != nil && got.Status.Config.SourceHash == sourceHash &&
			applied != nil && applied.ObservedGeneration >= a.Generation, nil
	})
	if err != nil && (ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded)) {
		return nil, err
	}
	return got, nil
}
