package facade

import (
	"net/http"
	"time"
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
	a, running, err := s.ops.RestartAgent(r.Context(), c.scope(), r.PathValue("agentId"), version, !noWait(r))
	return agentAnswer(a, running, http.StatusOK, err)
}

func (s *Server) agentVersions(r *http.Request, c *Caller) (*Response, error) {
	v, err := s.ops.AgentVersions(r.Context(), c.scope(), r.PathValue("agentId"))
	if err != nil {
		return nil, err
	}
	return ok(map[string]any{"current": v.Current, "running": v.Running, "default": v.Default, "available": v.Available})
}

// platformToken mints a short-lived JWT the agent uses to call the platform on its own behalf
// (ops.MintPlatformToken).
func (s *Server) platformToken(r *http.Request, c *Caller) (*Response, error) {
	tok, exp, err := s.ops.MintPlatformToken(r.Context(), c.scope(), r.PathValue("agentId"), s.opts.Signer)
	if err != nil {
		return nil, err
	}
	return created(map[string]any{"token": tok, "expiresAt": exp.UTC().Format(time.RFC3339)})
}

func (s *Server) getGatewayToken(r *http.Request, c *Caller) (*Response, error) {
	a, tok, err := s.ops.GatewayToken(r.Context(), c.scope(), r.PathValue("agentId"))
	if err != nil {
		return nil, err
	}
	return ok(map[string]any{"agentId": a.Name, "token": tok, "endpoint": a.Status.Endpoint})
}

// rotateGatewayToken replaces the agent's gateway token. The previous value is refused as
// soon as this answers: the operation waits until this replica's cache has the new value.
func (s *Server) rotateGatewayToken(r *http.Request, c *Caller) (*Response, error) {
	a, tok, err := s.ops.RotateGatewayToken(r.Context(), c.scope(), r.PathValue("agentId"))
	if err != nil {
		return nil, err
	}
	return ok(map[string]any{"agentId": a.Name, "token": tok})
}

// retryScripts re-runs the agent's start-up scripts (startup.sh and .agentplane/startup/*.sh
// in the home), in order, stopping at the first failure.
func (s *Server) retryScripts(r *http.Request, c *Caller) (*Response, error) {
	res, err := s.ops.RetryScripts(r.Context(), c.scope(), r.PathValue("agentId"))
	if err != nil {
		return nil, err
	}
	return ok(map[string]any{
		"exitCode": res.ExitCode, "stdout": string(res.Stdout), "stderr": string(res.Stderr),
		"timestamp": res.At.Format(time.RFC3339Nano),
	})
}

func (s *Server) listDevices(r *http.Request, c *Caller) (*Response, error) {
	devices, err := s.ops.Devices(r.Context(), c.scope(), r.PathValue("agentId"))
	if err != nil {
		return nil, err
	}
	return ok(devices)
}
