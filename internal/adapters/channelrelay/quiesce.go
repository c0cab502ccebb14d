package channelrelay

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/agentplane/agentplane/internal/adapters/channelrelay/discordgw"
)

// Quiescing: an agent's channel connections end before its gateway's checkpoint, not in it.
//
// CRIU restores a gateway's TCP connections closed (--tcp-close): the relay's end of each is
// gone by then. So each channel client of the engine met its connection's end only when the
// woken gateway ran again, and waited its reconnect backoff before it fetched the message it
// was woken for: 1 s for Telegram's poll (the engine's TELEGRAM_RETRY_BACKOFF_POLICY after a
// failed getUpdates), 1.5 to 2.5 s for the Slack relay websocket (SLACK_SOCKET_RECONNECT_POLICY)
// and 2 s for the Discord gateway (its first reconnect), on a gateway whose memory was still
// coming back. Quiesce ends them while the gateway still runs, the way each client takes
// as a reason to reconnect later (Telegram: a 429 with retry_after; Slack: a close frame;
// Discord: op 7 RECONNECT), and refuses the agent's new ones until it is released: the dump
// then finds the clients waiting on a timer, which has come due when the gateway is restored
// (its clocks count the sleep: checkpoint_clock.go in the local runtime), so it reconnects at
// once.

// QuiesceWait is how long Quiesce waits for each of the agent's connections to end.
const QuiesceWait = 2 * time.Second

// asleepRetryAfter is the retry_after, in seconds, a quiesced getUpdates answers with.
const asleepRetryAfter = 1

// holds counts the quiesces of each agent still held.
type holds struct {
	mu sync.Mutex
	n  map[AgentKey]int
}

func (h *holds) add(agent AgentKey) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == nil {
		h.n = map[AgentKey]int{}
	}
	h.n[agent]++
}

func (h *holds) release(agent AgentKey) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n[agent]--; h.n[agent] <= 0 {
		delete(h.n, agent)
	}
}

func (h *holds) held(agent AgentKey) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n[agent] > 0
}

// Quiesce ends agent's connections to the relay (its gateway's Telegram poll, Slack relay
// websocket and Discord gateway session), waiting up to QuiesceWait for each, and refuses the
// agent's new ones until release is called. The local runtime calls it before it checkpoints
// the agent's gateway and releases it once the dump has ended, whether it succeeded or not
// (local.Options.Quiesce).
func (r *Relay) Quiesce(agent AgentKey) (release func()) {
	quiesces := [...]func(AgentKey) func(){r.polls.quiesce, r.opts.Slack.quiesce, r.opts.Discord.quiesce}
	var releases [len(quiesces)]func()
	var wg sync.WaitGroup
	for i, q := range quiesces {
		wg.Add(1)
		go func() {
			defer wg.Done()
			releases[i] = q(agent)
		}()
	}
	wg.Wait()
	var once sync.Once
	return func() {
		once.Do(func() {
			for _, rel := range releases {
				rel()
			}
		})
	}
}

// telegramPolls are the agents' getUpdates calls in flight through the relay.
type telegramPolls struct {
	holds
	mu       sync.Mutex
	inflight map[AgentKey]map[*telegramPoll]struct{}
}

// telegramPoll is one getUpdates call in flight: Telegram has not answered it yet, or has
// (answered), or it is cut by a quiesce (quiesced), which answers it instead.
type telegramPoll struct {
	cancel             context.CancelFunc
	done               chan struct{}
	answered, quiesced bool
}

type pollKey struct{}

func pollOf(ctx context.Context) *telegramPoll {
	p, _ := ctx.Value(pollKey{}).(*telegramPoll)
	return p
}

// start registers a poll of agent, unless the agent is quiesced (nil): ctx is the poll's own,
// which a quiesce cancels.
func (t *telegramPolls) start(ctx context.Context, agent AgentKey) (context.Context, *telegramPoll) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.held(agent) {
		return ctx, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	p := &telegramPoll{cancel: cancel, done: make(chan struct{})}
	if t.inflight == nil {
		t.inflight = map[AgentKey]map[*telegramPoll]struct{}{}
	}
	if t.inflight[agent] == nil {
		t.inflight[agent] = map[*telegramPoll]struct{}{}
	}
	t.inflight[agent][p] = struct{}{}
	return context.WithValue(ctx, pollKey{}, p), p
}

// end unregisters a poll once it has been answered.
func (t *telegramPolls) end(agent AgentKey, p *telegramPoll) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p.cancel()
	delete(t.inflight[agent], p)
	if len(t.inflight[agent]) == 0 {
		delete(t.inflight, agent)
	}
	close(p.done)
}

