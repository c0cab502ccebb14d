package ops

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/storage"
	"github.com/agentplane/agentplane/internal/rules/snapshots"
)

// Snapshot messages (fixed by the contract, except MsgResetFailed).
const (
	MsgSyncFailed         = "Sync failed"
	MsgSnapshotNotFound   = "Snapshot not found"
	MsgInvalidSnapshotCID = "Invalid snapshot CID"
	MsgResetFailed        = "Reset failed"
	// snapshotWait bounds how long sync and reset wait for the controllers.
	snapshotWait = 10 * time.Minute
)

// Snapshots are the agent's snapshot history (completed snapshots, newest first, read
// live), once the snapshot storage, when configured, answers (Unavailable when it does not).
func (o *Ops) Snapshots(ctx context.Context, t Scope, agentID string) ([]agentsv1.Snapshot, error) {
	a, err := o.Agent(ctx, t, agentID)
	if err != nil {
		return nil, err
	}
	if o.d.Files != nil {
		if err := o.probeSnapshots(ctx, a.Namespace); err != nil {
			return nil, err
		}
	}
	return o.history(ctx, a)
}

// SyncSnapshot archives the agent's home into storage now: it creates a Snapshot and
// waits for the Snapshot controller to archive it. A sync that fails leaves no Snapshot
// behind that could complete later.
func (o *Ops) SyncSnapshot(ctx context.Context, t Scope, agentID string) (*agentsv1.Snapshot, error) {
	a, err := o.Agent(ctx, t, agentID)
	if err != nil {
		return nil, err
	}
	if o.d.Files == nil {
		return nil, Fail(Invalid, MsgStorageMissing)
	}
	if err := o.probeSnapshots(ctx, a.Namespace); err != nil {
		return nil, err
	}
	sn := newSnapshot(a, o.d.Now())
	if err := o.d.Client.Create(ctx, sn); err != nil {
		return nil, err
	}
	done, err := o.waitForSnapshot(ctx, client.ObjectKeyFromObject(sn))
	if err != nil {
		// The caller is told it failed: leave nothing behind that could complete later.
		_ = o.d.Client.Delete(context.WithoutCancel(ctx), sn, client.Preconditions{UID: &sn.UID})
		return nil, err
	}
	return done, nil
}

// probeSnapshots checks that the snapshot storage answers (Unavailable when it does not).
func (o *Ops) probeSnapshots(ctx context.Context, namespace string) error {
	if _, err := o.d.Files.List(ctx, storage.SnapshotSpace(namespace)); err != nil {
		return StorageError(err)
	}
	return nil
}

// history is the agent's completed snapshots, newest first, read live.
func (o *Ops) history(ctx context.Context, a *agentsv1.Agent) ([]agentsv1.Snapshot, error) {
	var list agentsv1.SnapshotList
	if err := o.d.APIReader.List(ctx, &list, client.InNamespace(a.Namespace)); err != nil {
		return nil, err
	}
	return snapshots.Completed(list.Items, a.Name), nil
}

// newSnapshot is the Snapshot a sync of a creates, owned by the agent.
func newSnapshot(a *agentsv1.Agent, now time.Time) *agentsv1.Snapshot {
	sn := &agentsv1.Snapshot{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: a.Name + "-",
			Namespace:    a.Namespace,
			Annotations:  map[string]string{agentsv1.AnnotationSnapshotRequestedAt: now.UTC().Format(time.RFC3339Nano)},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: agentsv1.GroupVersion.String(), Kind: agentsv1.KindAgent, Name: a.Name, UID: a.UID,
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
// (Internal `Sync failed`; Forbidden `Storage quota exceeded` when over the workspace's
// snapshot quota) or met an unreachable backend (Unavailable) with the Snapshot key.
func (o *Ops) waitForSnapshot(ctx context.Context, key client.ObjectKey) (*agentsv1.Snapshot, error) {
	wctx, cancel := context.WithTimeout(ctx, snapshotWait)
	defer cancel()
	var waitingSince time.Time
	got := &agentsv1.Snapshot{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	err := o.WaitFor(wctx, got, func() (bool, error) {
		ready := meta.FindStatusCondition(got.Status.Conditions, agentsv1.ConditionReady)
		switch {
		case got.Status.Phase == agentsv1.SnapshotCompleted:
			return true, nil
		case got.Status.Phase == agentsv1.SnapshotFailed && ready != nil && ready.Reason == agentsv1.ReasonQuotaExceeded:
			return true, Because(Forbidden, MsgStorageQuota, conditionCause(ready))
		case got.Status.Phase == agentsv1.SnapshotFailed:
			return true, Because(Internal, MsgSyncFailed, conditionCause(ready))
		case ready != nil && ready.Reason == agentsv1.ReasonStorageUnavailable:
			return true, fmt.Errorf("%w: %w", ErrUnavailable, conditionCause(ready))
		case ready != nil && ready.Reason == agentsv1.ReasonWaitingForAgent && o.waitedTooLong(&waitingSince):
			// The workspace cannot be reached (no pod yet): it had the provisioning time.
			return true, fmt.Errorf("%w: %w", ErrUnavailable, conditionCause(ready))
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
// workspace cannot be reached (no pod yet) before they fail Unavailable.
func (o *Ops) waitedTooLong(since *time.Time) bool {
	limit := o.ProvisionWait()
	if since.IsZero() {
		*since = time.Now()
	}
	return time.Since(*since) > limit
}

// conditionCause turns a condition into an error for the log.
func conditionCause(c *metav1.Condition) error {
	if c == nil {
		return errors.New("no condition")
	}
	return fmt.Errorf("%s: %s", c.Reason, c.Message)
}
