package apiserver

import (
	"context"
	"net/http"
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
	"github.com/agentplane/agentplane/internal/auth"
)

// Limits of a channel setup request (allowFrom's match the Channel CRD's).
const (
	maxChannelTokenBytes = 4096
	maxAllowFrom         = 256
	maxAllowFromEntry    = 256
)

// dmPolicies are OpenClaw's dmPolicy values.
var dmPolicies = []string{"pairing", "allowlist", "open", "disabled"}

// channelRequest is the body of POST /v0/agents/{agentId}/channels/{channel}. Absent fields
// keep their current value on an update (an empty token counts as absent); a new channel gets
// dmPolicy "pairing" and enabled true unless given.
type channelRequest struct {
	BotToken  *string   `json:"botToken"`
	AppToken  *string   `json:"appToken"`
	DMPolicy  *string   `json:"dmPolicy"`
	AllowFrom *[]string `json:"allowFrom"`
	Enabled   *bool     `json:"enabled"`
}

// validate checks the shape of the fields given and normalizes them.
func (q *channelRequest) validate() error {
	for _, tok := range []struct {
		v   **string
		msg string
	}{{&q.BotToken, msgInvalidBotToken}, {&q.AppToken, msgInvalidAppToken}} {
		if *tok.v == nil || **tok.v == "" {
			*tok.v = nil
			continue
		}
		v := **tok.v
		if len(v) > maxChannelTokenBytes || !utf8.ValidString(v) ||
			strings.IndexFunc(v, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
			return errorf(http.StatusBadRequest, tok.msg)
		}
	}
	if q.DMPolicy != nil && *q.DMPolicy == "" {
		q.DMPolicy = nil
	}
	if q.DMPolicy != nil && !slices.Contains(dmPolicies, *q.DMPolicy) {
		return errorf(http.StatusBadRequest, msgInvalidDMPolicy)
	}
	if q.AllowFrom != nil {
		var out []string
		for _, a := range *q.AllowFrom {
			a = strings.TrimSpace(a)
			if a == "" || utf8.RuneCountInString(a) > maxAllowFromEntry || strings.IndexFunc(a, unicode.IsControl) >= 0 {
				return errorf(http.StatusBadRequest, msgInvalidAllowFrom)
			}
			if !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
		if len(out) > maxAllowFrom {
			return errorf(http.StatusBadRequest, msgInvalidAllowFrom)
		}
		q.AllowFrom = &out
	}
	return nil
}

// checkTokens requires the tokens of type t that cur (nil: initial setup) does not hold yet
// and drops tokens t does not use: whatsapp pairs by QR code and takes none, only slack
// takes an app token.
func (q *channelRequest) checkTokens(t agentsv1.ChannelType, cur *agentsv1.Channel) error {
	if t == agentsv1.ChannelWhatsApp {
		q.BotToken = nil
	}
	if t != agentsv1.ChannelSlack {
		q.AppToken = nil
	}
	if t != agentsv1.ChannelWhatsApp && q.BotToken == nil && (cur == nil || cur.Spec.BotTokenRef == nil) {
		return errorf(http.StatusBadRequest, msgBotTokenRequired)
	}
	if t == agentsv1.ChannelSlack && q.AppToken == nil && (cur == nil || cur.Spec.AppTokenRef == nil) {
		return errorf(http.StatusBadRequest, msgAppTokenRequired)
	}
	return nil
}

// writeChannelTokens stores the tokens given in the core Secret `<agent>-channel-<type>`
// (owned by the agent, labelled for the Channel), keeping a token not given. It returns the
// Secret's name, "" when no token was given.
func (s *Server) writeChannelTokens(ctx context.Context, a *agentsv1.Agent, t agentsv1.ChannelType, q *channelRequest) (string, error) {
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
	err := retry.OnError(retry.DefaultRetry, isConflictOrExists, func() error {
		cur := &corev1.Secret{}
		err := s.opts.APIReader.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: name}, cur)
		if apierrors.IsNotFound(err) {
			sec := &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: a.Namespace, Labels: map[string]string{
					"app.kubernetes.io/part-of": "agentplane", agentsv1.LabelAgent: a.Name,
					agentsv1.LabelChannelTokensOf: ChannelName(a.Name, t),
				}},
				Type: corev1.SecretTypeOpaque,
				Data: data,
			}
			if err := controllerutil.SetOwnerReference(a, sec, s.opts.Client.Scheme()); err != nil {
				return err
			}
			return s.opts.Client.Create(ctx, sec)
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
		return s.opts.Client.Update(ctx, cur)
	})
	if err != nil {
		return "", err
	}
	return name, nil
}

