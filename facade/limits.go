package facade

import (
	"net/http"

	corev1 "k8s.io/api/core/v1"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/ops"
	"github.com/agentplane/agentplane/internal/rules/auth"
)

// Budgets and limits (additions beyond the contract): admins and owners set an agent's or the
// workspace's model budget and an agent's memory limit.

// budgetRequest is the body of PUT .../budget (0 or absent: unlimited).
type budgetRequest struct {
	RequestsPerMinute int64 `json:"requestsPerMinute"`
	TokensPerDay      int64 `json:"tokensPerDay"`
	// CostMicrosPerDay is spend per UTC day by the platform's model price table, in
	// millionths of its currency.
	CostMicrosPerDay int64 `json:"costMicrosPerDay"`
}

func (b budgetRequest) budget() agentsv1.ModelBudget {
	return agentsv1.ModelBudget{RequestsPerMinute: b.RequestsPerMinute, TokensPerDay: b.TokensPerDay, CostMicrosPerDay: b.CostMicrosPerDay}
}

// resourcesRequest is the body of PUT /v0/agents/{agentId}/resources.
type resourcesRequest struct {
	// MemoryLimit is a quantity (`1Gi`, `512Mi`); "" returns to the platform's default.
	MemoryLimit string `json:"memoryLimit"`
}

func viewBudget(b *agentsv1.ModelBudget) budgetRequest {
	if b == nil {
		return budgetRequest{}
	}
	return budgetRequest{RequestsPerMinute: b.RequestsPerMinute, TokensPerDay: b.TokensPerDay, CostMicrosPerDay: b.CostMicrosPerDay}
}

func (s *Server) putAgentBudget(r *http.Request, c *Caller) (*Response, error) {
	var req budgetRequest
	if err := decodeJSON(r, &req, ops.MsgInvalidBudget); err != nil {
		return nil, err
	}
	a, err := s.ops.SetAgentBudget(r.Context(), c.scope(), r.PathValue("agentId"), req.budget())
	if err != nil {
		return nil, err
	}
	return ok(map[string]any{"agentId": a.Name, "budget": viewBudget(a.Spec.Budget)})
}

func (s *Server) putWorkspaceBudget(r *http.Request, c *Caller) (*Response, error) {
	var req budgetRequest
	if err := decodeJSON(r, &req, ops.MsgInvalidBudget); err != nil {
		return nil, err
	}
	ws, err := s.ops.SetWorkspaceBudget(r.Context(), c.Namespace, req.budget())
	if err != nil {
		return nil, err
	}
	return ok(map[string]any{"workspace": ws.Name, "budget": viewBudget(ws.Spec.Budget)})
}

func (s *Server) putAgentResources(r *http.Request, c *Caller) (*Response, error) {
	var req resourcesRequest
	if err := decodeJSON(r, &req, ops.MsgInvalidMemoryLimit); err != nil {
		return nil, err
	}
	a, err := s.ops.SetAgentMemoryLimit(r.Context(), c.scope(), r.PathValue("agentId"), req.MemoryLimit)
	if err != nil {
		return nil, err
	}
	limit := ""
	if res := a.Spec.Resources; res != nil {
		if q, ok := res.Limits[corev1.ResourceMemory]; ok {
			limit = q.String()
		}
	}
	return ok(map[string]any{"agentId": a.Name, "memoryLimit": limit})
}

// limitRoutes: budgets and the memory limit, for admins and owners (a member could otherwise
// lift the budget that bounds its own agents).
func (s *Server) limitRoutes() {
	admin := access{scope: auth.ScopeAgentsWrite, perm: auth.PermAdmin}
	s.handle("PUT /v0/agents/{agentId}/budget", admin, s.putAgentBudget)
	s.handle("PUT /v0/agents/{agentId}/resources", admin, s.putAgentResources)
	s.handle("PUT /v0/workspace/budget", admin, s.putWorkspaceBudget)
}
