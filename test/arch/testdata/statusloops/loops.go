// Package statusloops plants violations of the one-loop rule for status writers
// (TestStatusLoopRuleFiresOnPlantedViolations): each line marked `want:` must be reported, no
// other.
package statusloops

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/statuspatch"
)

// correct: the write is the Loop's Write.
func correct(ctx context.Context, c client.Client, key client.ObjectKey) error {
	_, err := statuspatch.Run(ctx, statuspatch.Loop{
		Read: func(ctx context.Context, _ int) (client.Object, error) {
			a := &agentsv1.Agent{}
			return a, c.Get(ctx, key, a)
		},
		Change: func(client.Object) (bool, error) { return true, nil },
		Write: func(ctx context.Context, obj client.Object, p client.Patch) error {
			return c.Status().Patch(ctx, obj, p, client.FieldOwner(agentsv1.QuotaFieldManager))
		},
	})
	return err
}

// handRolled reads, changes, writes and retries in a loop of its own.
func handRolled(ctx context.Context, c client.Client, key client.ObjectKey) error {
	for range 5 {
		a := &agentsv1.Agent{}
		if err := c.Get(ctx, key, a); err != nil {
			return err
		}
		base := a.DeepCopy()
		a.Status.Endpoint = "x"
		err := c.Status().Patch(ctx, a, client.MergeFrom(base)) // want: a loop of its own
		if !apierrors.IsConflict(err) {
			return err
		}
	}
	return nil
}

// writer is not a statuspatch.Loop.
type writer struct {
	Write func(ctx context.Context, obj client.Object) error
}

func elsewhere(ctx context.Context, c client.Client, key client.ObjectKey) error {
	deferred := func(obj client.Object) error {
		return c.Status().Update(ctx, obj) // want: a function literal that is no Loop's Write
	}
	w := writer{Write: func(ctx context.Context, obj client.Object) error {
		return c.Status().Update(ctx, obj) // want: a Write of another type
	}}
	_, err := statuspatch.Run(ctx, statuspatch.Loop{
		Read:   func(context.Context, int) (client.Object, error) { return &agentsv1.Agent{}, nil },
		Change: func(client.Object) (bool, error) { return true, nil },
		Write: func(ctx context.Context, obj client.Object, _ client.Patch) error {
			return write(ctx, c, obj) // the write is in a helper the Write calls
		},
	})
	_, _ = deferred, w
	return err
}

func write(ctx context.Context, c client.Client, obj client.Object) error {
	return c.Status().Update(ctx, obj) // want: in a helper a Write calls
}
