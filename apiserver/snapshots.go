package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/agentplane/agentplane/internal/ops"
	"github.com/agentplane/agentplane/internal/snapshots"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/storage"
)

// Snapshot messages (fixed by the contract, except msgResetFailed).
const (
	msgSyncFailed         = "Sync failed"
	msgSnapshotNotFound   = "Snapshot not found"
	msgInvalidSnapshotCID = "Invalid snapshot CID"
	msgResetFailed        = "Reset failed"
	// snapshotWait bounds how long sync and reset wait for the controllers.
	snapshotWait = 10 * time.Minute
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

// probeSnapshots checks that the snapshot storage answers (503 when it does not).
func (s *Server) probeSnapshots(ctx context.Context, namespace string) error {
	if _, err := s.opts.Files.List(ctx, storage.SnapshotSpace(namespace)); err != nil {
		return storageError(err)
	}
	return nil
}

// history is the agent's completed snapshots, newest first, read live.
func (s *Server) history(ctx context.Context, a *agentsv1.Agent) ([]agentsv1.Snapshot, error) {
	var list agentsv1.SnapshotList
	if err := s.opts.APIReader.List(ctx, &list, client.InNamespace(a.Namespace)); err != nil {
		return nil, err
	}
	return snapshots.Completed(list.Items, a.Name), nil
}

// listSnapshots answers the agent's snapshot history, newest first.
func (s *Server) listSnapshots(r *http.Request, c *Caller) (*Response, error) {
	a, err := s.getAgent(r.Context(), c, r.PathValue("agentId"))
	if err != nil {
		return nil, err
	}
	if s.opts.Files != nil {
		if err := s.probeSnapshots(r.Context(), a.Namespace); err != nil {
			return nil, err
		}
	}
	items, err := s.history(r.Context(), a)
	if err != nil {
		return nil, err
	}
	out := make([]snapshotView, 0, len(items))
	for i := range items {
		out = append(out, viewSnapshot(&items[i]))
	}
	return ok(map[string]any{"snapshots": out})
}

// syncSnapshot archives the agent's workspace into storage now and answers its CID.
func (s *Server) syncSnapshot(r *http.Request, c *Caller) (*Response, error) {
	ctx := r.Context()
	a, err := s.getAgent(ctx, c, r.PathValue("agentId"))
	if err != nil {
		return nil, err
	}
	if s.opts.Files == nil {
		return nil, errorf(http.StatusBadRequest, ops.MsgStorageMissing)
	}
	if err := s.probeSnapshots(ctx, a.Namespace); err != nil {
		return nil, err
	}
	sn := newSnapshot(a, s.opts.Now())
	if err := s.opts.Client.Create(ctx, sn); err != nil {
		return nil, err
	}
	done, err := s.waitForSnapshot(ctx, client.ObjectKeyFromObject(sn))
	if err != nil {
		// The caller is told it failed: leave nothing behind that could complete later.
		_ = s.opts.Client.Delete(context.WithoutCancel(ctx), sn, client.Preconditions{UID: &sn.UID})
		return nil, err
	}
	return created(map[string]any{"snapshot": viewSnapshot(done)})
}

// newSnapshot is the Snapshot a sync of a creates, owned by the agent.
func newSnapshot(a *agentsv1.Agent, now time.Time) *agentsv1.Snapshot {
	sn := &agentsv1.Snapshot{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: a.Name + "-",
			Namespace:    a.Namespace,
			Annotations:  map[string]string{agentsv1.AnnotationSnapshotRequestedAt: now.UTC().Format(time.RFC3339Nano)},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: agentsv1.GroupVersion.String(), Kind: "Agent", Name: a.Name, UID: a.UID,
			}},
		},
		Spec: agentsv1.SnapshotSpec{AgentRef: agentsv1.LocalObjectReference{Name: a.Name}},
	}
	if len(validation.IsValidLabelValue(a.Name)) == 0 {
		sn.Labels = map[string]string{agentsv1.LabelAgent: a.Name}
	}
	return sn
}

