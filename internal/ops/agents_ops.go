package ops

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/rules/admission"
	"github.com/agentplane/agentplane/internal/rules/auth"
)

// Messages of the agent operations (fixed by the contract).
const (
	MsgRestartFailed   = "Restart failed"
	MsgCLIError        = "CLI error"
	MsgTokenGenFailed  = "Token generation failed"
	MsgScriptLaunch    = "Script launch failed"
	startupScriptsArgs = `set -u; ran=0; for f in startup.sh .agentplane/startup/*.sh; do [ -f "$f" ] || continue; ran=$((ran+1)); echo "== $f"; sh "$f" || exit $?; done; echo "ran $ran script(s)"`
	// startupScriptsTimeout bounds RetryScripts.
	startupScriptsTimeout = 5 * time.Minute
	// tokenCacheWait bounds how long RotateGatewayToken waits for the cache to hold the new
	// token.
	tokenCacheWait = 5 * time.Second
)

// RestartAgent restarts the workspace's agent (spec.restartRequestedAt), on version when it is
// set (an invalid one is `Invalid version`), and, with wait, waits like CreateAgent for the
// gateway of this restart. It returns the agent and whether the gateway answers.
func (o *Ops) RestartAgent(ctx context.Context, t Scope, id, version string, wait bool) (*agentsv1.Agent, bool, error) {
	if version != "" {
		probe := &agentsv1.Agent{Spec: agentsv1.AgentSpec{Engine: agentsv1.EngineSpec{Version: version}}}
		if _, err := o.d.Admission.Version(probe); errors.Is(err, admission.ErrInvalidVersion) {
			return nil, false, Fail(Invalid, MsgInvalidVersion)
		}
	}
	var requested metav1.Time
	a, err := o.updateAgentSpec(ctx, t, id, func(cur *agentsv1.Agent) {
		requested = o.StampAfter(cur.Spec.RestartRequestedAt)
		cur.Spec.RestartRequestedAt = &requested
		cur.Spec.Stopped = false
		if version != "" {
			cur.Spec.Engine.Version = version
		}
	})
	if err != nil {
		return nil, false, WithMessage(MsgRestartFailed, err)
	}
	if !wait {
		return a, false, nil
	}
	return o.waitForGateway(ctx, a, MsgRestartFailed, func(got *agentsv1.Agent) bool {
		return got.Status.LastRestartAt != nil && !got.Status.LastRestartAt.Before(&requested)
	})
}

// EngineVersions are the engine versions of an agent: the one it asks for (resolved), the
// one it runs, and those offered.
type EngineVersions struct {
	Current   string
	Running   string
	Default   string
	Available []string
}

// AgentVersions answers the workspace's agent's engine versions.
func (o *Ops) AgentVersions(ctx context.Context, t Scope, id string) (*EngineVersions, error) {
	a, err := o.Agent(ctx, t, id)
	if err != nil {
		return nil, err
	}
	offered := o.d.Admission.Versions
	current, _ := offered.Resolve(a.Spec.Engine.Version)
	return &EngineVersions{Current: current, Running: a.Status.EngineVersion, Default: offered.Default, Available: offered.Available}, nil
}

// GatewaySecretName is the core Secret that holds a's gateway token.
func GatewaySecretName(a *agentsv1.Agent) string {
	if a.Status.GatewayTokenSecret != "" {
		return a.Status.GatewayTokenSecret
	}
	return agentsv1.GatewayTokenSecretName(a.Name)
}

// GatewaySecret reads the agent's gateway-token Secret (live).
func (o *Ops) GatewaySecret(ctx context.Context, a *agentsv1.Agent) (*corev1.Secret, error) {
	sec := &corev1.Secret{}
	if err := o.d.APIReader.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: GatewaySecretName(a)}, sec); err != nil {
		return nil, err
	}
	return sec, nil
}

// GatewayToken answers the workspace's agent and its gateway token.
func (o *Ops) GatewayToken(ctx context.Context, t Scope, id string) (*agentsv1.Agent, string, error) {
	a, err := o.Agent(ctx, t, id)
	if err != nil {
		return nil, "", err
	}
	sec, err := o.GatewaySecret(ctx, a)
	if err != nil {
		return nil, "", err
	}
	return a, string(sec.Data[agentsv1.GatewayTokenDataKey]), nil
}

