package facade

import (
	"encoding/json"
	"net/http"

	"github.com/agentplane/agentplane/internal/ops"
)

// getConfig answers the agent's engine config with its secrets redacted.
func (s *Server) getConfig(r *http.Request, c *Caller) (*Response, error) {
	cfg, err := s.ops.Config(r.Context(), c.scope(), r.PathValue("agentId"))
	if err != nil {
		return nil, err
	}
	return ok(map[string]any{"config": cfg})
}

type configRequest struct {
	Config json.RawMessage `json:"config"`
}

// decodeConfig reads {config: {...}}: the body must be JSON (the operations check that the
// config is an object).
func decodeConfig(r *http.Request) (json.RawMessage, error) {
	var req configRequest
	if err := decodeJSON(r, &req, ops.MsgInvalidJSON); err != nil {
		return nil, err
	}
	return req.Config, nil
}

// validateConfig answers whether a candidate config is valid for the engine.
func (s *Server) validateConfig(r *http.Request, c *Caller) (*Response, error) {
	cfg, err := decodeConfig(r)
	if err != nil {
		return nil, err
	}
	res, err := s.ops.ValidateConfig(r.Context(), c.scope(), r.PathValue("agentId"), cfg)
	if err != nil {
		return nil, err
	}
	return ok(map[string]any{"valid": res.Valid, "output": res.Output})
}

// putConfig validates a config and stores it as the agent's (ops.PutConfig): 200 with the
// config as rendered, 202 when the agent cannot be reached or the wait ends first.
func (s *Server) putConfig(r *http.Request, c *Caller) (*Response, error) {
	cfg, err := decodeConfig(r)
	if err != nil {
		return nil, err
	}
	got, applied, err := s.ops.PutConfig(r.Context(), c.scope(), r.PathValue("agentId"), cfg)
	if err != nil {
		return nil, err
	}
	status := http.StatusOK
	if !applied {
		status = http.StatusAccepted
	}
	return &Response{Status: status, Body: map[string]any{"config": got}}, nil
}
