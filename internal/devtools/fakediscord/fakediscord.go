// Package fakediscord is a Discord REST API and gateway for tests, on loopback: one bot (its
// application has the bot's id) in one guild with one text channel, one human user who shares
// the guild and has a DM channel with the bot, the REST routes a bot needs to start and to answer
// a message, and a gateway (v10, JSON, no compression) that identifies and resumes sessions and
// dispatches the messages the test sends. Every REST call must carry the bot token; the fake
// keeps a record of the calls, of the routes it does not serve, and of the messages the bot
// posted.
//
// A discordgo client reaches it through an http.Client whose transport sends discord.com's
// requests to URL() (the fake serves /api/v9 as well as /api/v10); the engine's Discord plugin
// reaches it with DISCORD_API_URL=APIURL() in its environment.
package fakediscord

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentplane/agentplane/internal/adapters/channelrelay/discordgw"
)

// Options configures a Server; an empty field takes the default named on it.
type Options struct {
	// BotToken is what REST calls present as "Authorization: Bot <token>" and what IDENTIFY and
	// RESUME carry (see SetBotToken). Default: Discord's shape, base64url(BotUserID) +
	// ".fake.fakefakefake".
	BotToken  string
	BotUserID string // "100000000000000001"; the application's id too
	BotName   string // "fakebot"
	GuildID   string // "200000000000000001"
	GuildName string // "Fake Guild"
	ChannelID string // "300000000000000001": the guild's text channel, #general
	UserID    string // "400000000000000001": the human in the guild who DMs the bot
	UserName  string // "fakeuser"
	// DMChannelID is the DM channel between the user and the bot ("500000000000000001").
	DMChannelID string
	// HeartbeatInterval is what HELLO tells the clients (41250ms, Discord's).
	HeartbeatInterval time.Duration
}

// Post is one message the bot posted (POST /channels/{id}/messages), with its edits (PATCH) and
// deletion (DELETE) applied.
type Post struct {
	ID        string
	ChannelID string
	Content   string
	ReplyTo   string          // message_reference.message_id
	Files     []string        // the names of the files a multipart post carried
	Body      json.RawMessage // the JSON payload as posted (payload_json of a multipart post)
	Edited    bool
	Deleted   bool
}

// Reaction is one reaction the bot added (PUT .../reactions/{emoji}/@me) or removed (DELETE).
type Reaction struct {
	ChannelID string
	MessageID string
	Emoji     string // as in the path, unescaped: "👀" or "name:id"
	Removed   bool
}

// Gateway intents the fake honours when it dispatches.
const (
	IntentGuilds         = 1 << 0
	IntentGuildMessages  = 1 << 9
	IntentDirectMessages = 1 << 12
	IntentMessageContent = 1 << 15
)

// Server is a fake Discord with one bot, one guild and one user.
type Server struct {
	opts  Options // fixed; the bot token in use is botToken
	srv   *httptest.Server
	wsURL string // ws://127.0.0.1:PORT/gateway
	api   *http.ServeMux
	wg    sync.WaitGroup // the gateway connections' handlers

	mu         sync.Mutex
	closed     bool
	botToken   string
	changed    chan struct{} // closed and replaced on every change: calls, posts, connections, sessions
	calls      map[string]int
	unhandled  []string
	identifies []discordgw.Identify
	refused    int // gateway connections refused for their token
	sessions   map[string]*session
	conns      []*gwConn // identified or resumed, open, in connection order
	posts      []Post
	reactions  []Reaction
	messages   map[string]map[string]any // by id: every message in the fake's channels
	nonces     map[string]string         // "channel/nonce" of the bot's posts: the message id
	commands   map[string][]map[string]any
	lastID     int64              // the last snowflake made
	files      map[string]cdnFile // the CDN's attachments, by path
	cdnFetches int
}

// session is one gateway session: every event dispatched on it, by sequence number.
type session struct {
	id      string
	intents int
	events  []event // events[i] has sequence number i+1
	conn    *gwConn // its open connection, or nil
}

type event struct {
	t string
	d json.RawMessage
}

// gwConn is one identified or resumed gateway connection.
type gwConn struct {
	c    *discordgw.Conn
	sess *session
	next int // the index in sess.events of the next event to send
}

