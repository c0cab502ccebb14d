package channelrelay

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/agentplane/agentplane/internal/adapters/channelrelay/discordgw"
)

// Defaults of DiscordRouter.
const (
	// DefaultDiscordInbox bounds an agent's inbox of Discord messages.
	DefaultDiscordInbox = 1000
	// DefaultDiscordHeartbeat is the heartbeat interval the relay asks of the gateways: each
	// heartbeat acks the messages the gateway has seen, and a gateway silent for two intervals
	// is gone.
	DefaultDiscordHeartbeat = 10 * time.Second
	// DefaultDiscordReadyWait is how long a gateway's IDENTIFY waits for the bot's own
	// connection to Discord to be ready before the relay closes it (the gateway connects again
	// later, as after any close).
	DefaultDiscordReadyWait = 30 * time.Second
)

// ErrDiscordInboxFull: the agent's inbox holds DefaultDiscordInbox messages its gateway has not
// seen.
var ErrDiscordInboxFull = errors.New("channelrelay: the agent's discord inbox is full")

// DiscordRouter is, for each relayed Discord agent, the Discord gateway its gateway connects to
// (the engine's Discord plugin with DISCORD_API_URL at the relay). The platform holds the bot's
// one real gateway connection (DiscordIngress) and hands its events here: the bot's READY and
// guilds, which every new session of the agent's gateway gets first, and the dispatches after
// them. A message (MESSAGE_CREATE by someone other than the bot) goes into the agent's inbox,
// in arrival order, and stays there until the agent's gateway has seen it: the sequence number
// its heartbeat or its RESUME reports covers it. What a gateway had not seen when its
// connection ended is sent again on its next one; other events reach a connected gateway only.
// The inbox is in the platform's memory.
type DiscordRouter struct {
	Authorizer Authorizer
	Log        logr.Logger
	// MaxInbox, Heartbeat, ReadyWait: the defaults above when zero.
	MaxInbox  int
	Heartbeat time.Duration
	ReadyWait time.Duration

	once    sync.Once
	mu      sync.Mutex
	agents  map[AgentKey]*discordAgent
	changed chan struct{} // closed and replaced when a bot's READY arrives
	closed  bool
	held    holds // agents quiesced (quiesce.go)
	// mediaKey authenticates the attachment URLs the relay hands out (discordmedia.go).
	mediaKey []byte
}

type discordAgent struct {
	ready   json.RawMessage            // the bot's READY (d), nil until its connection has one
	guilds  map[string]json.RawMessage // GUILD_CREATE (d) by guild id
	order   []string                   // guild ids in arrival order
	inbox   []discordMessage           // not seen by the agent's gateway yet, in arrival order
	seq     int64                      // the last sequence number sent to a session of the agent
	session string                     // the current session's id
	conn    *discordSession
}

// discordSession is a gateway's connection with its own writer: the router queues what it
// sends, so a gateway that does not read stalls only itself (and is dropped when its queue is
// full).
type discordSession struct {
	conn *discordgw.Conn
	out  chan discordFrame
	// media rewrites a message's attachment URLs for the relay's origin the gateway reached.
	media func(json.RawMessage) json.RawMessage
}

type discordFrame struct {
	t   string
	seq int64
	d   any
}

func newDiscordSession(conn *discordgw.Conn, size int, media func(json.RawMessage) json.RawMessage) *discordSession {
	s := &discordSession{conn: conn, out: make(chan discordFrame, size), media: media}
	go s.write()
	return s
}

// dispatch queues an event; a full queue ends the session.
func (s *discordSession) dispatch(t string, seq int64, d any) {
	if raw, ok := d.(json.RawMessage); ok && s.media != nil && (t == "MESSAGE_CREATE" || t == "MESSAGE_UPDATE") {
		d = s.media(raw)
	}
	select {
	case s.out <- discordFrame{t: t, seq: seq, d: d}:
	case <-s.conn.Done():
	default:
		s.close("the gateway does not read its events")
	}
}

func (s *discordSession) write() {
	for {
		select {
		case <-s.conn.Done():
			return
		case f := <-s.out:
			if err := s.conn.Dispatch(f.t, f.seq, f.d); err != nil {
				s.conn.Close(discordgw.CloseUnknownError, "")
				return
			}
		}
	}
}

// close ends the session without waiting for its close frame: the router calls it under its
// lock, which a client that does not read must not hold up.
func (s *discordSession) close(reason string) {
	go s.conn.Close(discordgw.CloseUnknownError, reason)
}

type discordMessage struct {
	id   string
	data json.RawMessage
	sent int64 // the sequence number it was last sent with on the current session (0: not yet)
}