// waitForSnapshot waits until the Snapshot controller completed (the Snapshot), failed
// (500 Sync failed; 403 Storage quota exceeded when over the workspace's snapshot quota) or met an unreachable backend (503) with the Snapshot key.
func (s *Server) waitForSnapshot(ctx context.Context, key client.ObjectKey) (*agentsv1.Snapshot, error) {
	wctx, cancel := context.WithTimeout(ctx, snapshotWait)
	defer cancel()
	var waitingSince time.Time
	got := &agentsv1.Snapshot{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	err := s.ops.WaitFor(wctx, got, func() (bool, error) {
		ready := meta.FindStatusCondition(got.Status.Conditions, agentsv1.ConditionReady)
		switch {
		case got.Status.Phase == agentsv1.SnapshotCompleted:
			return true, nil
		case got.Status.Phase == agentsv1.SnapshotFailed && ready != nil && ready.Reason == agentsv1.ReasonQuotaExceeded:
			return true, withCause(http.StatusForbidden, ops.MsgStorageQuota, conditionError(ready))
		case got.Status.Phase == agentsv1.SnapshotFailed:
			return true, withCause(http.StatusInternalServerError, msgSyncFailed, conditionError(ready))
		case ready != nil && ready.Reason == agentsv1.ReasonStorageUnavailable:
			return true, fmt.Errorf("%w: %w", ErrUnavailable, conditionError(ready))
		case ready != nil && ready.Reason == agentsv1.ReasonWaitingForAgent && s.waitedTooLong(&waitingSince):
			// The workspace cannot be reached (no pod yet): it had the provisioning time.
			return true, fmt.Errorf("%w: %w", ErrUnavailable, conditionError(ready))
		}
		return false, nil
	})
	switch {
	case err == nil:
		return got, nil
	case ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
		return nil, fmt.Errorf("%w: the snapshot was not archived within %s", ErrUnavailable, snapshotWait)
	}
	return nil, err
}

// waitedTooLong starts the clock *since on its first call and reports whether the
// provisioning timeout has passed since: how long sync and reset wait for an agent whose
// workspace cannot be reached (no pod yet) before they answer 503.
func (s *Server) waitedTooLong(since *time.Time) bool {
	limit := s.provisionWait()
	if since.IsZero() {
		*since = time.Now()
	}
	return time.Since(*since) > limit
}

// conditionError turns a condition into an error for the log.
func conditionError(c *metav1.Condition) error {
	if c == nil {
		return errors.New("no condition")
	}
	return fmt.Errorf("%s: %s", c.Reason, c.Message)
}

// resetRequest is the body of POST /v0/agents/{agentId}/snapshots/reset.
type resetRequest struct {
	SnapshotCID string `json:"snapshotCid"`
}

// resetSnapshot restores the agent's workspace from a snapshot of its history and restarts
// the gateway.
func (s *Server) resetSnapshot(r *http.Request, c *Caller) (*Response, error) {
	ctx := r.Context()
	var body resetRequest
	if err := decodeJSON(r, &body, msgInvalidSnapshotCID); err != nil {
		return nil, err
	}
	want, err := storage.CanonicalCID(body.SnapshotCID)
	if err != nil || !cidPattern.MatchString(want) {
		return nil, withCause(http.StatusBadRequest, msgInvalidSnapshotCID, err)
	}
	a, err := s.getAgent(ctx, c, r.PathValue("agentId"))
	if err != nil {
		return nil, err
	}
	items, err := s.history(ctx, a)
	if err != nil {
		return nil, err
	}
	var found *agentsv1.Snapshot
	for i := range items {
		if storage.SameCID(items[i].Status.CID, want) {
			found = &items[i]
			break
		}
	}
	if found == nil {
		return nil, errorf(http.StatusNotFound, msgSnapshotNotFound)
	}
	if s.opts.Files == nil {
		return nil, errorf(http.StatusBadRequest, ops.MsgStorageMissing)
	}
	if _, err := s.opts.Files.Stat(ctx, storage.SnapshotSpace(a.Namespace), found.Status.CID); err != nil {
		if errors.Is(err, storage.ErrNotFound) {
			return nil, withCause(http.StatusNotFound, msgSnapshotNotFound, err)
		}
		return nil, storageError(err)
	}
	req, err := s.requestRestore(ctx, a, found.Status.CID)
	if err != nil {
		return nil, err
	}
	got, err := s.waitForRestore(ctx, a, req)
	if err != nil {
		return nil, err
	}
	if !got.Spec.Stopped {
		got = s.waitRunning(ctx, got)
	}
	return ok(map[string]any{"snapshot": viewSnapshot(found), "agent": viewAgent(got)})
}
