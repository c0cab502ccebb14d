// Package fakeslack is a Slack Web API and Socket Mode server for tests, on loopback: one
// workspace with one app and its bot, DMs that the test sends (delivered over Socket Mode as
// events_api envelopes, re-sent with retry_attempt+1 on the next connection when their
// connection closes before the ack, as Slack retries), the Web API methods a bot needs to answer
// a DM (auth.test, users.info, conversations.info, chat.postMessage/update/delete,
// reactions.add/remove), strict token checks and a record of the calls and posts.
//
// A slack-go client reaches it with slack.OptionAPIURL(s.APIURL()); the socketmode client then
// dials the URL that apps.connections.open answers.
package fakeslack

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Options configures a Server; an empty field takes the default named on it.
type Options struct {
	BotToken  string // "xoxb-fake-bot": every Web API method but apps.connections.open (see SetBotToken)
	AppToken  string // "xapp-fake-app": apps.connections.open
	TeamID    string // "T0FAKE"
	BotUserID string // "U0BOT"
	BotID     string // "B0BOT"
	AppID     string // "A0APP"
	// PingInterval is how often each Socket Mode connection gets a WebSocket ping (5s).
	// slack-go's socketmode client reconnects when none came for 30s.
	PingInterval time.Duration
}

// Post is one chat.postMessage call, with the chat.update edits and the chat.delete applied.
type Post struct {
	Channel  string
	Text     string
	TS       string
	ThreadTS string
	Deleted  bool // chat.delete removed it
}

// Server is a fake Slack workspace with one app.
type Server struct {
	opts     Options // fixed; the bot token in use is botToken
	srv      *httptest.Server
	wsURL    string // ws://127.0.0.1:PORT/socket
	upgrader websocket.Upgrader
	wg       sync.WaitGroup // the Socket Mode connections' handlers

	mu       sync.Mutex
	closed   bool
	botToken string
	changed  chan struct{} // closed and replaced on every change: queue, connections, acks, calls, posts
	tickets  map[string]bool
	conns    []*sock     // open, in connection order
	queue    []*envelope // not sent on an open connection, by seq
	unacked  map[string]*envelope
	acked    int
	seq      int64 // envelopes, events, tickets
	tsN      int64 // message timestamps
	posts    []Post
	calls    map[string]int
}

// sock is one Socket Mode connection.
type sock struct {
	ws       *websocket.Conn
	wmu      sync.Mutex    // serializes data frames (pings go through WriteControl)
	done     chan struct{} // closed (under Server.mu) when the connection is dropped
	inflight []*envelope   // sent here, not acked
}

// envelope is one events_api envelope waiting for its ack.
type envelope struct {
	id      string
	seq     int64
	attempt int
	payload json.RawMessage
	on      *sock // the connection it was last sent on while that one is open; nil: queued
}

// New starts a server listening on 127.0.0.1.
func New(o Options) *Server {
	def := func(v *string, d string) {
		if *v == "" {
			*v = d
		}
	}
	def(&o.BotToken, "xoxb-fake-bot")
	def(&o.AppToken, "xapp-fake-app")
	def(&o.TeamID, "T0FAKE")
	def(&o.BotUserID, "U0BOT")
	def(&o.BotID, "B0BOT")
	def(&o.AppID, "A0APP")
	if o.PingInterval <= 0 {
		o.PingInterval = 5 * time.Second
	}
	s := &Server{
		opts:     o,
		botToken: o.BotToken,
		changed:  make(chan struct{}),
		tickets:  map[string]bool{},
		unacked:  map[string]*envelope{},
		calls:    map[string]int{},
		upgrader: websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}, // slack-go sends Origin: https://api.slack.com
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/{method}", s.api)
	mux.HandleFunc("/socket", s.socket)
	s.srv = httptest.NewServer(mux)
	s.wsURL = "ws" + strings.TrimPrefix(s.srv.URL, "http") + "/socket"
	return s
}

// Close stops the server and closes every Socket Mode connection.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	conns := slices.Clone(s.conns)
	for _, c := range conns {
		s.drop(c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		_ = c.ws.Close()
	}
	s.srv.Close()
	s.wg.Wait()
}

// URL is the server's base URL, http://127.0.0.1:PORT.
func (s *Server) URL() string { return s.srv.URL }

// APIURL is the Web API's base URL (URL()+"/api/"), what slack.OptionAPIURL takes.
func (s *Server) APIURL() string { return s.srv.URL + "/api/" }

// SetBotToken rotates the bot token: the old one answers invalid_auth from now on.
func (s *Server) SetBotToken(tok string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.botToken = tok
}

