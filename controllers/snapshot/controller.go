// Package snapshot is the Snapshot controller: it archives an agent's home once into
// storage, within the workspace's snapshot quota, and keeps each agent's newest snapshots.
package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/controllers"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/storage"
	"github.com/agentplane/agentplane/internal/rules/quota"
)

// Defaults of Reconciler.
const (
	// DefaultSnapshotRetention is how many completed snapshots per agent are kept.
	DefaultSnapshotRetention = 10
	// DefaultArchiveTimeout bounds one archive (a runtime that hangs must not block forever).
	DefaultArchiveTimeout = 30 * time.Minute
)

// errPutEnded unblocks the archive writer once the store stopped reading.
var errPutEnded = errors.New("storage put ended")

// Reconciler archives each Snapshot's agent home exactly once: the runtime's
// deterministic tar is streamed through a pipe into storage (space <namespace>/snapshots), so
// memory stays bounded whatever the workspace size, and the same content always gives the same
// CID. A Snapshot that does not fit in its workspace's snapshot quota fails with
// Ready=False/QuotaExceeded and keeps no archive (snapshot_quota.go). A completed or failed
// Snapshot is never archived again. While storage is unreachable the Snapshot stays pending
// with Ready=False/StorageUnavailable and is retried with backoff.
// Completed snapshots beyond Retention per agent are deleted; the finalizer deletes an
// archive once no other Snapshot of the workspace and no AgentTemplate names its CID.
type Reconciler struct {
	client.Client
	// APIReader reads live (the reference check before an archive is deleted).
	APIReader client.Reader
	// Runtime archives workspaces.
	Runtime runtime.Runtime
	// Store holds the archives; nil fails every Snapshot with StorageNotConfigured.
	Store storage.Store
	// Retention is how many completed snapshots per agent are kept: 0 means
	// DefaultSnapshotRetention, a negative value keeps all.
	Retention int
	// RetryMin and RetryMax bound the backoff while storage is unreachable (defaults above).
	RetryMin, RetryMax time.Duration
	// Quota keeps the workspaces' snapshot quotas (spec.quotas.snapshots); nil keeps none.
	Quota *quota.Limiter
	// ArchiveTimeout bounds one archive (DefaultArchiveTimeout).
	ArchiveTimeout time.Duration
	// MaxConcurrent archives run at once (default 4).
	MaxConcurrent int
	Recorder      events.EventRecorder
	// Clock tells the time (default: the real clock).
	Clock clock.PassiveClock

	locks spaceLocks
}

// +kubebuilder:rbac:groups=agentplane.io,resources=snapshots,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=agentplane.io,resources=snapshots/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=agentplane.io,resources=snapshots/finalizers,verbs=update
// +kubebuilder:rbac:groups=agentplane.io,resources=agenttemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups=agentplane.io,resources=agents,verbs=get;list;watch

// Reconcile archives a new Snapshot, keeps the retention, and cleans up on delete, in the
// form of every reconciler here (controllers/doc.go). A pending Snapshot's pass reads it live
// before it acts (readPending).
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, reterr error) {
	snap := &agentsv1.Snapshot{}
	if err := r.Get(ctx, req.NamespacedName, snap); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if snap.DeletionTimestamp != nil {
		return r.reconcileDelete(ctx, snap)
	}
	if finished(snap) {
		return ctrl.Result{}, r.reconcileFinished(ctx, snap)
	}
	snap, agent, err := r.readPending(ctx, req.NamespacedName)
	if err != nil || snap == nil {
		return ctrl.Result{}, err
	}
	if err := r.adopt(ctx, snap, agent); err != nil {
		return ctrl.Result{}, err
	}
	// Deletions of archives in this space wait until the status is written, so none can
	// remove a blob this Put just wrote before the Snapshot naming it is recorded.
	unlock := r.locks.rlock(storage.SnapshotSpace(snap.Namespace))
	defer unlock()
	before := snap.DeepCopy()
	defer func() { controllers.PatchStatus(ctx, r.Client, snap, before, statusStep(snap), &res, &reterr) }()
	return r.reconcileNormal(ctx, snap, agent)
}

