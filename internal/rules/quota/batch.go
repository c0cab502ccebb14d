package quota

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/statuspatch"
)

// batchTimeout bounds one batch's read-mutate-write rounds (40 conflicts at most).
const batchTimeout = 30 * time.Second

// op is one caller's change of a holder: mutate reports whether it changed the holder, or an
// error of its own (then it changed nothing of its own: every mutate checks before it writes;
// it may still have settled slots, moves that any write may carry).
type op struct {
	mutate func(holder) (bool, error)
	err    error
	done   chan struct{}
}

// queue holds the ops waiting for the next write of one holder.
type queue struct {
	mu      sync.Mutex
	ops     []*op
	running bool
}

// update applies mutate to the holder key and writes its status with the read
// resourceVersion, as the quota's field manager. Updates of one holder from this process are gathered: while a write is in
// flight the next ones queue, and then all go in one write (group commit), each applied in
// turn to the same copy, so they are judged exactly as if written one by one, at the cost
// of one request. Conflicts with other writers are retried with jittered backoff.
func (l *Limiter) update(ctx context.Context, key client.ObjectKey, newHolder func() holder, mutate func(holder) (bool, error)) error {
	v, _ := l.queues.LoadOrStore(key, &queue{})
	q := v.(*queue)
	o := &op{mutate: mutate, done: make(chan struct{})}
	q.mu.Lock()
	q.ops = append(q.ops, o)
	if !q.running {
		q.running = true
		// The batches outlive any one caller's context: they carry others' ops too.
		go l.drain(context.WithoutCancel(ctx), key, newHolder, q)
	}
	q.mu.Unlock()
	select {
	case <-o.done:
		return o.err
	case <-ctx.Done():
		// The op may still be written: like a lost answer, its outcome is unknown (stale
		// reservations are freed by the recount).
		return ctx.Err()
	}
}

// drain writes the queued ops, a batch per write, until none is left.
func (l *Limiter) drain(ctx context.Context, key client.ObjectKey, newHolder func() holder, q *queue) {
	for {
		q.mu.Lock()
		batch := q.ops
		q.ops = nil
		if len(batch) == 0 {
			q.running = false
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		bctx, cancel := context.WithTimeout(ctx, batchTimeout)
		err := l.write(bctx, key, newHolder, batch)
		cancel()
		for _, o := range batch {
			if err != nil {
				o.err = err
			}
			close(o.done)
		}
	}
}

// write applies batch to the holder and writes it once. It sets each op's own error and
// returns an error that fails them all (a read or write that did not work out).
func (l *Limiter) write(ctx context.Context, key client.ObjectKey, newHolder func() holder, batch []*op) error {
	var h holder
	var remembered bool
	_, err := statuspatch.Run(ctx, statuspatch.Loop{
		Read: func(ctx context.Context, _ int) (client.Object, error) {
			h = newHolder()
			var err error
			remembered, err = l.read(ctx, key, h)
			return h.object(), err
		},
		Change: func(client.Object) (bool, error) {
			changed, settled := false, true
			for _, o := range batch {
				c, err := o.mutate(h)
				o.err = err
				changed = changed || c
				settled = settled && err == nil && c
			}
			if !settled && remembered {
				// A refusal or a no-op is decided on the API server's copy, never on a
				// remembered one that another writer may have outdated (it would not conflict).
				l.last.Delete(key)
				return false, statuspatch.ErrReread
			}
			return changed, nil
		},
		// A merge patch of what the batch changed, guarded by the read resourceVersion like
		// an update (the API server accepts one write per resourceVersion, which keeps the
		// limits), carries the quota's fields only: the status's other fields have writers
		// of their own (agentsv1.StatusFieldManagers).
		Write: func(ctx context.Context, obj client.Object, patch client.Patch) error {
			err := l.Writer.Status().Patch(ctx, obj, patch, client.FieldOwner(agentsv1.QuotaFieldManager))
			switch {
			case err != nil:
				l.last.Delete(key)
			case h.remembered():
				l.last.Store(key, obj.DeepCopyObject())
			}
			return err
		},
		Backoff: wait.Backoff{Duration: 5 * time.Millisecond, Factor: 1.5, Jitter: 1, Steps: 40, Cap: 500 * time.Millisecond},
	})
	if errors.Is(err, statuspatch.ErrContention) {
		return fmt.Errorf("quota on %s: %w", key, err)
	}
	return err
}

// read fills h with the holder: the copy this Limiter last wrote (remembered), or the API
// server's.
func (l *Limiter) read(ctx context.Context, key client.ObjectKey, h holder) (remembered bool, err error) {
	obj := h.object()
	if v, ok := l.last.Load(key); ok && h.remembered() {
		if cp := reflect.ValueOf(v.(client.Object).DeepCopyObject()); cp.Type() == reflect.TypeOf(obj) {
			reflect.ValueOf(obj).Elem().Set(cp.Elem())
			return true, nil
		}
	}
	return false, l.Reader.Get(ctx, key, obj)
}
