package ops

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// TestWakeRequestsAreNotMessages: a caller's wake (a request that needs the gateway, a
// resume) and a suspend take away the channel relay's AnnotationMessageWake. The API keeps
// seconds and a suspend clears the stamp, so a request in the same second as a message's wake
// before it gets the very stamp the annotation names: left in place, the controller would say
// a message woke the agent.
func TestWakeRequestsAreNotMessages(t *testing.T) {
	now := time.Date(2026, 12, 8, 1, 2, 3, 400_000_000, time.UTC)
	stamp := now.Truncate(time.Second)
	ctx, scope := context.Background(), Scope{Namespace: "ws"}
	for _, tc := range []struct {
		name string
		act  func(*Ops) error
		// wake: the act leaves a wake request of now's second.
		wake bool
	}{
		{"a request that needs the gateway", func(o *Ops) error { return o.Awaken(ctx, scope, "agt-a") }, true},
		{"a resume", func(o *Ops) error { _, _, err := o.ResumeAgent(ctx, scope, "agt-a", false); return err }, true},
		{"a suspend", func(o *Ops) error { _, _, err := o.SuspendAgent(ctx, scope, "agt-a", false); return err }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Asleep as asked after a message's wake in this second (the suspend cleared its stamp).
			a := &agentsv1.Agent{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "agt-a",
					Annotations: map[string]string{agentsv1.AnnotationMessageWake: stamp.Format(time.RFC3339)}},
				Spec:   agentsv1.AgentSpec{Suspended: true},
				Status: agentsv1.AgentStatus{Phase: agentsv1.AgentSuspended},
			}
			// No wait for the gateway: the fake has no controller to start one.
			o, c := fakeOps(Deps{Now: func() time.Time { return now }, ProvisionTimeout: time.Nanosecond}, a)
			if err := tc.act(o); err != nil {
				t.Fatal(err)
			}
			got := &agentsv1.Agent{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(a), got); err != nil {
				t.Fatal(err)
			}
			if v, ok := got.Annotations[agentsv1.AnnotationMessageWake]; ok {
				t.Errorf("the message's annotation stayed: %q", v)
			}
			w := got.Spec.WakeRequestedAt
			if tc.wake != (w != nil) || w != nil && !w.Time.Equal(stamp) {
				t.Errorf("wake request %v, want one of %v: %t", w, stamp, tc.wake)
			}
		})
	}
}
