package local

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

var _ runtime.Inventory = (*Runtime)(nil)

// Homes implements runtime.Inventory.
func (r *Runtime) Homes(ctx context.Context) ([]runtime.Home, error) {
	return ListHomes(ctx, r.opts.StateDir)
}

// ListHomes lists the agent homes kept in stateDir (<stateDir>/agents/<namespace>/<name>/ whose
// home exists: its own home/ or the warm pool member's it claimed). It only reads, so it runs
// beside the manager that holds the state dir (`agentplane doctor`).
func ListHomes(ctx context.Context, stateDir string) ([]runtime.Home, error) {
	root := filepath.Join(stateDir, "agents")
	namespaces, err := os.ReadDir(root) // sorted by name
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var homes []runtime.Home
	for _, ns := range namespaces {
		if !ns.IsDir() {
			continue
		}
		names, err := os.ReadDir(filepath.Join(root, ns.Name()))
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			dir := filepath.Join(root, ns.Name(), n.Name())
			st, err := readState(dir)
			if !n.IsDir() || err != nil {
				continue
			}
			home := homeOf(dir, st)
			if fi, err := os.Stat(home); err != nil || !fi.IsDir() {
				continue
			}
			homes = append(homes, runtime.Home{Namespace: ns.Name(), Name: n.Name(), Location: home})
		}
	}
	return homes, nil
}
