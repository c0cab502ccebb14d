package facade

import (
	"net/http"
	"time"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/rules/auth"
	"github.com/agentplane/agentplane/internal/rules/snapshots"
)

// snapshotRoutes registers the snapshot routes. Sync and reset are carried out by the
// controllers, as for kubectl: sync creates a Snapshot and waits for the Snapshot controller
// to archive it; reset sets the Agent's spec.desiredSnapshot and waits for the Agent controller
// to restore the workspace (which restarts the gateway) and record status.snapshotCid.
func (s *Server) snapshotRoutes() {
	read := access{scope: auth.ScopeAgentsRead, perm: auth.PermRead, gateway: true}
	write := access{scope: auth.ScopeAgentsWrite, perm: auth.PermWrite, gateway: true}
	s.handle("GET /v0/agents/{agentId}/snapshots", read, s.listSnapshots)
	woken := write
	woken.wakes = true
	s.handle("POST /v0/agents/{agentId}/snapshots/sync", woken, s.syncSnapshot)
	s.handle("POST /v0/agents/{agentId}/snapshots/reset", woken, s.resetSnapshot)
}

// snapshotView is a snapshot as the REST API shows it.
type snapshotView struct {
	ID        string    `json:"id"`
	CID       string    `json:"cid"`
	Size      int64     `json:"size"`
	CreatedAt time.Time `json:"createdAt"`
}

func viewSnapshot(sn *agentsv1.Snapshot) snapshotView {
	return snapshotView{ID: sn.Name, CID: sn.Status.CID, Size: sn.Status.Size, CreatedAt: snapshots.RequestedAt(sn).UTC()}
}

// listSnapshots answers the agent's snapshot history, newest first.
func (s *Server) listSnapshots(r *http.Request, c *Caller) (*Response, error) {
	items, err := s.ops.Snapshots(r.Context(), c.scope(), r.PathValue("agentId"))
	if err != nil {
		return nil, err
	}
	out := make([]snapshotView, 0, len(items))
	for i := range items {
		out = append(out, viewSnapshot(&items[i]))
	}
	return ok(map[string]any{"snapshots": out})
}

// syncSnapshot archives the agent's home into storage now and answers its CID.
func (s *Server) syncSnapshot(r *http.Request, c *Caller) (*Response, error) {
	sn, err := s.ops.SyncSnapshot(r.Context(), c.scope(), r.PathValue("agentId"))
	if err != nil {
		return nil, err
	}
	return created(map[string]any{"snapshot": viewSnapshot(sn)})
}
