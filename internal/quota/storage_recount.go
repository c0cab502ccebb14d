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

// RecountStorage rebuilds workspace ws's count of kind from its objects, listed live at
// exactly the Workspace's resourceVersion (so the count and the reservations it replaces
// describe one moment, and the write, guarded by that resourceVersion, fails if anything
// moved since): files from their File objects, snapshots from their completed Snapshots.
// Reservations whose object is counted and stale ones are dropped. Uploads leave no object to
// count: their stale reservations are dropped and their count kept. It repairs what a lost
// settle or free left behind; the usual moves never need it.
func (l *Limiter) RecountStorage(ctx context.Context, ws string, kind agentsv1.StorageKind) error {
	key := client.ObjectKey{Name: ws}
	l.last.Delete(key)
	err := l.update(ctx, key, newWorkspaceHolder, func(h holder) (bool, error) {
		_, c := storageCount(h, kind)
		var tally *storageTally
		if kind != agentsv1.StorageUploads {
			t, err := l.tallyAt(ctx, ws, kind, h.object().GetResourceVersion())
			if err != nil {
				return false, err
			}
			tally = t
		}
		next := agentsv1.StorageCount{Bytes: c.Bytes, Objects: c.Objects}
		if tally != nil {
			next.Bytes, next.Objects = tally.bytes, tally.objects
		}
		for _, r := range c.Pending {
			if (tally == nil || !tally.settles[r.Name]) && l.Now().Sub(r.Time.Time) < StorageStaleAfter {
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

// tallyAt counts workspace ws's objects of kind as they were at resourceVersion rv.
func (l *Limiter) tallyAt(ctx context.Context, ws string, kind agentsv1.StorageKind, rv string) (*storageTally, error) {
	t := &storageTally{settles: map[string]bool{}}
	opts := &client.ListOptions{Namespace: ws, Limit: recountPage, Raw: &metav1.ListOptions{
		ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchExact,
	}}
	for {
		var cont string
		switch kind {
		case agentsv1.StorageFiles:
			var page agentsv1.FileList
			if err := l.Reader.List(ctx, &page, opts); err != nil {
				return nil, err
			}
			for _, f := range page.Items {
				t.add(f.Spec.Size, f.Annotations[agentsv1.AnnotationStorageReservation])
			}
			cont = page.Continue
		case agentsv1.StorageSnapshots:
			var page agentsv1.SnapshotList
			if err := l.Reader.List(ctx, &page, opts); err != nil {
				return nil, err
			}
			for _, s := range page.Items {
				if s.Status.Phase == agentsv1.SnapshotCompleted {
					t.add(s.Status.Size, s.Name)
				}
			}
			cont = page.Continue
		}
		if cont == "" {
			return t, nil
		}
		opts.Continue, opts.Raw = cont, nil
	}
}

func (t *storageTally) add(bytes int64, settles string) {
	t.bytes += bytes
	t.objects++
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
