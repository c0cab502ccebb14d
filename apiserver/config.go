package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path"
	"slices"

	"github.com/titanous/json5"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/engine"
	"github.com/agentplane/agentplane/internal/runtime"
)

// Config messages (fixed by the contract).
const (
	msgInvalidJSON       = "Invalid JSON"
	msgInvalidConfig     = "Invalid config"
	msgValidationFailed  = "Validation command failed"
	msgReadConfigFailed  = "Failed to read config"
	msgWriteConfigFailed = "Failed to write config"
)

// getConfig answers the agent's engine config with its secrets redacted.
func (s *Server) getConfig(r *http.Request, c *Caller) (*Response, error) {
	a, err := s.getAgent(r.Context(), c, r.PathValue("agentId"))
	if err != nil {
		return nil, err
	}
	if s.opts.Runtime == nil {
		return nil, errorf(http.StatusInternalServerError, msgReadConfigFailed)
	}
	raw, err := s.opts.Runtime.ReadFile(r.Context(), a, s.opts.Engine.Layout().ConfigPath)
	if err != nil {
		return nil, withMessage(msgReadConfigFailed, err)
	}
	return s.configAnswer(http.StatusOK, raw, msgReadConfigFailed)
}

// configAnswer is {config} with raw's secrets redacted (failMsg names a failure, a 500).
func (s *Server) configAnswer(status int, raw []byte, failMsg string) (*Response, error) {
	red, err := s.opts.Engine.RedactConfig(raw)
	if err != nil {
		return nil, withCause(http.StatusInternalServerError, failMsg, err)
	}
	var cfg any
	if err := json5.Unmarshal(red, &cfg); err != nil {
		return nil, withCause(http.StatusInternalServerError, failMsg, err)
	}
	return &Response{Status: status, Body: map[string]any{"config": cfg}}, nil
}

type configRequest struct {
	Config json.RawMessage `json:"config"`
}

// decodeConfig reads {config: {...}}: the body and the config must be JSON, the config an
// object.
func decodeConfig(r *http.Request) ([]byte, error) {
	var req configRequest
	if err := decodeJSON(r, &req, msgInvalidJSON); err != nil {
		return nil, err
	}
	if len(req.Config) == 0 || req.Config[0] != '{' {
		return nil, errorf(http.StatusBadRequest, msgInvalidJSON)
	}
	return req.Config, nil
}

// candidateMark is the config path validateCandidate asks the engine's validate command for,
// to learn which environment variable carries it.
const candidateMark = "/agentplane/candidate-config"

// validateCandidate runs the engine's validator on config in a throwaway place: the runtime
// writes it into a private temporary directory where the command runs (never the agent's home)
// and removes it after, so a validation (a read scope) writes nothing of the agent's.
func (s *Server) validateCandidate(ctx context.Context, a *agentsv1.Agent, config []byte) (engine.ValidateResult, error) {
	cmd := s.opts.Engine.ValidateCommand(candidateMark)
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
	res, err := s.opts.Runtime.Exec(ctx, a, runtime.ExecRequest{
		Argv: cmd.Args, Engine: true, Env: env, Timeout: cmd.Timeout, Stdin: config,
		StdinFile: &runtime.StdinFile{Env: pathEnv, Name: path.Base(s.opts.Engine.Layout().ConfigPath)},
	})
	if err != nil {
		return engine.ValidateResult{}, err
	}
	return s.opts.Engine.ParseValidate(res.Stdout, res.ExitCode)
}

// validateConfig answers whether a candidate config is valid for the engine.
func (s *Server) validateConfig(r *http.Request, c *Caller) (*Response, error) {
	cfg, err := decodeConfig(r)
	if err != nil {
		return nil, err
	}
	a, err := s.getAgent(r.Context(), c, r.PathValue("agentId"))
	if err != nil {
		return nil, err
	}
	if s.opts.Runtime == nil {
		return nil, errorf(http.StatusInternalServerError, msgValidationFailed)
	}
	res, err := s.validateCandidate(r.Context(), a, cfg)
	if err != nil {
		return nil, withMessage(msgValidationFailed, err)
	}
	return ok(map[string]any{"valid": res.Valid, "output": res.Output})
}

