package ops

import (
	"context"
	"errors"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/rules/auth"
)

// Channel messages. `Unsupported channel`, `Configuration failed` and `Removal failed` are
// fixed by the contract.
const (
	MsgUnsupportedChannel  = "Unsupported channel"
	MsgChannelConfigFailed = "Configuration failed"
	MsgChannelRemoveFailed = "Removal failed"
	MsgChannelPlan         = "Channels require a paid plan"
	MsgChannelNotFound     = "Channel not found"
	MsgChannelRemoving     = "Channel is being removed"
	MsgBotTokenRequired    = "botToken is required"
	MsgAppTokenRequired    = "appToken is required for slack"
	MsgInvalidBotToken     = "Invalid botToken"
	MsgInvalidAppToken     = "Invalid appToken"
	MsgInvalidDMPolicy     = "Invalid dmPolicy"
	MsgInvalidAllowFrom    = "Invalid allowFrom"
)

// ChannelName is the Channel object of an agent's channel of type t.
func ChannelName(agent string, t agentsv1.ChannelType) string { return agent + "-" + string(t) }

// ChannelSecretName is the core Secret holding the tokens of an agent's channel of type t.
func ChannelSecretName(agent string, t agentsv1.ChannelType) string {
	return agent + "-channel-" + string(t)
}

// ChannelTypeFor checks a channel type named by a caller and the workspace's plan (channels
// need PlanPro).
func ChannelTypeFor(name string, plan agentsv1.Plan) (agentsv1.ChannelType, error) {
	t := agentsv1.ChannelType(name)
	if !slices.Contains(agentsv1.ChannelTypes, t) {
		return "", Fail(Invalid, MsgUnsupportedChannel)
	}
	if plan != agentsv1.PlanPro {
		return "", Fail(Forbidden, MsgChannelPlan)
	}
	return t, nil
}

// ChannelState is an agent's channel of one type as callers are shown it: the Channel (nil:
// the type is not configured) and hints of its tokens (auth.Hint, "" when there is none),
// never the tokens.
type ChannelState struct {
	Type         agentsv1.ChannelType
	Channel      *agentsv1.Channel
	BotTokenHint string
	AppTokenHint string
}

