package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"time"

	"github.com/agentplane/agentplane/internal/ops"
	"github.com/agentplane/agentplane/internal/storage"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// cidPattern is the CRD's pattern for spec.desiredSnapshot.
var cidPattern = regexp.MustCompile(agentsv1.CIDPattern)

// restoreRequest is the spec the facade wrote, for waitForRestore.
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
// have changed since). The facade writes no status: the controller alone reports the outcome.
func (s *Server) requestRestore(ctx context.Context, a *agentsv1.Agent, cid string) (restoreRequest, error) {
	req := restoreRequest{cid: cid}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &agentsv1.Agent{}
		if err := s.opts.APIReader.Get(ctx, client.ObjectKeyFromObject(a), cur); err != nil {
			return err
		}
		req.at = s.stampAfter(cur.Spec.RestoreRequestedAt)
		cur.Spec.DesiredSnapshot, cur.Spec.RestoreRequestedAt = cid, req.at.DeepCopy()
		if err := s.opts.Client.Update(ctx, cur); err != nil {
			return err
		}
		req.generation = cur.Generation
		return nil
	})
	if apierrors.IsNotFound(err) {
		return req, withCause(http.StatusNotFound, ops.MsgAgentNotFound, err)
	}
	return req, err
}

// waitForRestore waits for the controller's acknowledgement of req: the SnapshotRestored
// condition of the request's generation (or a later one), True once status.snapshotCid and
// status.lastRestoreAt show the request carried out, False with the reason it failed.
func (s *Server) waitForRestore(ctx context.Context, a *agentsv1.Agent, req restoreRequest) (*agentsv1.Agent, error) {
	wctx, cancel := context.WithTimeout(ctx, snapshotWait)
	defer cancel()
	got := a.DeepCopy()
	var waitingSince time.Time
	err := s.ops.WaitFor(wctx, got, func() (bool, error) {
		c := meta.FindStatusCondition(got.Status.Conditions, agentsv1.AgentSnapshotRestored)
		switch {
		case req.doneBy(got):
			return true, nil
		case c == nil || c.ObservedGeneration < req.generation || c.Status != metav1.ConditionFalse:
			return false, nil
		case c.Reason != agentsv1.ReasonWaitingForAgent:
			return true, restoreFailure(c)
		case s.waitedTooLong(&waitingSince):
			return true, fmt.Errorf("%w: %w", ErrUnavailable, conditionError(c))
		}
		return false, nil
	})
	switch {
	case err == nil:
		return got, nil
	case ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
		if gerr := s.opts.APIReader.Get(ctx, client.ObjectKeyFromObject(a), &agentsv1.Agent{}); apierrors.IsNotFound(gerr) {
			return nil, withCause(http.StatusNotFound, ops.MsgAgentNotFound, gerr)
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

// restoreFailure maps the controller's reason to the answer.
func restoreFailure(c *metav1.Condition) error {
	cause := conditionError(c)
	switch c.Reason {
	case agentsv1.ReasonSnapshotNotFound:
		return withCause(http.StatusNotFound, msgSnapshotNotFound, cause)
	case agentsv1.ReasonStorageUnavailable:
		return fmt.Errorf("%w: %w", ErrUnavailable, cause)
	case agentsv1.ReasonStorageNotConfigured:
		return withCause(http.StatusBadRequest, ops.MsgStorageMissing, cause)
	}
	return withCause(http.StatusInternalServerError, msgResetFailed, cause)
}

// waitRunning waits (at most the provisioning timeout) for the gateway the restore restarted
// to answer again, or to be reported down; it returns the agent as last seen.
func (s *Server) waitRunning(ctx context.Context, a *agentsv1.Agent) *agentsv1.Agent {
	ctx, cancel := context.WithTimeout(ctx, s.provisionWait())
	defer cancel()
	got := a.DeepCopy()
	_ = s.ops.WaitFor(ctx, got, func() (bool, error) {
		return got.Status.ObservedGeneration >= got.Generation &&
			(got.Status.Phase == agentsv1.AgentRunning || got.Status.Phase == agentsv1.AgentNotRunning), nil
	})
	return got
}
