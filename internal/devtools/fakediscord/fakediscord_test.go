package fakediscord

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"

	"github.com/agentplane/agentplane/internal/adapters/channelrelay/discordgw"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
)

// bounded is a context for one wait on an event.
func bounded(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testenv.EventBound)
	t.Cleanup(cancel)
	return ctx
}

// recv is the next value on ch.
func recv[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-bounded(t).Done():
		t.Fatalf("no %s", what)
	}
	var zero T
	return zero
}

// rewrite sends discord.com's requests to the fake.
type rewrite struct{ origin *url.URL }

func (rw rewrite) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Host == "discord.com" {
		r = r.Clone(r.Context())
		r.URL.Scheme, r.URL.Host, r.Host = rw.origin.Scheme, rw.origin.Host, ""
	}
	return http.DefaultTransport.RoundTrip(r)
}

// events are what a discordgo session's handlers received.
type events struct {
	ready    chan *discordgo.Ready
	guilds   chan *discordgo.GuildCreate
	messages chan *discordgo.MessageCreate // the user's, not the bot's own
	resumed  chan *discordgo.Resumed
}

// dgSession is a discordgo session with token against the fake, not open yet; it is closed when
// the test ends.
func dgSession(t *testing.T, s *Server, token string) (*discordgo.Session, *events) {
	t.Helper()
	dg, err := discordgo.New("Bot " + token)
	if err != nil {
		t.Fatal(err)
	}
	origin, _ := url.Parse(s.URL())
	dg.Client = &http.Client{Transport: rewrite{origin}}
	dg.Identify.Intents = discordgo.IntentsGuilds | discordgo.IntentsGuildMessages | discordgo.IntentsDirectMessages | discordgo.IntentsMessageContent
	dg.LogLevel = -1
	dg.StateEnabled = false // the state would update the events' objects while the test reads them
	ev := &events{
		ready:    make(chan *discordgo.Ready, 10),
		guilds:   make(chan *discordgo.GuildCreate, 10),
		messages: make(chan *discordgo.MessageCreate, 100),
		resumed:  make(chan *discordgo.Resumed, 10),
	}
	dg.AddHandler(func(_ *discordgo.Session, r *discordgo.Ready) { ev.ready <- r })
	dg.AddHandler(func(_ *discordgo.Session, g *discordgo.GuildCreate) { ev.guilds <- g })
	dg.AddHandler(func(_ *discordgo.Session, r *discordgo.Resumed) { ev.resumed <- r })
	dg.AddHandler(func(_ *discordgo.Session, m *discordgo.MessageCreate) {
		if m.Author != nil && m.Author.ID != s.Options().BotUserID {
			ev.messages <- m
		}
	})
	t.Cleanup(func() { _ = dg.Close() })
	return dg, ev
}

