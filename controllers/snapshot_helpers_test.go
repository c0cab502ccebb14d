package controllers_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/archive"
	"github.com/agentplane/agentplane/internal/adapters/cid"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/storage"
)

// dirRuntime is a runtime.Runtime whose agents are directories: <root>/<ns>/<name> is the
// workspace (created by Ensure), archived and restored with internal/adapters/archive as the local
// runtime does. The gateway always "runs".
type dirRuntime struct {
	root       string
	archives   atomic.Int32
	restores   atomic.Int32
	mu         sync.Mutex
	archiveErr error
}

var _ runtime.Runtime = (*dirRuntime)(nil)

func (d *dirRuntime) dir(a *agentsv1.Agent) string { return filepath.Join(d.root, a.Namespace, a.Name) }

func (d *dirRuntime) Name() string { return "dir" }

func (d *dirRuntime) Ensure(_ context.Context, a *agentsv1.Agent, _ runtime.Desired) (runtime.Observed, error) {
	if err := os.MkdirAll(d.dir(a), 0o755); err != nil {
		return runtime.Observed{}, err
	}
	return runtime.Observed{Phase: runtime.PhaseRunning, Endpoint: "http://dir.invalid", EngineVersion: "1.0.0"}, nil
}

func (d *dirRuntime) Delete(_ context.Context, a *agentsv1.Agent) error {
	return os.RemoveAll(d.dir(a))
}

func (d *dirRuntime) Exec(context.Context, *agentsv1.Agent, runtime.ExecRequest) (runtime.ExecResult, error) {
	return runtime.ExecResult{}, runtime.ErrExec
}

func (d *dirRuntime) ReadFile(context.Context, *agentsv1.Agent, string) ([]byte, error) {
	return nil, runtime.ErrNotFound
}

func (d *dirRuntime) WriteFile(context.Context, *agentsv1.Agent, string, []byte) error {
	return runtime.ErrExec
}

func (d *dirRuntime) ArchiveWorkspace(_ context.Context, a *agentsv1.Agent, w io.Writer) error {
	d.mu.Lock()
	err := d.archiveErr
	d.mu.Unlock()
	if err != nil {
		return err
	}
	if _, err := os.Stat(d.dir(a)); err != nil {
		return runtime.ErrNotRunning
	}
	d.archives.Add(1)
	return archive.Write(d.dir(a), w)
}

func (d *dirRuntime) RestoreWorkspace(_ context.Context, a *agentsv1.Agent, r io.Reader) error {
	d.restores.Add(1)
	return archive.Extract(r, d.dir(a), archive.Limits{})
}

// Logs: a directory writes no output; following waits until ctx ends or the agent is gone.
func (d *dirRuntime) Logs(ctx context.Context, a *agentsv1.Agent, req runtime.LogRequest) ([]string, error) {
	if req.Follow == nil {
		return []string{}, nil
	}
	if _, err := os.Stat(d.dir(a)); err != nil {
		return nil, runtime.ErrNotRunning
	}
	<-ctx.Done()
	return nil, nil
}

func (d *dirRuntime) failArchives(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.archiveErr = err
}

// write replaces the workspace of agent (ns/name) with files.
func (d *dirRuntime) write(key types.NamespacedName, files map[string]string) {
	dir := filepath.Join(d.root, key.Namespace, key.Name)
	ExpectWithOffset(1, os.RemoveAll(dir)).To(Succeed())
	for name, content := range files {
		p := filepath.Join(dir, name)
		ExpectWithOffset(1, os.MkdirAll(filepath.Dir(p), 0o755)).To(Succeed())
		ExpectWithOffset(1, os.WriteFile(p, []byte(content), 0o644)).To(Succeed())
	}
}

// read returns the workspace's files by relative path.
func (d *dirRuntime) read(key types.NamespacedName) map[string]string {
	dir := filepath.Join(d.root, key.Namespace, key.Name)
	out := map[string]string{}
	ExpectWithOffset(1, filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		raw, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[rel] = string(raw)
		return err
	})).To(Succeed())
	return out
}

// cidOf is the CID the workspace files archive to (what a snapshot must record).
func cidOf(files map[string]string) string {
	dir, err := os.MkdirTemp("", "snapcid-")
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	defer os.RemoveAll(dir)
	for name, content := range files {
		p := filepath.Join(dir, name)
		ExpectWithOffset(1, os.MkdirAll(filepath.Dir(p), 0o755)).To(Succeed())
		ExpectWithOffset(1, os.WriteFile(p, []byte(content), 0o644)).To(Succeed())
	}
	var buf bytes.Buffer
	ExpectWithOffset(1, archive.Write(dir, &buf)).To(Succeed())
	c, _, err := cid.Compute(&buf)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return c.String()
}

// flakyStore is a storage.Store that can be switched to fail like an unreachable backend.
type flakyStore struct {
	storage.Store
	down atomic.Bool
}

var errDown = errors.New("connection refused (test outage)")

func (f *flakyStore) Put(ctx context.Context, space string, r io.Reader) (storage.Object, error) {
	if f.down.Load() {
		return storage.Object{}, storage.Unavailable("put", errDown)
	}
	return f.Store.Put(ctx, space, r)
}

func (f *flakyStore) Get(ctx context.Context, space, c string) (io.ReadCloser, storage.Object, error) {
	if f.down.Load() {
		return nil, storage.Object{}, storage.Unavailable("get", errDown)
	}
	return f.Store.Get(ctx, space, c)
}

func (f *flakyStore) Stat(ctx context.Context, space, c string) (storage.Object, error) {
	if f.down.Load() {
		return storage.Object{}, storage.Unavailable("stat", errDown)
	}
	return f.Store.Stat(ctx, space, c)
}

func (f *flakyStore) Delete(ctx context.Context, space, c string) error {
	if f.down.Load() {
		return storage.Unavailable("delete", errDown)
	}
	return f.Store.Delete(ctx, space, c)
}

func (f *flakyStore) List(ctx context.Context, space string) ([]storage.Object, error) {
	if f.down.Load() {
		return nil, storage.Unavailable("list", errDown)
	}
	return f.Store.List(ctx, space)
}
