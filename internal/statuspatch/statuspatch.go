// Package statuspatch is the read, change, write and retry loop of the status writers that are
// not reconcilers: the quota's Limiter (its batches and its pruning of domain slots), the model
// proxy's usage recorder and the storage migration's storedVersions. Each reads an object,
// changes its own status fields on it, and writes that change guarded by the resourceVersion it
// read (the API server accepts one write per resourceVersion); a conflict reads again.
//
// The write itself stays with each writer (Loop.Write): its Status() call names the writer's
// field manager where test/arch finds it (one writer per status field, docs/ARCHITECTURE.md).
// The reconcilers write through controllers.PatchStatus instead: they compute a whole status
// from the world each pass and never retry in place.
package statuspatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ErrReread is what Loop.Change returns when it cannot decide on the copy it was given (one a
// writer remembered, which another writer may have outdated): the loop reads again, without
// counting an attempt. Read must then return the stored object.
var ErrReread = errors.New("statuspatch: read the stored object again")

// ErrContention is the error of a loop whose every attempt conflicted; it wraps the last
// conflict (apierrors.IsConflict holds).
var ErrContention = errors.New("too much contention")

// Loop is one status change of one object.
type Loop struct {
	// Read returns the object as it is now: conflicts counts the writes that conflicted so
	// far (after one, a cache that was behind must not be read again).
	Read func(ctx context.Context, conflicts int) (client.Object, error)
	// Change changes obj's status in place and reports whether there is anything to write
	// (false ends the loop without a write), or ErrReread.
	Change func(obj client.Object) (write bool, err error)
	// Write writes obj as Change left it: patch is a merge patch from the object as read,
	// guarded by the resourceVersion read (an Update of obj is the same guard). A conflict
	// runs the loop again.
	Write func(ctx context.Context, obj client.Object, patch client.Patch) error
	// Backoff bounds the attempts (Steps; at least one) and the waits after a conflict
	// (none when Duration is 0).
	Backoff wait.Backoff
}

// Run reads, changes and writes until a write lands (wrote), Change finds nothing to write, an
// error that is not a conflict (returned as it is, a NotFound too), or every attempt conflicted
// (ErrContention). A wait between attempts ends with ctx.
func Run(ctx context.Context, l Loop) (wrote bool, err error) {
	b := l.Backoff
	if b.Steps <= 0 {
		b.Steps = 1
	}
	conflicts := 0
	for {
		obj, err := l.Read(ctx, conflicts)
		if err != nil {
			return false, err
		}
		base := obj.DeepCopyObject().(client.Object)
		write, err := l.Change(obj)
		if errors.Is(err, ErrReread) {
			continue
		}
		if err != nil || !write {
			return false, err
		}
		err = l.Write(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
		if err == nil {
			return true, nil
		}
		if !apierrors.IsConflict(err) {
			return false, err
		}
		conflicts++
		wait := b.Step()
		if b.Steps == 0 {
			return false, fmt.Errorf("%w: %w", ErrContention, err)
		}
		if err := sleep(ctx, wait); err != nil {
			return false, err
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