// SendDM queues an events_api envelope with a message event from user in the DM channel
// "D"+user, and returns the message's ts. An open connection gets it at once; otherwise it
// waits for the next one.
func (s *Server) SendDM(user, text string) (ts string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts = s.nextTS()
	s.seq++
	payload, _ := json.Marshal(map[string]any{
		"type":       "event_callback",
		"team_id":    s.opts.TeamID,
		"api_app_id": s.opts.AppID,
		"event_id":   fmt.Sprintf("Ev%010d", s.seq),
		"event_time": time.Now().Unix(),
		"event": map[string]any{
			"type": "message", "channel": "D" + user, "channel_type": "im", "user": user,
			"text": text, "ts": ts, "event_ts": ts, "team": s.opts.TeamID,
		},
	})
	e := &envelope{id: fmt.Sprintf("fake-envelope-%d", s.seq), seq: s.seq, payload: payload}
	s.unacked[e.id] = e
	s.queue = append(s.queue, e)
	s.notify()
	return ts
}

// Unacked is how many envelopes are sent or queued but not acked yet.
func (s *Server) Unacked() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.unacked)
}

// Acked is how many envelopes were acked (each counts once).
func (s *Server) Acked() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.acked
}

// Connections is how many Socket Mode connections are open.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Posts returns the chat.postMessage calls in order, with their edits and deletions applied.
func (s *Server) Posts() []Post {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.posts)
}

// Calls is how many requests reached the Web API method, whatever the answer.
func (s *Server) Calls(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[method]
}

// Disconnect sends every open Socket Mode connection a disconnect request (reason
// refresh_requested) and closes it; its unacked envelopes go to the next connection.
func (s *Server) Disconnect() {
	s.mu.Lock()
	conns := slices.Clone(s.conns)
	for _, c := range conns {
		s.drop(c)
	}
	s.mu.Unlock()
	msg, _ := json.Marshal(map[string]any{"type": "disconnect", "reason": "refresh_requested", "debug_info": map[string]any{"host": "fake"}})
	for _, c := range conns {
		c.wmu.Lock()
		_ = c.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
		_ = c.ws.WriteMessage(websocket.TextMessage, msg)
		c.wmu.Unlock()
		_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "refresh_requested"), time.Now().Add(5*time.Second))
		_ = c.ws.Close()
	}
}

// Await returns once cond holds, checking it again after each change the fake sees (a
// connection, an ack, a call, a post), or ctx's error when ctx ends first. cond may call the
// Server's methods.
func (s *Server) Await(ctx context.Context, cond func() bool) error {
	for {
		s.mu.Lock()
		changed := s.changed
		s.mu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// notify wakes whatever waits for a change (s.mu held).
func (s *Server) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// nextTS is a new message timestamp, greater than every earlier one (s.mu held).
func (s *Server) nextTS() string {
	s.tsN += 100
	return fmt.Sprintf("%d.%06d", 1700000000+s.tsN/1000000, s.tsN%1000000)
}

// drop forgets an open connection and queues its unacked envelopes again, in their order, for
// the next connection (s.mu held; a no-op for a dropped one).
func (s *Server) drop(c *sock) {
	i := slices.Index(s.conns, c)
	if i < 0 {
		return
	}
	s.conns = slices.Delete(s.conns, i, i+1)
	close(c.done)
	for _, e := range c.inflight {
		e.on = nil
		e.attempt++
		s.queue = append(s.queue, e)
	}
	c.inflight = nil
	slices.SortFunc(s.queue, func(a, b *envelope) int { return int(a.seq - b.seq) })
	s.notify()
}

// ack settles an envelope wherever it waits, so an ack that arrives on a later connection
// counts too; unknown or already acked ids are ignored (s.mu held).
func (s *Server) ack(id string) {
	e, ok := s.unacked[id]
	if !ok {
		return
	}
	delete(s.unacked, id)
	s.acked++
	if e.on != nil {
		e.on.inflight = slices.DeleteFunc(e.on.inflight, func(x *envelope) bool { return x == e })
	} else {
		s.queue = slices.DeleteFunc(s.queue, func(x *envelope) bool { return x == e })
	}
	s.notify()
}

// socket serves a Socket Mode connection: hello, then the queued envelopes in order, pings,
// and the acks read back.
func (s *Server) socket(w http.ResponseWriter, r *http.Request) {
	ticket := r.URL.Query().Get("ticket")
	s.mu.Lock()
	good := s.tickets[ticket]
	delete(s.tickets, ticket) // a ticket is good for one connection
	s.mu.Unlock()
	if !good {
		http.Error(w, "invalid ticket", http.StatusUnauthorized)
		return
	}
	ws, err := s.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	c := &sock{ws: ws, done: make(chan struct{})}
	c.wmu.Lock() // hello goes first, even before a Disconnect's frame
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		c.wmu.Unlock()
		_ = ws.Close()
		return
	}
	s.wg.Add(1)
	defer s.wg.Done()
	s.conns = append(s.conns, c)
	n := len(s.conns)
	s.notify()
	s.mu.Unlock()
	hello, _ := json.Marshal(map[string]any{
		"type": "hello", "num_connections": n,
		"debug_info":      map[string]any{"host": "fake"},
		"connection_info": map[string]any{"app_id": s.opts.AppID},
	})
	err = ws.WriteMessage(websocket.TextMessage, hello)
	c.wmu.Unlock()

	var local sync.WaitGroup
	if err == nil {
		local.Go(func() { s.pings(c) })
		local.Go(func() { s.deliver(c) })
		for {
			kind, msg, err := ws.ReadMessage()
			if err != nil {
				break
			}
			var a struct {
				EnvelopeID string `json:"envelope_id"`
			}
			if kind == websocket.TextMessage && json.Unmarshal(msg, &a) == nil && a.EnvelopeID != "" {
				s.mu.Lock()
				s.ack(a.EnvelopeID)
				s.mu.Unlock()
			}
		}
	}
	s.mu.Lock()
	s.drop(c)
	s.mu.Unlock()
	_ = ws.Close()
	local.Wait()
}

// pings sends the connection a WebSocket ping every PingInterval until it is dropped.
func (s *Server) pings(c *sock) {
	t := time.NewTicker(s.opts.PingInterval)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
			if c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(10*time.Second)) != nil {
				return
			}
		}
	}
}

