package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// progress records when each of the controller's StatefulSets first shows up, from one
// metadata watch (polling lists of thousands of objects would load the API server more than
// the controller does).
type progress struct {
	mu   sync.Mutex
	seen map[string]time.Time // namespace/name -> when it appeared
	n    int
	done chan struct{}
}

// watchStatefulSets records the StatefulSets that appear in namespaces named prefix*, from
// done closes once n have.
func watchStatefulSets(ctx context.Context, cfg *rest.Config, prefix string, n int) (*progress, error) {
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	p := &progress{seen: map[string]time.Time{}, n: n, done: make(chan struct{})}
	inf := metadatainformer.NewFilteredMetadataInformer(mc, appsv1.SchemeGroupVersion.WithResource("statefulsets"),
		metav1.NamespaceAll, 10*time.Minute, cache.Indexers{}, nil).Informer()
	// The watcher's store keeps names only, so the benchmark's own memory does not blur the
	// manager's RSS.
	if err := inf.SetTransform(func(o any) (any, error) {
		if m, ok := o.(*metav1.PartialObjectMetadata); ok {
			return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, ResourceVersion: m.ResourceVersion}}, nil
		}
		return o, nil
	}); err != nil {
		return nil, err
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(o any) {
		m, ok := o.(*metav1.PartialObjectMetadata)
		if !ok || !strings.HasPrefix(m.Namespace, prefix) {
			return
		}
		p.add(m.Namespace + "/" + m.Name)
	}}); err != nil {
		return nil, err
	}
	go inf.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, fmt.Errorf("statefulset watch did not sync")
	}
	return p, nil
}

func (p *progress) add(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.seen[key]; ok {
		return
	}
	p.seen[key] = time.Now()
	if len(p.seen) == p.n {
		close(p.done)
	}
}

// wait returns when every StatefulSet exists, or with the count so far once timeout passed.
func (p *progress) wait(ctx context.Context, timeout time.Duration) (int, error) {
	select {
	case <-p.done:
		return p.n, nil
	case <-time.After(timeout):
	case <-ctx.Done():
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.seen), fmt.Errorf("%d of %d StatefulSets after %s", len(p.seen), p.n, timeout)
}

// times are the arrival times since start, in order.
func (p *progress) times(start time.Time) []time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]time.Duration, 0, len(p.seen))
	for _, t := range p.seen {
		out = append(out, t.Sub(start))
	}
	slices.Sort(out)
	return out
}

// decileCost is the time per agent of the first and of the last tenth of the arrivals (the
// span of each tenth divided by its agents): flat cost per agent gives a ratio near 1.
func decileCost(times []time.Duration) (first, last time.Duration) {
	n := len(times)
	k := max(n/10, 2)
	if n < k {
		return 0, 0
	}
	first = (times[k-1] - times[0]) / time.Duration(k-1)
	last = (times[n-1] - times[n-k]) / time.Duration(k-1)
	return first, last
}
