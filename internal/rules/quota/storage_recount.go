package quota

import (
	"context"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// storageTally is a count rebuilt from the objects: their bytes and number, and the names of
// the reservations they settle (a reservation whose object is counted is dropped).
type storageTally struct {
	bytes, objects int64
	settles        map[string]bool
}

// RecountStorage rebuilds workspace ws's count of kind from its objects, listed live after the
// Workspace is read (the write, guarded by the Workspace's resourceVersion, fails if a
// reservation, settle or free moved meanwhile; the objects are listed as they are now, not
// at that resourceVersion, which can predate them: an object whose settle was lost changed
// nothing of the Workspace): files from their File objects, snapshots from their completed Snapshots,
// uploads from their agents' tallies (AnnotationUploads). Reservations whose object is counted
// and stale ones are dropped. An upload's tally lands before its settle and names no
// reservation, so uploads are recounted only while no upload is in flight. It repairs what a
// lost settle or free left behind, and gives back the uploads of deleted agents.
func (l *Limiter) RecountStorage(ctx context.Context, ws string, kind agentsv1.StorageKind) error {
	key := client.ObjectKey{Name: ws}
	l.last.Delete(key)
	err := l.update(ctx, key, newWorkspaceHolder, func(h holder) (bool, error) {
		_, c := storageCount(h, kind)
		fresh := slices.ContainsFunc(c.Pending, func(r agentsv1.StorageReservation) bool { return !l.storageStale(r) })
		if kind == agentsv1.StorageUploads && fresh {
			return false, nil
		}
		tally, err := l.tally(ctx, ws, kind)
		if err != nil {
			return false, err
		}
		next := agentsv1.StorageCount{Bytes: tally.bytes, Objects: tally.objects}
		for _, r := range c.Pending {
			if !tally.settles[r.Name] && !l.storageStale(r) {
				next.Pending = append(next.Pending, r)
			}
		}
		if next.Bytes == c.Bytes && next.Objects == c.Objects && len(next.Pending) == len(c.Pending) {
			return false, nil
		}
		*c = next
		return true, nil
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// tally counts workspace ws's objects of kind, listed live page by page.
func (l *Limiter) tally(ctx context.Context, ws string, kind agentsv1.StorageKind) (*storageTally, error) {
	t := &storageTally{settles: map[string]bool{}}
	opts := &client.ListOptions{Namespace: ws, Limit: recountPage}
	for {
		var cont string
		switch kind {
		case agentsv1.StorageFiles:
			var page agentsv1.FileList
			if err := l.Reader.List(ctx, &page, opts); err != nil {
				return nil, err
			}
			for _, f := range page.Items {
				t.add(f.Spec.Size, 1, f.Annotations[agentsv1.AnnotationStorageReservation])
			}
			cont = page.Continue
		case agentsv1.StorageSnapshots:
			var page agentsv1.SnapshotList
			if err := l.Reader.List(ctx, &page, opts); err != nil {
				return nil, err
			}
			for _, s := range page.Items {
				if s.Status.Phase == agentsv1.SnapshotCompleted {
					t.add(s.Status.Size, 1, s.Name)
				}
			}
			cont = page.Continue
		case agentsv1.StorageUploads:
			var page agentsv1.AgentList
			if err := l.Reader.List(ctx, &page, opts); err != nil {
				return nil, err
			}
			for i := range page.Items {
				bytes, objects := agentsv1.UploadTally(&page.Items[i])
				t.add(bytes, objects, "")
			}
			cont = page.Continue
		}
		if cont == "" {
			return t, nil
		}
		opts.Continue = cont
	}
}

// storageStale reports whether r is past StorageStaleAfter.
func (l *Limiter) storageStale(r agentsv1.StorageReservation) bool {
	return l.Now().Sub(r.Time.Time) >= StorageStaleAfter
}

func (t *storageTally) add(bytes, objects int64, settles string) {
	t.bytes += bytes
	t.objects += objects
	if settles != "" {
		t.settles[settles] = true
	}
}

// StorageRecountDue reports the kinds of ws (read from a cache) that hold a stale
// reservation, and when the next one turns stale (zero: none pending).
func (l *Limiter) StorageRecountDue(ws *agentsv1.Workspace) (due []agentsv1.StorageKind, next metav1.Time) {
	for _, kind := range agentsv1.StorageKinds {
		at := StaleStorageAt(ws.Status.Storage.Count(kind))
		switch {
		case at.IsZero():
		case !l.Now().Before(at):
			due = append(due, kind)
		case next.IsZero() || at.Before(next.Time):
			next = metav1.NewTime(at)
		}
	}
	return slices.Clip(due), next
}
