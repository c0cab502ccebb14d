package apiserver

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

const (
	msgSuspendFailed = "Suspend failed"
	msgResumeFailed  = "Resume failed"
	// activityStampEvery bounds the facade's last-active writes: at most one per agent and
	// replica in this interval (the idle policy counts in minutes).
	activityStampEvery = time.Minute
)

// suspendAgent asks the agent to sleep (spec.suspended) and waits for the controller to have
// drained and stopped its gateway (202 when the wait ends first).
func (s *Server) suspendAgent(r *http.Request, c *Caller) (*Response, error) {
	a, err := s.updateAgentSpec(r.Context(), c, r.PathValue("agentId"), func(a *agentsv1.Agent) {
		a.Spec.Suspended, a.Spec.WakeRequestedAt = true, nil
	})
	if err != nil {
		return nil, withMessage(msgSuspendFailed, err)
	}
	if r.URL.Query().Get("wait") == "false" {
		return &Response{Status: http.StatusAccepted, Body: map[string]any{"agent": viewAgent(a)}}, nil
	}
	gen := a.Generation
	return s.waitForAgent(r.Context(), a, http.StatusOK, func(got *agentsv1.Agent) (bool, error) {
		return got.Status.ObservedGeneration >= gen && got.Status.Phase == agentsv1.AgentSuspended, nil
	})
}

// resumeAgent clears spec.suspended (and starts a new idle window) and waits for the gateway
// like a restart does.
func (s *Server) resumeAgent(r *http.Request, c *Caller) (*Response, error) {
	var requested metav1.Time
	a, err := s.updateAgentSpec(r.Context(), c, r.PathValue("agentId"), func(a *agentsv1.Agent) {
		requested = s.wakeStamp(a)
		a.Spec.Suspended, a.Spec.WakeRequestedAt = false, &requested
	})
	if err != nil {
		return nil, withMessage(msgResumeFailed, err)
	}
	if r.URL.Query().Get("wait") == "false" {
		return &Response{Status: http.StatusAccepted, Body: map[string]any{"agent": viewAgent(a)}}, nil
	}
	// The cache may still show the agent before this change: wait for the controller's pass
	// over this generation.
	gen := a.Generation
	return s.waitForGateway(r.Context(), a, http.StatusOK, msgResumeFailed, func(got *agentsv1.Agent) bool {
		return got.Status.ObservedGeneration >= gen && !got.Spec.Suspended
	})
}

// updateAgentSpec changes the caller's agent with optimistic concurrency.
func (s *Server) updateAgentSpec(ctx context.Context, c *Caller, id string, change func(*agentsv1.Agent)) (*agentsv1.Agent, error) {
	a, err := s.getAgent(ctx, c, id)
	if err != nil {
		return nil, err
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &agentsv1.Agent{}
		if err := s.opts.APIReader.Get(ctx, client.ObjectKeyFromObject(a), cur); err != nil {
			return err
		}
		change(cur)
		if err := s.opts.Client.Update(ctx, cur); err != nil {
			return err
		}
		a = cur
		return nil
	})
	return a, err
}

// wakeStamp is a wake request strictly later than the agent's previous one.
func (s *Server) wakeStamp(a *agentsv1.Agent) metav1.Time {
	return s.stampAfter(a.Spec.WakeRequestedAt)
}

// stampAfter is a request stamp for now, made strictly later than prev (the API keeps
// seconds, and a controller acts on a stamp later than the last it carried out).
func (s *Server) stampAfter(prev *metav1.Time) metav1.Time {
	t := metav1.NewTime(s.opts.Now().UTC().Truncate(time.Second))
	if prev != nil && !t.After(prev.Time) {
		t = metav1.NewTime(prev.Add(time.Second))
	}
	return t
}

// sleeping: the controller reports the agent asleep (or putting it to sleep).
func sleeping(a *agentsv1.Agent) bool {
	return a.Status.Phase == agentsv1.AgentSuspended ||
		meta.IsStatusConditionTrue(a.Status.Conditions, agentsv1.ConditionSuspended)
}

// awaken runs before a route that needs the agent's gateway: it records the request as the
// agent's activity (for the idle policy) and, when the agent sleeps, wakes it
// (spec.wakeRequestedAt) and waits, bounded, for its gateway. When the wait ends first, the
// route runs anyway and answers as it would for a gateway that does not run.
func (s *Server) awaken(r *http.Request, c *Caller) error {
	id := r.PathValue("agentId")
	if id == "" {
		return nil
	}
	// The cache suffices to tell a sleeping agent (the route reads the agent live itself):
	// a route that needs the gateway costs no extra read of the API server.
	a := &agentsv1.Agent{}
	if c.GatewayAgent != "" && c.GatewayAgent != id {
		return nil // the route answers for an agent the token does not own
	}
	if err := s.opts.Client.Get(r.Context(), client.ObjectKey{Namespace: c.Namespace, Name: id}, a); err != nil {
		return nil // the route answers for a missing agent itself
	}
	if a.Spec.Stopped || !sleeping(a) {
		s.touch(r.Context(), a)
		return nil
	}
	var requested metav1.Time
	a, err := s.updateAgentSpec(r.Context(), c, id, func(a *agentsv1.Agent) {
		requested = s.wakeStamp(a)
		a.Spec.WakeRequestedAt = &requested
	})
	if err != nil {
		return err
	}
	s.log.V(1).Info("woke a sleeping agent for a request", "agent", a.Name, "path", r.URL.Path)
	wctx, cancel := context.WithTimeout(r.Context(), s.provisionWait())
	defer cancel()
	got := a.DeepCopy()
	err = s.ops.WaitFor(wctx, got, func() (bool, error) {
		return got.Status.ObservedGeneration >= a.Generation && got.Status.Phase == agentsv1.AgentRunning, nil
	})
	if err != nil && r.Context().Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}

// touch stamps the agent's last activity, at most once per activityStampEvery per agent on
// this replica (a metadata merge patch: no read, no conflict).
func (s *Server) touch(ctx context.Context, a *agentsv1.Agent) {
	now := s.opts.Now()
	if prev, err := time.Parse(time.RFC3339, a.Annotations[agentsv1.AnnotationLastActive]); err == nil && now.Sub(prev) < activityStampEvery {
		return
	}
	if !s.activity.due(a.UID, now) {
		return
	}
	patch := []byte(`{"metadata":{"annotations":{"` + agentsv1.AnnotationLastActive + `":"` + now.UTC().Format(time.RFC3339) + `"}}}`)
	if err := s.opts.Client.Patch(ctx, a, client.RawPatch(types.MergePatchType, patch)); err != nil {
		s.log.V(1).Info("cannot stamp the agent's last activity", "agent", a.Name, "error", err.Error())
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
