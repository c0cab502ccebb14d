package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/controllers"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/snapshotstore"
	"github.com/agentplane/agentplane/internal/adapters/storage"
	"github.com/agentplane/agentplane/internal/rules/snapshots"
)

// restoreSnapshot carries out a restore request: spec.desiredSnapshot names a CID the
// workspace was not last restored from (status.snapshotCid), or spec.restoreRequestedAt is
// later than the request last carried out (status.lastRestoreAt) — both doors, kubectl and
// REST reset, write only these spec fields. The CID must be a completed Snapshot of this agent
// or a template's snapshot (templates seed new agents with it). The runtime replaces the
// workspace atomically and restarts a running gateway; then status.snapshotCid and
// status.lastRestoreAt record the request. The SnapshotRestored condition (with the
// generation of the request) reports the outcome; unreachable storage and a failed restore
// are retried with backoff, a CID that is no snapshot of the agent is not (until the spec
// changes).
func (r *Reconciler) restoreSnapshot(ctx context.Context, agent *agentsv1.Agent) (ctrl.Result, error) {
	want := agent.Spec.DesiredSnapshot
	if !restorePending(agent) {
		return ctrl.Result{}, nil
	}
	if r.Snapshots == nil {
		r.setRestored(agent, metav1.ConditionFalse, agentsv1.ReasonStorageNotConfigured, "snapshot %s: no storage is configured", want)
		return ctrl.Result{}, nil
	}
	var reader client.Reader = r.Client
	if r.SnapshotReader != nil {
		reader = r.SnapshotReader
		// The cache may not show yet the status an earlier pass wrote: never restore twice
		// (the event of that write brings the agent back).
		live := &agentsv1.Agent{}
		if err := reader.Get(ctx, client.ObjectKeyFromObject(agent), live); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		if live.Spec.DesiredSnapshot != want || !restorePending(live) {
			return ctrl.Result{}, nil
		}
	}
	allowed, err := snapshotAllowed(ctx, reader, agent, want)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !allowed {
		r.setRestored(agent, metav1.ConditionFalse, agentsv1.ReasonSnapshotNotFound,
			"snapshot %s is neither a completed snapshot of this agent nor a template's snapshot", want)
		return ctrl.Result{}, nil
	}
	space, err := snapshotstore.Locator{Reader: reader, Store: r.Snapshots}.Locate(ctx, agent.Namespace, want)
	if err != nil {
		return r.restoreFailed(ctx, agent, want, err)
	}
	rc, _, err := r.Snapshots.Get(ctx, space, want)
	if err != nil {
		return r.restoreFailed(ctx, agent, want, err)
	}
	defer rc.Close()
	wasRunning := agent.Status.Phase != agentsv1.AgentNotRunning && !agent.Spec.Stopped
	if err := r.Runtime.RestoreWorkspace(ctx, agent, rc); err != nil {
		return r.restoreFailed(ctx, agent, want, err)
	}
	agent.Status.SnapshotCID = want
	agent.Status.LastRestoreAt = agent.Spec.RestoreRequestedAt.DeepCopy()
	// The restore replaced the workspace, skills/ included: unpack the attached skills again.
	agent.Status.InstalledSkills = nil
	r.unpacked.store(agent.UID, nil)
	r.setRestored(agent, metav1.ConditionTrue, agentsv1.ReasonRestored, "workspace restored from snapshot %s", want)
	r.event(agent, corev1.EventTypeNormal, agentsv1.ReasonRestored, "Restore", "workspace restored from snapshot %s", want)
	log.FromContext(ctx).Info("workspace restored", "snapshot", want)
	if wasRunning {
		// The runtime restarted the gateway: report it starting until it is observed again.
		applyObserved(agent, runtime.Observed{
			Phase: runtime.PhaseStarting, Message: "the gateway restarts after a workspace restore",
			Endpoint: agent.Status.Endpoint, EngineVersion: agent.Status.EngineVersion, Restarts: agent.Status.Restarts,
		}, r.Clock.Now())
		return ctrl.Result{RequeueAfter: startingPoll}, nil
	}
	return ctrl.Result{}, nil
}