func (r *DiscordRouter) init() {
	r.once.Do(func() {
		if r.MaxInbox <= 0 {
			r.MaxInbox = DefaultDiscordInbox
		}
		if r.Heartbeat <= 0 {
			r.Heartbeat = DefaultDiscordHeartbeat
		}
		if r.ReadyWait <= 0 {
			r.ReadyWait = DefaultDiscordReadyWait
		}
		r.agents = map[AgentKey]*discordAgent{}
		r.changed = make(chan struct{})
		r.mediaKey = newMediaKey()
	})
}

func (r *DiscordRouter) agent(key AgentKey) *discordAgent {
	a := r.agents[key]
	if a == nil {
		a = &discordAgent{guilds: map[string]json.RawMessage{}}
		r.agents[key] = a
	}
	return a
}

// Upstream takes one dispatch of the bot's own connection to Discord for agent: READY and
// guilds are kept for the agent's gateway's sessions, a message by someone else goes into its
// inbox (reported by the result: the caller wakes a sleeping agent), and every other event goes
// to the agent's gateway if it is connected.
func (r *DiscordRouter) Upstream(agent AgentKey, t string, d json.RawMessage) (message bool, err error) {
	r.init()
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.agent(agent)
	switch t {
	case "READY":
		a.ready = append(json.RawMessage(nil), d...)
		a.guilds, a.order = map[string]json.RawMessage{}, nil
		close(r.changed)
		r.changed = make(chan struct{})
		return false, nil
	case "RESUMED":
		return false, nil
	case "GUILD_CREATE":
		var g struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(d, &g) == nil && g.ID != "" {
			if _, ok := a.guilds[g.ID]; !ok {
				a.order = append(a.order, g.ID)
			}
			a.guilds[g.ID] = append(json.RawMessage(nil), d...)
		}
	case "GUILD_DELETE":
		var g struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(d, &g) == nil {
			delete(a.guilds, g.ID)
			a.order = slices.DeleteFunc(a.order, func(id string) bool { return id == g.ID })
		}
	case "MESSAGE_CREATE":
		if id, ok := a.foreignMessage(d); ok {
			for _, m := range a.inbox {
				if m.id == id {
					return false, nil // the bot's connection resumed and got it again
				}
			}
			if len(a.inbox) >= r.MaxInbox {
				return false, ErrDiscordInboxFull
			}
			a.inbox = append(a.inbox, discordMessage{id: id, data: append(json.RawMessage(nil), d...)})
			a.sendInbox()
			return true, nil
		}
	}
	if a.conn != nil {
		a.seq++
		a.conn.dispatch(t, a.seq, append(json.RawMessage(nil), d...))
	}
	return false, nil
}

// foreignMessage reports a message's id when someone other than the bot wrote it.
func (a *discordAgent) foreignMessage(d json.RawMessage) (string, bool) {
	var m struct {
		ID     string `json:"id"`
		Author struct {
			ID string `json:"id"`
		} `json:"author"`
	}
	if json.Unmarshal(d, &m) != nil || m.ID == "" {
		return "", false
	}
	var ready struct {
		User struct {
			ID string `json:"id"`
		} `json:"user"`
	}
	_ = json.Unmarshal(a.ready, &ready)
	return m.ID, m.Author.ID == "" || m.Author.ID != ready.User.ID
}

// sendInbox sends the messages of the inbox the current session has not been sent yet.
func (a *discordAgent) sendInbox() {
	if a.conn == nil {
		return
	}
	for i := range a.inbox {
		if a.inbox[i].sent != 0 {
			continue
		}
		a.seq++
		a.inbox[i].sent = a.seq
		a.conn.dispatch("MESSAGE_CREATE", a.seq, a.inbox[i].data)
	}
}

// seen drops from the inbox what the session has seen (every message sent with a sequence
// number up to seq).
func (a *discordAgent) seen(seq int64) {
	kept := a.inbox[:0]
	for _, m := range a.inbox {
		if m.sent == 0 || m.sent > seq {
			kept = append(kept, m)
		}
	}
	clear(a.inbox[len(kept):])
	a.inbox = kept
}

// Pending is how many messages wait in agent's inbox for its gateway.
func (r *DiscordRouter) Pending(agent AgentKey) int {
	r.init()
	r.mu.Lock()
	defer r.mu.Unlock()
	if a := r.agents[agent]; a != nil {
		return len(a.inbox)
	}
	return 0
}

// Connected reports whether agent's gateway holds a session now.
func (r *DiscordRouter) Connected(agent AgentKey) bool {
	r.init()
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.agents[agent]
	return a != nil && a.conn != nil
}

// Drop forgets agent (its Discord channel is gone) and ends its gateway's session.
func (r *DiscordRouter) Drop(agent AgentKey) {
	r.init()
	r.mu.Lock()
	defer r.mu.Unlock()
	if a := r.agents[agent]; a != nil {
		if a.conn != nil {
			a.conn.close("")
		}
		delete(r.agents, agent)
	}
}

// Close ends every gateway's session and refuses new ones (the platform stops).
func (r *DiscordRouter) Close() {
	r.init()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	for _, a := range r.agents {
		if a.conn != nil {
			a.conn.close("")
			a.conn = nil
		}
	}
}

