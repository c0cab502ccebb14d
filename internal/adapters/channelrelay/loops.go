package channelrelay

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/watchfilter"
)

// sleepChanged passes the Agent updates the relay's controllers act on: its spec (stopped, a
// wake asked for), its deletion, its Suspended condition. The status writes in between (usage,
// rollouts, health) pass not, nor the live token reads their reconciles would make.
func sleepChanged() predicate.Predicate {
	return watchfilter.Updates(func(o, n *agentsv1.Agent) bool {
		return watchfilter.SpecOrDeletion(o, n) ||
			watchfilter.ConditionChanged(o.Status.Conditions, n.Status.Conditions, agentsv1.ConditionSuspended)
	})
}

// agentsOfChannels reconciles the agent of each Channel of type t that changes (the relay's
// controllers are controllers of Agents).
func agentsOfChannels(t agentsv1.ChannelType) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		ch, ok := o.(*agentsv1.Channel)
		if !ok || ch.Spec.AgentRef.Name == "" || ch.Spec.Type != t {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ch.Namespace, Name: ch.Spec.AgentRef.Name}}}
	})
}

// ingress is what an ingress of the relay (Slack's, Discord's) is to the manager: a Runnable
// that holds the connections, on the leader, and a controller of Agents that starts and ends
// them.
type ingress interface {
	reconcile.Reconciler
	manager.LeaderElectionRunnable
	Start(context.Context) error
}

// setupIngress registers in with mgr: it runs beside the controllers and reconciles each
// Agent whose sleep changes and the agent of each Channel of type t that changes.
func setupIngress(mgr ctrl.Manager, name string, t agentsv1.ChannelType, in ingress) error {
	if err := mgr.Add(in); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).Named(name).
		For(&agentsv1.Agent{}, builder.WithPredicates(sleepChanged())).
		Watches(&agentsv1.Channel{}, agentsOfChannels(t)).
		Complete(in)
}

// loops runs at most one background loop per agent, for one input (a token, a pair of
// tokens): starting it again with the same input keeps it, with another replaces it. Every
// loop ends when the manager stops (run), and none starts after.
type loops[In comparable] struct {
	mu      sync.Mutex
	running map[AgentKey]*loop[In]
	// base is run's context (nil before: loops started then live until stopped).
	base context.Context
	wg   sync.WaitGroup
}

type loop[In comparable] struct {
	in     In
	cancel context.CancelFunc
}

// run implements the manager's Runnable for its owner: the loops live until ctx ends, then run
// ends them and waits for them.
func (l *loops[In]) run(ctx context.Context) {
	l.mu.Lock()
	l.base = ctx
	l.mu.Unlock()
	<-ctx.Done()
	l.mu.Lock()
	for agent, lp := range l.running {
		lp.cancel()
		delete(l.running, agent)
	}
	l.mu.Unlock()
	l.wg.Wait()
}

// started reports whether run has begun (tests wait for it).
func (l *loops[In]) started() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.base != nil
}

// start runs fn for agent with in, unless it runs with in already; fn's loop is forgotten when
// fn returns.
func (l *loops[In]) start(agent AgentKey, in In, fn func(ctx context.Context)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.running == nil {
		l.running = map[AgentKey]*loop[In]{}
	}
	if lp := l.running[agent]; lp != nil {
		if lp.in == in {
			return
		}
		lp.cancel()
	}
	base := l.base
	if base == nil {
		base = context.Background() // not run by a manager (tests call Reconcile)
	}
	if base.Err() != nil {
		return // the manager stops
	}
	ctx, cancel := context.WithCancel(base)
	lp := &loop[In]{in: in, cancel: cancel}
	l.running[agent] = lp
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer l.forget(agent, lp)
		fn(ctx)
	}()
}

// stop ends agent's loop.
func (l *loops[In]) stop(agent AgentKey) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if lp := l.running[agent]; lp != nil {
		lp.cancel()
		delete(l.running, agent)
	}
}

// has reports whether agent's loop runs.
func (l *loops[In]) has(agent AgentKey) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.running[agent] != nil
}

// forget drops lp once its loop ended by itself (a later loop of the agent may have replaced
// it).
func (l *loops[In]) forget(agent AgentKey, lp *loop[In]) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.running[agent] == lp {
		lp.cancel()
		delete(l.running, agent)
	}
}
