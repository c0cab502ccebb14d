package kube_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentplane/agentplane/internal/adapters/runtime/kube"
)

// laggingClient is the real API server's client behind a cache that never shows
// StatefulSets (as right after they were applied), counting applies (and creates).
type laggingClient struct {
	client.Client
	applies atomic.Int32
}

func (c *laggingClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*appsv1.StatefulSet); ok {
		return apierrors.NewNotFound(schema.GroupResource{Group: "apps", Resource: "statefulsets"}, key.Name)
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c *laggingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	c.applies.Add(1) // a StatefulSet the cache does not show is created: a write all the same
	return c.Client.Create(ctx, obj, opts...)
}

func (c *laggingClient) Apply(ctx context.Context, obj k8sruntime.ApplyConfiguration, opts ...client.ApplyOption) error {
	c.applies.Add(1)
	return c.Client.Apply(ctx, obj, opts...)
}

// The pass right after an apply (the controller is woken by the objects it created) does not
// apply again while the cache lags; past the window, or with a changed spec, it does.
func TestEnsureSkipsReapplyWhileCacheLags(t *testing.T) {
	ctx, a := setup(t, "kube-recent")
	lag := &laggingClient{Client: env.Client}
	clk := testingclock.NewFakePassiveClock(time.Now())
	r := kube.New(kube.Options{Client: lag, APIReader: env.Client, Scheme: env.Scheme, RESTConfig: env.Config, Engine: kube.NewStubEngine(), Clock: clk})

	first := ensure(t, ctx, r, a, desired())
	if got := lag.applies.Load(); got != 2 {
		t.Fatalf("first pass: %d applies, want 2 (the namespace's governing Service, StatefulSet)", got)
	}
	second := ensure(t, ctx, r, a, desired())
	if got := lag.applies.Load(); got != 2 {
		t.Errorf("second pass right after: %d applies, want still 2", got)
	}
	if second.Phase != first.Phase || second.Endpoint != first.Endpoint {
		t.Errorf("second pass observed %+v, first %+v", second, first)
	}

	changed := desired()
	changed.RestartNonce = "r1"
	ensure(t, ctx, r, a, changed)
	// The cache shows no StatefulSet: a create, refused (it exists), then the apply; the
	// governing Service exists and is not written again.
	if got := lag.applies.Load(); got != 4 {
		t.Errorf("changed spec: %d applies, want 4", got)
	}
	clk.SetTime(clk.Now().Add(6 * time.Second))
	ensure(t, ctx, r, a, changed)
	if got := lag.applies.Load(); got != 6 {
		t.Errorf("past the window: %d applies, want 6", got)
	}
	if err := r.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	ensure(t, ctx, r, a, changed)
	if got := lag.applies.Load(); got != 7 {
		t.Errorf("after Delete: %d applies, want 7 (the StatefulSet created)", got)
	}
}
