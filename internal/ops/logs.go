package ops

import (
	"context"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/logredact"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/rules/secrets"
)

// Gateway logs (an addition beyond the contract).
const (
	MsgInvalidTail    = "Invalid tail"
	MsgReadLogsFailed = "Failed to read logs"

	// DefaultLogTail and DefaultFollowLogTail are the lines read, or sent before following,
	// when the caller names no tail; MaxLogTail bounds a tail.
	DefaultLogTail       = 200
	DefaultFollowLogTail = 50
	MaxLogTail           = 5000
)

// logTail is the tail asked for (nil: def), checked.
func logTail(tail *int, def int) (int, error) {
	if tail == nil {
		return def, nil
	}
	if *tail < 1 || *tail > MaxLogTail {
		return 0, Fail(Invalid, MsgInvalidTail)
	}
	return *tail, nil
}

// AgentLogs answers the last lines (tail, nil: DefaultLogTail) of the agent's gateway
// output, redacted. Reading logs never wakes a suspended agent: the runtime answers with
// what it still keeps.
func (o *Ops) AgentLogs(ctx context.Context, t Scope, id string, tail *int) ([]string, error) {
	a, n, red, err := o.openLogs(ctx, t, id, tail, DefaultLogTail)
	if err != nil {
		return nil, err
	}
	lines, err := o.d.Runtime.Logs(ctx, a, runtime.LogRequest{Tail: n})
	if err != nil {
		return nil, WithMessage(MsgReadLogsFailed, err)
	}
	return red.RedactLines(lines), nil
}

// FollowLogs checks a request to follow the agent's gateway output (tail, nil:
// DefaultFollowLogTail) and prepares its redactor; Start follows it.
func (o *Ops) FollowLogs(ctx context.Context, t Scope, id string, tail *int) (*LogFollow, error) {
	a, n, red, err := o.openLogs(ctx, t, id, tail, DefaultFollowLogTail)
	if err != nil {
		return nil, err
	}
	live := &LiveRedactor{o: o, a: a, red: red}
	live.key, _ = o.redactorKey(ctx, a)
	return &LogFollow{Agent: a, tail: n, live: live, o: o}, nil
}

// openLogs checks a request for the agent's output and builds its redactor. A redactor that
// cannot be built fails the request rather than risk printing a secret.
func (o *Ops) openLogs(ctx context.Context, t Scope, id string, tail *int, def int) (*agentsv1.Agent, int, *logredact.Redactor, error) {
	n, err := logTail(tail, def)
	if err != nil {
		return nil, 0, nil, err
	}
	a, err := o.Agent(ctx, t, id)
	if err != nil {
		return nil, 0, nil, err
	}
	if o.d.Runtime == nil {
		return nil, 0, nil, Fail(Internal, MsgReadLogsFailed)
	}
	red, err := o.LogRedactor(ctx, a)
	if err != nil {
		return nil, 0, nil, WithMessage(MsgReadLogsFailed, err)
	}
	return a, n, red, nil
}

// AgentGone reports whether the agent was deleted (or is being deleted) since it was read.
func (o *Ops) AgentGone(ctx context.Context, a *agentsv1.Agent) bool {
	cur := &agentsv1.Agent{}
	err := o.d.APIReader.Get(ctx, client.ObjectKeyFromObject(a), cur)
	switch {
	case apierrors.IsNotFound(err):
		return true
	case err != nil:
		return false
	}
	return cur.UID != a.UID || cur.DeletionTimestamp != nil
}

// LogRedactor hides, besides what looks like a credential, the agent's gateway token and the
// values of its attached secrets, of its environment Secret and of its channels' tokens: the
// values the gateway was given. A value that cannot be read fails it rather than risk
// printing it.
func (o *Ops) LogRedactor(ctx context.Context, a *agentsv1.Agent) (*logredact.Redactor, error) {
	var vals []string
	sec, err := o.GatewaySecret(ctx, a)
	switch {
	case err == nil:
		vals = append(vals, string(sec.Data[agentsv1.GatewayTokenDataKey]))
	case !apierrors.IsNotFound(err):
		return nil, err
	}
	for _, ref := range a.Spec.Secrets {
		as := &agentsv1.AgentSecret{}
		if err := o.d.APIReader.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: ref.Name}, as); err != nil {
			if apierrors.IsNotFound(err) {
				continue // detached or deleted since: not given to a new gateway
			}
			return nil, err
		}
		v, err := secrets.Value(ctx, o.d.APIReader, o.d.Sealer, as)
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
		vals = append(vals, string(v))
	}
	// The derived environment (kube) and the channels' token Secrets set up for the agent.
	names := []string{agentsv1.EnvSecretName(a.Name)}
	for _, t := range agentsv1.ChannelTypes {
		names = append(names, ChannelSecretName(a.Name, t))
	}
	for _, name := range names {
		sec := &corev1.Secret{}
		switch err := o.d.APIReader.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: name}, sec); {
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

// LiveRedactor is a follower's Redactor, rebuilt when what it hides changed: each Current
// compares a key read from the manager's cache (redactorKey) with the one it was built from,
// so a steady stream costs no request to the API server. (Not less often than each batch of
// lines: the lines that follow an attach come within milliseconds, once the gateway
// restarted with the secret, which the controller does only after the cache held the
// attach.) It is not safe for concurrent use.
type LiveRedactor struct {
	o   *Ops
	a   *agentsv1.Agent
	red *logredact.Redactor
	key string
}

// Last is the Redactor as last built, without a refresh.
func (l *LiveRedactor) Last() *logredact.Redactor { return l.red }

// Current is the Redactor of the agent's secrets now.
func (l *LiveRedactor) Current(ctx context.Context) *logredact.Redactor {
	key, err := l.o.redactorKey(ctx, l.a)
	if err != nil || key == l.key {
		return l.red
	}
	cur := &agentsv1.Agent{}
	err = l.o.d.APIReader.Get(ctx, client.ObjectKeyFromObject(l.a), cur)
	var red *logredact.Redactor
	if err == nil {
		red, err = l.o.LogRedactor(ctx, cur) // its secrets now, not when the stream began
	}
	if err != nil {
		logr.FromContextOrDiscard(ctx).V(1).Info("refreshing the log redactor failed; keeping the last one", "agent", l.a.Name, "error", err.Error())
		return l.red
	}
	l.red, l.key = red, key
	return red
}

// redactorKey names, from the manager's cache, the versions of what LogRedactor reads: the
// agent's attached AgentSecrets and the Secrets that hold its gateway token, its environment
// and its channels' tokens.
func (o *Ops) redactorKey(ctx context.Context, a *agentsv1.Agent) (string, error) {
	cur := &agentsv1.Agent{}
	if err := o.d.Client.Get(ctx, client.ObjectKeyFromObject(a), cur); err != nil {
		return "", err
	}
	var b strings.Builder
	version := func(obj client.Object, name string) error {
		err := o.d.Client.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: name}, obj)
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
		gw = agentsv1.GatewayTokenSecretName(a.Name)
	}
	names := []string{gw, agentsv1.EnvSecretName(a.Name)}
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
