package apiserver

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/ops"
)

// Gateway logs (an addition beyond the contract): GET /v0/agents/{agentId}/logs.
const (
	maxLogBatch = 1000 // lines written to a follower at once

	// logHold is how long at most a follower holds its last lines back for the next ones (a value
	// split across two reads is hidden only if both halves are seen together).
	logHold = 200 * time.Millisecond
)

// LogOptions bound the followers of gateway logs.
type LogOptions struct {
	// Buffer is how many lines a follower may have waiting to be written (1000).
	Buffer int
	// SlowAfter is how long a full buffer may stay full before its follower is cut off with
	// `too slow` (5 s). The runtime reads the output for each follower alone, so waiting
	// delays nobody else.
	SlowAfter time.Duration
	// KeepAlive is the interval of the keep-alive comments, at which a follower also checks
	// that its agent still exists (15 s).
	KeepAlive time.Duration
	// Retry is the wait before following again an output that ended (a restarted container)
	// or is not there yet (no pod) while the agent exists (2 s).
	Retry time.Duration
}

func (o *LogOptions) setDefaults() {
	if o.Buffer <= 0 {
		o.Buffer = 1000
	}
	if o.SlowAfter <= 0 {
		o.SlowAfter = 5 * time.Second
	}
	if o.KeepAlive <= 0 {
		o.KeepAlive = 15 * time.Second
	}
	if o.Retry <= 0 {
		o.Retry = 2 * time.Second
	}
}

// Followers is the number of log streams being served.
func (s *Server) Followers() int64 { return s.followers.Load() }

// agentLogs answers the last lines of the agent's gateway output ({lines}) or, with
// follow=true, streams them and every new line as server-sent events. Reading logs never
// wakes a suspended agent: the runtime answers with what it still keeps.
func (s *Server) agentLogs(r *http.Request, c *Caller) (*Response, error) {
	q := r.URL.Query()
	var tail *int
	if q.Has("tail") {
		n, err := strconv.Atoi(q.Get("tail"))
		if err != nil {
			return nil, errorf(http.StatusBadRequest, ops.MsgInvalidTail)
		}
		tail = &n
	}
	if q.Get("follow") != "true" {
		lines, err := s.ops.AgentLogs(r.Context(), c.tenant(), r.PathValue("agentId"), tail)
		if err != nil {
			return nil, err
		}
		return ok(map[string]any{"lines": lines})
	}
	f, err := s.ops.FollowLogs(r.Context(), c.tenant(), r.PathValue("agentId"), tail)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // proxies: do not buffer the stream
	return &Response{Status: http.StatusOK, Header: h, Stream: func(w http.ResponseWriter) {
		s.streamLogs(w, r, f)
	}}, nil
}

// logFollower is one follow stream: the runtime's reader pushes lines into a bounded buffer
// that the handler writes out.
type logFollower struct {
	lines     chan string
	slow      chan struct{} // closed when the buffer stayed full: the follower is cut off
	slowOnce  sync.Once
	slowAfter time.Duration
	ctx       context.Context
}

// push queues a line; it waits at most slowAfter for room, then cuts the follower off.
func (f *logFollower) push(line string) bool {
	select {
	case f.lines <- line:
		return true
	default:
	}
	t := time.NewTimer(f.slowAfter)
	defer t.Stop()
	select {
	case f.lines <- line:
		return true
	case <-f.ctx.Done():
		return false
	case <-t.C:
		f.slowOnce.Do(func() { close(f.slow) })
		return false
	}
}

// streamLogs serves one follower until the client leaves, the agent is deleted or the
// follower is too slow.
func (s *Server) streamLogs(w http.ResponseWriter, r *http.Request, lf *ops.LogFollow) {
	a := lf.Agent
	s.followers.Add(1)
	defer s.followers.Add(-1)
	ctx, cancel := context.WithCancel(r.Context())
	rc := http.NewResponseController(w)
	f := &logFollower{lines: make(chan string, s.opts.Logs.Buffer), slow: make(chan struct{}),
		slowAfter: s.opts.Logs.SlowAfter, ctx: ctx}
	deleted := make(chan bool, 1)
	writerDone, pumpDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(pumpDone)
		deleted <- s.pumpLogs(ctx, lf, f)
		select {
		case <-f.slow:
			// A writer blocked on a client that does not read is released.
			select {
			case <-writerDone:
			case <-time.After(time.Second):
				_ = rc.SetWriteDeadline(time.Now())
			}
		default:
		}
	}()
	defer func() {
		close(writerDone)
		cancel()
		<-pumpDone
	}()

	w.WriteHeader(http.StatusOK)
	if rc.Flush() != nil {
		return
	}
	keep := time.NewTicker(s.opts.Logs.KeepAlive)
	defer keep.Stop()
	ls := &logStream{ctx: ctx, w: w, rc: rc, f: f, rl: newRedactedLines(lf.Redactor)}
	defer ls.rl.hold.Stop()
	s.writeLogs(ls, a, keep.C, deleted)
}

