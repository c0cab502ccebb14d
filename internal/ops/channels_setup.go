package ops

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// Limits of a channel setup (allowFrom's match the Channel CRD's).
const (
	maxChannelTokenBytes = 4096
	// MaxAllowFrom is how many senders a channel's allowFrom lists at most.
	MaxAllowFrom      = 256
	maxAllowFromEntry = 256
)

// DMPolicies are OpenClaw's dmPolicy values.
var DMPolicies = []string{"pairing", "allowlist", "open", "disabled"}

// ChannelSetup is a channel setup or update. Absent fields keep their current value on an
// update (an empty token counts as absent); a new channel gets dmPolicy "pairing" and enabled
// true unless given.
type ChannelSetup struct {
	BotToken  *string
	AppToken  *string
	DMPolicy  *string
	AllowFrom *[]string
	Enabled   *bool
	// NoWait returns as soon as the Channel is written, without the controller's verdict.
	NoWait bool
}

// ChannelOutcome is where a setup stands when SetupChannel returns.
type ChannelOutcome int

const (
	// ChannelPending: no verdict yet (the agent is not reachable yet, the wait ended, or
	// NoWait).
	ChannelPending ChannelOutcome = iota
	// ChannelUpdated: the controller configured an existing channel.
	ChannelUpdated
	// ChannelCreated: the controller configured a new channel.
	ChannelCreated
)

// validate checks the shape of the fields given and normalizes them.
func (q *ChannelSetup) validate() error {
	for _, tok := range []struct {
		v   **string
		msg string
	}{{&q.BotToken, MsgInvalidBotToken}, {&q.AppToken, MsgInvalidAppToken}} {
		if *tok.v == nil || **tok.v == "" {
			*tok.v = nil
			continue
		}
		v := **tok.v
		if len(v) > maxChannelTokenBytes || !utf8.ValidString(v) ||
			strings.IndexFunc(v, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
			return Fail(Invalid, tok.msg)
		}
	}
	if q.DMPolicy != nil && *q.DMPolicy == "" {
		q.DMPolicy = nil
	}
	if q.DMPolicy != nil && !slices.Contains(DMPolicies, *q.DMPolicy) {
		return Fail(Invalid, MsgInvalidDMPolicy)
	}
	if q.AllowFrom != nil {
		var out []string
		for _, a := range *q.AllowFrom {
			a = strings.TrimSpace(a)
			if a == "" || utf8.RuneCountInString(a) > maxAllowFromEntry || strings.IndexFunc(a, unicode.IsControl) >= 0 {
				return Fail(Invalid, MsgInvalidAllowFrom)
			}
			if !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
		if len(out) > MaxAllowFrom {
			return Fail(Invalid, MsgInvalidAllowFrom)
		}
		q.AllowFrom = &out
	}
	return nil
}

// checkTokens requires the tokens of type t that cur (nil: initial setup) does not hold yet
// and drops tokens t does not use: whatsapp pairs by QR code and takes none, only slack
// takes an app token.
func (q *ChannelSetup) checkTokens(t agentsv1.ChannelType, cur *agentsv1.Channel) error {
	if t == agentsv1.ChannelWhatsApp {
		q.BotToken = nil
	}
	if t != agentsv1.ChannelSlack {
		q.AppToken = nil
	}
	if t != agentsv1.ChannelWhatsApp && q.BotToken == nil && (cur == nil || cur.Spec.BotTokenRef == nil) {
		return Fail(Invalid, MsgBotTokenRequired)
	}
	if t == agentsv1.ChannelSlack && q.AppToken == nil && (cur == nil || cur.Spec.AppTokenRef == nil) {
		return Fail(Invalid, MsgAppTokenRequired)
	}
	return nil
}

// SetupChannel connects the agent to a chat network, or updates the connection. Tokens go to
// the core Secret `<agent>-channel-<type>`; the Channel references them. It then waits for
// the Channel controller's verdict on this request: configured (ChannelCreated for a new
// channel, else ChannelUpdated), a failure (Internal `Configuration failed`), or not yet
// (ChannelPending). plan is the workspace's: channels need PlanPro.
func (o *Ops) SetupChannel(ctx context.Context, t Scope, plan agentsv1.Plan, agentID, channel string, q ChannelSetup) (ChannelState, ChannelOutcome, error) {
	if _, err := ChannelTypeFor(channel, plan); err != nil {
		return ChannelState{}, ChannelPending, err
	}
	if err := q.validate(); err != nil {
		return ChannelState{}, ChannelPending, err
	}
	a, typ, err := o.channelTarget(ctx, t, plan, agentID, channel)
	if err != nil {
		return ChannelState{}, ChannelPending, err
	}
	cur := &agentsv1.Channel{}
	err = o.d.APIReader.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: ChannelName(a.Name, typ)}, cur)
	switch {
	case apierrors.IsNotFound(err):
		cur = nil
	case err != nil:
		return ChannelState{}, ChannelPending, err
	case cur.DeletionTimestamp != nil:
		return ChannelState{}, ChannelPending, Fail(Conflict, MsgChannelRemoving)
	}
	if err := q.checkTokens(typ, cur); err != nil {
		return ChannelState{}, ChannelPending, err
	}
	secretName, err := o.writeChannelTokens(ctx, a, typ, &q)
	if err != nil {
		return ChannelState{}, ChannelPending, err
	}
	ch, isNew, err := o.applyChannel(ctx, a, typ, &q, secretName)
	if err != nil {
		return ChannelState{}, ChannelPending, err
	}
	outcome := ChannelPending
	if !q.NoWait {
		if ch, outcome, err = o.channelVerdict(ctx, ch, isNew); err != nil {
			return ChannelState{}, ChannelPending, err
		}
	}
	st, err := o.channelState(ctx, ch)
	if err != nil {
		return ChannelState{}, ChannelPending, err
	}
	return st, outcome, nil
}