// Channels lists the agent's channels, one per type of agentsv1.ChannelTypes in that order.
func (o *Ops) Channels(ctx context.Context, t Scope, agentID string) ([]ChannelState, error) {
	a, err := o.Agent(ctx, t, agentID)
	if err != nil {
		return nil, err
	}
	var list agentsv1.ChannelList
	if err := o.d.APIReader.List(ctx, &list, client.InNamespace(a.Namespace), client.MatchingFields{agentsv1.IndexAgentRef: a.Name}); err != nil {
		return nil, err
	}
	out := make([]ChannelState, 0, len(agentsv1.ChannelTypes))
	for _, typ := range agentsv1.ChannelTypes {
		ch := pickChannel(list.Items, a.Name, typ)
		if ch == nil {
			out = append(out, ChannelState{Type: typ})
			continue
		}
		st, err := o.channelState(ctx, ch)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

// channelState is ch with hints computed from its token Secrets as they are now.
func (o *Ops) channelState(ctx context.Context, ch *agentsv1.Channel) (ChannelState, error) {
	st := ChannelState{Type: ch.Spec.Type, Channel: ch}
	var err error
	if st.BotTokenHint, err = o.tokenHint(ctx, ch.Namespace, ch.Spec.BotTokenRef); err != nil {
		return st, err
	}
	if st.AppTokenHint, err = o.tokenHint(ctx, ch.Namespace, ch.Spec.AppTokenRef); err != nil {
		return st, err
	}
	return st, nil
}

// tokenHint is auth.Hint of the referenced token ("" when there is none).
func (o *Ops) tokenHint(ctx context.Context, namespace string, ref *agentsv1.SecretKeyReference) (string, error) {
	if ref == nil {
		return "", nil
	}
	sec := &corev1.Secret{}
	if err := o.d.APIReader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, sec); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	if v := sec.Data[ref.Key]; len(v) > 0 {
		return auth.Hint(string(v)), nil
	}
	return "", nil
}

// pickChannel is the agent's Channel of type t among items: the facade's own
// (`<agent>-<type>`) first, else the oldest.
func pickChannel(items []agentsv1.Channel, agent string, t agentsv1.ChannelType) *agentsv1.Channel {
	var best *agentsv1.Channel
	for i := range items {
		ch := &items[i]
		if ch.Spec.AgentRef.Name != agent || ch.Spec.Type != t {
			continue
		}
		if ch.Name == ChannelName(agent, t) {
			return ch
		}
		if best == nil || ch.CreationTimestamp.Before(&best.CreationTimestamp) ||
			ch.CreationTimestamp.Equal(&best.CreationTimestamp) && ch.Name < best.Name {
			best = ch
		}
	}
	return best
}

// channelTarget checks the channel type and the plan, then reads the agent.
func (o *Ops) channelTarget(ctx context.Context, t Scope, plan agentsv1.Plan, agentID, channel string) (*agentsv1.Agent, agentsv1.ChannelType, error) {
	typ, err := ChannelTypeFor(channel, plan)
	if err != nil {
		return nil, "", err
	}
	a, err := o.Agent(ctx, t, agentID)
	if err != nil {
		return nil, "", err
	}
	return a, typ, nil
}

// DeleteChannel disconnects the agent from a chat network: the Channel is deleted and its
// finalizer removes it from the engine config. It waits until the Channel is gone (deleted)
// or the controller reports that the removal failed (Internal `Removal failed`; the
// controller keeps retrying); deleted is false when the wait ends first.
func (o *Ops) DeleteChannel(ctx context.Context, t Scope, plan agentsv1.Plan, agentID, channel string) (deleted bool, err error) {
	a, typ, err := o.channelTarget(ctx, t, plan, agentID, channel)
	if err != nil {
		return false, err
	}
	ch := &agentsv1.Channel{}
	if err := o.d.APIReader.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: ChannelName(a.Name, typ)}, ch); err != nil {
		if apierrors.IsNotFound(err) {
			return false, Because(NotFound, MsgChannelNotFound, err)
		}
		return false, err
	}
	// A new spec.applyRequestedAt first: the verdict waited for is on that generation (a
	// removal that failed before is retried, not answered from its old verdict).
	patch := client.MergeFrom(ch.DeepCopy())
	ch.Spec.ApplyRequestedAt = &metav1.MicroTime{Time: o.d.Now().UTC()}
	if err := o.d.Client.Patch(ctx, ch, patch); apierrors.IsNotFound(err) {
		return true, nil
	} else if err != nil {
		return false, err
	}
	if ch.DeletionTimestamp == nil {
		if err := o.d.Client.Delete(ctx, ch, client.Preconditions{UID: &ch.UID}); err != nil && !apierrors.IsNotFound(err) {
			return false, WithMessage(MsgChannelRemoveFailed, err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, o.ProvisionWait())
	defer cancel()
	got := ch.DeepCopy()
	removalFailed := func() *metav1.Condition {
		c := meta.FindStatusCondition(got.Status.Conditions, agentsv1.ChannelConfigured)
		if got.DeletionTimestamp != nil && c != nil && c.Reason == agentsv1.ReasonChannelRemovalFailed && c.ObservedGeneration >= ch.Generation {
			return c
		}
		return nil
	}
	var failed *metav1.Condition
	err = o.WaitForDeletion(wctx, got, func() (bool, error) {
		failed = removalFailed()
		return failed != nil, nil
	})
	switch {
	case err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
		return false, nil
	case err != nil:
		return false, err
	case failed != nil:
		return false, Because(Internal, MsgChannelRemoveFailed, errors.New(failed.Reason+": "+failed.Message))
	}
	return true, nil
}
