package kube

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// Limits of the file operations.
const (
	// MaxReadFile is the largest file ReadFile returns.
	MaxReadFile = 128 << 20
	// fileOpTimeout bounds ReadFile and WriteFile when the caller's context has no deadline.
	fileOpTimeout = 2 * time.Minute
)

// ReadFile reads a file relative to the agent's home (/home/node). Symlinks are followed only
// while they stay inside the home.
func (r *Runtime) ReadFile(ctx context.Context, agent *agentsv1.Agent, p string) ([]byte, error) {
	rel, err := checkRel(p)
	if err != nil {
		return nil, err
	}
	ctx, cancel := withDefaultTimeout(ctx, fileOpTimeout)
	defer cancel()
	out := newCapped(MaxReadFile)
	code, stderr, err := r.run(ctx, agent, readCommand(r.home, rel), nil, out)
	if err != nil {
		return nil, err
	}
	if code != 0 {
		return nil, commandFailed("read file", code, stderr)
	}
	if out.Truncated() {
		return nil, fmt.Errorf("%w: %s is larger than %d bytes", runtime.ErrExec, rel, MaxReadFile)
	}
	return out.Bytes(), nil
}

// WriteFile writes a file relative to the agent's home through a temporary file renamed over
// the target, so readers (the gateway's config watcher) never see half a file.
func (r *Runtime) WriteFile(ctx context.Context, agent *agentsv1.Agent, p string, data []byte) error {
	rel, err := checkRel(p)
	if err != nil {
		return err
	}
	ctx, cancel := withDefaultTimeout(ctx, fileOpTimeout)
	defer cancel()
	code, stderr, err := r.run(ctx, agent, writeCommand(r.home, rel), bytes.NewReader(data), io.Discard)
	if err != nil {
		return err
	}
	if code != 0 {
		return commandFailed("write file", code, stderr)
	}
	return nil
}

// ArchiveWorkspace writes the workspace as a deterministic tar (sorted names, mtime 0, owner
// 0) to w.
func (r *Runtime) ArchiveWorkspace(ctx context.Context, agent *agentsv1.Agent, w io.Writer) error {
	code, stderr, err := r.run(ctx, agent, archiveCommand(r.workspace()), nil, w)
	if err != nil {
		return err
	}
	if code != 0 {
		return commandFailed("archive workspace", code, stderr)
	}
	return nil
}

// RestoreWorkspace extracts the tar stream rd into a fresh directory and swaps it in for the
// workspace; a broken archive leaves the workspace as it was.
func (r *Runtime) RestoreWorkspace(ctx context.Context, agent *agentsv1.Agent, rd io.Reader) error {
	code, stderr, err := r.run(ctx, agent, restoreCommand(r.workspace()), rd, io.Discard)
	if err != nil {
		return err
	}
	if code != 0 {
		return commandFailed("restore workspace", code, stderr)
	}
	return r.rollPod(ctx, agent)
}

// rollPod deletes the agent's pod so the gateway starts again on the restored workspace (it
// reads part of it only at start); its StatefulSet makes a new pod on the same volume. A pod
// already gone is fine. An error leaves the restore to be retried, which is idempotent.
func (r *Runtime) rollPod(ctx context.Context, agent *agentsv1.Agent) error {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: agent.Namespace, Name: PodName(agent)}}
	if err := r.opts.Client.Delete(ctx, pod); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("restart the gateway after the restore: %w", err)
	}
	return nil
}

func commandFailed(what string, code int, stderr []byte) error {
	msg := strings.TrimSpace(string(stderr))
	if len(msg) > 512 {
		msg = msg[:512]
	}
	if strings.Contains(msg, "No space left on device") || strings.Contains(msg, "Disk quota exceeded") {
		return fmt.Errorf("%w: %s: exit code %d: %s", runtime.ErrNoSpace, what, code, msg)
	}
	return fmt.Errorf("%w: %s: exit code %d: %s", runtime.ErrExec, what, code, msg)
}

func withDefaultTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}
