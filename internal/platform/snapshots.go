package platform

import (
	"context"

	snapshotctrl "github.com/agentplane/agentplane/controllers/snapshot"
	"github.com/agentplane/agentplane/internal/adapters/snapshotstore"
)

// setupSnapshots registers the Snapshot controller: it archives workspaces into Options.Files
// (space <namespace>/snapshots) and keeps Options.SnapshotRetention snapshots per agent.
func (p *Platform) setupSnapshots() error {
	if p.runtime == nil {
		return nil
	}
	mgr := p.Manager
	return (&snapshotctrl.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Runtime: p.runtime, Store: p.opts.Files,
		Retention: p.opts.SnapshotRetention, Recorder: eventRecorder(mgr, "agentplane-snapshot"),
		Quota: p.limiter,
	}).SetupWithManager(mgr)
}

// snapshotExists tells the facade whether storage holds a snapshot an agent of namespace may
// be seeded with (a template's snapshot may have been taken in any workspace).
func (p *Platform) snapshotExists(ctx context.Context, namespace, cid string) bool {
	if p.opts.Files == nil {
		return false
	}
	return snapshotstore.Locator{Reader: p.Manager.GetAPIReader(), Store: p.opts.Files}.Exists(ctx, namespace, cid)
}