// restorePending: the spec asks for a restore the status does not show carried out.
func restorePending(agent *agentsv1.Agent) bool {
	want := agent.Spec.DesiredSnapshot
	if want == "" {
		return false
	}
	if !storage.SameCID(want, agent.Status.SnapshotCID) {
		return true
	}
	asked, done := agent.Spec.RestoreRequestedAt, agent.Status.LastRestoreAt
	return asked != nil && (done == nil || asked.After(done.Time))
}

// restoreFailed records why the restore of want did not happen and when to try again.
func (r *Reconciler) restoreFailed(ctx context.Context, agent *agentsv1.Agent, want string, err error) (ctrl.Result, error) {
	switch {
	case errors.Is(err, storage.ErrUnavailable):
		r.setRestored(agent, metav1.ConditionFalse, agentsv1.ReasonStorageUnavailable, "snapshot %s: storage is unreachable: %v", want, err)
	case errors.Is(err, storage.ErrNotFound):
		r.setRestored(agent, metav1.ConditionFalse, agentsv1.ReasonSnapshotNotFound, "snapshot %s: storage does not hold it", want)
		return ctrl.Result{}, nil
	case errors.Is(err, runtime.ErrNotRunning):
		r.setRestored(agent, metav1.ConditionFalse, agentsv1.ReasonWaitingForAgent, "snapshot %s: %v", want, err)
		return ctrl.Result{RequeueAfter: controllers.AgentWaitPoll}, nil
	case ctx.Err() != nil:
		return ctrl.Result{}, ctx.Err()
	default:
		r.setRestored(agent, metav1.ConditionFalse, agentsv1.ReasonRestoreFailed, "snapshot %s: restore failed: %v", want, err)
		r.event(agent, corev1.EventTypeWarning, agentsv1.ReasonRestoreFailed, "Restore", "restore of snapshot %s failed", want)
	}
	var since time.Duration
	if c := meta.FindStatusCondition(agent.Status.Conditions, agentsv1.AgentSnapshotRestored); c != nil {
		since = r.Clock.Now().Sub(c.LastTransitionTime.Time)
	}
	return ctrl.Result{RequeueAfter: controllers.RetryWait(since, controllers.DefaultStorageRetryMin, controllers.DefaultStorageRetryMax)}, nil
}

// setRestored sets the SnapshotRestored condition.
func (r *Reconciler) setRestored(agent *agentsv1.Agent, status metav1.ConditionStatus, reason, format string, args ...any) {
	meta.SetStatusCondition(&agent.Status.Conditions, metav1.Condition{
		Type: agentsv1.AgentSnapshotRestored, Status: status, ObservedGeneration: agent.Generation,
		Reason: reason, Message: controllers.TruncateMessage(fmt.Sprintf(format, args...)),
	})
}

// snapshotAllowed reports whether an agent may be restored from cid: a completed Snapshot of
// the agent, the snapshot of the agent's template, or that of a published template.
func snapshotAllowed(ctx context.Context, reader client.Reader, agent *agentsv1.Agent, cid string) (bool, error) {
	var snaps agentsv1.SnapshotList
	if err := reader.List(ctx, &snaps, client.InNamespace(agent.Namespace), client.MatchingFields{agentsv1.IndexAgentRef: agent.Name}); err != nil {
		return false, err
	}
	for _, s := range snapshots.Completed(snaps.Items, agent.Name) {
		if storage.SameCID(s.Status.CID, cid) {
			return true, nil
		}
	}
	var templates agentsv1.AgentTemplateList
	if err := reader.List(ctx, &templates); err != nil {
		return false, err
	}
	for i := range templates.Items {
		t := &templates.Items[i]
		if storage.SameCID(t.Spec.SnapshotCID, cid) && (t.Name == agent.Spec.Template || t.Spec.State == agentsv1.TemplatePublished) {
			return true, nil
		}
	}
	return false, nil
}