// New starts a server listening on 127.0.0.1.
func New(o Options) *Server {
	def := func(v *string, d string) {
		if *v == "" {
			*v = d
		}
	}
	def(&o.BotUserID, "100000000000000001")
	def(&o.BotToken, base64.RawURLEncoding.EncodeToString([]byte(o.BotUserID))+".fake.fakefakefake")
	def(&o.BotName, "fakebot")
	def(&o.GuildID, "200000000000000001")
	def(&o.GuildName, "Fake Guild")
	def(&o.ChannelID, "300000000000000001")
	def(&o.UserID, "400000000000000001")
	def(&o.UserName, "fakeuser")
	def(&o.DMChannelID, "500000000000000001")
	if o.HeartbeatInterval <= 0 {
		o.HeartbeatInterval = discordgw.DefaultHeartbeatInterval
	}
	s := &Server{
		opts:     o,
		botToken: o.BotToken,
		changed:  make(chan struct{}),
		calls:    map[string]int{},
		sessions: map[string]*session{},
		messages: map[string]map[string]any{},
		files:    map[string]cdnFile{},
		nonces:   map[string]string{},
		commands: map[string][]map[string]any{},
	}
	s.routes()
	mux := http.NewServeMux()
	mux.HandleFunc("/api/", s.serveAPI)
	mux.HandleFunc("/gateway", s.gateway)
	mux.HandleFunc("/gateway/", s.gateway) // discordgo adds a slash before the query
	mux.HandleFunc("GET /cdn/{path...}", s.cdn)
	s.srv = httptest.NewServer(mux)
	s.wsURL = "ws" + strings.TrimPrefix(s.srv.URL, "http") + "/gateway"
	return s
}

// Close closes every gateway connection and stops the server.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	conns := slices.Clone(s.conns)
	s.mu.Unlock()
	for _, c := range conns {
		c.c.Close(1001, "going away")
	}
	s.srv.Close()
	s.wg.Wait()
}

// URL is the server's origin, http://127.0.0.1:PORT.
func (s *Server) URL() string { return s.srv.URL }

// APIURL is the REST API's base, URL()+"/api/v10": what DISCORD_API_URL takes.
func (s *Server) APIURL() string { return s.srv.URL + "/api/v10" }

// GatewayURL is the gateway's URL, ws://127.0.0.1:PORT/gateway, what GET /gateway answers.
func (s *Server) GatewayURL() string { return s.wsURL }

// BotToken is the bot token in use.
func (s *Server) BotToken() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.botToken
}

// SetBotToken rotates the bot token: REST calls and IDENTIFY or RESUME with the old one are
// refused from now on (connections open already stay open).
func (s *Server) SetBotToken(tok string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.botToken = tok
	s.notify()
}

// Options is the server's configuration, defaults filled in (BotToken is the first token).
func (s *Server) Options() Options { return s.opts }

// Posts returns the bot's posts in order, with their edits and deletions applied.
func (s *Server) Posts() []Post {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.posts)
}

// WaitPosts waits until the bot has posted at least n messages and returns the posts, or ctx's
// error with the posts so far.
func (s *Server) WaitPosts(ctx context.Context, n int) ([]Post, error) {
	err := s.Await(ctx, func() bool { return len(s.Posts()) >= n })
	return s.Posts(), err
}

// Reactions returns the reactions the bot added or removed, in order.
func (s *Server) Reactions() []Reaction {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reactions)
}

// Connections is how many gateway connections are identified (or resumed) and open.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// WaitConnections waits until at least n gateway connections are identified and open.
func (s *Server) WaitConnections(ctx context.Context, n int) error {
	return s.Await(ctx, func() bool { return s.Connections() >= n })
}

// Identifies returns every IDENTIFY the gateway accepted, in order (token and intents).
func (s *Server) Identifies() []discordgw.Identify {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.identifies)
}

// Refused is how many gateway connections were closed with 4004 for their token.
func (s *Server) Refused() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

// Calls counts the requests of each REST route, whatever the answer, by "METHOD /route" with
// the route's parameters in braces and no /api/vN prefix ("POST /channels/{channel}/messages").
// The gateway counts its connections as "GATEWAY IDENTIFY" and "GATEWAY RESUME".
func (s *Server) Calls() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.calls)
}