// discordgo connects (GET /gateway first), identifies, gets READY and GUILD_CREATE, receives a
// DM and a guild message, and its posts are recorded.
func TestDiscordgo(t *testing.T) {
	t.Parallel()
	s := New(Options{})
	t.Cleanup(s.Close)
	o := s.Options()
	if !strings.HasSuffix(o.BotToken, ".fake.fakefakefake") || !strings.HasPrefix(o.BotToken, "MTAwMDAwMDAwMDAwMDAwMDAx") {
		t.Fatalf("default token %q", o.BotToken)
	}
	dg, ev := dgSession(t, s, o.BotToken)
	if err := dg.Open(); err != nil {
		t.Fatalf("Open: %v", err)
	}
	r := recv(t, "READY", ev.ready)
	if r.User.ID != o.BotUserID || !r.User.Bot || r.SessionID == "" || len(r.Guilds) != 1 || r.Guilds[0].ID != o.GuildID || r.Version != 10 {
		t.Fatalf("READY: %+v", r)
	}
	g := recv(t, "GUILD_CREATE", ev.guilds)
	if g.ID != o.GuildID || g.Name != o.GuildName || len(g.Channels) != 1 || g.Channels[0].ID != o.ChannelID || len(g.Roles) != 1 || g.MemberCount != 2 {
		t.Fatalf("GUILD_CREATE: %+v", g.Guild)
	}
	if err := s.WaitConnections(bounded(t), 1); err != nil {
		t.Fatal(err)
	}
	if ids := s.Identifies(); len(ids) != 1 || ids[0].Token != "Bot "+o.BotToken || ids[0].Intents != int(dg.Identify.Intents) {
		t.Fatalf("identifies: %+v", ids)
	}

	id := s.SendDM("hello bot")
	m := recv(t, "the DM", ev.messages)
	if m.ID != id || m.Content != "hello bot" || m.ChannelID != o.DMChannelID || m.GuildID != "" || m.Author.ID != o.UserID || m.Type != discordgo.MessageTypeDefault || m.Timestamp.IsZero() {
		t.Fatalf("DM: %+v", m.Message)
	}
	gid := s.SendGuildMessage("hi all", true)
	m = recv(t, "the guild message", ev.messages)
	if m.ID != gid || m.ChannelID != o.ChannelID || m.GuildID != o.GuildID || m.Content != "<@"+o.BotUserID+"> hi all" ||
		len(m.Mentions) != 1 || m.Mentions[0].ID != o.BotUserID || m.Member == nil || !idLess(id, gid) {
		t.Fatalf("guild message: %+v", m.Message)
	}

	sent, err := dg.ChannelMessageSend(o.DMChannelID, "hello human")
	if err != nil || sent.Author.ID != o.BotUserID || sent.ChannelID != o.DMChannelID || !idLess(gid, sent.ID) {
		t.Fatalf("ChannelMessageSend: %+v %v", sent, err)
	}
	reply, err := dg.ChannelMessageSendReply(o.ChannelID, "hi", &discordgo.MessageReference{MessageID: gid, ChannelID: o.ChannelID})
	if err != nil || reply.MessageReference == nil || reply.MessageReference.MessageID != gid || reply.GuildID != o.GuildID {
		t.Fatalf("ChannelMessageSendReply: %+v %v", reply, err)
	}
	file, err := dg.ChannelFileSendWithMessage(o.DMChannelID, "a file", "notes.txt", strings.NewReader("text"))
	if err != nil || len(file.Attachments) != 1 || file.Attachments[0].Filename != "notes.txt" {
		t.Fatalf("ChannelFileSendWithMessage: %+v %v", file, err)
	}
	if _, err := dg.ChannelMessageEdit(o.DMChannelID, sent.ID, "hello, human"); err != nil {
		t.Fatalf("ChannelMessageEdit: %v", err)
	}
	if err := dg.ChannelMessageDelete(o.ChannelID, reply.ID); err != nil {
		t.Fatalf("ChannelMessageDelete: %v", err)
	}
	if _, err := dg.ChannelMessageEdit(o.DMChannelID, id, "not mine"); err == nil {
		t.Fatal("edited the user's message")
	}
	posts, err := s.WaitPosts(bounded(t), 3)
	if err != nil || len(posts) != 3 {
		t.Fatalf("posts: %+v %v", posts, err)
	}
	if p := posts[0]; p.ID != sent.ID || p.ChannelID != o.DMChannelID || p.Content != "hello, human" || !p.Edited || p.Deleted || p.ReplyTo != "" {
		t.Fatalf("first post: %+v", p)
	}
	if p := posts[1]; p.ChannelID != o.ChannelID || p.Content != "hi" || p.ReplyTo != gid || !p.Deleted {
		t.Fatalf("second post: %+v", p)
	}
	if p := posts[2]; p.Content != "a file" || !slices.Equal(p.Files, []string{"notes.txt"}) {
		t.Fatalf("third post: %+v", p)
	}

	// The other routes a bot calls.
	if u, err := dg.User("@me"); err != nil || u.ID != o.BotUserID || !u.Bot {
		t.Fatalf("GET /users/@me: %+v %v", u, err)
	}
	if gl, err := dg.Guild(o.GuildID); err != nil || gl.Name != o.GuildName {
		t.Fatalf("GET /guilds/{guild}: %+v %v", gl, err)
	}
	if _, err := dg.Guild("1"); err == nil {
		t.Fatal("an unknown guild")
	}
	if chs, err := dg.GuildChannels(o.GuildID); err != nil || len(chs) != 1 || chs[0].Type != discordgo.ChannelTypeGuildText {
		t.Fatalf("GET /guilds/{guild}/channels: %+v %v", chs, err)
	}
	if mem, err := dg.GuildMember(o.GuildID, o.UserID); err != nil || mem.User.ID != o.UserID {
		t.Fatalf("GET /guilds/{guild}/members/{user}: %+v %v", mem, err)
	}
	if ch, err := dg.Channel(o.DMChannelID); err != nil || ch.Type != discordgo.ChannelTypeDM || ch.Recipients[0].ID != o.UserID {
		t.Fatalf("GET /channels/{channel}: %+v %v", ch, err)
	}
	if ch, err := dg.UserChannelCreate(o.UserID); err != nil || ch.ID != o.DMChannelID {
		t.Fatalf("POST /users/@me/channels: %+v %v", ch, err)
	}
	if err := dg.ChannelTyping(o.DMChannelID); err != nil {
		t.Fatalf("typing: %v", err)
	}
	if err := dg.MessageReactionAdd(o.DMChannelID, id, "👀"); err != nil {
		t.Fatalf("reaction: %v", err)
	}
	if err := dg.MessageReactionRemove(o.DMChannelID, id, "👀", "@me"); err != nil {
		t.Fatalf("reaction removal: %v", err)
	}
	if rs := s.Reactions(); len(rs) != 2 || rs[0] != (Reaction{ChannelID: o.DMChannelID, MessageID: id, Emoji: "👀"}) || !rs[1].Removed {
		t.Fatalf("reactions: %+v", rs)
	}
	cmds, err := dg.ApplicationCommandBulkOverwrite(o.BotUserID, "", []*discordgo.ApplicationCommand{{Name: "ask", Description: "Ask"}})
	if err != nil || len(cmds) != 1 || cmds[0].ID == "" || cmds[0].ApplicationID != o.BotUserID {
		t.Fatalf("PUT commands: %+v %v", cmds, err)
	}
	if got, err := dg.ApplicationCommands(o.BotUserID, o.GuildID); err != nil || len(got) != 0 {
		t.Fatalf("GET guild commands: %+v %v", got, err)
	}
	if _, err := dg.GuildBans(o.GuildID, 10, "", ""); err == nil {
		t.Fatal("an unhandled route answered")
	}
	if u := s.Unhandled(); !slices.Equal(u, []string{"GET /guilds/" + o.GuildID + "/bans?limit=10"}) {
		t.Fatalf("unhandled: %q", u)
	}
	calls := s.Calls()
	for k, n := range map[string]int{"GET /gateway": 1, "GATEWAY IDENTIFY": 1, "POST /channels/{channel}/messages": 3,
		"PATCH /channels/{channel}/messages/{message}": 2, "PUT /applications/{app}/commands": 1} {
		if calls[k] != n {
			t.Errorf("%d calls of %s, want %d: %v", calls[k], k, n, calls)
		}
	}
}

