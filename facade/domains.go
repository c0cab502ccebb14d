package facade

import (
	"net/http"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/ops"
	"github.com/agentplane/agentplane/internal/rules/auth"
)

// planOf is the plan of the caller's workspace ("" when the caller has none).
func planOf(c *Caller) agentsv1.Plan {
	if c.Workspace == nil {
		return ""
	}
	return c.Workspace.Spec.Plan
}

// domainRoutes registers the domain routes. Reads need agents:read, writes domains:write;
// the agent's gateway token is accepted on its own agent (with the scopes it carries).
func (s *Server) domainRoutes() {
	read := access{scope: auth.ScopeAgentsRead, perm: auth.PermRead, gateway: true}
	// Writes need a user's token: a domain widens the agent's reach (a public address).
	write := access{scope: auth.ScopeDomainsWrite, perm: auth.PermWrite}
	s.handle("GET /v0/agents/{agentId}/domains", read, s.listDomains)
	s.handle("POST /v0/agents/{agentId}/domains", write, s.createDomain)
	s.handle("GET /v0/agents/{agentId}/domains/{domainId}", read, s.getDomainRoute)
	s.handle("PATCH /v0/agents/{agentId}/domains/{domainId}", write, s.patchDomain)
	s.handle("DELETE /v0/agents/{agentId}/domains/{domainId}", write, s.deleteDomain)
	s.handle("POST /v0/agents/{agentId}/domains/{domainId}/verify", write, s.verifyDomain)
}

// domainRequest is the body of POST and PATCH. Pointers tell "absent" from "empty".
type domainRequest struct {
	Subdomain    *string `json:"subdomain"`
	CustomDomain *string `json:"customDomain"`
	TargetPort   *int64  `json:"targetPort"`
}

func (s *Server) listDomains(r *http.Request, c *Caller) (*Response, error) {
	list, err := s.ops.Domains(r.Context(), c.scope(), r.PathValue("agentId"))
	if err != nil {
		return nil, err
	}
	out := make([]domainView, 0, len(list))
	for i := range list {
		out = append(out, viewDomain(&list[i]))
	}
	return ok(map[string]any{"domains": out})
}

func (s *Server) createDomain(r *http.Request, c *Caller) (*Response, error) {
	var req domainRequest
	if err := decodeJSON(r, &req, msgInvalidBody); err != nil {
		return nil, err
	}
	d, err := s.ops.CreateDomain(r.Context(), c.scope(), planOf(c), r.PathValue("agentId"), ops.DomainFields(req))
	if err != nil {
		return nil, err
	}
	return created(map[string]any{"domain": viewDomain(d)})
}

func (s *Server) getDomainRoute(r *http.Request, c *Caller) (*Response, error) {
	d, err := s.ops.Domain(r.Context(), c.scope(), r.PathValue("agentId"), r.PathValue("domainId"))
	if err != nil {
		return nil, err
	}
	return ok(map[string]any{"domain": viewDomain(d)})
}

// patchDomain changes targetPort; the host name is immutable.
func (s *Server) patchDomain(r *http.Request, c *Caller) (*Response, error) {
	var req domainRequest
	if err := decodeJSON(r, &req, msgInvalidBody); err != nil {
		return nil, err
	}
	d, err := s.ops.PatchDomain(r.Context(), c.scope(), r.PathValue("agentId"), r.PathValue("domainId"), ops.DomainFields(req))
	if err != nil {
		return nil, err
	}
	return ok(map[string]any{"domain": viewDomain(d)})
}

// deleteDomain answers 200 once the Domain is gone (its name is then free to claim again),
// 202 when the wait ends first.
func (s *Server) deleteDomain(r *http.Request, c *Caller) (*Response, error) {
	d, deleted, err := s.ops.DeleteDomain(r.Context(), c.scope(), r.PathValue("agentId"), r.PathValue("domainId"))
	if err != nil {
		return nil, err
	}
	if !deleted {
		return &Response{Status: http.StatusAccepted, Body: map[string]any{"id": d.Name, "deleted": false}}, nil
	}
	return ok(map[string]any{"id": d.Name, "deleted": true})
}
