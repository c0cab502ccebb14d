package ops

import (
	"context"
	"errors"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// defaultProvisionWait bounds a wait for a controller's verdict without ProvisionTimeout.
const defaultProvisionWait = 3 * time.Minute

// ProvisionWait bounds a wait for a controller's verdict (Deps.ProvisionTimeout).
func (o *Ops) ProvisionWait() time.Duration {
	if o.d.ProvisionTimeout > 0 {
		return o.d.ProvisionTimeout
	}
	return defaultProvisionWait
}

// startDowns is how many times a gateway goes down during a wait for its start before the
// start counts as failed. The runtimes restart a gateway that exits (the local supervisor
// with backoff, the kubelet), and one early exit is no verdict: the engine gives parts of its
// boot fixed bounds that a loaded node misses (OpenClaw's state lease heartbeat gets 5 s to
// start, and the gateway exits 1 without it), and then boots on the restart. A gateway that
// goes down again after its restart is failing.
const startDowns = 2

// waitForGateway waits until the agent's gateway answers (true), fails to start (it went
// down startDowns times: Internal failMsg with the agent in Fields["agent"]) or the wait ends
// (false: still starting). done, when set, says whether the observed status already reflects
// the request being waited for.
func (o *Ops) waitForGateway(ctx context.Context, agent *agentsv1.Agent, failMsg string, done func(*agentsv1.Agent) bool) (*agentsv1.Agent, bool, error) {
	var start startVerdict
	return o.waitForAgent(ctx, agent, func(got *agentsv1.Agent) (bool, error) {
		if got.Status.ObservedGeneration < got.Generation || done != nil && !done(got) {
			return false, nil
		}
		switch running, failed := start.see(got); {
		case failed:
			return true, &Error{Code: Internal, Message: failMsg, Fields: map[string]any{"agent": got.DeepCopy()}}
		case running:
			return true, nil
		}
		return false, nil
	})
}

// startVerdict follows a gateway's start through the statuses a wait sees of its agent.
type startVerdict struct {
	downs int  // times the gateway was seen going down
	down  bool // it is down in the last status seen
}

// see takes the next status seen and says whether the gateway runs, or failed to start (it
// went down startDowns times; a stopped agent is not down).
func (v *startVerdict) see(a *agentsv1.Agent) (running, failed bool) {
	switch {
	case a.Status.Phase == agentsv1.AgentRunning:
		return true, false
	case a.Status.Phase == agentsv1.AgentNotRunning && !a.Spec.Stopped:
		if !v.down {
			v.downs, v.down = v.downs+1, true
		}
		return false, v.downs >= startDowns
	}
	v.down = false // starting again: a restart
	return false, false
}

// waitForAgent waits (bounded by ProvisionWait) until until says the agent is as asked
// (true), and returns the agent as last seen; false when the wait ended first.
func (o *Ops) waitForAgent(ctx context.Context, agent *agentsv1.Agent, until func(*agentsv1.Agent) (bool, error)) (*agentsv1.Agent, bool, error) {
	wctx, cancel := context.WithTimeout(ctx, o.ProvisionWait())
	defer cancel()
	got := agent.DeepCopy()
	err := o.WaitFor(wctx, got, func() (bool, error) { return until(got) })
	switch {
	case err == nil:
		return got, true, nil
	case ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
		return got, false, nil
	}
	return nil, false, err
}

// updateAgentSpec changes the workspace's agent with optimistic concurrency.
func (o *Ops) updateAgentSpec(ctx context.Context, t Scope, id string, change func(*agentsv1.Agent)) (*agentsv1.Agent, error) {
	a, err := o.Agent(ctx, t, id)
	if err != nil {
		return nil, err
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &agentsv1.Agent{}
		if err := o.d.APIReader.Get(ctx, client.ObjectKeyFromObject(a), cur); err != nil {
			return err
		}
		change(cur)
		if err := o.d.Client.Update(ctx, cur); err != nil {
			return err
		}
		a = cur
		return nil
	})
	return a, err
}

// StampAfter is a request stamp for now, made strictly later than prev (the API keeps
// seconds, and a controller acts on a stamp later than the last it carried out).
func (o *Ops) StampAfter(prev *metav1.Time) metav1.Time {
	t := metav1.NewTime(o.d.Now().UTC().Truncate(time.Second))
	if prev != nil && !t.After(prev.Time) {
		t = metav1.NewTime(prev.Add(time.Second))
	}
	return t
}
