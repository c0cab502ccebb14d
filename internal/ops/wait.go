package ops

import (
	"context"
	"reflect"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// waitRecheck is how often a waiter re-reads its object without an event, so conditions that
// depend on time (how long an agent has been unreachable) are evaluated again. The read is
// from the informer cache: it costs no API request.
var waitRecheck = time.Second

// WaitFor waits until done reports true (nil), done fails (its error), or ctx ends
// (ctx.Err()). Before each call of done, obj is read again from the manager's informer cache
// under its own key (a read that fails, for example NotFound while the cache has not seen a
// new object yet, leaves obj as it was and done is not called). It wakes on the informer's
// events for that object, so a controller's acknowledgement is seen as soon as the cache has
// it; every wait shares one event handler per kind.
func (o *Ops) WaitFor(ctx context.Context, obj client.Object, done func() (bool, error)) error {
	return o.wait(ctx, obj, done, false)
}

// WaitCached waits, at most cacheCatchUp, until the manager's informer cache holds written
// at its generation or a later one. Readers of that cache then see the facade's own write:
// the model proxy authorizes from it, so a detached provider secret is refused from the
// answer on, whatever the controllers are busy with. Only the informer's event is awaited.
func (o *Ops) WaitCached(ctx context.Context, written client.Object) {
	ctx, cancel := context.WithTimeout(ctx, cacheCatchUp)
	defer cancel()
	got := written.DeepCopyObject().(client.Object)
	_ = o.WaitFor(ctx, got, func() (bool, error) { return got.GetGeneration() >= written.GetGeneration(), nil })
}

// cacheCatchUp bounds WaitCached: an informer normally delivers a write in milliseconds.
const cacheCatchUp = 30 * time.Second

// WaitForDeletion is WaitFor for an object being deleted: the wait also ends (nil) once the
// object is gone. A cache without it is confirmed on the API server (a cache that has not
// seen a new object yet holds nothing either).
func (o *Ops) WaitForDeletion(ctx context.Context, obj client.Object, done func() (bool, error)) error {
	return o.wait(ctx, obj, done, true)
}

func (o *Ops) wait(ctx context.Context, obj client.Object, done func() (bool, error), goneEnds bool) error {
	key := client.ObjectKeyFromObject(obj)
	wake, stop := o.waiters.subscribe(ctx, o.d.Informers, obj)
	defer stop()
	recheck := time.NewTicker(waitRecheck)
	defer recheck.Stop()
	for {
		err := o.d.Client.Get(ctx, key, obj)
		switch {
		case err == nil:
			if ok, err := done(); err != nil || ok {
				return err
			}
		case goneEnds && apierrors.IsNotFound(err):
			if o.d.APIReader == nil {
				return nil
			}
			live := obj.DeepCopyObject().(client.Object)
			if err := o.d.APIReader.Get(ctx, key, live); apierrors.IsNotFound(err) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		case <-recheck.C:
		}
	}
}

// waiters fans the informers' events out to the waits on each object.
type waiters struct {
	mu sync.Mutex
	// watched are the kinds whose informer carries the fan-out handler.
	watched map[reflect.Type]bool
	subs    map[waitKey]map[chan struct{}]struct{}
}

type waitKey struct {
	kind reflect.Type
	key  client.ObjectKey
}

// subscribe returns a channel that receives a value after each event of obj's kind and key,
// and a function that ends the subscription. Without informers (a facade built without a
// manager) the channel never fires and waits rely on the recheck.
func (w *waiters) subscribe(ctx context.Context, informers cache.Informers, obj client.Object) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	if informers == nil {
		return ch, func() {}
	}
	kind := reflect.TypeOf(obj)
	k := waitKey{kind: kind, key: client.ObjectKeyFromObject(obj)}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.watched[kind] {
		inf, err := informers.GetInformer(ctx, obj)
		if err != nil {
			return ch, func() {}
		}
		if _, err := inf.AddEventHandler(w.handler(kind)); err != nil {
			return ch, func() {}
		}
		if w.watched == nil {
			w.watched = map[reflect.Type]bool{}
		}
		w.watched[kind] = true
	}
	if w.subs == nil {
		w.subs = map[waitKey]map[chan struct{}]struct{}{}
	}
	if w.subs[k] == nil {
		w.subs[k] = map[chan struct{}]struct{}{}
	}
	w.subs[k][ch] = struct{}{}
	return ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.subs[k], ch)
		if len(w.subs[k]) == 0 {
			delete(w.subs, k)
		}
	}
}

// handler is the one event handler of a kind: it wakes the waits on the object concerned.
func (w *waiters) handler(kind reflect.Type) toolscache.ResourceEventHandler {
	notify := func(o any) {
		if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
			o = d.Obj
		}
		obj, ok := o.(client.Object)
		if !ok {
			return
		}
		k := waitKey{kind: kind, key: client.ObjectKeyFromObject(obj)}
		w.mu.Lock()
		defer w.mu.Unlock()
		for ch := range w.subs[k] {
			select {
			case ch <- struct{}{}:
			default: // a wake is already pending
			}
		}
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { notify(o) },
		UpdateFunc: func(_, o any) { notify(o) },
		DeleteFunc: notify,
	}
}
