package channelrelay

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/gorilla/websocket"
)

// SlackGatewayPath is the route of the gateways' relay websocket (the engine's
// channels.slack.relay.url).
const SlackGatewayPath = "/relay/slack/gateway"

// Defaults of SlackRouter.
const (
	// DefaultSlackInbox bounds an agent's inbox: beyond it, an event is not acked to Slack
	// (which sends it again later) rather than dropped.
	DefaultSlackInbox = 1000
	// DefaultSlackPing is how often the router pings a gateway; one that answers no ping for
	// two intervals is gone (the engine's relay client sends no pings of its own and cannot
	// tell a half-open connection).
	DefaultSlackPing = 15 * time.Second
)

// ErrInboxFull: the agent's inbox holds DefaultSlackInbox events its gateway has not acked.
var ErrInboxFull = errors.New("channelrelay: the agent's slack inbox is full")

// SlackRouter keeps each relayed Slack agent's inbox and delivers it over the agent's relay
// websocket. An event stays in the inbox, in arrival order, until the gateway acks it (the
// engine acks once the event is in its durable ingress queue); what a gateway did not ack
// before its connection ended is sent again on its next connection, where the engine
// acknowledges a repeated message without handling it twice (its ingress keys messages by team,
// channel and ts). So nothing that reached the inbox is lost or doubled while the platform
// runs; the inbox is in the platform's memory.
type SlackRouter struct {
	Authorizer Authorizer
	Log        logr.Logger
	// MaxInbox and Ping: DefaultSlackInbox and DefaultSlackPing when zero.
	MaxInbox int
	Ping     time.Duration

	once     sync.Once
	upgrader websocket.Upgrader
	mu       sync.Mutex
	inboxes  map[AgentKey]*slackInbox
	closed   bool
	held     holds         // agents quiesced (quiesce.go)
	acked    chan struct{} // closed and replaced at each ack
}

type slackInbox struct {
	events []slackEvent // not acked yet, in arrival order
	conn   *gatewayConn
}

type slackEvent struct {
	id    string
	frame []byte // the slack_event frame
}

type gatewayConn struct {
	ws   *websocket.Conn
	out  chan []byte
	once sync.Once
	done chan struct{}
	// detached is closed once the router no longer holds the connection (detach).
	detached chan struct{}
}

func (c *gatewayConn) close() {
	c.once.Do(func() {
		close(c.done)
		_ = c.ws.Close()
	})
}

// send queues frame for the writer; a gateway too slow to take its inbox is dropped (it gets
// the inbox again when it connects again).
func (c *gatewayConn) send(frame []byte) {
	select {
	case c.out <- frame:
	case <-c.done:
	default:
		c.close()
	}
}

func (r *SlackRouter) init() {
	r.once.Do(func() {
		if r.MaxInbox <= 0 {
			r.MaxInbox = DefaultSlackInbox
		}
		if r.Ping <= 0 {
			r.Ping = DefaultSlackPing
		}
		r.inboxes = map[AgentKey]*slackInbox{}
		r.acked = make(chan struct{})
		r.upgrader = websocket.Upgrader{
			HandshakeTimeout: 30 * time.Second,
			// the gateway is no browser: it sends no Origin; a browser page must not reach it
			CheckOrigin: func(req *http.Request) bool { return req.Header.Get("Origin") == "" },
		}
	})
}

// Deliver puts a Slack event (payload: the Events API event_callback of a Socket Mode
// envelope) into agent's inbox and sends it to the agent's gateway if it is connected. An id
// already in the inbox is not added again (Slack sends an envelope again when it missed the
// ack).
func (r *SlackRouter) Deliver(agent AgentKey, id string, payload json.RawMessage) error {
	r.init()
	var ev struct {
		Event struct {
			Channel string `json:"channel"`
		} `json:"event"`
	}
	_ = json.Unmarshal(payload, &ev)
	key := ev.Event.Channel
	if key == "" {
		key = "default"
	}
	frame, err := json.Marshal(map[string]any{
		"type": "slack_event", "delivery_id": id,
		"route":   map[string]string{"kind": "channel_default", "key": key},
		"payload": payload,
	})
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	in := r.inboxes[agent]
	if in == nil {
		in = &slackInbox{}
		r.inboxes[agent] = in
	}
	for _, e := range in.events {
		if e.id == id {
			return nil
		}
	}
	if len(in.events) >= r.MaxInbox {
		return ErrInboxFull
	}
	in.events = append(in.events, slackEvent{id: id, frame: frame})
	if in.conn != nil {
		in.conn.send(frame)
	}
	return nil
}

// Pending is how many events wait in agent's inbox for its gateway's ack.
func (r *SlackRouter) Pending(agent AgentKey) int {
	r.init()
	r.mu.Lock()
	defer r.mu.Unlock()
	if in := r.inboxes[agent]; in != nil {
		return len(in.events)
	}
	return 0
}

