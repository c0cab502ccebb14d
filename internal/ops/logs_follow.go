package ops

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/go-logr/logr"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/logredact"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// logHold is how long at most a follow holds its last lines back for the next ones (a value
// split across two lines is hidden only if both halves are seen together).
const logHold = 200 * time.Millisecond

// LogFollowOptions bound a follow of an agent's gateway output.
type LogFollowOptions struct {
	// Buffer is how many lines may wait for the reader (1000).
	Buffer int
	// SlowAfter is how long a full buffer may stay full before the follow is cut off (5 s).
	// The runtime reads the output for each follow alone, so waiting delays nobody else.
	SlowAfter time.Duration
	// Retry is the wait before following again an output that ended (a restarted container)
	// or is not there yet (no pod) while the agent exists (2 s).
	Retry time.Duration
}

func (o *LogFollowOptions) setDefaults() {
	if o.Buffer <= 0 {
		o.Buffer = 1000
	}
	if o.SlowAfter <= 0 {
		o.SlowAfter = 5 * time.Second
	}
	if o.Retry <= 0 {
		o.Retry = 2 * time.Second
	}
}

// LogFollow is a checked request to follow an agent's gateway output (FollowLogs): the agent
// as read, the lines to send first, and the redactor of what it prints.
type LogFollow struct {
	Agent *agentsv1.Agent
	tail  int
	live  *LiveRedactor
	o     *Ops
}

// LogStream is a running follow (LogFollow.Start): the agent's lines arrive on Lines until
// Ended says why they stopped. Its reader takes them in batches and passes each through
// Redact.
type LogStream struct {
	lines     chan string
	slow      chan struct{} // closed when the buffer stayed full: the follow is cut off
	slowOnce  sync.Once
	slowAfter time.Duration
	ctx       context.Context
	ended     chan bool
	done      chan struct{}

	fol  *logredact.Follower
	live *LiveRedactor
	hold *time.Timer
	held bool // hold is armed
}

// Start follows the agent's output until ctx ends, the agent is deleted or the reader falls
// behind by more than opts allow. An output that ended or is not there yet is followed again
// after opts.Retry while the agent exists, with only what is written from then on.
func (l *LogFollow) Start(ctx context.Context, opts LogFollowOptions) *LogStream {
	opts.setDefaults()
	hold := time.NewTimer(time.Hour)
	hold.Stop()
	s := &LogStream{
		lines: make(chan string, opts.Buffer), slow: make(chan struct{}), slowAfter: opts.SlowAfter, ctx: ctx,
		ended: make(chan bool, 1), done: make(chan struct{}),
		fol: logredact.NewFollower(l.live.Last()), live: l.live, hold: hold,
	}
	go func() {
		defer close(s.done)
		s.ended <- l.pump(ctx, s, opts.Retry)
	}()
	return s
}

// pump follows the output into s, again after retry each time it ends; it returns whether
// the agent was deleted.
func (l *LogFollow) pump(ctx context.Context, s *LogStream, retry time.Duration) bool {
	req := runtime.LogRequest{Tail: l.tail, Follow: s.push}
	for {
		_, err := l.o.d.Runtime.Logs(ctx, l.Agent, req)
		// Followed again: only what is written from now on (a new container's output), where
		// the runtime can tell.
		req.Tail, req.Since = MaxLogTail, time.Now()
		select {
		case <-ctx.Done():
			return false
		case <-s.slow:
			return false
		default:
		}
		if err == nil {
			return false
		}
		if !errors.Is(err, io.EOF) && !errors.Is(err, runtime.ErrNotRunning) {
			logr.FromContextOrDiscard(ctx).V(1).Info("following gateway logs failed; retrying", "agent", l.Agent.Name, "error", err.Error())
		}
		if l.o.AgentGone(ctx, l.Agent) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(retry):
		}
	}
}

// push queues a line; it waits at most slowAfter for room, then cuts the follow off.
func (s *LogStream) push(line string) bool {
	select {
	case s.lines <- line:
		return true
	default:
	}
	t := time.NewTimer(s.slowAfter)
	defer t.Stop()
	select {
	case s.lines <- line:
		return true
	case <-s.ctx.Done():
		return false
	case <-t.C:
		s.slowOnce.Do(func() { close(s.slow) })
		return false
	}
}

// Lines are the agent's lines as the runtime read them, not yet redacted.
func (s *LogStream) Lines() <-chan string { return s.lines }

// Slow is closed when the reader fell behind and the follow was cut off.
func (s *LogStream) Slow() <-chan struct{} { return s.slow }

// Ended delivers, once, why the follow stopped: true when the agent was deleted.
func (s *LogStream) Ended() <-chan bool { return s.ended }

// Done is closed once the follow stopped (the runtime's reader is gone).
func (s *LogStream) Done() <-chan struct{} { return s.done }

// Hold fires when lines Redact held back are due: Redact them with flush then.
func (s *LogStream) Hold() <-chan time.Time { return s.hold.C }

// Redact takes the next lines and returns, redacted, those that may go out (all with flush):
// the lines go through a logredact.Follower (a value split across two lines is hidden) whose
// Redactor follows the secrets attached meanwhile; the lines it holds back go out at most
// logHold after they came (Hold fires). It is not safe for concurrent use.
func (s *LogStream) Redact(ctx context.Context, lines []string, flush bool) []string {
	s.fol.SetRedactor(s.live.Current(ctx))
	out := s.fol.Write(lines...)
	if flush {
		out = append(out, s.fol.Flush()...)
	}
	switch {
	case s.fol.Pending() == 0 && s.held:
		s.hold.Stop()
		s.held = false
	case s.fol.Pending() > 0 && !s.held:
		s.hold.Reset(logHold)
		s.held = true
	}
	return out
}