// ServeHTTP is the agents' Discord gateway: a gateway identifies (or resumes) with its Discord
// relay token, gets the bot's READY and guilds (a new session) or RESUMED, then its inbox and
// every event as it comes.
func (r *DiscordRouter) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.init()
	conn, first, err := discordgw.Accept(w, req, discordgw.Options{HeartbeatInterval: r.Heartbeat})
	if err != nil {
		return // Accept closed it
	}
	g, err := r.Authorizer.AuthorizeDiscord(req.Context(), first.Token())
	switch {
	case errors.Is(err, ErrUnauthorized):
		conn.Close(discordgw.CloseAuthenticationFailed, "Authentication failed.")
		return
	case err != nil:
		r.Log.Error(err, "cannot authorize a relay token")
		conn.Close(discordgw.CloseUnknownError, "the platform cannot read the channel now")
		return
	}
	if r.held.held(g.Agent) {
		conn.Close(discordgw.CloseUnknownError, "the agent is going to sleep")
		return
	}
	if !r.attach(req.Context(), g.Agent, conn, first, req.Host) {
		return
	}
	r.Log.V(1).Info("discord gateway connected", "agent", g.Agent.String(), "resumed", first.Resume != nil)
	err = conn.Serve(func(seq *int64) {
		if seq != nil {
			r.mu.Lock()
			if a := r.agents[g.Agent]; a != nil && a.conn != nil && a.conn.conn == conn {
				a.seen(*seq)
			}
			r.mu.Unlock()
		}
	})
	r.detach(g.Agent, conn)
	r.Log.V(1).Info("discord gateway disconnected", "agent", g.Agent.String(), "reason", errString(err))
}

// attach makes conn the agent's session (ending an older one): a resume of the current session
// acks what it saw and gets RESUMED, anything else a new session with the bot's READY and
// guilds (once the bot's own connection has them); then the inbox.
func (r *DiscordRouter) attach(ctx context.Context, agent AgentKey, conn *discordgw.Conn, first discordgw.First, host string) bool {
	wait := time.NewTimer(r.ReadyWait)
	defer wait.Stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		if r.closed || r.held.held(agent) {
			conn.Close(discordgw.CloseUnknownError, "")
			return false
		}
		a := r.agent(agent)
		if a.ready != nil || (first.Resume != nil && first.Resume.SessionID == a.session) {
			break
		}
		changed := r.changed
		r.mu.Unlock()
		select {
		case <-changed:
		case <-wait.C:
			conn.Close(discordgw.CloseUnknownError, "the bot is not connected to Discord yet")
			r.mu.Lock()
			return false
		case <-ctx.Done():
			conn.Close(discordgw.CloseUnknownError, "")
			r.mu.Lock()
			return false
		case <-conn.Done():
			r.mu.Lock()
			return false
		}
		r.mu.Lock()
	}
	a := r.agent(agent)
	if a.conn != nil {
		a.conn.close("another session of the agent connected")
	}
	a.conn = newDiscordSession(conn, r.MaxInbox+64, func(d json.RawMessage) json.RawMessage { return r.withMedia("http://"+host, d) })
	resumed := first.Resume != nil && first.Resume.SessionID == a.session
	if resumed {
		a.seen(first.Resume.Seq) // what the resumed session saw
	}
	for i := range a.inbox {
		a.inbox[i].sent = 0 // the rest goes again on this connection
	}
	if resumed {
		a.seq++
		a.conn.dispatch("RESUMED", a.seq, map[string]any{})
	} else {
		a.session = newSessionID()
		if err := a.sendReady("ws://" + host + DiscordGatewayPath); err != nil {
			a.conn.close("")
			a.conn = nil
			return false
		}
	}
	a.sendInbox()
	return true
}

// sendReady starts a new session: the bot's READY with the relay's session, then its guilds.
func (a *discordAgent) sendReady(resumeURL string) error {
	var ready map[string]json.RawMessage
	if err := json.Unmarshal(a.ready, &ready); err != nil {
		return err
	}
	ready["session_id"], _ = json.Marshal(a.session)
	ready["resume_gateway_url"], _ = json.Marshal(resumeURL)
	a.seq++
	a.conn.dispatch("READY", a.seq, ready)
	for _, id := range a.order {
		if g, ok := a.guilds[id]; ok {
			a.seq++
			a.conn.dispatch("GUILD_CREATE", a.seq, g)
		}
	}
	return nil
}

func (r *DiscordRouter) detach(agent AgentKey, conn *discordgw.Conn) {
	conn.Close(discordgw.CloseUnknownError, "")
	r.mu.Lock()
	defer r.mu.Unlock()
	if a := r.agents[agent]; a != nil && a.conn != nil && a.conn.conn == conn {
		a.conn = nil
	}
}

func newSessionID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
