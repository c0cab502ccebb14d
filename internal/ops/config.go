package ops

import (
	"context"
	"encoding/json"
	"errors"
	"path"

	"github.com/titanous/json5"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// Config messages (fixed by the contract).
const (
	MsgInvalidJSON       = "Invalid JSON"
	MsgInvalidConfig     = "Invalid config"
	MsgValidationFailed  = "Validation command failed"
	MsgReadConfigFailed  = "Failed to read config"
	MsgWriteConfigFailed = "Failed to write config"
)

// Config answers the agent's engine config with its secrets redacted.
func (o *Ops) Config(ctx context.Context, t Scope, id string) (any, error) {
	a, err := o.Agent(ctx, t, id)
	if err != nil {
		return nil, err
	}
	if o.d.Runtime == nil {
		return nil, Fail(Internal, MsgReadConfigFailed)
	}
	raw, err := o.d.Runtime.ReadFile(ctx, a, o.d.Engine.Layout().ConfigPath)
	if err != nil {
		return nil, WithMessage(MsgReadConfigFailed, err)
	}
	return o.redactedConfig(raw, MsgReadConfigFailed)
}

// redactedConfig is raw with its secrets redacted, parsed (failMsg names a failure).
func (o *Ops) redactedConfig(raw []byte, failMsg string) (any, error) {
	red, err := o.d.Engine.RedactConfig(raw)
	if err != nil {
		return nil, Because(Internal, failMsg, err)
	}
	var cfg any
	if err := json5.Unmarshal(red, &cfg); err != nil {
		return nil, Because(Internal, failMsg, err)
	}
	return cfg, nil
}

// checkConfigObject: a candidate config is a JSON object.
func checkConfigObject(config json.RawMessage) error {
	if len(config) == 0 || config[0] != '{' {
		return Fail(Invalid, MsgInvalidJSON)
	}
	return nil
}

// candidateMark is the config path validateCandidate asks the engine's validate command for,
// to learn which environment variable carries it.
const candidateMark = "/agentplane/candidate-config"

// validateCandidate runs the engine's validator on config in a throwaway place: the runtime
// writes it into a private temporary directory where the command runs (never the agent's home)
// and removes it after, so a validation (a read scope) writes nothing of the agent's.
func (o *Ops) validateCandidate(ctx context.Context, a *agentsv1.Agent, config []byte) (engine.ValidateResult, error) {
	cmd := o.d.Engine.ValidateCommand(candidateMark)
	var pathEnv string
	env := map[string]string{}
	for k, v := range cmd.Env {
		if v == candidateMark {
			pathEnv = k
			continue
		}
		env[k] = v
	}
	if pathEnv == "" {
		return engine.ValidateResult{}, errors.New("the engine's validate command takes no config path from the environment")
	}
	res, err := o.d.Runtime.Exec(ctx, a, runtime.ExecRequest{
		Argv: cmd.Args, Engine: true, Env: env, Timeout: cmd.Timeout, Stdin: config,
		StdinFile: &runtime.StdinFile{Env: pathEnv, Name: path.Base(o.d.Engine.Layout().ConfigPath)},
	})
	if err != nil {
		return engine.ValidateResult{}, err
	}
	return o.d.Engine.ParseValidate(res.Stdout, res.ExitCode)
}

// ValidateConfig answers whether a candidate config (a JSON object) is valid for the engine.
func (o *Ops) ValidateConfig(ctx context.Context, t Scope, id string, config json.RawMessage) (engine.ValidateResult, error) {
	if err := checkConfigObject(config); err != nil {
		return engine.ValidateResult{}, err
	}
	a, err := o.Agent(ctx, t, id)
	if err != nil {
		return engine.ValidateResult{}, err
	}
	if o.d.Runtime == nil {
		return engine.ValidateResult{}, Fail(Internal, MsgValidationFailed)
	}
	res, err := o.validateCandidate(ctx, a, config)
	if err != nil {
		return engine.ValidateResult{}, WithMessage(MsgValidationFailed, err)
	}
	return res, nil
}

// PutConfig validates a config (a JSON object) and stores it as the agent's (the Secret
// `<agent>-config` that spec.configRef names); the Agent controller renders the engine's
// file from it and the agent's channels, and the gateway hot-reloads it. Redacted values keep
// their current secrets; the gateway token and the channels stay the platform's (what a
// config read back holds of them is left out). It waits for the render and returns the
// config as rendered and true, or, when the agent cannot be reached or the wait ends first,
// the candidate (redacted) and false. An invalid config is `Invalid config` with
// Fields["issues"].
func (o *Ops) PutConfig(ctx context.Context, t Scope, id string, config json.RawMessage) (any, bool, error) {
	if err := checkConfigObject(config); err != nil {
		return nil, false, err
	}
	a, err := o.Agent(ctx, t, id)
	if err != nil {
		return nil, false, err
	}
	if o.d.Runtime == nil {
		return nil, false, Fail(Internal, MsgWriteConfigFailed)
	}
	user, candidate, err := o.candidateConfig(ctx, a, config)
	if err != nil {
		return nil, false, err
	}
	if err := o.storeConfig(ctx, a, user); err != nil {
		return nil, false, WithMessage(MsgWriteConfigFailed, err)
	}
	sourceHash := agentsv1.ConfigSourceHash(user)
	got, err := o.awaitRender(ctx, a, sourceHash)
	if err != nil {
		return nil, false, err
	}
	applied := meta.FindStatusCondition(got.Status.Conditions, agentsv1.AgentConfigApplied)
	switch {
	case got.Status.Config == nil || got.Status.Config.SourceHash != sourceHash || applied == nil ||
		applied.Reason == agentsv1.ReasonWaitingForAgent:
		cfg, err := o.redactedConfig(candidate, MsgWriteConfigFailed)
		return cfg, false, err
	case applied.Status != metav1.ConditionTrue:
		return nil, false, Because(Internal, MsgWriteConfigFailed, errors.New(applied.Reason+": "+applied.Message))
	}
	cfg, err := o.Config(ctx, t, id)
	return cfg, err == nil, err
}

// candidateConfig turns the config a client sent into the user's part to store and the
// engine's file it renders to, validated.
func (o *Ops) candidateConfig(ctx context.Context, a *agentsv1.Agent, config []byte) (user, candidate []byte, err error) {
	current, err := o.d.Runtime.ReadFile(ctx, a, o.d.Engine.Layout().ConfigPath)
	if err != nil {
		return nil, nil, WithMessage(MsgWriteConfigFailed, err)
	}
	managed, err := o.managedChannelTypes(ctx, a)
	if err != nil {
		return nil, nil, err
	}
	user, err = o.d.Engine.RestoreRedacted(config, current)
	if err == nil {
		user, err = o.d.Engine.UserConfig(user, managed)
	}
	if err == nil {
		candidate, err = o.d.Engine.RenderConfig(engine.Render{Base: user, Live: current})
	}
	if err != nil {
		if errors.Is(err, engine.ErrInvalidConfig) {
			return nil, nil, Because(Invalid, MsgInvalidConfig, err)
		}
		return nil, nil, Because(Internal, MsgWriteConfigFailed, err)
	}
	res, err := o.validateCandidate(ctx, a, candidate)
	if err != nil {
		return nil, nil, WithMessage(MsgValidationFailed, err)
	}
	if !res.Valid {
		return nil, nil, &Error{Code: Invalid, Message: MsgInvalidConfig, Fields: map[string]any{"issues": res.Issues}}
	}
	return user, candidate, nil
}