// deliver sends the connection the queued envelopes, oldest first, until it is dropped.
func (s *Server) deliver(c *sock) {
	for {
		s.mu.Lock()
		select {
		case <-c.done:
			s.mu.Unlock()
			return
		default:
		}
		var e *envelope
		if len(s.queue) > 0 {
			e = s.queue[0]
			s.queue = s.queue[1:]
			e.on = c
			c.inflight = append(c.inflight, e)
		}
		changed := s.changed
		var frame []byte
		if e != nil {
			frame, _ = json.Marshal(map[string]any{
				"envelope_id": e.id, "type": "events_api", "accepts_response_payload": false,
				"retry_attempt": e.attempt, "retry_reason": retryReason(e.attempt), "payload": e.payload,
			})
		}
		s.mu.Unlock()
		if e == nil {
			select {
			case <-c.done:
				return
			case <-changed:
			}
			continue
		}
		c.wmu.Lock()
		err := c.ws.WriteMessage(websocket.TextMessage, frame)
		c.wmu.Unlock()
		if err != nil {
			_ = c.ws.Close() // the reader ends and drops the connection
			return
		}
	}
}

func retryReason(attempt int) string {
	if attempt == 0 {
		return ""
	}
	return "timeout"
}

// api serves the Web API: POST /api/{method} with a form, multipart or JSON body (the query
// counts too), always HTTP 200 with a JSON answer.
func (s *Server) api(w http.ResponseWriter, r *http.Request) {
	method := r.PathValue("method")
	p, tokens := params(r)
	s.mu.Lock()
	s.calls[method]++
	want := s.botToken
	s.notify()
	s.mu.Unlock()
	switch method {
	case "apps.connections.open":
		want = s.opts.AppToken
	case "auth.test", "users.info", "conversations.info", "chat.postMessage", "chat.update",
		"chat.delete", "reactions.add", "reactions.remove":
	default:
		reply(w, map[string]any{"ok": false, "error": "unknown_method", "req_method": method})
		return
	}
	if len(tokens) == 0 {
		reply(w, map[string]any{"ok": false, "error": "not_authed"})
		return
	}
	for _, t := range tokens {
		if t != want {
			reply(w, map[string]any{"ok": false, "error": "invalid_auth"})
			return
		}
	}
	if strings.HasPrefix(method, "chat.") {
		s.chat(w, method, p)
		return
	}
	s.answer(w, method, p)
}