// writeLogs writes the follower's lines, keep-alives and its end to the client until one
// of them ends the stream.
func (s *Server) writeLogs(ls *logStream, a *agentsv1.Agent, keep <-chan time.Time, deleted <-chan bool) {
	ctx, f, rl := ls.ctx, ls.f, ls.rl
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.slow:
			ls.tooSlow()
			return
		case line := <-f.lines:
			ls.buf.Reset()
			ls.data(line)
			ls.take(maxLogBatch)
			if ls.out(false); ls.buf.Len() > 0 && !ls.send(ls.buf.String()) {
				return
			}
		case <-rl.hold.C:
			rl.held = false
			ls.buf.Reset()
			if ls.out(true); ls.buf.Len() > 0 && !ls.send(ls.buf.String()) {
				return
			}
		case <-keep:
			if s.ops.AgentGone(ctx, a) {
				ls.buf.Reset()
				ls.out(true)
				ls.buf.WriteString("event: end\ndata: agent deleted\n\n")
				ls.send(ls.buf.String())
				return
			}
			if !ls.send(": keep-alive\n\n") {
				return
			}
		case gone := <-deleted:
			select {
			case <-f.slow:
				ls.tooSlow()
				return
			default:
			}
			ls.buf.Reset()
			ls.take(math.MaxInt)
			ls.out(true)
			if gone {
				ls.buf.WriteString("event: end\ndata: agent deleted\n\n")
			}
			ls.send(ls.buf.String())
			return
		}
	}
}

// logStream writes one follower's lines to its client as server-sent events: lines are
// batched, redacted (rl), then written into buf and sent.
type logStream struct {
	ctx   context.Context
	w     http.ResponseWriter
	rc    *http.ResponseController
	f     *logFollower
	rl    *redactedLines
	buf   strings.Builder
	batch []string
}

// send writes ev and flushes it.
func (ls *logStream) send(ev string) bool {
	_, err := io.WriteString(ls.w, ev)
	return err == nil && ls.rc.Flush() == nil
}

// tooSlow tells a follower that was cut off, if it reads at all.
func (ls *logStream) tooSlow() {
	_ = ls.rc.SetWriteDeadline(time.Now().Add(time.Second))
	if ls.send("event: error\ndata: too slow\n\n") {
		_ = ls.rc.SetWriteDeadline(time.Time{}) // the connection may serve further requests
	}
}

// data adds a line to the batch.
func (ls *logStream) data(line string) { ls.batch = append(ls.batch, line) }

// take adds the lines waiting in the follower's buffer to the batch until it holds limit.
func (ls *logStream) take(limit int) {
	for more := true; more && len(ls.batch) < limit; {
		select {
		case l := <-ls.f.lines:
			ls.data(l)
		default:
			more = false
		}
	}
}

// out writes the batch's lines that may go out (all with flush) into buf.
func (ls *logStream) out(flush bool) {
	for _, l := range ls.rl.write(ls.ctx, ls.batch, flush) {
		ls.buf.WriteString("data: ")
		ls.buf.WriteString(strings.ReplaceAll(l, "\r", ""))
		ls.buf.WriteString("\n\n")
	}
	ls.batch = ls.batch[:0]
}

// is followed again after Retry.
func (s *Server) pumpLogs(ctx context.Context, lf *ops.LogFollow, f *logFollower) bool {
	a := lf.Agent
	req := runtime.LogRequest{Tail: lf.Tail, Follow: f.push}
	for {
		err := lf.Follow(ctx, req)
		// Followed again: only what is written from now on (a new container's output), where
		// the runtime can tell.
		req.Tail, req.Since = ops.MaxLogTail, time.Now()
		select {
		case <-ctx.Done():
			return false
		case <-f.slow:
			return false
		default:
		}
		if err == nil {
			return false
		}
		if !errors.Is(err, io.EOF) && !errors.Is(err, runtime.ErrNotRunning) {
			logr.FromContextOrDiscard(ctx).V(1).Info("following gateway logs failed; retrying", "agent", a.Name, "error", err.Error())
		}
		if s.ops.AgentGone(ctx, a) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(s.opts.Logs.Retry):
		}
	}
}
