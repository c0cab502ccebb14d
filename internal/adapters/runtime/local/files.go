package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"k8s.io/apimachinery/pkg/types"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/archive"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// ReadFile implements runtime.Runtime: path is relative to the agent's home and may not leave
// it, symlinks included (os.Root).
func (r *Runtime) ReadFile(ctx context.Context, ag *agentsv1.Agent, path string) ([]byte, error) {
	root, rel, err := r.openHome(ag, path)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	info, err := root.Stat(rel)
	if err != nil {
		return nil, fileErr(path, err)
	}
	if info.IsDir() {
		return nil, fmt.Errorf("%w: %q is a directory", runtime.ErrInvalidPath, path)
	}
	b, err := root.ReadFile(rel)
	if err != nil {
		return nil, fileErr(path, err)
	}
	return b, nil
}

// WriteFile implements runtime.Runtime: a temp file next to the target is written, synced
// and renamed over it, so readers see the old or the new content. Missing parent dirs are
// created (0700). An existing file keeps its mode, a new one gets 0644; the engine config is
// always 0600. Writing the engine config makes the next Ensure check the gateway token in it.
func (r *Runtime) WriteFile(ctx context.Context, ag *agentsv1.Agent, path string, data []byte) error {
	root, rel, err := r.openHome(ag, path)
	if err != nil {
		return err
	}
	defer root.Close()
	if err := root.MkdirAll(filepath.Dir(rel), 0o700); err != nil {
		return fileErr(path, err)
	}
	isConfig := rel == filepath.Clean(r.opts.Engine.Layout().ConfigPath)
	perm := fs.FileMode(0o644)
	if info, err := root.Lstat(rel); err == nil {
		if info.IsDir() {
			return fmt.Errorf("%w: %q is a directory", runtime.ErrInvalidPath, path)
		}
		if info.Mode().IsRegular() {
			perm = info.Mode().Perm()
		}
	}
	if isConfig {
		perm = 0o600
	}
	// The agent's uid owns the file before it appears under its name: a command in the
	// sandbox never meets it unreadable (a root-owned 0600 engine config, between the rename
	// and a chown after it, read as empty).
	if err := writeHomeFile(root, rel, data, perm, func(tmp string) { r.own(root.Name(), filepath.Join(root.Name(), tmp)) }); err != nil {
		return fileErr(path, err)
	}
	if isConfig {
		r.forgetToken(keyOf(ag))
	}
	return nil
}

func writeAndSync(f *os.File, data []byte, perm fs.FileMode) error {
	_, err := f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// forgetToken makes the next Ensure check the token in a config written from outside.
func (r *Runtime) forgetToken(key types.NamespacedName) {
	r.mu.Lock()
	a := r.agents[key]
	r.mu.Unlock()
	if a != nil {
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.loadLocked() == nil && a.st.TokenHash != "" {
			a.st.TokenHash = ""
			a.saveLocked()
		}
		if a.loadLocked() == nil {
			a.discardCheckpointLocked() // a checkpointed gateway would keep the former config
		}
		return
	}
	dir := r.AgentDir(key)
	if st, err := readState(dir); err == nil && st.TokenHash != "" {
		st.TokenHash = ""
		_ = writeState(dir, st)
	}
}

// ArchiveWorkspace implements runtime.Runtime (internal/adapters/archive: a deterministic tar).
// A workspace that is gone (removed from inside the agent) is not made again here, unlike for
// the other file operations: a snapshot of it would be an empty archive, so it is ErrNotFound.
func (r *Runtime) ArchiveWorkspace(ctx context.Context, ag *agentsv1.Agent, w io.Writer) error {
	home, err := r.existingHome(ag)
	if err != nil {
		return err
	}
	root, err := os.OpenRoot(home)
	if err != nil {
		return err
	}
	defer root.Close()
	ws, err := root.OpenRoot(r.opts.Engine.Layout().WorkspaceDir)
	if err != nil {
		return homeErr(err)
	}
	defer ws.Close()
	return homeErr(archive.WriteRoot(ws, w))
}

// homeErr maps an error of a path in an agent's home: missing is ErrNotFound, a symlink
// leading out of the home ErrInvalidPath (a link the agent planted).
func homeErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: %v", runtime.ErrNotFound, err)
	case isEscape(err):
		return fmt.Errorf("%w: %v", runtime.ErrInvalidPath, err)
	case isNoSpace(err):
		return fmt.Errorf("%w: %v", runtime.ErrNoSpace, err)
	}
	return err
}

// RestoreWorkspace implements runtime.Runtime: the stream is extracted next to the workspace
// (RestoreLimits; unsafe entries refused with ErrInvalidPath) and swapped in, then a running
// gateway is restarted so it sees the restored files. On error the workspace is unchanged.
func (r *Runtime) RestoreWorkspace(ctx context.Context, ag *agentsv1.Agent, rd io.Reader) error {
	home, err := r.existingHome(ag)
	if err != nil {
		return err
	}
	wsRel := r.opts.Engine.Layout().WorkspaceDir
	if err := r.extractWorkspace(home, wsRel, rd); err != nil {
		return err
	}
	r.own(home, filepath.Join(home, wsRel))
	r.mu.Lock()
	a := r.agents[keyOf(ag)]
	r.mu.Unlock()
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.loadLocked() == nil {
		a.discardCheckpointLocked() // its memory holds the former workspace's state
	}
	if a.proc != nil && !a.closed {
		a.log.Info("restarting gateway after a workspace restore")
		a.stopLocked(ctx)
		a.startLocked(ctx)
		a.poke()
	}
	return nil
}