// Connected reports whether agent's gateway holds its relay websocket now.
func (r *SlackRouter) Connected(agent AgentKey) bool {
	r.init()
	r.mu.Lock()
	defer r.mu.Unlock()
	in := r.inboxes[agent]
	return in != nil && in.conn != nil
}

// Drop forgets agent's inbox and ends its gateway's connection (its Slack channel is gone).
func (r *SlackRouter) Drop(agent AgentKey) {
	r.init()
	r.mu.Lock()
	defer r.mu.Unlock()
	if in := r.inboxes[agent]; in != nil {
		if in.conn != nil {
			in.conn.close()
		}
		delete(r.inboxes, agent)
	}
}

// Close ends every gateway's connection and refuses new ones (the platform stops; a server's
// shutdown does not end hijacked connections).
func (r *SlackRouter) Close() {
	r.init()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	for _, in := range r.inboxes {
		if in.conn != nil {
			in.conn.close()
			in.conn = nil
		}
	}
}

// ServeHTTP is the gateways' relay websocket: the gateway authenticates with its Slack relay
// token as a bearer token, gets its inbox, then every event as it arrives, and acks each.
func (r *SlackRouter) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.init()
	tok, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
	if !ok || tok == "" {
		http.Error(w, "a relay token is required", http.StatusUnauthorized)
		return
	}
	g, err := r.Authorizer.AuthorizeSlack(req.Context(), tok)
	switch {
	case errors.Is(err, ErrUnauthorized):
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	case err != nil:
		r.Log.Error(err, "cannot authorize a relay token")
		http.Error(w, "the platform cannot read the channel now", http.StatusServiceUnavailable)
		return
	}
	if r.held.held(g.Agent) {
		http.Error(w, "the agent is going to sleep", http.StatusServiceUnavailable)
		return
	}
	ws, err := r.upgrader.Upgrade(w, req, nil)
	if err != nil {
		return // the upgrader answered
	}
	ws.SetReadLimit(64 << 10)
	c := &gatewayConn{ws: ws, out: make(chan []byte, r.MaxInbox+64), done: make(chan struct{}), detached: make(chan struct{})}
	if !r.attach(g.Agent, c) {
		c.close()
		return
	}
	r.Log.V(1).Info("slack gateway connected", "agent", g.Agent.String())
	go r.write(c)
	r.read(g.Agent, c)
	r.detach(g.Agent, c)
	r.Log.V(1).Info("slack gateway disconnected", "agent", g.Agent.String())
}

// attach makes c the agent's connection (ending an older one) and queues the inbox on it.
func (r *SlackRouter) attach(agent AgentKey, c *gatewayConn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.held.held(agent) {
		return false
	}
	in := r.inboxes[agent]
	if in == nil {
		in = &slackInbox{}
		r.inboxes[agent] = in
	}
	if in.conn != nil {
		in.conn.close()
	}
	in.conn = c
	for _, e := range in.events {
		c.send(e.frame)
	}
	return true
}

// detach forgets the agent's connection c once it has ended, and ends it if it has not.
func (r *SlackRouter) detach(agent AgentKey, c *gatewayConn) {
	r.mu.Lock()
	if in := r.inboxes[agent]; in != nil && in.conn == c {
		in.conn = nil
	}
	r.mu.Unlock()
	c.close()
	close(c.detached)
}

// ack removes an acked event from the inbox.
func (r *SlackRouter) ack(agent AgentKey, id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	in := r.inboxes[agent]
	if in == nil {
		return
	}
	for i, e := range in.events {
		if e.id == id {
			in.events = append(in.events[:i], in.events[i+1:]...)
			close(r.acked)
			r.acked = make(chan struct{})
			return
		}
	}
}

// read takes the gateway's acks until the connection ends or stops answering pings.
func (r *SlackRouter) read(agent AgentKey, c *gatewayConn) {
	alive := func(string) error { return c.ws.SetReadDeadline(time.Now().Add(2 * r.Ping)) }
	_ = alive("")
	c.ws.SetPongHandler(alive)
	for {
		_, msg, err := c.ws.ReadMessage()
		if err != nil {
			return
		}
		_ = alive("")
		var f struct {
			Type       string `json:"type"`
			DeliveryID string `json:"delivery_id"`
		}
		if json.Unmarshal(msg, &f) == nil && f.Type == "ack" && f.DeliveryID != "" {
			r.ack(agent, f.DeliveryID)
		}
	}
}

// write sends the queued frames and the pings (the connection's only writer).
func (r *SlackRouter) write(c *gatewayConn) {
	t := time.NewTicker(r.Ping)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case f := <-c.out:
			_ = c.ws.SetWriteDeadline(time.Now().Add(2 * r.Ping))
			if err := c.ws.WriteMessage(websocket.TextMessage, f); err != nil {
				c.close()
				return
			}
		case <-t.C:
			if err := c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(r.Ping)); err != nil {
				c.close()
				return
			}
		}
	}
}
