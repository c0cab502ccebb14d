package apiserver

import (
	"context"
	"errors"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/admission"
	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/engine"
	"github.com/agentplane/agentplane/internal/runtime"
)

// Messages of the agent operations (fixed by the contract).
const (
	msgRestartFailed   = "Restart failed"
	msgCLIError        = "CLI error"
	msgTokenGenFailed  = "Token generation failed"
	msgScriptLaunch    = "Script launch failed"
	startupScriptsArgs = `set -u; ran=0; for f in startup.sh .agentplane/startup/*.sh; do [ -f "$f" ] || continue; ran=$((ran+1)); echo "== $f"; sh "$f" || exit $?; done; echo "ran $ran script(s)"`
)

// restartRequest is the body of POST /v0/agents/{agentId}/restart.
type restartRequest struct {
	Version       string `json:"version"`
	EngineVersion string `json:"engineVersion"`
}

func (s *Server) restartAgent(r *http.Request, c *Caller) (*Response, error) {
	var req restartRequest
	if r.ContentLength != 0 {
		if err := decodeJSON(r, &req, msgInvalidBody); err != nil {
			return nil, err
		}
	}
	version := req.Version
	if version == "" {
		version = req.EngineVersion
	}
	if version != "" {
		probe := &agentsv1.Agent{Spec: agentsv1.AgentSpec{Engine: agentsv1.EngineSpec{Version: version}}}
		if _, err := s.opts.Admission.Version(probe); errors.Is(err, admission.ErrInvalidVersion) {
			return nil, errorf(http.StatusBadRequest, msgInvalidVersion)
		}
	}
	var requested metav1.Time
	a, err := s.updateAgentSpec(r.Context(), c, r.PathValue("agentId"), func(cur *agentsv1.Agent) {
		requested = s.stampAfter(cur.Spec.RestartRequestedAt)
		cur.Spec.RestartRequestedAt = &requested
		cur.Spec.Stopped = false
		if version != "" {
			cur.Spec.Engine.Version = version
		}
	})
	if err != nil {
		return nil, withMessage(msgRestartFailed, err)
	}
	if r.URL.Query().Get("wait") == "false" {
		return &Response{Status: http.StatusAccepted, Body: map[string]any{"agent": viewAgent(a)}}, nil
	}
	return s.waitForGateway(r.Context(), a, http.StatusOK, msgRestartFailed, func(got *agentsv1.Agent) bool {
		return got.Status.LastRestartAt != nil && !got.Status.LastRestartAt.Before(&requested)
	})
}

func (s *Server) agentVersions(r *http.Request, c *Caller) (*Response, error) {
	a, err := s.getAgent(r.Context(), c, r.PathValue("agentId"))
	if err != nil {
		return nil, err
	}
	offered := s.opts.Admission.Versions
	current, _ := offered.Resolve(a.Spec.Engine.Version)
	return ok(map[string]any{
		"current": current, "running": a.Status.EngineVersion,
		"default": offered.Default, "available": offered.Available,
	})
}

// gatewaySecret reads the agent's gateway-token Secret.
func (s *Server) gatewaySecret(ctx context.Context, a *agentsv1.Agent) (*corev1.Secret, error) {
	sec := &corev1.Secret{}
	if err := s.opts.APIReader.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: gatewaySecretName(a)}, sec); err != nil {
		return nil, err
	}
	return sec, nil
}

func (s *Server) getGatewayToken(r *http.Request, c *Caller) (*Response, error) {
	a, err := s.getAgent(r.Context(), c, r.PathValue("agentId"))
	if err != nil {
		return nil, err
	}
	sec, err := s.gatewaySecret(r.Context(), a)
	if err != nil {
		return nil, err
	}
	return ok(map[string]any{"agentId": a.Name, "token": string(sec.Data[agentsv1.GatewayTokenDataKey]), "endpoint": a.Status.Endpoint})
}

// rotateGatewayToken replaces the agent's gateway token. The previous value is refused as
// soon as this answers: the handler waits until its own cache has the new value.
func (s *Server) rotateGatewayToken(r *http.Request, c *Caller) (*Response, error) {
	a, err := s.getAgent(r.Context(), c, r.PathValue("agentId"))
	if err != nil {
		return nil, err
	}
	tok := auth.NewGatewayToken()
	var updated *corev1.Secret
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sec, err := s.gatewaySecret(r.Context(), a)
		if err != nil {
			return err
		}
		sec.Data[agentsv1.GatewayTokenDataKey] = []byte(tok)
		if err := s.opts.Client.Update(r.Context(), sec); err != nil {
			return err
		}
		updated = sec
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.waitForCache(r.Context(), updated)
	return ok(map[string]any{"agentId": a.Name, "token": tok})
}

// waitForCache waits (briefly) until the informer cache holds obj's token.
func (s *Server) waitForCache(ctx context.Context, obj *corev1.Secret) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	got := obj.DeepCopy()
	_ = s.ops.WaitFor(ctx, got, func() (bool, error) {
		return string(got.Data[agentsv1.GatewayTokenDataKey]) == string(obj.Data[agentsv1.GatewayTokenDataKey]), nil
	})
}

// retryScripts re-runs the agent's start-up scripts (startup.sh and .agentplane/startup/*.sh
// in the workspace), in order, stopping at the first failure.
func (s *Server) retryScripts(r *http.Request, c *Caller) (*Response, error) {
	a, err := s.getAgent(r.Context(), c, r.PathValue("agentId"))
	if err != nil {
		return nil, err
	}
	res, err := s.opts.Runtime.Exec(r.Context(), a, runtime.ExecRequest{Argv: []string{"sh", "-c", startupScriptsArgs}, Timeout: 5 * time.Minute})
	if err != nil {
		return nil, withMessage(msgScriptLaunch, err)
	}
	return ok(map[string]any{
		"exitCode": res.ExitCode, "stdout": string(res.Stdout), "stderr": string(res.Stderr),
		"timestamp": s.opts.Now().UTC().Format(time.RFC3339Nano),
	})
}

func (s *Server) listDevices(r *http.Request, c *Caller) (*Response, error) {
	a, err := s.getAgent(r.Context(), c, r.PathValue("agentId"))
	if err != nil {
		return nil, err
	}
	cmd := s.opts.Engine.DevicesListCommand()
	res, err := s.runEngine(r.Context(), a, cmd)
	if err != nil {
		return nil, withMessage(msgCLIError, err)
	}
	devices, err := s.opts.Engine.ParseDevices(res.Stdout, res.ExitCode)
	if err != nil {
		return nil, withCause(http.StatusInternalServerError, msgCLIError, err)
	}
	return ok(devices)
}

// runEngine runs an engine CLI command in the agent's home.
func (s *Server) runEngine(ctx context.Context, a *agentsv1.Agent, cmd engine.Command) (runtime.ExecResult, error) {
	if s.opts.Runtime == nil || s.opts.Engine == nil {
		return runtime.ExecResult{}, errors.New("no runtime configured")
	}
	return s.opts.Runtime.Exec(ctx, a, runtime.ExecRequest{Argv: cmd.Args, Engine: true, Env: cmd.Env, Timeout: cmd.Timeout})
}
