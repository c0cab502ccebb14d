package snapshotstore

import (
	"context"
	"errors"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/storage"
)

// Locator finds the storage space that holds a snapshot archive. An agent's own
// snapshots are in its workspace's space; a template's snapshot was taken in some workspace
// (the template only names its CID), so it may be in any workspace's space.
type Locator struct {
	// Reader lists Snapshots and Workspaces (live reads preferred).
	Reader client.Reader
	// Store holds the archives.
	Store storage.Store
}

// Locate returns the space holding cid for an agent of namespace: the workspace's own
// snapshot space first, then those of the workspaces whose Snapshots carry the CID, then
// every other workspace's. The error matches storage.ErrNotFound when no space holds it and
// storage.ErrUnavailable when storage cannot be reached.
func (l Locator) Locate(ctx context.Context, namespace, cid string) (string, error) {
	if l.Store == nil {
		return "", fmt.Errorf("%w: no storage configured", storage.ErrNotFound)
	}
	tried := map[string]bool{}
	try := func(ns string) (bool, error) {
		if ns == "" || tried[ns] {
			return false, nil
		}
		tried[ns] = true
		_, err := l.Store.Stat(ctx, storage.SnapshotSpace(ns), cid)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, storage.ErrNotFound), errors.Is(err, storage.ErrInvalid):
			return false, nil
		}
		return false, err
	}
	if found, err := try(namespace); found || err != nil {
		return storage.SnapshotSpace(namespace), err
	}
	var snaps agentsv1.SnapshotList
	if err := l.Reader.List(ctx, &snaps); err != nil {
		return "", err
	}
	for i := range snaps.Items {
		if s := &snaps.Items[i]; storage.SameCID(s.Status.CID, cid) {
			if found, err := try(s.Namespace); found || err != nil {
				return storage.SnapshotSpace(s.Namespace), err
			}
		}
	}
	var workspaces agentsv1.WorkspaceList
	if err := l.Reader.List(ctx, &workspaces); err != nil {
		return "", err
	}
	for i := range workspaces.Items {
		ns := workspaces.Items[i].Name
		if found, err := try(ns); found || err != nil {
			return storage.SnapshotSpace(ns), err
		}
	}
	return "", storage.NotFound("snapshots", cid, nil)
}

// Exists reports whether storage holds cid for an agent of namespace (the REST facade seeds
// agents created from a template with its snapshot only then).
func (l Locator) Exists(ctx context.Context, namespace, cid string) bool {
	_, err := l.Locate(ctx, namespace, cid)
	return err == nil
}
