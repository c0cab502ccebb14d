package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"time"

	"github.com/agentplane/agentplane/internal/storage"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// cidPattern is the CRD's pattern for spec.desiredSnapshot.
var cidPattern = regexp.MustCompile(agentsv1.CIDPattern)

// restoreRequest is what requestRestore did, for waitForRestore.
type restoreRequest struct {
	cid string
	// generation of the Agent once spec.desiredSnapshot named cid.
	generation int64
	// marked: the status was marked (condition Unknown), so a later False is about this request.
	marked bool
	// at is when the status was marked (seconds, as conditions keep them).
	at time.Time
}

// requestRestore asks the Agent controller to restore cid: it sets spec.desiredSnapshot. When
// that alone would not make the controller act (the same CID was asked for, or last restored,
// before) it also marks the status — the SnapshotRestored condition Unknown and, if the
// workspace was last restored from cid, status.snapshotCid cleared — so the controller
// restores again (the workspace may have changed since) and the outcome can be told apart
// from an earlier one.
func (s *Server) requestRestore(ctx context.Context, a *agentsv1.Agent, cid string) (restoreRequest, error) {
	key := client.ObjectKeyFromObject(a)
	req := restoreRequest{cid: cid}
	changed, restoredFrom := false, ""
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &agentsv1.Agent{}
		if err := s.opts.APIReader.Get(ctx, key, cur); err != nil {
			return err
		}
		req.generation, changed, restoredFrom = cur.Generation, false, cur.Status.SnapshotCID
		if cur.Spec.DesiredSnapshot == cid {
			return nil
		}
		cur.Spec.DesiredSnapshot = cid
		if err := s.opts.Client.Update(ctx, cur); err != nil {
			return err
		}
		req.generation, changed = cur.Generation, true
		return nil
	})
	if err != nil || changed && !storage.SameCID(restoredFrom, cid) {
		return req, resetError(err)
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &agentsv1.Agent{}
		if err := s.opts.APIReader.Get(ctx, key, cur); err != nil {
			return err
		}
		orig := cur.DeepCopy()
		if storage.SameCID(cur.Status.SnapshotCID, cid) {
			cur.Status.SnapshotCID = ""
		}
		req.at = s.opts.Now().Truncate(time.Second)
		meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{
			Type: agentsv1.AgentSnapshotRestored, Status: metav1.ConditionUnknown, ObservedGeneration: cur.Generation,
			Reason: agentsv1.ReasonRestoreRequested, Message: fmt.Sprintf("restore of snapshot %s requested", cid),
		})
		return s.opts.Client.Status().Patch(ctx, cur, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
	})
	if err == nil {
		// The controller reacts to spec and metadata changes, not to status writes: touch an
		// annotation so it takes the request up.
		err = s.touchAgent(ctx, key, agentsv1.AnnotationRestoreRequested, s.opts.Now().UTC().Format(time.RFC3339Nano))
	}
	req.marked = err == nil
	return req, resetError(err)
}

// resetError maps a failed write of the reset request.
func resetError(err error) error {
	if apierrors.IsNotFound(err) {
		return withCause(http.StatusNotFound, msgAgentNotFound, err)
	}
	return err
}

// waitForRestore polls the Agent (live, to see our own status write) until status.snapshotCid
// names the requested CID, or the SnapshotRestored condition reports a failure of this request.
func (s *Server) waitForRestore(ctx context.Context, key client.ObjectKey, req restoreRequest) (*agentsv1.Agent, error) {
	ctx, cancel := context.WithTimeout(ctx, snapshotWait)
	defer cancel()
	tick := time.NewTicker(2 * snapshotPoll)
	defer tick.Stop()
	var waitingSince time.Time
	for {
		got := &agentsv1.Agent{}
		err := s.opts.APIReader.Get(ctx, key, got)
		switch {
		case err == nil:
			if storage.SameCID(got.Status.SnapshotCID, req.cid) {
				return got, nil
			}
			c := meta.FindStatusCondition(got.Status.Conditions, agentsv1.AgentSnapshotRestored)
			if c != nil && req.failedBy(c) {
				return nil, restoreFailure(c)
			}
			if c != nil && c.Reason == agentsv1.ReasonWaitingForAgent && s.waitedTooLong(&waitingSince) {
				return nil, fmt.Errorf("%w: %w", ErrUnavailable, conditionError(c))
			}
		case apierrors.IsNotFound(err):
			return nil, withCause(http.StatusNotFound, msgAgentNotFound, err)
		case ctx.Err() == nil:
			return nil, err
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, fmt.Errorf("%w: the workspace was not restored within %s", ErrUnavailable, snapshotWait)
			}
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}

// failedBy reports whether c is a failure of this request (not an earlier one's).
func (req restoreRequest) failedBy(c *metav1.Condition) bool {
	if c.Status != metav1.ConditionFalse || c.Reason == agentsv1.ReasonWaitingForAgent || c.ObservedGeneration < req.generation {
		return false
	}
	return !req.marked || !c.LastTransitionTime.Time.Before(req.at)
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
		return withCause(http.StatusBadRequest, msgStorageMissing, cause)
	}
	return withCause(http.StatusInternalServerError, msgResetFailed, cause)
}

// waitRunning waits (at most the provisioning timeout) for the gateway the restore restarted
// to answer again, or to be reported down; it returns the agent as last seen.
func (s *Server) waitRunning(ctx context.Context, a *agentsv1.Agent) *agentsv1.Agent {
	timeout := s.opts.ProvisionTimeout
	if timeout <= 0 {
		timeout = defaultProvisionWait
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(2 * snapshotPoll)
	defer tick.Stop()
	cur := a
	for {
		if cur.Status.ObservedGeneration >= cur.Generation &&
			(cur.Status.Phase == agentsv1.AgentRunning || cur.Status.Phase == agentsv1.AgentNotRunning) {
			return cur
		}
		select {
		case <-ctx.Done():
			return cur
		case <-tick.C:
		}
		got := &agentsv1.Agent{}
		if err := s.opts.APIReader.Get(ctx, client.ObjectKeyFromObject(a), got); err == nil {
			cur = got
		}
	}
}

// touchAgent sets an annotation on the agent (a metadata change the Agent and Channel
// controllers react to). A merge patch of one annotation needs no read first.
func (s *Server) touchAgent(ctx context.Context, key client.ObjectKey, name, value string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{name: value}}})
	if err != nil {
		return err
	}
	a := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	return s.opts.Client.Patch(ctx, a, client.RawPatch(types.MergePatchType, patch))
}