// Unhandled lists the REST requests no route served ("METHOD /path", the path as requested
// without the /api/vN prefix, then "?query" if any), in order: they were answered 404.
func (s *Server) Unhandled() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.unhandled)
}

// Await returns once cond holds, checking it again after each change the fake sees (a call,
// a post, a connection, a session), or ctx's error when ctx ends first. cond may call the
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

// SendDM dispatches a MESSAGE_CREATE from the user in the DM channel to every session (those
// without the DIRECT_MESSAGES intent excepted) and returns the message's id. A session whose
// connection dropped gets it when it resumes.
func (s *Server) SendDM(content string) (messageID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.message(s.opts.DMChannelID, s.user(), content)
	s.created(m)
	return m["id"].(string)
}

// SendGuildMessage dispatches a MESSAGE_CREATE from the user in the guild's text channel to
// every session with the GUILD_MESSAGES intent and returns the message's id. With mentionBot
// the message mentions the bot: "<@BOTID> " goes before content unless content has it, and the
// bot is in mentions. A session without the MESSAGE_CONTENT intent gets an empty content
// unless the bot is mentioned, as Discord does.
func (s *Server) SendGuildMessage(content string, mentionBot bool) (messageID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	mention := "<@" + s.opts.BotUserID + ">"
	if mentionBot && !strings.Contains(content, mention) {
		content = mention + " " + content
	}
	m := s.message(s.opts.ChannelID, s.user(), content)
	m["member"] = s.member()
	if mentionBot {
		bot := s.bot()
		bot["member"] = s.member()
		m["mentions"] = []any{bot}
	}
	s.created(m)
	return m["id"].(string)
}

// Disconnect closes every gateway connection with 4000 (unknown error): the clients may
// resume their sessions.
func (s *Server) Disconnect() {
	s.mu.Lock()
	conns := slices.Clone(s.conns)
	s.mu.Unlock()
	for _, c := range conns {
		c.c.Close(discordgw.CloseUnknownError, "Unknown error.")
	}
}

// InvalidateSessions forgets every session and closes every gateway connection with 4000: a
// client's RESUME then gets INVALID_SESSION (not resumable) and it must identify anew, as
// after Discord lost its sessions.
func (s *Server) InvalidateSessions() {
	s.mu.Lock()
	conns := slices.Clone(s.conns)
	clear(s.sessions)
	s.notify()
	s.mu.Unlock()
	for _, c := range conns {
		c.c.Close(discordgw.CloseUnknownError, "Unknown error.")
	}
}

// Reconnect sends every gateway connection a RECONNECT (op 7): the clients should resume on a
// new connection.
func (s *Server) Reconnect() {
	s.mu.Lock()
	conns := slices.Clone(s.conns)
	s.mu.Unlock()
	for _, c := range conns {
		_ = c.c.Reconnect()
	}
}

// notify wakes whatever waits for a change (s.mu held).
func (s *Server) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// discordEpoch is 2015-01-01T00:00:00Z in ms, where snowflakes count from.
const discordEpoch = 1420070400000

// snowflake is a new id, greater than every earlier one, of the current time (s.mu held).
func (s *Server) snowflake() string {
	id := (time.Now().UnixMilli() - discordEpoch) << 22
	if id <= s.lastID {
		id = s.lastID + 1
	}
	s.lastID = id
	return strconv.FormatInt(id, 10)
}

func timestamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000+00:00") }

// joinedAt is when the bot and the user joined the guild.
var joinedAt = timestamp(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))

// permissions are @everyone's: view, send, threads, embed, attach, history, react, external
// emojis, application commands, invites, nicknames, voice.
const permissions = 1<<0 | 1<<6 | 1<<10 | 1<<11 | 1<<14 | 1<<15 | 1<<16 | 1<<18 | 1<<20 | 1<<21 |
	1<<26 | 1<<31 | 1<<35 | 1<<36 | 1<<38

// appFlags are the application's flags: the limited (unverified app) gateway intents for
// presence, guild members and message content.
const appFlags = 1<<13 | 1<<15 | 1<<19