// applyChannel creates or updates the agent's Channel of type t from q, referencing the
// tokens in secretName ("" keeps the current references), with a new spec.applyRequestedAt:
// every request is a new generation for the controllers to act on.
func (s *Server) applyChannel(ctx context.Context, a *agentsv1.Agent, t agentsv1.ChannelType, q *channelRequest, secretName string) (*agentsv1.Channel, bool, error) {
	var out *agentsv1.Channel
	isNew := false
	err := retry.OnError(retry.DefaultRetry, isConflictOrExists, func() error {
		ch := &agentsv1.Channel{}
		err := s.opts.APIReader.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: ChannelName(a.Name, t)}, ch)
		isNew = apierrors.IsNotFound(err)
		if err != nil && !isNew {
			return err
		}
		if isNew {
			enabled := true
			ch = &agentsv1.Channel{
				ObjectMeta: metav1.ObjectMeta{
					Name: ChannelName(a.Name, t), Namespace: a.Namespace,
					Labels: map[string]string{"app.kubernetes.io/part-of": "agentplane", agentsv1.LabelAgent: a.Name},
				},
				Spec: agentsv1.ChannelSpec{
					AgentRef: agentsv1.LocalObjectReference{Name: a.Name}, Type: t,
					DMPolicy: agentsv1.DMPolicy("pairing"), Enabled: &enabled,
				},
			}
			if err := controllerutil.SetControllerReference(a, ch, s.opts.Client.Scheme()); err != nil {
				return err
			}
		} else if ch.DeletionTimestamp != nil {
			return errorf(http.StatusConflict, msgChannelRemoving)
		}
		q.applyTo(ch, secretName, s.opts.Now())
		if isNew {
			err = s.opts.Client.Create(ctx, ch)
		} else {
			err = s.opts.Client.Update(ctx, ch)
		}
		out = ch
		return err
	})
	return out, isNew, err
}

// applyTo writes the fields q gives into ch's spec.
func (q *channelRequest) applyTo(ch *agentsv1.Channel, secretName string, now time.Time) {
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

func isConflictOrExists(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
}

// channelView is a channel as the REST API shows it: token hints only, never tokens.
type channelView struct {
	Type          string   `json:"type"`
	Configured    bool     `json:"configured"`
	Enabled       bool     `json:"enabled"`
	DMPolicy      string   `json:"dmPolicy,omitempty"`
	AllowFrom     []string `json:"allowFrom"`
	BotTokenHint  string   `json:"botTokenHint,omitempty"`
	AppTokenHint  string   `json:"appTokenHint,omitempty"`
	StatusReason  string   `json:"statusReason,omitempty"`
	StatusMessage string   `json:"statusMessage,omitempty"`
}

// unconfiguredView is a channel type the agent has no Channel for.
func unconfiguredView(t agentsv1.ChannelType) channelView {
	return channelView{Type: string(t), AllowFrom: []string{}}
}

// viewChannel shows ch; hints are computed from the token Secrets as they are now.
func (s *Server) viewChannel(ctx context.Context, ch *agentsv1.Channel) (channelView, error) {
	v := channelView{
		Type: string(ch.Spec.Type), Configured: ch.Status.Configured && ch.DeletionTimestamp == nil,
		Enabled: ch.Spec.Enabled == nil || *ch.Spec.Enabled, DMPolicy: string(ch.Spec.DMPolicy),
		AllowFrom: append([]string{}, ch.Spec.AllowFrom...),
	}
	var err error
	if v.BotTokenHint, err = s.tokenHint(ctx, ch.Namespace, ch.Spec.BotTokenRef); err != nil {
		return v, err
	}
	if v.AppTokenHint, err = s.tokenHint(ctx, ch.Namespace, ch.Spec.AppTokenRef); err != nil {
		return v, err
	}
	if c := meta.FindStatusCondition(ch.Status.Conditions, agentsv1.ChannelConfigured); c != nil && c.Status != metav1.ConditionTrue {
		v.StatusReason, v.StatusMessage = c.Reason, c.Message
	}
	return v, nil
}

// tokenHint is auth.Hint of the referenced token ("" when there is none).
func (s *Server) tokenHint(ctx context.Context, namespace string, ref *agentsv1.SecretKeyReference) (string, error) {
	if ref == nil {
		return "", nil
	}
	sec := &corev1.Secret{}
	if err := s.opts.APIReader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, sec); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	if v := sec.Data[ref.Key]; len(v) > 0 {
		return auth.Hint(string(v)), nil
	}
	return "", nil
}

// channelAnswer answers ch with status.
func (s *Server) channelAnswer(ctx context.Context, ch *agentsv1.Channel, status int) (*Response, error) {
	v, err := s.viewChannel(ctx, ch)
	if err != nil {
		return nil, err
	}
	return &Response{Status: status, Body: map[string]any{"channel": v}}, nil
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