// answer answers an authorized call of a method other than chat.*.
func (s *Server) answer(w http.ResponseWriter, method string, p url.Values) {
	o := s.opts
	switch method {
	case "apps.connections.open":
		s.mu.Lock()
		s.seq++
		ticket := strconv.FormatInt(s.seq, 10)
		s.tickets[ticket] = true
		s.mu.Unlock()
		reply(w, map[string]any{"ok": true, "url": s.wsURL + "?ticket=" + ticket})
	case "auth.test":
		reply(w, map[string]any{"ok": true, "url": "https://fake.slack.com/", "team": "Fake", "user": "bot",
			"team_id": o.TeamID, "user_id": o.BotUserID, "bot_id": o.BotID, "app_id": o.AppID, "is_enterprise_install": false})
	case "users.info":
		id := p.Get("user")
		if id == "" {
			reply(w, map[string]any{"ok": false, "error": "user_not_found"})
			return
		}
		name := "user-" + strings.ToLower(id)
		reply(w, map[string]any{"ok": true, "user": map[string]any{
			"id": id, "team_id": o.TeamID, "name": name, "real_name": "User " + id, "deleted": false, "is_bot": id == o.BotUserID,
			"profile": map[string]any{"display_name": name, "real_name": "User " + id},
		}})
	case "conversations.info":
		id := p.Get("channel")
		if id == "" {
			reply(w, map[string]any{"ok": false, "error": "channel_not_found"})
			return
		}
		ch := map[string]any{"id": id, "is_im": strings.HasPrefix(id, "D"), "is_mpim": false,
			"is_channel": strings.HasPrefix(id, "C"), "is_group": strings.HasPrefix(id, "G")}
		if strings.HasPrefix(id, "D") {
			ch["user"] = strings.TrimPrefix(id, "D")
		} else {
			ch["name"] = "channel-" + strings.ToLower(id)
		}
		reply(w, map[string]any{"ok": true, "channel": ch})
	default: // reactions.add, reactions.remove
		reply(w, map[string]any{"ok": true})
	}
}

// chat answers chat.postMessage, chat.update and chat.delete.
func (s *Server) chat(w http.ResponseWriter, method string, p url.Values) {
	switch method {
	case "chat.postMessage":
		ch := p.Get("channel")
		if ch == "" {
			reply(w, map[string]any{"ok": false, "error": "channel_not_found"})
			return
		}
		s.mu.Lock()
		post := Post{Channel: ch, Text: p.Get("text"), TS: s.nextTS(), ThreadTS: p.Get("thread_ts")}
		s.posts = append(s.posts, post)
		s.notify()
		s.mu.Unlock()
		reply(w, map[string]any{"ok": true, "channel": ch, "ts": post.TS, "message": s.message(post)})
	case "chat.update", "chat.delete":
		ch, ts := p.Get("channel"), p.Get("ts")
		s.mu.Lock()
		i := slices.IndexFunc(s.posts, func(x Post) bool { return x.Channel == ch && x.TS == ts && !x.Deleted })
		var post Post
		if i >= 0 {
			if method == "chat.update" {
				s.posts[i].Text = p.Get("text")
			} else {
				s.posts[i].Deleted = true
			}
			post = s.posts[i]
			s.notify()
		}
		s.mu.Unlock()
		switch {
		case i < 0:
			reply(w, map[string]any{"ok": false, "error": "message_not_found"})
		case method == "chat.update":
			reply(w, map[string]any{"ok": true, "channel": ch, "ts": ts, "text": post.Text, "message": s.message(post)})
		default:
			reply(w, map[string]any{"ok": true, "channel": ch, "ts": ts})
		}
	}
}

// message is a post as the Web API shows it.
func (s *Server) message(p Post) map[string]any {
	m := map[string]any{"type": "message", "text": p.Text, "ts": p.TS, "user": s.opts.BotUserID, "bot_id": s.opts.BotID}
	if p.ThreadTS != "" {
		m["thread_ts"] = p.ThreadTS
	}
	return m
}

// params reads a request's arguments (query, then a JSON, multipart or form body; JSON
// values that are not strings are kept as their JSON text) and every token it presents
// (the Authorization header's bearer token and a token argument).
func params(r *http.Request) (url.Values, []string) {
	p := url.Values{}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		b, _ := io.ReadAll(io.LimitReader(r.Body, 8<<20))
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		for k, v := range m {
			if str, ok := v.(string); ok {
				p.Set(k, str)
			} else {
				j, _ := json.Marshal(v)
				p.Set(k, string(j))
			}
		}
		for k, v := range r.URL.Query() {
			if !p.Has(k) {
				p[k] = v
			}
		}
	case "multipart/form-data":
		_ = r.ParseMultipartForm(8 << 20)
		p = r.Form
	default:
		_ = r.ParseForm()
		p = r.Form
	}
	var tokens []string
	if auth := r.Header.Get("Authorization"); auth != "" {
		tok, _ := strings.CutPrefix(auth, "Bearer ")
		tokens = append(tokens, tok)
	}
	tokens = append(tokens, p["token"]...)
	return p, slices.DeleteFunc(tokens, func(t string) bool { return t == "" })
}

func reply(w http.ResponseWriter, body map[string]any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_ = json.NewEncoder(w).Encode(body)
}
