package ops

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllertest"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/scheme"
)

// waitResult runs waitFor in the background and returns its result channel.
func waitResult(ctx context.Context, o *Ops, obj client.Object, done func() (bool, error)) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- o.WaitFor(ctx, obj, done) }()
	return ch
}

// informedOps is Ops on a fake client holding agents, whose informer events the test sends
// through the returned fake informer.
func informedOps(t *testing.T, agents ...*agentsv1.Agent) (*Ops, client.Client, *controllertest.FakeInformer) {
	t.Helper()
	sch := scheme.New()
	b := fake.NewClientBuilder().WithScheme(sch).WithStatusSubresource(&agentsv1.Agent{})
	for _, a := range agents {
		b = b.WithObjects(a.DeepCopy())
	}
	c := b.Build()
	informers := &informertest.FakeInformers{Scheme: sch}
	fi, err := informers.FakeInformerFor(context.Background(), &agentsv1.Agent{})
	if err != nil {
		t.Fatal(err)
	}
	return New(Deps{Client: c, Informers: informers}), c, fi
}

// TestWaitForWakesOnEvents: a wait ends on the informer's event for its object, not on a
// timer (the recheck is set far beyond the test's bound), and leaves no subscription behind.
func TestWaitForWakesOnEvents(t *testing.T) {
	old := waitRecheck
	waitRecheck = time.Hour
	defer func() { waitRecheck = old }()

	agent := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "a1"}, Status: agentsv1.AgentStatus{Phase: agentsv1.AgentStarting}}
	other := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "a2"}}
	o, c, fi := informedOps(t, agent, other)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := agent.DeepCopy()
	calls, started := 0, make(chan struct{})
	res := waitResult(ctx, o, got, func() (bool, error) {
		if calls++; calls == 1 {
			close(started)
		}
		return got.Status.Phase == agentsv1.AgentRunning, nil
	})
	<-started
	second := waitResult(ctx, o, agent.DeepCopy(), func() (bool, error) { return false, errors.New("never ready") })
	if err := <-second; err == nil || err.Error() != "never ready" {
		t.Fatalf("a failing check ends the wait with its error; got %v", err)
	}

	// An event for another agent wakes nobody's check into success.
	fi.Update(other, other)
	// The controller's acknowledgement reaches the cache: the event ends the wait.
	cur := &agentsv1.Agent{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(agent), cur); err != nil {
		t.Fatal(err)
	}
	running := cur.DeepCopy()
	running.Status.Phase = agentsv1.AgentRunning
	if err := c.Status().Update(ctx, running); err != nil {
		t.Fatal(err)
	}
	fi.Update(cur, running)
	select {
	case err := <-res:
		if err != nil {
			t.Fatalf("wait: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the wait did not end on the informer's event")
	}
	if got.Status.Phase != agentsv1.AgentRunning {
		t.Fatalf("the wait hands back the object it saw; phase %q", got.Status.Phase)
	}
	if calls != 2 {
		t.Fatalf("the check ran %d times; want once at start and once for its own object's event", calls)
	}
	o.waiters.mu.Lock()
	defer o.waiters.mu.Unlock()
	if len(o.waiters.subs) != 0 {
		t.Fatalf("subscriptions left behind: %v", o.waiters.subs)
	}
	if len(o.waiters.watched) != 1 {
		t.Fatalf("one event handler per kind; got %d kinds", len(o.waiters.watched))
	}
}

// TestWaitForEndsWithContext: a wait that is never satisfied ends with the context's error.
func TestWaitForEndsWithContext(t *testing.T) {
	sch := scheme.New()
	agent := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "a1"}}
	c := fake.NewClientBuilder().WithScheme(sch).WithObjects(agent.DeepCopy()).Build()
	o := New(Deps{Client: c, Informers: &informertest.FakeInformers{Scheme: sch}})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := o.WaitFor(ctx, agent, func() (bool, error) { return false, nil })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want the context's deadline", err)
	}
}

// TestGatewayStartFailsWhenItGoesDownAgain: a wait for a gateway's start does not fail on its
// first exit, which its runtime answers with a restart (the engine's own 5-second startup
// bounds fail on a loaded node and the restart boots), but on its going down again after a
// restart; two observations of one down are one down.
func TestGatewayStartFailsWhenItGoesDownAgain(t *testing.T) {
	old := waitRecheck
	waitRecheck = time.Hour
	defer func() { waitRecheck = old }()
	const starting, running, down = agentsv1.AgentStarting, agentsv1.AgentRunning, agentsv1.AgentNotRunning
	for _, tc := range []struct {
		name   string
		phases []agentsv1.AgentPhase
		fails  bool
	}{
		{"one early exit, then running", []agentsv1.AgentPhase{down, starting, running}, false},
		{"down, restarted, down again", []agentsv1.AgentPhase{down, starting, down}, true},
		{"one down seen twice, then running", []agentsv1.AgentPhase{down, down, starting, running}, false},
		{"running at once", []agentsv1.AgentPhase{running}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			agent := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "a1"}, Status: agentsv1.AgentStatus{Phase: starting}}
			o, c, fi := informedOps(t, agent)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			// The wait reports each status it checks (done is called with it first), so the
			// test moves the agent on only once the wait has seen the last step.
			seen := make(chan string, 16)
			res := make(chan error, 1)
			go func() {
				_, _, err := o.waitForGateway(ctx, agent.DeepCopy(), "Gateway failed to start", func(got *agentsv1.Agent) bool {
					seen <- fmt.Sprintf("%s/%d", got.Status.Phase, got.Status.Restarts)
					return true
				})
				res <- err
			}()
			await := func(want string) {
				t.Helper()
				for {
					select {
					case s := <-seen:
						if s == want {
							return
						}
					case err := <-res:
						t.Fatalf("the wait ended (%v) before it saw %s", err, want)
					case <-ctx.Done():
						t.Fatalf("the wait never saw %s", want)
					}
				}
			}
			await(string(starting) + "/0")
			for i, p := range tc.phases {
				cur := &agentsv1.Agent{}
				if err := c.Get(ctx, client.ObjectKeyFromObject(agent), cur); err != nil {
					t.Fatal(err)
				}
				next := cur.DeepCopy()
				next.Status.Phase, next.Status.Restarts = p, int32(i+1) // each step a status of its own
				if err := c.Status().Update(ctx, next); err != nil {
					t.Fatal(err)
				}
				fi.Update(cur, next)
				if i < len(tc.phases)-1 {
					await(fmt.Sprintf("%s/%d", p, i+1))
				}
			}
			var err error
			select {
			case err = <-res:
			case <-ctx.Done():
				t.Fatal("the wait did not end")
			}
			var oe *Error
			switch {
			case tc.fails && (!errors.As(err, &oe) || oe.Code != Internal || oe.Message != "Gateway failed to start"):
				t.Fatalf("want the start failed, got %v", err)
			case !tc.fails && err != nil:
				t.Fatalf("want the gateway running, got %v", err)
			}
		})
	}
}