// A wrong token gets 401 from REST and 4004 from the gateway; a rotation refuses the old one.
func TestAuth(t *testing.T) {
	t.Parallel()
	s := New(Options{BotToken: "old"})
	t.Cleanup(s.Close)
	bad, _ := dgSession(t, s, "wrong")
	_, err := bad.User("@me")
	var re *discordgo.RESTError
	if !errors.As(err, &re) || re.Response.StatusCode != 401 || re.Message == nil || re.Message.Message != "401: Unauthorized" {
		t.Fatalf("a wrong token: %v", err)
	}
	if err := bad.Open(); !errors.As(err, &re) || re.Response.StatusCode != 401 {
		t.Fatalf("Open with a wrong token: %v", err)
	}
	req, _ := http.NewRequest("GET", s.APIURL()+"/users/@me", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 401 {
		t.Fatalf("no token: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	// GET /gateway needs no token; the gateway does.
	resp, err := http.Get(s.APIURL() + "/gateway")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /gateway: %v %v", resp, err)
	}
	resp.Body.Close()
	ws := dial(t, s)
	ws.send(t, discordgw.OpIdentify, map[string]any{"token": "wrong", "intents": 1})
	if code := ws.closed(t); code != discordgw.CloseAuthenticationFailed || s.Refused() != 1 || s.Connections() != 0 {
		t.Fatalf("IDENTIFY with a wrong token: close %d, %d refused", code, s.Refused())
	}

	good, _ := dgSession(t, s, "old")
	if err := good.Open(); err != nil {
		t.Fatal(err)
	}
	s.SetBotToken("new")
	if _, err := good.User("@me"); !errors.As(err, &re) || re.Response.StatusCode != 401 {
		t.Fatalf("the old token after rotation: %v", err)
	}
	ws = dial(t, s)
	ws.send(t, discordgw.OpIdentify, map[string]any{"token": "old", "intents": 1})
	if code := ws.closed(t); code != discordgw.CloseAuthenticationFailed {
		t.Fatalf("IDENTIFY with the old token: close %d", code)
	}
	rotated, _ := dgSession(t, s, "new")
	if u, err := rotated.User("@me"); err != nil || u.ID != s.Options().BotUserID {
		t.Fatalf("the new token: %v", err)
	}
}

// A dropped discordgo session resumes and gets the DM sent while it was away.
func TestResume(t *testing.T) {
	t.Parallel()
	s := New(Options{})
	t.Cleanup(s.Close)
	dg, ev := dgSession(t, s, s.BotToken())
	if err := dg.Open(); err != nil {
		t.Fatal(err)
	}
	recv(t, "READY", ev.ready)
	if err := s.WaitConnections(bounded(t), 1); err != nil {
		t.Fatal(err)
	}
	s.Disconnect()
	if err := s.Await(bounded(t), func() bool { return s.Connections() == 0 }); err != nil {
		t.Fatal(err)
	}
	id := s.SendDM("while you were away")
	recv(t, "RESUMED", ev.resumed)
	if m := recv(t, "the missed DM", ev.messages); m.ID != id || m.Content != "while you were away" {
		t.Fatalf("missed DM: %+v", m.Message)
	}
	// discordgo may resume twice: its heartbeat goroutine can still see the dropped connection
	// fail after the listener has resumed, and then closes the new one.
	if c := s.Calls(); c["GATEWAY RESUME"] < 1 || c["GATEWAY IDENTIFY"] != 1 || len(s.Identifies()) != 1 {
		t.Fatalf("calls: %v", c)
	}
	if err := s.WaitConnections(bounded(t), 1); err != nil {
		t.Fatal(err)
	}
}

// The gateway protocol on the wire: sequence numbers, intents, RESUME's replay, unknown
// sessions and bad sequence numbers.
func TestGatewayWire(t *testing.T) {
	t.Parallel()
	s := New(Options{})
	t.Cleanup(s.Close)
	tok := s.BotToken()
	ws := dial(t, s)
	// No MESSAGE_CONTENT: a guild message that does not mention the bot comes without content.
	ws.send(t, discordgw.OpIdentify, map[string]any{"token": tok, "intents": IntentGuilds | IntentGuildMessages | IntentDirectMessages})
	ready := ws.next(t)
	if ready.T != "READY" || ready.S != 1 {
		t.Fatalf("first dispatch: %+v", ready)
	}
	var r struct {
		SessionID        string `json:"session_id"`
		ResumeGatewayURL string `json:"resume_gateway_url"`
		Application      struct {
			ID string `json:"id"`
		} `json:"application"`
	}
	_ = json.Unmarshal(ready.D, &r)
	if r.ResumeGatewayURL != s.GatewayURL() || r.Application.ID != s.Options().BotUserID {
		t.Fatalf("READY: %s", ready.D)
	}
	if g := ws.next(t); g.T != "GUILD_CREATE" || g.S != 2 {
		t.Fatalf("second dispatch: %+v", g)
	}
	s.SendGuildMessage("secret", false)
	s.SendGuildMessage("for you", true)
	for i, want := range []string{"", "<@" + s.Options().BotUserID + "> for you"} {
		p := ws.next(t)
		var m struct{ Content string }
		_ = json.Unmarshal(p.D, &m)
		if p.T != "MESSAGE_CREATE" || p.S != int64(3+i) || m.Content != want {
			t.Fatalf("guild message %d: %+v %q", i, p, m.Content)
		}
	}
	ws.close()
	if err := s.Await(bounded(t), func() bool { return s.Connections() == 0 }); err != nil {
		t.Fatal(err)
	}
	s.SendDM("one")
	s.SendDM("two")

	ws = dial(t, s)
	ws.send(t, discordgw.OpResume, map[string]any{"token": tok, "session_id": r.SessionID, "seq": 3})
	for i, want := range []string{"MESSAGE_CREATE", "MESSAGE_CREATE", "MESSAGE_CREATE", "RESUMED"} {
		if p := ws.next(t); p.T != want || p.S != int64(4+i) {
			t.Fatalf("after RESUME %d: %+v, want %s", i, p, want)
		}
	}
	ws.close()

	ws = dial(t, s)
	ws.send(t, discordgw.OpResume, map[string]any{"token": tok, "session_id": "nope", "seq": 1})
	if p := ws.read(t); p.Op != discordgw.OpInvalidSession || string(p.D) != "false" {
		t.Fatalf("RESUME of an unknown session: %+v", p)
	}
	ws.close()
	ws = dial(t, s)
	ws.send(t, discordgw.OpResume, map[string]any{"token": tok, "session_id": r.SessionID, "seq": 99})
	if code := ws.closed(t); code != discordgw.CloseInvalidSeq {
		t.Fatalf("RESUME from a future seq: close %d", code)
	}

	// Forgotten sessions: the open connection is closed and its RESUME is refused.
	ws = dial(t, s)
	ws.send(t, discordgw.OpResume, map[string]any{"token": tok, "session_id": r.SessionID, "seq": 7})
	if p := ws.next(t); p.T != "RESUMED" || p.S != 8 {
		t.Fatalf("RESUME: %+v", p)
	}
	s.InvalidateSessions()
	if code := ws.closed(t); code != discordgw.CloseUnknownError {
		t.Fatalf("InvalidateSessions: close %d", code)
	}
	ws = dial(t, s)
	ws.send(t, discordgw.OpResume, map[string]any{"token": tok, "session_id": r.SessionID, "seq": 8})
	if p := ws.read(t); p.Op != discordgw.OpInvalidSession || string(p.D) != "false" {
		t.Fatalf("RESUME of a forgotten session: %+v", p)
	}
}

// wire is a raw gateway client.
type wire struct {
	c *websocket.Conn
}

// dial connects to the gateway and reads HELLO.
func dial(t *testing.T, s *Server) *wire {
	t.Helper()
	c, _, err := websocket.DefaultDialer.DialContext(bounded(t), s.GatewayURL()+"?v=10&encoding=json", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	w := &wire{c: c}
	hello := w.read(t)
	var h struct {
		HeartbeatInterval int64 `json:"heartbeat_interval"`
	}
	if err := json.Unmarshal(hello.D, &h); err != nil || hello.Op != discordgw.OpHello || h.HeartbeatInterval != s.Options().HeartbeatInterval.Milliseconds() {
		t.Fatalf("HELLO: %+v", hello)
	}
	return w
}

type frame struct {
	Op int             `json:"op"`
	D  json.RawMessage `json:"d"`
	S  int64           `json:"s"`
	T  string          `json:"t"`
}

func (w *wire) send(t *testing.T, op int, d any) {
	t.Helper()
	if err := w.c.WriteJSON(map[string]any{"op": op, "d": d}); err != nil {
		t.Fatal(err)
	}
}

// read reads the next frame; the server's first write comes well within the bound.
func (w *wire) read(t *testing.T) frame {
	t.Helper()
	_ = w.c.SetReadDeadline(time.Now().Add(testenv.EventBound))
	var f frame
	if err := w.c.ReadJSON(&f); err != nil {
		t.Fatalf("read: %v", err)
	}
	return f
}

// next is the next dispatch.
func (w *wire) next(t *testing.T) frame {
	t.Helper()
	for {
		if f := w.read(t); f.Op == discordgw.OpDispatch {
			return f
		}
	}
}

// closed reads until the server closes the connection and returns the close code.
func (w *wire) closed(t *testing.T) int {
	t.Helper()
	_ = w.c.SetReadDeadline(time.Now().Add(testenv.EventBound))
	for {
		_, _, err := w.c.ReadMessage()
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			return ce.Code
		}
		if err != nil {
			t.Fatalf("no close frame: %v", err)
		}
	}
}

func (w *wire) close() {
	_ = w.c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	_ = w.c.Close()
}

// The REST answers' shapes for clients other than discordgo: errors, multipart, /gateway/bot.
func TestREST(t *testing.T) {
	t.Parallel()
	s := New(Options{})
	t.Cleanup(s.Close)
	do := func(method, path, body, ct string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(method, s.APIURL()+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bot "+s.BotToken())
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var out map[string]any
		_ = json.Unmarshal(b, &out)
		return resp.StatusCode, out
	}
	code, gw := do("GET", "/gateway/bot", "", "")
	if code != 200 || gw["url"] != s.GatewayURL() || gw["shards"] != 1.0 || gw["session_start_limit"].(map[string]any)["max_concurrency"] != 1.0 {
		t.Fatalf("/gateway/bot: %d %v", code, gw)
	}
	if code, app := do("GET", "/oauth2/applications/@me", "", ""); code != 200 || app["id"] != s.Options().BotUserID {
		t.Fatalf("/oauth2/applications/@me: %d %v", code, app)
	}
	if code, nf := do("GET", "/nothing/here", "", ""); code != 404 || nf["message"] != "404: Not Found" || nf["code"] != 0.0 {
		t.Fatalf("unknown route: %d %v", code, nf)
	}
	if code, e := do("POST", "/channels/"+s.Options().DMChannelID+"/messages", `{}`, "application/json"); code != 400 || e["code"] != 50006.0 {
		t.Fatalf("empty message: %d %v", code, e)
	}
	body := "--b\r\nContent-Disposition: form-data; name=\"payload_json\"\r\n\r\n" +
		`{"content":"multi","message_reference":{"message_id":"42"}}` + "\r\n--b--\r\n"
	if code, m := do("POST", "/channels/"+s.Options().ChannelID+"/messages", body, "multipart/form-data; boundary=b"); code != 200 || m["content"] != "multi" || m["guild_id"] != s.Options().GuildID {
		t.Fatalf("multipart post: %d %v", code, m)
	}
	if p := s.Posts(); len(p) != 1 || p[0].Content != "multi" || p[0].ReplyTo != "42" || p[0].ChannelID != s.Options().ChannelID {
		t.Fatalf("posts: %+v", p)
	}
	once := `{"content":"once","nonce":"n1","enforce_nonce":true}`
	_, first := do("POST", "/channels/"+s.Options().DMChannelID+"/messages", once, "application/json")
	if code, again := do("POST", "/channels/"+s.Options().DMChannelID+"/messages", once, "application/json"); code != 200 || again["id"] != first["id"] || len(s.Posts()) != 2 {
		t.Fatalf("a repeated nonce: %d %v after %v, %d posts", code, again, first, len(s.Posts()))
	}
	if code, e := do("POST", "/channels/"+s.Options().DMChannelID+"/messages", `{"content":"`+strings.Repeat("x", 2001)+`"}`, "application/json"); code != 400 || e["code"] != 50035.0 {
		t.Fatalf("a long message: %d %v", code, e)
	}
	if code, e := do("GET", "/channels/1/messages", "", ""); code != 404 || e["code"] != 10003.0 {
		t.Fatalf("unknown channel: %d %v", code, e)
	}
	if u := s.Unhandled(); !slices.Equal(u, []string{"GET /nothing/here"}) {
		t.Fatalf("unhandled: %q", u)
	}
}
