package facade

import (
	"context"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/ops"
)

// Gateway logs (an addition beyond the contract): GET /v0/agents/{agentId}/logs.
const maxLogBatch = 1000 // lines written to a follower at once

// LogOptions bound the followers of gateway logs. Buffer, SlowAfter (after which a follower
// is cut off with `too slow`) and Retry are the follow's (ops.LogFollowOptions, with its
// defaults).
type LogOptions struct {
	Buffer    int
	SlowAfter time.Duration
	// KeepAlive is the interval of the keep-alive comments, at which a follower also checks
	// that its agent still exists (15 s).
	KeepAlive time.Duration
	Retry     time.Duration
}

// setDefaults sets KeepAlive's default; the operation defaults the others.
func (o *LogOptions) setDefaults() {
	if o.KeepAlive <= 0 {
		o.KeepAlive = 15 * time.Second
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
		lines, err := s.ops.AgentLogs(r.Context(), c.scope(), r.PathValue("agentId"), tail)
		if err != nil {
			return nil, err
		}
		return ok(map[string]any{"lines": lines})
	}
	f, err := s.ops.FollowLogs(r.Context(), c.scope(), r.PathValue("agentId"), tail)
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

// streamLogs serves one follower until the client leaves, the agent is deleted or the
// follower is too slow: it writes out what the operation's follow (ops.LogStream) reads.
func (s *Server) streamLogs(w http.ResponseWriter, r *http.Request, lf *ops.LogFollow) {
	s.followers.Add(1)
	defer s.followers.Add(-1)
	ctx, cancel := context.WithCancel(r.Context())
	rc := http.NewResponseController(w)
	lo := s.opts.Logs
	f := lf.Start(ctx, ops.LogFollowOptions{Buffer: lo.Buffer, SlowAfter: lo.SlowAfter, Retry: lo.Retry})
	writerDone, released := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(released)
		<-f.Done()
		select {
		case <-f.Slow():
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
		<-released
	}()

	w.WriteHeader(http.StatusOK)
	if rc.Flush() != nil {
		return
	}
	keep := time.NewTicker(lo.KeepAlive)
	defer keep.Stop()
	s.writeLogs(&logStream{ctx: ctx, w: w, rc: rc, f: f}, lf.Agent, keep.C)
}

// writeLogs writes the follower's lines, keep-alives and its end to the client until one
// of them ends the stream.
func (s *Server) writeLogs(ls *logStream, a *agentsv1.Agent, keep <-chan time.Time) {
	ctx, f := ls.ctx, ls.f
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.Slow():
			ls.tooSlow()
			return
		case line := <-f.Lines():
			ls.buf.Reset()
			ls.data(line)
			ls.take(maxLogBatch)
			if ls.out(false); ls.buf.Len() > 0 && !ls.send(ls.buf.String()) {
				return
			}
		case <-f.Hold():
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
		case gone := <-f.Ended():
			select {
			case <-f.Slow():
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
// batched, redacted (f.Redact), then written into buf and sent.
type logStream struct {
	ctx   context.Context
	w     http.ResponseWriter
	rc    *http.ResponseController
	f     *ops.LogStream
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
		case l := <-ls.f.Lines():
			ls.data(l)
		default:
			more = false
		}
	}
}

// out writes the batch's lines that may go out (all with flush) into buf.
func (ls *logStream) out(flush bool) {
	for _, l := range ls.f.Redact(ls.ctx, ls.batch, flush) {
		ls.buf.WriteString("data: ")
		ls.buf.WriteString(strings.ReplaceAll(l, "\r", ""))
		ls.buf.WriteString("\n\n")
	}
	ls.batch = ls.batch[:0]
}