// channelVerdict waits for the controller's verdict on ch (as written by the request) and
// returns the Channel as last seen with the outcome it shows.
func (o *Ops) channelVerdict(ctx context.Context, ch *agentsv1.Channel, isNew bool) (*agentsv1.Channel, ChannelOutcome, error) {
	got, err := o.awaitChannel(ctx, ch)
	if err != nil {
		return nil, ChannelPending, err
	}
	cond := meta.FindStatusCondition(got.Status.Conditions, agentsv1.ChannelConfigured)
	switch {
	case !hasVerdict(got, ch.Generation) || cond.Status == metav1.ConditionUnknown:
		return got, ChannelPending, nil
	case cond.Status == metav1.ConditionTrue && isNew:
		return got, ChannelCreated, nil
	case cond.Status == metav1.ConditionTrue:
		return got, ChannelUpdated, nil
	case cond.Reason == agentsv1.ReasonChannelAgentNotReady:
		return got, ChannelPending, nil
	}
	return nil, ChannelPending, Because(Internal, MsgChannelConfigFailed, errors.New(cond.Reason+": "+cond.Message))
}

// hasVerdict: the Channel's status holds the controller's verdict on generation, the one the
// request's write produced (the cache may still hold an older one).
func hasVerdict(ch *agentsv1.Channel, generation int64) bool {
	cond := meta.FindStatusCondition(ch.Status.Conditions, agentsv1.ChannelConfigured)
	return ch.Status.ObservedGeneration >= generation && cond != nil && cond.ObservedGeneration >= generation
}

// awaitChannel waits until the Channel holds a settled verdict on the request (Configured
// True or False; Unknown means the agent has not rendered it yet) or the wait ends, and
// returns the Channel as last seen.
func (o *Ops) awaitChannel(ctx context.Context, ch *agentsv1.Channel) (*agentsv1.Channel, error) {
	wctx, cancel := context.WithTimeout(ctx, o.ProvisionWait())
	defer cancel()
	got := ch.DeepCopy()
	err := o.WaitFor(wctx, got, func() (bool, error) {
		cond := meta.FindStatusCondition(got.Status.Conditions, agentsv1.ChannelConfigured)
		return hasVerdict(got, ch.Generation) && cond.Status != metav1.ConditionUnknown, nil
	})
	if err != nil && (ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded)) {
		return nil, err
	}
	if got.Generation < ch.Generation {
		return ch, nil // the cache never caught up: answer what was written
	}
	return got, nil
}

