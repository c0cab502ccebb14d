package ops

import (
	"context"
	"errors"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

const (
	MsgSuspendFailed = "Suspend failed"
	MsgResumeFailed  = "Resume failed"
	// activityStampEvery bounds the last-active writes: at most one per agent and replica in
	// this interval (the idle policy counts in minutes).
	activityStampEvery = time.Minute
)

// SuspendAgent asks the agent to sleep (spec.suspended) and, with wait, waits for the
// controller to have drained and stopped its gateway. It returns the agent and whether it
// sleeps (false: the wait ended first, or was not asked for).
func (o *Ops) SuspendAgent(ctx context.Context, t Scope, id string, wait bool) (*agentsv1.Agent, bool, error) {
	a, err := o.updateAgentSpec(ctx, t, id, func(a *agentsv1.Agent) {
		a.Spec.Suspended = true
		setWakeRequest(a, nil)
	})
	if err != nil {
		return nil, false, WithMessage(MsgSuspendFailed, err)
	}
	if !wait {
		return a, false, nil
	}
	gen := a.Generation
	return o.waitForAgent(ctx, a, func(got *agentsv1.Agent) (bool, error) {
		return got.Status.ObservedGeneration >= gen && got.Status.Phase == agentsv1.AgentSuspended, nil
	})
}

// ResumeAgent clears spec.suspended (and starts a new idle window) and, with wait, waits for
// the gateway like a restart does.
func (o *Ops) ResumeAgent(ctx context.Context, t Scope, id string, wait bool) (*agentsv1.Agent, bool, error) {
	var requested metav1.Time
	a, err := o.updateAgentSpec(ctx, t, id, func(a *agentsv1.Agent) {
		requested = o.StampAfter(a.Spec.WakeRequestedAt)
		a.Spec.Suspended = false
		setWakeRequest(a, &requested)
	})
	if err != nil {
		return nil, false, WithMessage(MsgResumeFailed, err)
	}
	if !wait {
		return a, false, nil
	}
	// The cache may still show the agent before this change: wait for the controller's pass
	// over this generation.
	gen := a.Generation
	return o.waitForGateway(ctx, a, MsgResumeFailed, func(got *agentsv1.Agent) bool {
		return got.Status.ObservedGeneration >= gen && !got.Spec.Suspended
	})
}

// setWakeRequest is the facade's one write of the agent's wake request (at, or none): the
// stamp, and no AnnotationMessageWake, which names the channel relay's requests. The API keeps
// seconds, and a suspend clears the stamp, so a request's stamp may equal that of a message's
// wake before it: the annotation goes with the request it named, or the controller would say a
// message woke the agent.
func setWakeRequest(a *agentsv1.Agent, at *metav1.Time) {
	a.Spec.WakeRequestedAt = at
	delete(a.Annotations, agentsv1.AnnotationMessageWake)
}

// sleeping: the controller reports the agent asleep (or putting it to sleep).
func sleeping(a *agentsv1.Agent) bool {
	return a.Status.Phase == agentsv1.AgentSuspended ||
		meta.IsStatusConditionTrue(a.Status.Conditions, agentsv1.ConditionSuspended)
}

// Awaken runs before a request that needs the agent's gateway: it records the request as the
// agent's activity (for the idle policy) and, when the agent sleeps, wakes it
// (spec.wakeRequestedAt) and waits, bounded, for its gateway. When the wait ends first it
// returns nil: the request goes on and meets a gateway that does not run. An agent the caller
// cannot see is left alone (nil): the request answers for it.
func (o *Ops) Awaken(ctx context.Context, t Scope, id string) error {
	if id == "" || t.OnlyAgent != "" && t.OnlyAgent != id {
		return nil
	}
	// The cache suffices to tell a sleeping agent (the request reads the agent live itself):
	// a request that needs the gateway costs no extra read of the API server.
	a := &agentsv1.Agent{}
	if err := o.d.Client.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: id}, a); err != nil {
		return nil
	}
	if a.Spec.Stopped || !sleeping(a) {
		o.touch(ctx, a)
		return nil
	}
	var requested metav1.Time
	a, err := o.updateAgentSpec(ctx, t, id, func(a *agentsv1.Agent) {
		requested = o.StampAfter(a.Spec.WakeRequestedAt)
		setWakeRequest(a, &requested)
	})
	if err != nil {
		return err
	}
	o.d.Log.V(1).Info("woke a sleeping agent for a request", "agent", a.Name)
	wctx, cancel := context.WithTimeout(ctx, o.ProvisionWait())
	defer cancel()
	got := a.DeepCopy()
	err = o.WaitFor(wctx, got, func() (bool, error) {
		return got.Status.ObservedGeneration >= a.Generation && got.Status.Phase == agentsv1.AgentRunning, nil
	})
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}

// touch stamps the agent's last activity, at most once per activityStampEvery per agent on
// this replica (a metadata merge patch: no read, no conflict).
func (o *Ops) touch(ctx context.Context, a *agentsv1.Agent) {
	now := o.d.Now()
	if prev, err := time.Parse(time.RFC3339, a.Annotations[agentsv1.AnnotationLastActive]); err == nil && now.Sub(prev) < activityStampEvery {
		return
	}
	if !o.activity.due(a.UID, now) {
		return
	}
	patch := []byte(`{"metadata":{"annotations":{"` + agentsv1.AnnotationLastActive + `":"` + now.UTC().Format(time.RFC3339) + `"}}}`)
	if err := o.d.Client.Patch(ctx, a, client.RawPatch(types.MergePatchType, patch)); err != nil {
		o.d.Log.V(1).Info("cannot stamp the agent's last activity", "agent", a.Name, "error", err.Error())
	}
}

// activityStamps remembers when this replica last stamped each agent.
type activityStamps struct {
	mu   sync.Mutex
	last map[types.UID]time.Time
}

// due reports whether a stamp is due for uid now, and records it. Entries older than the
// interval are swept as the map grows.
func (t *activityStamps) due(uid types.UID, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.last == nil {
		t.last = map[types.UID]time.Time{}
	}
	if prev, ok := t.last[uid]; ok && now.Sub(prev) < activityStampEvery {
		return false
	}
	if len(t.last) >= 4096 {
		for k, v := range t.last {
			if now.Sub(v) >= activityStampEvery {
				delete(t.last, k)
			}
		}
	}
	t.last[uid] = now
	return true
}