// finished: the Snapshot completed or failed; it is never archived again.
func finished(snap *agentsv1.Snapshot) bool {
	return snap.Status.Phase == agentsv1.SnapshotCompleted || snap.Status.Phase == agentsv1.SnapshotFailed
}

// reconcileFinished: an agent that is gone takes its snapshots along (as the garbage
// collector would, where none runs) and the history of completed ones keeps its size.
func (r *Reconciler) reconcileFinished(ctx context.Context, snap *agentsv1.Snapshot) error {
	if gone, err := r.ownerGone(ctx, snap); err != nil || gone {
		if gone {
			err = client.IgnoreNotFound(r.Delete(ctx, snap, client.Preconditions{UID: &snap.UID}))
		}
		return err
	}
	if snap.Status.Phase == agentsv1.SnapshotFailed {
		return nil
	}
	return r.applyRetention(ctx, snap)
}

// readPending reads the Snapshot live, and its agent (nil when it is gone or going). The cache
// may not show yet the status an earlier pass wrote: only what the API server says is still
// pending is archived, so a Snapshot is never archived twice (the event of the write that
// changed it brings it back); a nil Snapshot has nothing to do.
func (r *Reconciler) readPending(ctx context.Context, key client.ObjectKey) (*agentsv1.Snapshot, *agentsv1.Agent, error) {
	snap := &agentsv1.Snapshot{}
	if err := r.APIReader.Get(ctx, key, snap); err != nil {
		return nil, nil, client.IgnoreNotFound(err)
	}
	if snap.DeletionTimestamp != nil || finished(snap) {
		return nil, nil, nil
	}
	agent := &agentsv1.Agent{}
	err := r.Get(ctx, client.ObjectKey{Namespace: snap.Namespace, Name: snap.Spec.AgentRef.Name}, agent)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, nil, err
	}
	if err != nil || agent.DeletionTimestamp != nil {
		agent = nil
	}
	return snap, agent, nil
}

// reconcileNormal archives the agent's home (or relinks an archive storage holds) and
// records the outcome in the status; it never writes it.
func (r *Reconciler) reconcileNormal(ctx context.Context, snap *agentsv1.Snapshot, agent *agentsv1.Agent) (ctrl.Result, error) {
	switch {
	case agent == nil:
		r.fail(snap, agentsv1.ReasonAgentNotFound, fmt.Sprintf("agent %q does not exist", snap.Spec.AgentRef.Name))
		return ctrl.Result{}, nil
	case r.Store == nil:
		r.fail(snap, agentsv1.ReasonStorageNotConfigured, "no storage is configured for snapshots")
		return ctrl.Result{}, nil
	}
	if c := snap.Annotations[agentsv1.AnnotationSnapshotRelink]; c != "" {
		return r.relink(ctx, snap, c)
	}
	return r.archive(ctx, snap, agent)
}

// adopt adds the finalizer, the requested-at stamp, the owner reference to the agent and the
// agent label in one write.
func (r *Reconciler) adopt(ctx context.Context, snap *agentsv1.Snapshot, agent *agentsv1.Agent) error {
	orig := snap.DeepCopy()
	controllerutil.AddFinalizer(snap, agentsv1.SnapshotFinalizer)
	if snap.Annotations[agentsv1.AnnotationSnapshotRequestedAt] == "" {
		// Orders snapshots created in the same second (kubectl sets no such annotation).
		metav1.SetMetaDataAnnotation(&snap.ObjectMeta, agentsv1.AnnotationSnapshotRequestedAt, r.Clock.Now().UTC().Format(time.RFC3339Nano))
	}
	if agent != nil {
		if err := controllerutil.SetOwnerReference(agent, snap, r.Scheme()); err != nil {
			return err
		}
		if len(validation.IsValidLabelValue(agent.Name)) == 0 && snap.Labels[agentsv1.LabelAgent] != agent.Name {
			if snap.Labels == nil {
				snap.Labels = map[string]string{}
			}
			snap.Labels[agentsv1.LabelAgent] = agent.Name
		}
	}
	if equality.Semantic.DeepEqual(orig.ObjectMeta, snap.ObjectMeta) {
		return nil
	}
	return r.Update(ctx, snap)
}

