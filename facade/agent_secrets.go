package facade

import (
	"net/http"
)

type attachSecretsRequest struct {
	SecretIDs []string `json:"secretIds"`
}

func (s *Server) attachSecrets(r *http.Request, c *Caller) (*Response, error) {
	var req attachSecretsRequest
	if err := decodeJSON(r, &req, msgInvalidBody); err != nil {
		return nil, err
	}
	agent, err := s.ops.AttachSecrets(r.Context(), c.scope(), r.PathValue("agentId"), req.SecretIDs)
	if err != nil {
		return nil, err
	}
	return ok(map[string]any{"agent": viewAgent(agent)})
}

func (s *Server) detachSecret(r *http.Request, c *Caller) (*Response, error) {
	agent, err := s.ops.DetachSecret(r.Context(), c.scope(), r.PathValue("agentId"), r.PathValue("secretId"))
	if err != nil {
		return nil, err
	}
	return ok(map[string]any{"agent": viewAgent(agent)})
}

func (s *Server) listAgentSecrets(r *http.Request, c *Caller) (*Response, error) {
	list, err := s.ops.AgentSecrets(r.Context(), c.scope(), r.PathValue("agentId"))
	if err != nil {
		return nil, err
	}
	out := make([]secretView, 0, len(list))
	for i := range list {
		out = append(out, viewSecret(&list[i]))
	}
	return ok(map[string]any{"secrets": out})
}
