package ops

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/storage"
)

// snapshotCIDPattern is the CRD's pattern for spec.desiredSnapshot.
var snapshotCIDPattern = regexp.MustCompile(agentsv1.CIDPattern)

// ResetSnapshot restores the agent's home from a snapshot of its history (by CID) and
// waits for the Agent controller to carry it out, which restarts the gateway, and then for the
// gateway to answer again (at most the provisioning timeout). It returns the snapshot and the
// agent as last seen.
func (o *Ops) ResetSnapshot(ctx context.Context, t Scope, agentID, cid string) (*agentsv1.Snapshot, *agentsv1.Agent, error) {
	want, err := storage.CanonicalCID(cid)
	if err != nil || !snapshotCIDPattern.MatchString(want) {
		return nil, nil, Because(Invalid, MsgInvalidSnapshotCID, err)
	}
	a, err := o.Agent(ctx, t, agentID)
	if err != nil {
		return nil, nil, err
	}
	found, err := o.snapshotOf(ctx, a, want)
	if err != nil {
		return nil, nil, err
	}
	req, err := o.requestRestore(ctx, a, found.Status.CID)
	if err != nil {
		return nil, nil, err
	}
	got, err := o.waitForRestore(ctx, a, req)
	if err != nil {
		return nil, nil, err
	}
	if !got.Spec.Stopped {
		got = o.waitRunning(ctx, got)
	}
	return found, got, nil
}

// snapshotOf finds the snapshot of the agent's history with the CID want, and checks that
// its archive is in storage.
func (o *Ops) snapshotOf(ctx context.Context, a *agentsv1.Agent, want string) (*agentsv1.Snapshot, error) {
	items, err := o.history(ctx, a)
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
		return nil, Fail(NotFound, MsgSnapshotNotFound)
	}
	if o.d.Files == nil {
		return nil, Fail(Invalid, MsgStorageMissing)
	}
	if _, err := o.d.Files.Stat(ctx, storage.SnapshotSpace(a.Namespace), found.Status.CID); err != nil {
		if errors.Is(err, storage.ErrNotFound) {
			return nil, Because(NotFound, MsgSnapshotNotFound, err)
		}
		return nil, StorageError(err)
	}
	return found, nil
}

// restoreRequest is the spec the operation wrote, for waitForRestore.
type restoreRequest struct {
	cid string
	// generation of the Agent with the request in its spec.
	generation int64
	// at is the request stamp (spec.restoreRequestedAt).
	at metav1.Time
}

// requestRestore asks the Agent controller to restore cid: one spec update sets
// spec.desiredSnapshot and a new spec.restoreRequestedAt, strictly later than the previous
// one, so the controller restores even when the workspace was last restored from cid (it may
// have changed since). The operation writes no status: the controller alone reports the
// outcome.
func (o *Ops) requestRestore(ctx context.Context, a *agentsv1.Agent, cid string) (restoreRequest, error) {
	req := restoreRequest{cid: cid}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &agentsv1.Agent{}
		if err := o.d.APIReader.Get(ctx, client.ObjectKeyFromObject(a), cur); err != nil {
			return err
		}
		req.at = o.StampAfter(cur.Spec.RestoreRequestedAt)
		cur.Spec.DesiredSnapshot, cur.Spec.RestoreRequestedAt = cid, req.at.DeepCopy()
		if err := o.d.Client.Update(ctx, cur); err != nil {
			return err
		}
		req.generation = cur.Generation
		return nil
	})
	if apierrors.IsNotFound(err) {
		return req, Because(NotFound, MsgAgentNotFound, err)
	}
	return req, err
}

// waitForRestore waits for the controller's acknowledgement of req: the SnapshotRestored
// condition of the request's generation (or a later one), True once status.snapshotCid and
// status.lastRestoreAt show the request carried out, False with the reason it failed.
func (o *Ops) waitForRestore(ctx context.Context, a *agentsv1.Agent, req restoreRequest) (*agentsv1.Agent, error) {
	wctx, cancel := context.WithTimeout(ctx, snapshotWait)
	defer cancel()
	got := a.DeepCopy()
	var waitingSince time.Time
	err := o.WaitFor(wctx, got, func() (bool, error) {
		c := meta.FindStatusCondition(got.Status.Conditions, agentsv1.AgentSnapshotRestored)
		switch {
		case req.doneBy(got):
			return true, nil
		case c == nil || c.ObservedGeneration < req.generation || c.Status != metav1.ConditionFalse:
			return false, nil
		case c.Reason != agentsv1.ReasonWaitingForAgent:
			return true, restoreFailure(c)
		case o.waitedTooLong(&waitingSince):
			return true, fmt.Errorf("%w: %w", ErrUnavailable, conditionCause(c))
		}
		return false, nil
	})
	switch {
	case err == nil:
		return got, nil
	case ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
		if gerr := o.d.APIReader.Get(ctx, client.ObjectKeyFromObject(a), &agentsv1.Agent{}); apierrors.IsNotFound(gerr) {
			return nil, Because(NotFound, MsgAgentNotFound, gerr)
		}
		return nil, fmt.Errorf("%w: the workspace was not restored within %s", ErrUnavailable, snapshotWait)
	}
	return nil, err
}

// doneBy reports whether got shows the request carried out.
func (req restoreRequest) doneBy(got *agentsv1.Agent) bool {
	c := meta.FindStatusCondition(got.Status.Conditions, agentsv1.AgentSnapshotRestored)
	last := got.Status.LastRestoreAt
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration >= req.generation &&
		storage.SameCID(got.Status.SnapshotCID, req.cid) && last != nil && !last.Before(&req.at)
}

// restoreFailure maps the controller's reason to the operation's failure.
func restoreFailure(c *metav1.Condition) error {
	cause := conditionCause(c)
	switch c.Reason {
	case agentsv1.ReasonSnapshotNotFound:
		return Because(NotFound, MsgSnapshotNotFound, cause)
	case agentsv1.ReasonStorageUnavailable:
		return fmt.Errorf("%w: %w", ErrUnavailable, cause)
	case agentsv1.ReasonStorageNotConfigured:
		return Because(Invalid, MsgStorageMissing, cause)
	}
	return Because(Internal, MsgResetFailed, cause)
}

// waitRunning waits (at most the provisioning timeout) for the gateway the restore restarted
// to answer again, or to fail to start (startVerdict: one early exit, which its runtime
// restarts, is no verdict); it returns the agent as last seen.
func (o *Ops) waitRunning(ctx context.Context, a *agentsv1.Agent) *agentsv1.Agent {
	ctx, cancel := context.WithTimeout(ctx, o.ProvisionWait())
	defer cancel()
	got := a.DeepCopy()
	var start startVerdict
	_ = o.WaitFor(ctx, got, func() (bool, error) {
		if got.Status.ObservedGeneration < got.Generation {
			return false, nil
		}
		running, failed := start.see(got)
		return running || failed, nil
	})
	return got
}
