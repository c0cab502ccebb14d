package facade

import (
	"net/http"

	"github.com/agentplane/agentplane/internal/ops"
)

// resetRequest is the body of POST /v0/agents/{agentId}/snapshots/reset.
type resetRequest struct {
	SnapshotCID string `json:"snapshotCid"`
}

// resetSnapshot restores the agent's home from a snapshot of its history and restarts
// the gateway.
func (s *Server) resetSnapshot(r *http.Request, c *Caller) (*Response, error) {
	var body resetRequest
	if err := decodeJSON(r, &body, ops.MsgInvalidSnapshotCID); err != nil {
		return nil, err
	}
	sn, agent, err := s.ops.ResetSnapshot(r.Context(), c.scope(), r.PathValue("agentId"), body.SnapshotCID)
	if err != nil {
		return nil, err
	}
	return ok(map[string]any{"snapshot": viewSnapshot(sn), "agent": viewAgent(agent)})
}