// writeChannelTokens stores the tokens given in the core Secret `<agent>-channel-<type>`
// (owned by the agent, labelled for the Channel), keeping a token not given. It returns the
// Secret's name, "" when no token was given.
func (o *Ops) writeChannelTokens(ctx context.Context, a *agentsv1.Agent, t agentsv1.ChannelType, q *ChannelSetup) (string, error) {
	data := map[string][]byte{}
	if q.BotToken != nil {
		data[agentsv1.ChannelBotTokenKey] = []byte(*q.BotToken)
	}
	if q.AppToken != nil {
		data[agentsv1.ChannelAppTokenKey] = []byte(*q.AppToken)
	}
	if len(data) == 0 {
		return "", nil
	}
	name := ChannelSecretName(a.Name, t)
	err := retry.OnError(retry.DefaultRetry, conflictOrExists, func() error {
		cur := &corev1.Secret{}
		err := o.d.APIReader.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: name}, cur)
		if apierrors.IsNotFound(err) {
			sec := &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: a.Namespace, Labels: map[string]string{
					"app.kubernetes.io/part-of": "agentplane", agentsv1.LabelAgent: a.Name,
					agentsv1.LabelChannelTokensOf: ChannelName(a.Name, t),
				}},
				Type: corev1.SecretTypeOpaque,
				Data: data,
			}
			if err := controllerutil.SetOwnerReference(a, sec, o.d.Client.Scheme()); err != nil {
				return err
			}
			return o.d.Client.Create(ctx, sec)
		}
		if err != nil {
			return err
		}
		if cur.Data == nil {
			cur.Data = map[string][]byte{}
		}
		for k, v := range data {
			cur.Data[k] = v
		}
		if cur.Labels == nil {
			cur.Labels = map[string]string{}
		}
		cur.Labels[agentsv1.LabelChannelTokensOf] = ChannelName(a.Name, t)
		return o.d.Client.Update(ctx, cur)
	})
	if err != nil {
		return "", err
	}
	return name, nil
}

// applyChannel creates or updates the agent's Channel of type t from q, referencing the
// tokens in secretName ("" keeps the current references), with a new spec.applyRequestedAt:
// every request is a new generation for the controllers to act on.
func (o *Ops) applyChannel(ctx context.Context, a *agentsv1.Agent, t agentsv1.ChannelType, q *ChannelSetup, secretName string) (*agentsv1.Channel, bool, error) {
	var out *agentsv1.Channel
	isNew := false
	err := retry.OnError(retry.DefaultRetry, conflictOrExists, func() error {
		ch := &agentsv1.Channel{}
		err := o.d.APIReader.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: ChannelName(a.Name, t)}, ch)
		isNew = apierrors.IsNotFound(err)
		if err != nil && !isNew {
			return err
		}
		if isNew {
			if ch, err = o.newChannel(a, t); err != nil {
				return err
			}
		} else if ch.DeletionTimestamp != nil {
			return Fail(Conflict, MsgChannelRemoving)
		}
		q.applyTo(ch, secretName, o.d.Now())
		if isNew {
			err = o.d.Client.Create(ctx, ch)
		} else {
			err = o.d.Client.Update(ctx, ch)
		}
		out = ch
		return err
	})
	return out, isNew, err
}

// newChannel is a new Channel of type t, controlled by the agent, with the defaults.
func (o *Ops) newChannel(a *agentsv1.Agent, t agentsv1.ChannelType) (*agentsv1.Channel, error) {
	enabled := true
	ch := &agentsv1.Channel{
		ObjectMeta: metav1.ObjectMeta{
			Name: ChannelName(a.Name, t), Namespace: a.Namespace,
			Labels: map[string]string{"app.kubernetes.io/part-of": "agentplane", agentsv1.LabelAgent: a.Name},
		},
		Spec: agentsv1.ChannelSpec{
			AgentRef: agentsv1.LocalObjectReference{Name: a.Name}, Type: t,
			DMPolicy: agentsv1.DMPolicy("pairing"), Enabled: &enabled,
		},
	}
	if err := controllerutil.SetControllerReference(a, ch, o.d.Client.Scheme()); err != nil {
		return nil, err
	}
	return ch, nil
}

// applyTo writes the fields q gives into ch's spec.
func (q *ChannelSetup) applyTo(ch *agentsv1.Channel, secretName string, now time.Time) {
	ch.Spec.ApplyRequestedAt = &metav1.MicroTime{Time: now.UTC()}
	if q.BotToken != nil {
		ch.Spec.BotTokenRef = &agentsv1.SecretKeyReference{Name: secretName, Key: agentsv1.ChannelBotTokenKey}
	}
	if q.AppToken != nil {
		ch.Spec.AppTokenRef = &agentsv1.SecretKeyReference{Name: secretName, Key: agentsv1.ChannelAppTokenKey}
	}
	if q.DMPolicy != nil {
		ch.Spec.DMPolicy = agentsv1.DMPolicy(*q.DMPolicy)
	}
	if q.AllowFrom != nil {
		ch.Spec.AllowFrom = *q.AllowFrom
	}
	if q.Enabled != nil {
		ch.Spec.Enabled = q.Enabled
	}
}

// conflictOrExists: a write that lost a race (to another writer, or to a create of the same
// name), worth retrying from a new read.
func conflictOrExists(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
}