// MintPlatformToken mints, with s, a short-lived JWT the workspace's agent id uses to call the
// platform on its own behalf. It is stateless (no object per mint): it names the agent and its
// UID, is bound to the agent's current gateway token and expires after auth.PlatformTokenTTL.
// It dies with the agent and with the rotation of the gateway token, and opens the agent's own
// routes with auth.PlatformTokenScopes (read) only. It reads the agent and then its gateway
// token's Secret: the Secret's name is in the agent's status, and the agent's UID and
// deletion are what the token is bound to.
func (o *Ops) MintPlatformToken(ctx context.Context, t Scope, id string, s *auth.Signer) (string, time.Time, error) {
	a, err := o.Agent(ctx, t, id)
	if err != nil {
		return "", time.Time{}, err
	}
	sec, err := o.GatewaySecret(ctx, a)
	if err != nil {
		return "", time.Time{}, WithMessage(MsgTokenGenFailed, err)
	}
	gw := string(sec.Data[agentsv1.GatewayTokenDataKey])
	if gw == "" {
		return "", time.Time{}, Fail(Internal, MsgTokenGenFailed)
	}
	tok, exp, err := s.MintPlatform(auth.PlatformToken{
		Workspace: a.Namespace, Agent: a.Name, AgentUID: string(a.UID), GatewayToken: gw,
	})
	if err != nil {
		return "", time.Time{}, WithMessage(MsgTokenGenFailed, err)
	}
	return tok, exp, nil
}

// RotateGatewayToken replaces the agent's gateway token and returns the new one. The previous
// value is refused as soon as this returns: it waits until the cache has the new value.
func (o *Ops) RotateGatewayToken(ctx context.Context, t Scope, id string) (*agentsv1.Agent, string, error) {
	a, err := o.Agent(ctx, t, id)
	if err != nil {
		return nil, "", err
	}
	tok := auth.NewGatewayToken()
	var updated *corev1.Secret
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sec, err := o.GatewaySecret(ctx, a)
		if err != nil {
			return err
		}
		sec.Data[agentsv1.GatewayTokenDataKey] = []byte(tok)
		if err := o.d.Client.Update(ctx, sec); err != nil {
			return err
		}
		updated = sec
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	o.waitForToken(ctx, updated)
	return a, tok, nil
}

// waitForToken waits (briefly) until the informer cache holds obj's token.
func (o *Ops) waitForToken(ctx context.Context, obj *corev1.Secret) {
	ctx, cancel := context.WithTimeout(ctx, tokenCacheWait)
	defer cancel()
	got := obj.DeepCopy()
	_ = o.WaitFor(ctx, got, func() (bool, error) {
		return string(got.Data[agentsv1.GatewayTokenDataKey]) == string(obj.Data[agentsv1.GatewayTokenDataKey]), nil
	})
}

// ScriptsRun is the outcome of RetryScripts.
type ScriptsRun struct {
	runtime.ExecResult
	// At is when they ended.
	At time.Time
}

// RetryScripts re-runs the agent's start-up scripts (startup.sh and .agentplane/startup/*.sh
// in the workspace), in order, stopping at the first failure.
func (o *Ops) RetryScripts(ctx context.Context, t Scope, id string) (*ScriptsRun, error) {
	a, err := o.Agent(ctx, t, id)
	if err != nil {
		return nil, err
	}
	res, err := o.d.Runtime.Exec(ctx, a, runtime.ExecRequest{Argv: []string{"sh", "-c", startupScriptsArgs}, Timeout: startupScriptsTimeout})
	if err != nil {
		return nil, WithMessage(MsgScriptLaunch, err)
	}
	return &ScriptsRun{ExecResult: res, At: o.d.Now().UTC()}, nil
}

// Devices lists the devices paired with the agent's gateway (the engine's CLI).
func (o *Ops) Devices(ctx context.Context, t Scope, id string) (engine.Devices, error) {
	a, err := o.Agent(ctx, t, id)
	if err != nil {
		return engine.Devices{}, err
	}
	res, err := o.RunEngine(ctx, a, o.d.Engine.DevicesListCommand())
	if err != nil {
		return engine.Devices{}, WithMessage(MsgCLIError, err)
	}
	devices, err := o.d.Engine.ParseDevices(res.Stdout, res.ExitCode)
	if err != nil {
		return engine.Devices{}, Because(Internal, MsgCLIError, err)
	}
	return devices, nil
}

// errNoRuntime: the facade was built without a runtime or engine.
var errNoRuntime = errors.New("no runtime configured")

// RunEngine runs an engine CLI command in the agent's home.
func (o *Ops) RunEngine(ctx context.Context, a *agentsv1.Agent, cmd engine.Command) (runtime.ExecResult, error) {
	if o.d.Runtime == nil || o.d.Engine == nil {
		return runtime.ExecResult{}, errNoRuntime
	}
	return o.d.Runtime.Exec(ctx, a, runtime.ExecRequest{Argv: cmd.Args, Engine: true, Env: cmd.Env, Timeout: cmd.Timeout})
}