// archive streams the agent's home into storage and records the outcome in snap.Status.
func (r *Reconciler) archive(ctx context.Context, snap *agentsv1.Snapshot, agent *agentsv1.Agent) (ctrl.Result, error) {
	space := storage.SnapshotSpace(snap.Namespace)
	timeout := r.ArchiveTimeout
	if timeout <= 0 {
		timeout = DefaultArchiveTimeout
	}
	q, ok, err := r.reserve(ctx, snap)
	if !ok {
		return ctrl.Result{}, err
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	obj, storeErr, archiveErr := r.put(actx, agent, space, q)
	if storeErr != nil || archiveErr != nil {
		q.release(ctx)
	}
	switch {
	case q.over():
		r.overQuota(ctx, snap, nil)
		return ctrl.Result{}, nil
	case storeErr == nil && archiveErr == nil:
		if err := q.settle(ctx, obj.Size); err != nil {
			r.overQuota(ctx, snap, &obj)
			return ctrl.Result{}, nil
		}
		r.complete(ctx, snap, obj, "archived")
		r.event(snap, corev1.EventTypeNormal, "Archived", "Archive", "workspace of %s archived as %s (%d bytes)", agent.Name, obj.CID, obj.Size)
		return ctrl.Result{}, nil
	case errors.Is(storeErr, storage.ErrUnavailable):
		r.pending(snap, agentsv1.ReasonStorageUnavailable, "storage is unreachable: "+storeErr.Error())
		log.FromContext(ctx).Info("snapshot storage unreachable, will retry", "error", storeErr.Error())
		return ctrl.Result{RequeueAfter: r.backoff(snap)}, nil
	case errors.Is(archiveErr, runtime.ErrNotRunning):
		r.pending(snap, agentsv1.ReasonWaitingForAgent, archiveErr.Error())
		return ctrl.Result{RequeueAfter: controllers.AgentWaitPoll}, nil
	case ctx.Err() != nil:
		return ctrl.Result{}, ctx.Err()
	case archiveErr != nil:
		r.fail(snap, agentsv1.ReasonArchiveFailed, "archiving the workspace failed: "+archiveErr.Error())
	default:
		r.fail(snap, agentsv1.ReasonArchiveFailed, "storing the archive failed: "+storeErr.Error())
	}
	return ctrl.Result{}, nil
}

// put streams the runtime's archive of the agent's home into storage.
// The archive is cut off once it outgrows the room left in the workspace's snapshot quota.
func (r *Reconciler) put(ctx context.Context, agent *agentsv1.Agent, space string, q *snapshotQuota) (storage.Object, error, error) {
	return StreamArchive(ctx, r.Store, space, func(w io.Writer) error {
		return r.Runtime.ArchiveWorkspace(ctx, agent, q.limit(w))
	})
}

// StreamArchive runs write (an archiver) into one end of a pipe and store.Put on the other, so
// the archive is hashed and stored as it is produced, in bounded memory. It returns the
// stored object, the store's own error and the archiver's error apart (an archiver failure
// also fails the Put; that is reported as the archiver's error only).
func StreamArchive(ctx context.Context, store storage.Store, space string, write func(io.Writer) error) (obj storage.Object, storeErr, archiveErr error) {
	pr, pw := io.Pipe()
	archived := make(chan error, 1)
	go func() {
		err := write(pw)
		_ = pw.CloseWithError(err) // nil: the reader sees EOF
		archived <- err
	}()
	obj, storeErr = store.Put(ctx, space, pr)
	_ = pr.CloseWithError(errPutEnded)
	archiveErr = <-archived
	if archiveErr != nil && errors.Is(archiveErr, errPutEnded) {
		archiveErr = nil // the store gave up first; its error says why
	}
	if archiveErr != nil && storeErr != nil && !errors.Is(storeErr, storage.ErrUnavailable) {
		storeErr = nil // the store only reports the archive's failure
	}
	if storeErr == nil && archiveErr == nil && obj.CID == "" {
		storeErr = errors.New("storage returned no CID")
	}
	return obj, storeErr, archiveErr
}

// fail ends the Snapshot: phase failed, Ready=False with reason.
func (r *Reconciler) fail(snap *agentsv1.Snapshot, reason, msg string) {
	snap.Status.Phase = agentsv1.SnapshotFailed
	meta.SetStatusCondition(&snap.Status.Conditions, computeReadyCondition(snap, metav1.ConditionFalse, reason, msg))
	r.event(snap, corev1.EventTypeWarning, reason, "Archive", "%s", controllers.TruncateMessage(msg))
}

// pending keeps the Snapshot waiting with Ready=False and reason.
func (r *Reconciler) pending(snap *agentsv1.Snapshot, reason, msg string) {
	snap.Status.Phase = agentsv1.SnapshotPending
	meta.SetStatusCondition(&snap.Status.Conditions, computeReadyCondition(snap, metav1.ConditionFalse, reason, msg))
}

// computeReadyCondition is the Snapshot's Ready condition for what its archive came to.
func computeReadyCondition(snap *agentsv1.Snapshot, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{
		Type: agentsv1.ConditionReady, Status: status, ObservedGeneration: snap.Generation,
		Reason: reason, Message: controllers.TruncateMessage(msg),
	}
}

// backoff is the wait before the next attempt while storage is unreachable: as long as the
// outage has lasted so far (so the waits double), within RetryMin and RetryMax.
func (r *Reconciler) backoff(snap *agentsv1.Snapshot) time.Duration {
	since := time.Duration(0)
	if c := meta.FindStatusCondition(snap.Status.Conditions, agentsv1.ConditionReady); c != nil {
		since = r.Clock.Now().Sub(c.LastTransitionTime.Time)
	}
	return controllers.RetryWait(since, r.RetryMin, r.RetryMax)
}

// statusStep writes the status when it changed, without optimistic lock: no conflict may
// force a second archive. observedGeneration moves on a pass that converged: no error, and
// storage was reached.
func statusStep(snap *agentsv1.Snapshot) controllers.StatusStep {
	return controllers.StatusStep{
		Compute: func(passOK bool) bool {
			c := meta.FindStatusCondition(snap.Status.Conditions, agentsv1.ConditionReady)
			if passOK && (c == nil || c.Reason != agentsv1.ReasonStorageUnavailable) {
				snap.Status.ObservedGeneration = snap.Generation
			}
			return true
		},
		Options: []controllers.StatusPatchOption{controllers.WithoutLock},
	}
}

func (r *Reconciler) event(snap *agentsv1.Snapshot, typ, reason, action, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(snap, nil, typ, reason, action, note, args...)
	}
}

// SetupWithManager registers the controller for Snapshots, and for the deletion of Agents
// (their snapshots go with them).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	n := r.MaxConcurrent
	if n <= 0 {
		n = 4
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&agentsv1.Snapshot{}).
		Watches(&agentsv1.Agent{}, handler.EnqueueRequestsFromMapFunc(controllers.SnapshotsOfAgent(r.Client)),
			builder.WithPredicates(predicate.Funcs{
				CreateFunc: func(event.CreateEvent) bool { return false },
				UpdateFunc: func(event.UpdateEvent) bool { return false },
				DeleteFunc: func(event.DeleteEvent) bool { return true },
			})).
		WithOptions(controller.Options{MaxConcurrentReconciles: n}).
		Named("snapshot").
		Complete(r)
}