// putConfig validates a config and stores it as the agent's (the Secret `<agent>-config`
// that spec.configRef names); the Agent controller renders the engine's file from it and the
// agent's channels, and the gateway hot-reloads it. Redacted values keep their current
// secrets; the gateway token and the channels stay the platform's (what a config read back
// holds of them is left out). The handler waits for the render: 200 with the config as
// rendered, 202 when the agent cannot be reached or the wait ends first.
func (s *Server) putConfig(r *http.Request, c *Caller) (*Response, error) {
	cfg, err := decodeConfig(r)
	if err != nil {
		return nil, err
	}
	ctx := r.Context()
	a, err := s.getAgent(ctx, c, r.PathValue("agentId"))
	if err != nil {
		return nil, err
	}
	if s.opts.Runtime == nil {
		return nil, errorf(http.StatusInternalServerError, msgWriteConfigFailed)
	}
	current, err := s.opts.Runtime.ReadFile(ctx, a, s.opts.Engine.Layout().ConfigPath)
	if err != nil {
		return nil, withMessage(msgWriteConfigFailed, err)
	}
	managed, err := s.managedChannelTypes(ctx, a)
	if err != nil {
		return nil, err
	}
	user, err := s.opts.Engine.RestoreRedacted(cfg, current)
	if err == nil {
		user, err = s.opts.Engine.UserConfig(user, managed)
	}
	var candidate []byte
	if err == nil {
		candidate, err = s.opts.Engine.RenderConfig(engine.Render{Base: user, Live: current})
	}
	if err != nil {
		if errors.Is(err, engine.ErrInvalidConfig) {
			return nil, withCause(http.StatusBadRequest, msgInvalidConfig, err)
		}
		return nil, withCause(http.StatusInternalServerError, msgWriteConfigFailed, err)
	}
	res, err := s.validateCandidate(ctx, a, candidate)
	if err != nil {
		return nil, withMessage(msgValidationFailed, err)
	}
	if !res.Valid {
		return nil, &Error{Status: http.StatusBadRequest, Message: msgInvalidConfig, Fields: map[string]any{"issues": res.Issues}}
	}
	if err := s.storeConfig(ctx, a, user); err != nil {
		return nil, withMessage(msgWriteConfigFailed, err)
	}
	sourceHash := agentsv1.ConfigSourceHash(user)
	got, err := s.awaitRender(ctx, a, sourceHash)
	if err != nil {
		return nil, err
	}
	applied := meta.FindStatusCondition(got.Status.Conditions, agentsv1.AgentConfigApplied)
	switch {
	case got.Status.Config == nil || got.Status.Config.SourceHash != sourceHash || applied == nil ||
		applied.Reason == agentsv1.ReasonWaitingForAgent:
		return s.configAnswer(http.StatusAccepted, candidate, msgWriteConfigFailed)
	case applied.Status != metav1.ConditionTrue:
		return nil, withCause(http.StatusInternalServerError, msgWriteConfigFailed, errors.New(applied.Reason+": "+applied.Message))
	}
	return s.getConfig(r, c)
}

// managedChannelTypes are the channel types the platform renders into the agent's config:
// those of its Channels and those its last render wrote.
func (s *Server) managedChannelTypes(ctx context.Context, a *agentsv1.Agent) ([]string, error) {
	var out []string
	if a.Status.Config != nil {
		for _, rc := range a.Status.Config.Channels {
			out = append(out, string(rc.Type))
		}
	}
	var list agentsv1.ChannelList
	if err := s.opts.APIReader.List(ctx, &list, client.InNamespace(a.Namespace), client.MatchingFields{agentsv1.IndexAgentRef: a.Name}); err != nil {
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
func (s *Server) storeConfig(ctx context.Context, a *agentsv1.Agent, user []byte) error {
	name := agentsv1.ConfigSecretName(a.Name)
	err := retry.OnError(retry.DefaultRetry, isConflictOrExists, func() error {
		sec := &corev1.Secret{}
		err := s.opts.APIReader.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: name}, sec)
		if apierrors.IsNotFound(err) {
			sec = &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: a.Namespace, Labels: map[string]string{
					agentsv1.LabelAppPartOf: "agentplane", agentsv1.LabelAgent: a.Name, agentsv1.LabelConfigOf: a.Name,
				}},
				Type: corev1.SecretTypeOpaque,
				Data: map[string][]byte{agentsv1.ConfigDataKey: user},
			}
			if err := controllerutil.SetControllerReference(a, sec, s.opts.Client.Scheme()); err != nil {
				return err
			}
			return s.opts.Client.Create(ctx, sec)
		}
		if err != nil {
			return err
		}
		sec.Data = map[string][]byte{agentsv1.ConfigDataKey: user}
		return s.opts.Client.Update(ctx, sec)
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
	return s.opts.Client.Patch(ctx, a, client.RawPatch(types.MergePatchType, patch))
}

// awaitRender waits until the Agent controller rendered (or could not render) the config
// with hash sourceHash on a's generation (the one that names it), or the wait ends; it
// returns the agent as last seen.
func (s *Server) awaitRender(ctx context.Context, a *agentsv1.Agent, sourceHash string) (*agentsv1.Agent, error) {
	wctx, cancel := context.WithTimeout(ctx, s.provisionWait())
	defer cancel()
	got := a.DeepCopy()
	err := s.ops.WaitFor(wctx, got, func() (bool, error) {
		applied := meta.FindStatusCondition(got.Status.Conditions, agentsv1.AgentConfigApplied)
		return got.Status.Config != nil && got.Status.Config.SourceHash == sourceHash &&
			applied != nil && applied.ObservedGeneration >= a.Generation, nil
	})
	if err != nil && (ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded)) {
		return nil, err
	}
	return got, nil
}
