package apiserver

import (
	"context"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/logredact"
	"github.com/agentplane/agentplane/internal/secrets"
)

// logRedactor hides, besides what looks like a credential, the agent's gateway token and the
// values of its attached secrets, of its environment Secret and of its channels' tokens: the
// values the gateway was given. A value that cannot be read fails the request rather than risk
// printing it.
func (s *Server) logRedactor(ctx context.Context, a *agentsv1.Agent) (*logredact.Redactor, error) {
	var vals []string
	sec, err := s.gatewaySecret(ctx, a)
	switch {
	case err == nil:
		vals = append(vals, string(sec.Data[agentsv1.GatewayTokenDataKey]))
	case !apierrors.IsNotFound(err):
		return nil, err
	}
	for _, ref := range a.Spec.Secrets {
		as := &agentsv1.AgentSecret{}
		if err := s.opts.APIReader.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: ref.Name}, as); err != nil {
			if apierrors.IsNotFound(err) {
				continue // detached or deleted since: not given to a new gateway
			}
			return nil, err
		}
		v, err := secrets.Value(ctx, s.opts.APIReader, s.opts.Sealer, as)
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
		vals = append(vals, string(v))
	}
	// The derived environment (kube) and the channels' token Secrets set up for the agent.
	names := []string{a.Name + "-env"}
	for _, t := range agentsv1.ChannelTypes {
		names = append(names, ChannelSecretName(a.Name, t))
	}
	for _, name := range names {
		sec := &corev1.Secret{}
		switch err := s.opts.APIReader.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: name}, sec); {
		case err == nil:
			for _, v := range sec.Data {
				vals = append(vals, string(v))
			}
		case !apierrors.IsNotFound(err):
			return nil, err
		}
	}
	return logredact.New(vals), nil
}

// liveRedactor is a follower's Redactor, rebuilt when what it hides changed: before each batch
// of lines it compares a key read from the manager's cache (redactorKey) with the one it was
// built from, so a steady stream costs no request to the API server. (Not less often: the lines
// that follow an attach come within milliseconds, once the gateway restarted with the secret,
// which the controller does only after the cache held the attach.)
type liveRedactor struct {
	s   *Server
	a   *agentsv1.Agent
	red *logredact.Redactor
	key string
}

func (l *liveRedactor) current(ctx context.Context) *logredact.Redactor {
	key, err := l.s.redactorKey(ctx, l.a)
	if err != nil || key == l.key {
		return l.red
	}
	cur := &agentsv1.Agent{}
	err = l.s.opts.APIReader.Get(ctx, client.ObjectKeyFromObject(l.a), cur)
	var red *logredact.Redactor
	if err == nil {
		red, err = l.s.logRedactor(ctx, cur) // its secrets now, not when the stream began
	}
	if err != nil {
		logr.FromContextOrDiscard(ctx).V(1).Info("refreshing the log redactor failed; keeping the last one", "agent", l.a.Name, "error", err.Error())
		return l.red
	}
	l.red, l.key = red, key
	return red
}

// redactorKey names, from the manager's cache, the versions of what logRedactor reads: the
// agent's attached AgentSecrets and the Secrets that hold its gateway token, its environment
// and its channels' tokens.
func (s *Server) redactorKey(ctx context.Context, a *agentsv1.Agent) (string, error) {
	cur := &agentsv1.Agent{}
	if err := s.opts.Client.Get(ctx, client.ObjectKeyFromObject(a), cur); err != nil {
		return "", err
	}
	var b strings.Builder
	version := func(obj client.Object, name string) error {
		err := s.opts.Client.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: name}, obj)
		switch {
		case err == nil:
			b.WriteString(name + "@" + obj.GetResourceVersion() + ";")
		case apierrors.IsNotFound(err):
			b.WriteString(name + "@-;")
		default:
			return err
		}
		return nil
	}
	for _, ref := range cur.Spec.Secrets {
		if err := version(&agentsv1.AgentSecret{}, ref.Name); err != nil {
			return "", err
		}
	}
	gw := cur.Status.GatewayTokenSecret
	if gw == "" {
		gw = a.Name + "-gateway-token"
	}
	names := []string{gw, a.Name + "-env"}
	for _, t := range agentsv1.ChannelTypes {
		names = append(names, ChannelSecretName(a.Name, t))
	}
	for _, n := range names {
		if err := version(&corev1.Secret{}, n); err != nil {
			return "", err
		}
	}
	return b.String(), nil
}

// redactedLines is a follower's way out: lines go through a logredact.Follower (a value split
// across two lines is hidden) whose Redactor follows the secrets attached meanwhile; the lines
// it holds back go out at most logHold after they came (hold fires).
type redactedLines struct {
	live *liveRedactor
	fol  *logredact.Follower
	hold *time.Timer
	held bool // hold is armed
}

func (s *Server) newRedactedLines(ctx context.Context, a *agentsv1.Agent, red *logredact.Redactor) *redactedLines {
	live := &liveRedactor{s: s, a: a, red: red}
	live.key, _ = s.redactorKey(ctx, a)
	hold := time.NewTimer(time.Hour)
	hold.Stop()
	return &redactedLines{live: live, fol: logredact.NewFollower(red), hold: hold}
}

// write takes the next lines and returns, redacted, those that may go out (all with flush).
func (l *redactedLines) write(ctx context.Context, lines []string, flush bool) []string {
	l.fol.SetRedactor(l.live.current(ctx))
	out := l.fol.Write(lines...)
	if flush {
		out = append(out, l.fol.Flush()...)
	}
	switch {
	case l.fol.Pending() == 0 && l.held:
		l.hold.Stop()
		l.held = false
	case l.fol.Pending() > 0 && !l.held:
		l.hold.Reset(logHold)
		l.held = true
	}
	return out
}