// answer claims the poll for Telegram's answer; false when a quiesce has cut it.
func (t *telegramPolls) answer(p *telegramPoll) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p.quiesced {
		return false
	}
	p.answered = true
	return true
}

// cut reports whether a quiesce cut p.
func (t *telegramPolls) cut(p *telegramPoll) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return p.quiesced
}

// quiesce cuts agent's polls that Telegram has not answered yet (the relay answers them
// asleepAnswer) and holds the agent's next ones off.
func (t *telegramPolls) quiesce(agent AgentKey) func() {
	t.mu.Lock()
	t.add(agent)
	var wait []chan struct{}
	for p := range t.inflight[agent] {
		if !p.answered {
			p.quiesced = true
			p.cancel()
		}
		wait = append(wait, p.done)
	}
	t.mu.Unlock()
	deadline := time.NewTimer(QuiesceWait)
	defer deadline.Stop()
wait:
	for _, d := range wait {
		select {
		case <-d:
		case <-deadline.C:
			break wait
		}
	}
	return func() { t.release(agent) }
}

// asleepAnswer answers a getUpdates of a quiesced agent as Telegram answers a client that
// polls too often: 429 with retry_after, on which the engine's polling worker waits that long
// before it polls again; and the connection closes, so that none is left for the dump.
func asleepAnswer(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusTooManyRequests)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"ok": false, "error_code": http.StatusTooManyRequests,
		"description": fmt.Sprintf("Too Many Requests: retry after %d (the agent is going to sleep)", asleepRetryAfter),
		"parameters":  map[string]any{"retry_after": asleepRetryAfter},
	})
}

// quiesce lets the agent's connected gateway ack what it was sent (the engine acks an event
// once it is in its durable queue: the relay would send the rest again at the wake, and wake
// the agent for it), then sends it a close frame and waits for its connection to end; the
// router refuses the agent's gateway until release. Nil router: nothing to do.
func (r *SlackRouter) quiesce(agent AgentKey) func() {
	if r == nil {
		return func() {}
	}
	r.init()
	r.held.add(agent)
	release := func() { r.held.release(agent) }
	ctx, cancel := context.WithTimeout(context.Background(), QuiesceWait)
	defer cancel()
	c := r.ackedConn(ctx, agent)
	if c == nil {
		return release
	}
	// The engine's client answers a close frame with its own, and then reconnects after its
	// backoff; the read loop ends on that answer, which ends the connection (detach). The
	// router has forgotten it when detached is closed (done may come first).
	_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseServiceRestart, "the agent is going to sleep"), time.Now().Add(time.Second))
	select {
	case <-c.detached:
	case <-ctx.Done():
		c.close() // the read loop ends at once, and detaches it
		<-c.detached
	}
	return release
}

// ackedConn waits until agent's connected gateway has acked every event of its inbox, or ctx
// ends, and returns its connection (nil: none).
func (r *SlackRouter) ackedConn(ctx context.Context, agent AgentKey) *gatewayConn {
	for {
		r.mu.Lock()
		var c *gatewayConn
		pending := 0
		if in := r.inboxes[agent]; in != nil {
			c, pending = in.conn, len(in.events)
		}
		acked := r.acked
		r.mu.Unlock()
		if c == nil || pending == 0 {
			return c
		}
		select {
		case <-acked:
		case <-c.done:
			return nil
		case <-ctx.Done():
			return c
		}
	}
}

// quiesce asks the agent's connected gateway session for a heartbeat (op 1: its answer says
// which messages it has seen, which leave the inbox; else they would wake the agent again as
// soon as it sleeps, its own heartbeat coming every 41 s) and then to reconnect (op 7, which
// the engine's Discord client takes by closing the connection and resuming after its backoff),
// and waits for the session to end (its heartbeat comes before its close, in order); the
// router refuses the agent's gateway until release.
func (r *DiscordRouter) quiesce(agent AgentKey) func() {
	if r == nil {
		return func() {}
	}
	r.init()
	r.mu.Lock()
	r.held.add(agent)
	var s *discordSession
	if a := r.agents[agent]; a != nil {
		s = a.conn
	}
	r.mu.Unlock()
	release := func() { r.held.release(agent) }
	if s == nil {
		return release
	}
	if s.conn.Heartbeat() == nil && s.conn.Reconnect() == nil {
		select {
		case <-s.conn.Done():
		case <-time.After(QuiesceWait):
		}
	}
	s.conn.Close(discordgw.CloseUnknownError, "the agent is going to sleep") // resumable: the client resumes later
	return release
}
