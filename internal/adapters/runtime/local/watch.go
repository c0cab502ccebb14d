package local

import (
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// notifyBuffer is how many notifications wait for the Agent controller.
const notifyBuffer = 1024

var _ runtime.Watcher = (*Runtime)(nil)

// SetupWatches makes the Agent controller reconcile an agent whenever its gateway changes
// phase outside Ensure (it exited, became healthy): the supervisors' notifications.
func (r *Runtime) SetupWatches(b *builder.Builder) *builder.Builder {
	return b.WatchesRawSource(source.Channel(r.events, &handler.EnqueueRequestForObject{}))
}

// enqueue passes key to the Agent controller without ever blocking a supervisor.
func (r *Runtime) enqueue(key types.NamespacedName) {
	a := &agentsv1.Agent{}
	a.Name, a.Namespace = key.Name, key.Namespace
	select {
	case r.events <- event.GenericEvent{Object: a}:
	default:
		// The buffer is full (or no controller watches): a reconcile for some agent is
		// already pending and the controller's periodic requeue catches up.
	}
}