// extractWorkspace replaces the workspace wsRel of the home home with the tar stream rd,
// through the home as a root.
func (r *Runtime) extractWorkspace(home, wsRel string, rd io.Reader) error {
	root, err := os.OpenRoot(home)
	if err != nil {
		return err
	}
	defer root.Close()
	if err := root.MkdirAll(filepath.Dir(wsRel), 0o700); err != nil {
		return homeErr(err)
	}
	parent, err := root.OpenRoot(filepath.Dir(wsRel))
	if err != nil {
		return homeErr(err)
	}
	defer parent.Close()
	if err := archive.ExtractIn(parent, filepath.Base(wsRel), rd, r.opts.RestoreLimits); err != nil {
		if errors.Is(err, archive.ErrUnsafe) || errors.Is(err, archive.ErrLimit) {
			return fmt.Errorf("%w: %w", runtime.ErrInvalidPath, err)
		}
		return homeErr(err)
	}
	return nil
}

// existingHome is the home of ag, ErrNotRunning when it has none on this host.
func (r *Runtime) existingHome(ag *agentsv1.Agent) (string, error) {
	home := r.homeOf(keyOf(ag))
	if _, err := os.Stat(home); err != nil {
		return "", fmt.Errorf("%w: agent %s has no home on this host", runtime.ErrNotRunning, keyOf(ag))
	}
	return home, nil
}

// workspaceOf is the engine's workspace dir in the agent home home.
func (r *Runtime) workspaceOf(home string) string {
	return filepath.Join(home, r.opts.Engine.Layout().WorkspaceDir)
}

// ensureWorkspace returns the workspace of the agent whose home is home, making it (for the
// agent's sandbox uid) when the engine has not yet.
func (r *Runtime) ensureWorkspace(home string) (string, error) {
	ws := r.workspaceOf(home)
	made, err := mkdirInHome(home, r.opts.Engine.Layout().WorkspaceDir)
	if err != nil {
		return "", homeErr(err)
	}
	if made {
		r.own(home, filepath.Join(home, r.opts.Engine.Layout().StateDir))
	}
	return ws, nil
}

// homeOf is the agent's home: the one its runtime entry or its state.json records, its
// volume mounted when it has one (a manager that restarted mounts it on first use).
func (r *Runtime) homeOf(key types.NamespacedName) string {
	home := r.recordedHome(key)
	r.mountExisting(home)
	return home
}

// recordedHome is the agent's home as its runtime entry or its state.json records it.
func (r *Runtime) recordedHome(key types.NamespacedName) string {
	r.mu.Lock()
	a := r.agents[key]
	r.mu.Unlock()
	dir := r.AgentDir(key)
	if a == nil {
		st, _ := readState(dir)
		return homeOf(dir, st)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.loadLocked(); err != nil {
		st, _ := readState(dir)
		return homeOf(dir, st)
	}
	return a.home
}

// openHome opens the agent's home as an os.Root and checks path: relative, not leaving the
// home lexically (os.Root refuses symlink escapes on use).
func (r *Runtime) openHome(ag *agentsv1.Agent, path string) (*os.Root, string, error) {
	rel, err := relPath(path)
	if err != nil {
		return nil, "", err
	}
	root, err := os.OpenRoot(r.homeOf(keyOf(ag)))
	if err != nil {
		return nil, "", fmt.Errorf("%w: agent %s has no home on this host", runtime.ErrNotRunning, keyOf(ag))
	}
	return root, rel, nil
}

// relPath cleans a path relative to the home; "", absolute paths and ".." escapes are
// ErrInvalidPath.
func relPath(path string) (string, error) {
	if path == "" || filepath.IsAbs(path) || strings.ContainsRune(path, 0) {
		return "", fmt.Errorf("%w: %q must be a relative path", runtime.ErrInvalidPath, path)
	}
	rel := filepath.Clean(path)
	if rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("%w: %q is outside the agent's home", runtime.ErrInvalidPath, path)
	}
	return rel, nil
}

// fileErr maps file errors: missing is ErrNotFound, a symlink leaving the home ErrInvalidPath.
func fileErr(path string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("%w: %s", runtime.ErrNotFound, path)
	case isEscape(err):
		return fmt.Errorf("%w: %q leaves the agent's home", runtime.ErrInvalidPath, path)
	case isNoSpace(err):
		return fmt.Errorf("%w: %s: %v", runtime.ErrNoSpace, path, err)
	}
	return err
}

// isNoSpace reports whether err is a write the home's filesystem had no room (or quota) for.
func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// isEscape tells an os.Root's refusal of a path that leads out of it (through a symlink).
func isEscape(err error) bool {
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}
