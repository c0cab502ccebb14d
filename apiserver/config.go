package apiserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"path"
	"path/filepath"
	"time"

	"github.com/titanous/json5"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	red, err := s.opts.Engine.RedactConfig(raw)
	if err != nil {
		return nil, withCause(http.StatusInternalServerError, msgReadConfigFailed, err)
	}
	var cfg any
	if err := json5.Unmarshal(red, &cfg); err != nil {
		return nil, withCause(http.StatusInternalServerError, msgReadConfigFailed, err)
	}
	return ok(map[string]any{"config": cfg})
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

// validateCandidate writes config next to the live one, runs the engine's validator on it and
// removes it again.
func (s *Server) validateCandidate(ctx context.Context, a *agentsv1.Agent, config []byte) (engine.ValidateResult, error) {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	candidate := path.Join(path.Dir(s.opts.Engine.Layout().ConfigPath), ".candidate-"+hex.EncodeToString(b)+".json")
	if err := s.opts.Runtime.WriteFile(ctx, a, candidate, config); err != nil {
		return engine.ValidateResult{}, err
	}
	defer func() {
		// Exec runs in the workspace: name the candidate relative to it.
		rel, err := filepath.Rel(s.opts.Engine.Layout().WorkspaceDir, candidate)
		if err == nil {
			_, _ = s.opts.Runtime.Exec(context.WithoutCancel(ctx), a, runtime.ExecRequest{Argv: []string{"rm", "-f", "--", rel}})
		}
	}()
	res, err := s.runEngine(ctx, a, s.opts.Engine.ValidateCommand(candidate))
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

// putConfig validates a config, then replaces the agent's config atomically; the gateway
// hot-reloads it. Redacted values keep their current secrets and the gateway token stays the
// platform's (rotate it through its own route).
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
	configPath := s.opts.Engine.Layout().ConfigPath
	current, err := s.opts.Runtime.ReadFile(ctx, a, configPath)
	if err != nil {
		return nil, withMessage(msgWriteConfigFailed, err)
	}
	cfg, err = s.opts.Engine.RestoreRedacted(cfg, current)
	if err != nil {
		if errors.Is(err, engine.ErrInvalidConfig) {
			return nil, withCause(http.StatusBadRequest, msgInvalidConfig, err)
		}
		return nil, withCause(http.StatusInternalServerError, msgWriteConfigFailed, err)
	}
	if sec, err := s.gatewaySecret(ctx, a); err == nil {
		if cfg, err = s.opts.Engine.SetGatewayToken(cfg, string(sec.Data[agentsv1.GatewayTokenDataKey])); err != nil {
			return nil, withCause(http.StatusInternalServerError, msgWriteConfigFailed, err)
		}
	}
	res, err := s.validateCandidate(ctx, a, cfg)
	if err != nil {
		return nil, withMessage(msgValidationFailed, err)
	}
	if !res.Valid {
		return nil, &Error{Status: http.StatusBadRequest, Message: msgInvalidConfig, Fields: map[string]any{"issues": res.Issues}}
	}
	if err := s.opts.Runtime.WriteFile(ctx, a, configPath, cfg); err != nil {
		return nil, withMessage(msgWriteConfigFailed, err)
	}
	s.markConfigWritten(ctx, a)
	return s.getConfig(r, c)
}

// markConfigWritten bumps agentsv1.AnnotationConfigWritten on the agent. The config is written either
// way: a failure is logged (the channels are re-applied on their next change).
func (s *Server) markConfigWritten(ctx context.Context, a *agentsv1.Agent) {
	if err := s.touchAgent(ctx, client.ObjectKeyFromObject(a), agentsv1.AnnotationConfigWritten, s.opts.Now().UTC().Format(time.RFC3339Nano)); err != nil {
		s.log.Info("marking the agent's config as written failed", "agent", a.Name, "error", err.Error())
	}
}
