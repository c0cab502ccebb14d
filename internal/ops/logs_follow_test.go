package ops

import (
	"context"
	"io"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// scriptedLogs is a runtime whose Logs plays one step per call (the last one again when
// they run out) and hands each request to requests.
type scriptedLogs struct {
	runtime.Runtime
	steps    []func(ctx context.Context, req runtime.LogRequest) error
	requests chan runtime.LogRequest
	calls    int
}

func (r *scriptedLogs) Logs(ctx context.Context, _ *agentsv1.Agent, req runtime.LogRequest) ([]string, error) {
	step := r.steps[min(r.calls, len(r.steps)-1)]
	r.calls++
	r.requests <- req
	return nil, step(ctx, req)
}

// lines pushes lines, then ends with end (nil: waits for the follow's end, as a live output
// does).
func lines(end error, ls ...string) func(context.Context, runtime.LogRequest) error {
	return func(ctx context.Context, req runtime.LogRequest) error {
		for _, l := range ls {
			if !req.Follow(l) {
				return nil
			}
		}
		if end == nil {
			<-ctx.Done()
			return ctx.Err()
		}
		return end
	}
}

// startFollow follows agent a1 of workspace ws (which has a gateway token) through rt; when
// deleted, a1 is deleted once the request to follow it was checked.
func startFollow(t *testing.T, rt *scriptedLogs, opts LogFollowOptions, deleted bool) (*LogStream, context.CancelFunc) {
	t.Helper()
	a := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "a1", UID: "uid-a1"}}
	o, c := fakeOps(Deps{Runtime: rt}, a, tokenSecret("ws", "a1", "gw-token-of-a1-0123456789"))
	f, err := o.FollowLogs(context.Background(), Scope{Namespace: "ws"}, "a1", ptr(3))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if deleted {
		if err := c.Delete(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	return f.Start(ctx, opts), cancel
}

// next is the next line of s (the test fails after a minute without one).
func next(t *testing.T, s *LogStream) string {
	t.Helper()
	select {
	case l := <-s.Lines():
		return l
	case <-time.After(time.Minute):
		t.Fatal("no line")
		return ""
	}
}

// TestFollowFollowsAgainAfterTheOutputEnds: an output that ends while the agent exists is
// followed again, with only what is written from then on; the follow stops with its context.
func TestFollowFollowsAgainAfterTheOutputEnds(t *testing.T) {
	rt := &scriptedLogs{requests: make(chan runtime.LogRequest, 10), steps: []func(context.Context, runtime.LogRequest) error{
		lines(io.EOF, "before the restart"),
		lines(runtime.ErrNotRunning),
		lines(nil, "after the restart", "with gw-token-of-a1-0123456789 in it"),
	}}
	s, cancel := startFollow(t, rt, LogFollowOptions{Retry: time.Millisecond}, false)
	if first := <-rt.requests; first.Tail != 3 || !first.Since.IsZero() {
		t.Fatalf("first request %+v, want the tail asked for", first)
	}
	for _, want := range []string{"before the restart", "after the restart"} {
		if got := next(t, s); got != want {
			t.Fatalf("line %q, want %q", got, want)
		}
	}
	if again := <-rt.requests; again.Tail != MaxLogTail || again.Since.IsZero() {
		t.Fatalf("request after the end %+v, want what is written since", again)
	}
	if got := s.Redact(context.Background(), []string{next(t, s)}, true); len(got) != 1 || got[0] != "with [REDACTED] in it" {
		t.Fatalf("redacted %q", got)
	}
	cancel()
	if deleted := <-s.Ended(); deleted {
		t.Fatal("a follow its reader left ended as if the agent was deleted")
	}
	<-s.Done()
}

// TestFollowEndsWhenTheAgentIsDeleted: an output that ends after its agent was deleted ends
// the follow, saying so.
func TestFollowEndsWhenTheAgentIsDeleted(t *testing.T) {
	rt := &scriptedLogs{requests: make(chan runtime.LogRequest, 10), steps: []func(context.Context, runtime.LogRequest) error{
		lines(runtime.ErrNotRunning, "last words"),
	}}
	s, _ := startFollow(t, rt, LogFollowOptions{}, true)
	if !<-s.Ended() {
		t.Fatal("the follow of a deleted agent did not say so")
	}
	if got := next(t, s); got != "last words" {
		t.Fatalf("line %q", got)
	}
}

// TestFollowCutsOffASlowReader: a reader that leaves the buffer full for SlowAfter is cut off
// (Slow), and the runtime's reader stops.
func TestFollowCutsOffASlowReader(t *testing.T) {
	rt := &scriptedLogs{requests: make(chan runtime.LogRequest, 10), steps: []func(context.Context, runtime.LogRequest) error{
		lines(nil, "one", "two", "three"),
	}}
	s, _ := startFollow(t, rt, LogFollowOptions{Buffer: 2, SlowAfter: time.Millisecond}, false)
	<-s.Slow()
	if deleted := <-s.Ended(); deleted {
		t.Fatal("a cut-off follow ended as if the agent was deleted")
	}
	<-s.Done()
	if rt.calls != 1 {
		t.Fatalf("the runtime was asked %d times, want once", rt.calls)
	}
}
