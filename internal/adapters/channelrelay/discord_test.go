package channelrelay

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/gorilla/websocket"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/channelrelay/discordgw"
	"github.com/agentplane/agentplane/internal/devtools/fakediscord"
	"github.com/agentplane/agentplane/internal/scheme"
)

var (
	discordBotToken   = base64.RawURLEncoding.EncodeToString([]byte("100000000000000001")) + ".real.bot-token-never-in-the-agent"
	discordRelayToken = base64.RawURLEncoding.EncodeToString([]byte("100000000000000001")) + ".relay.token-of-the-agent"
)

func (f fakeAuthorizer) AuthorizeDiscord(_ context.Context, tok string) (Grant, error) {
	switch {
	case f.err != nil:
		return Grant{}, f.err
	case tok != discordRelayToken:
		return Grant{}, ErrUnauthorized
	}
	return Grant{Agent: agentKey, BotToken: discordBotToken}, nil
}

func discordChannel(agent string, enabled bool) *agentsv1.Channel {
	return &agentsv1.Channel{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: agent + "-discord"},
		Spec: agentsv1.ChannelSpec{
			Type: agentsv1.ChannelDiscord, AgentRef: agentsv1.LocalObjectReference{Name: agent}, Enabled: &enabled,
			BotTokenRef: &agentsv1.SecretKeyReference{Name: agent + "-discord-token", Key: "token"},
		},
	}
}

func discordToken(agent string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: agent + "-discord-token"},
		Data: map[string][]byte{"token": []byte(discordBotToken)}}
}

func newDiscordRelay(t *testing.T, api string, a Authorizer, router *DiscordRouter) (*httptest.Server, *logSink) {
	t.Helper()
	logs := &logSink{}
	r, err := New(Options{Authorizer: a, DiscordAPI: api, Discord: router, Log: funcr.New(logs.add, funcr.Options{Verbosity: 1})})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv, logs
}

func newDiscordIngress(t *testing.T, api string, objs ...client.Object) (*DiscordIngress, client.Client) {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).
		WithIndex(&agentsv1.Channel{}, agentsv1.IndexAgentRef, func(o client.Object) []string {
			return []string{o.(*agentsv1.Channel).Spec.AgentRef.Name}
		}).Build()
	router := &DiscordRouter{Authorizer: fakeAuthorizer{}, Log: logr.Discard(), Heartbeat: 50 * time.Millisecond}
	s := &DiscordIngress{Client: c, APIReader: c, Router: router, DiscordAPI: api, Retry: 10 * time.Millisecond, Log: logr.Discard()}
	s.init()
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- s.Start(ctx) }()
	eventually(t, "the ingress to start", func() bool { return s.bots.started() })
	t.Cleanup(func() {
		cancel()
		if err := <-stopped; err != nil {
			t.Error(err)
		}
	})
	return s, c
}

// agentGateway connects a Discord client (discordgo, as the engine's plugin would) to the
// relay with the agent's relay token and collects the messages it gets.
func agentGateway(t *testing.T, relay string) (*discordgo.Session, <-chan *discordgo.MessageCreate) {
	t.Helper()
	dg, err := discordgo.New("Bot " + discordRelayToken)
	if err != nil {
		t.Fatal(err)
	}
	dg.ShouldReconnectOnError = false
	dg.StateEnabled = false
	dg.LogLevel = -1
	dg.Client = &http.Client{Transport: rebase{to: relay + DiscordAPIPath + "/", next: http.DefaultTransport}}
	got := make(chan *discordgo.MessageCreate, 100)
	dg.AddHandler(func(_ *discordgo.Session, m *discordgo.MessageCreate) { got <- m })
	if err := dg.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dg.Close() })
	return dg, got
}

func next[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-t.Context().Done():
		t.Fatalf("never: %s", what)
	}
	panic("unreachable")
}

// The ingress holds the bot's gateway connection for an agent with an enabled Discord channel,
// puts a DM into the agent's inbox and wakes the agent if it sleeps; the woken gateway gets
// the DM from the relay's gateway, its heartbeat empties the inbox, and its answer reaches
// Discord with the bot's token in place of the relay token. Disabling the channel ends the
// bot's connection and the gateway's session and drops the inbox.
func TestDiscordIngressQueuesAndWakes(t *testing.T) {
	t.Parallel()
	dc := fakediscord.New(fakediscord.Options{BotToken: discordBotToken})
	t.Cleanup(dc.Close)
	s, c := newDiscordIngress(t, dc.APIURL(), sleeping("agent", time.Now().Add(-time.Hour)), discordChannel("agent", true), discordToken("agent"),
		sleeping("off", time.Now()), discordChannel("off", false), discordToken("off"))
	ctx := context.Background()
	for _, n := range []string{"agent", "off"} {
		if _, err := s.Reconcile(ctx, ctrl.Request{NamespacedName: key(n)}); err != nil {
			t.Fatal(err)
		}
	}
	if !s.Connected(agentKey) || s.Connected(key("off")) {
		t.Fatalf("connected: agent %v, off %v", s.Connected(agentKey), s.Connected(key("off")))
	}
	eventually(t, "the bot's connection to Discord", func() bool { return dc.Connections() == 1 })

	dm := dc.SendDM("wake up")
	eventually(t, "the DM in the agent's inbox", func() bool { return s.Router.Pending(agentKey) == 1 })
	a := &agentsv1.Agent{}
	eventually(t, "the agent to be woken", func() bool {
		return c.Get(ctx, agentKey, a) == nil && a.Spec.WakeRequestedAt != nil
	})
	wokenForMessage(t, a)

	srv, logs := newDiscordRelay(t, dc.APIURL(), fakeAuthorizer{}, s.Router)
	dg, got := agentGateway(t, srv.URL)
	m := next(t, got, "the DM at the agent's gateway")
	if m.ID != dm || m.Content != "wake up" {
		t.Fatalf("the gateway got %q (%s), want %q (%s)", m.Content, m.ID, "wake up", dm)
	}
	if dg.State.User != nil && dg.State.User.ID != "100000000000000001" {
		t.Fatalf("the gateway's READY names the bot %q", dg.State.User.ID)
	}
	eventually(t, "the gateway's heartbeat to empty the inbox", func() bool { return s.Router.Pending(agentKey) == 0 })

	if _, err := dg.ChannelMessageSend(m.ChannelID, "hello from the agent"); err != nil {
		t.Fatalf("the agent's answer through the relay: %v", err)
	}
	posts := dc.Posts()
	if len(posts) != 1 || posts[0].Content != "hello from the agent" || posts[0].ChannelID != m.ChannelID {
		t.Fatalf("Discord got %+v", posts)
	}
	if strings.Contains(logs.String(), discordBotToken) {
		t.Fatal("the relay logged the bot's token")
	}

	// The bot's own message comes back from Discord: the gateway sees it, the inbox never
	// holds it. A message while the gateway is connected goes straight to it.
	if m := next(t, got, "the bot's own message"); m.Content != "hello from the agent" || m.Author == nil || !m.Author.Bot {
		t.Fatalf("the gateway got %q by %+v, want the bot's own message", m.Content, m.Author)
	}
	if n := s.Router.Pending(agentKey); n != 0 {
		t.Fatalf("the bot's own message waits in the inbox (%d)", n)
	}
	dc.SendDM("again")
	if m := next(t, got, "a live DM"); m.Content != "again" {
		t.Fatalf("the gateway got %q", m.Content)
	}

	// Disabled: the bot's connection ends, the inbox goes, the gateway's session ends.
	ch := &agentsv1.Channel{}
	if err := c.Get(ctx, key("agent-discord"), ch); err != nil {
		t.Fatal(err)
	}
	off := false
	ch.Spec.Enabled = &off
	if err := c.Update(ctx, ch); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reconcile(ctx, ctrl.Request{NamespacedName: agentKey}); err != nil {
		t.Fatal(err)
	}
	if s.Connected(agentKey) {
		t.Fatal("a disabled channel's bot connection is still held")
	}
	eventually(t, "the bot's connection to end", func() bool { return dc.Connections() == 0 })
	eventually(t, "the gateway's session to end", func() bool { return !s.Router.Connected(agentKey) })
}

// rawGateway is a hand-driven Discord gateway client: it connects, identifies or resumes, reads
// dispatches and heartbeats only when told.
type rawGateway struct {
	t       *testing.T
	ws      *websocket.Conn
	session string
	seq     int64
}

func dialRaw(t *testing.T, srv string, session string, seq int64) *rawGateway {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv, "http")+DiscordGatewayPath+"?v=10&encoding=json", nil)
	if err != nil {
		t.Fatal(err)
	}
	g := &rawGateway{t: t, ws: ws, session: session, seq: seq}
	if p := g.read(); p.Op != discordgw.OpHello {
		t.Fatalf("the first message is op %d, want HELLO", p.Op)
	}
	if session != "" {
		g.send(discordgw.OpResume, map[string]any{"token": discordRelayToken, "session_id": session, "seq": seq})
	} else {
		g.send(discordgw.OpIdentify, map[string]any{"token": discordRelayToken, "intents": 0})
	}
	return g
}

func (g *rawGateway) send(op int, d any) {
	if err := g.ws.WriteJSON(map[string]any{"op": op, "d": d}); err != nil {
		g.t.Fatal(err)
	}
}

func (g *rawGateway) read() discordgw.Payload {
	g.t.Helper()
	var p discordgw.Payload
	if err := g.ws.ReadJSON(&p); err != nil {
		g.t.Fatalf("the relay's gateway: %v", err)
	}
	if p.S != nil {
		g.seq = *p.S
	}
	if p.Op == discordgw.OpDispatch && *p.T == "READY" {
		var r struct {
			SessionID string `json:"session_id"`
		}
		_ = json.Unmarshal(p.D, &r)
		g.session = r.SessionID
	}
	return p
}

// message reads until the next MESSAGE_CREATE and returns its content.
func (g *rawGateway) message() string {
	for {
		p := g.read()
		if p.Op == discordgw.OpDispatch && *p.T == "MESSAGE_CREATE" {
			var m struct {
				Content string `json:"content"`
			}
			_ = json.Unmarshal(p.D, &m)
			return m.Content
		}
	}
}

// A hundred sleep and wake cycles: each time a message comes while no gateway is connected,
// the gateway connects again (resuming its session with the sequence number it saw, as a
// restored checkpoint does, or identifying anew after a heartbeat, as a gateway started again
// does), gets what it had not seen, and a third of the time goes away before it heartbeats.
// Every message reaches it once, in order.
func TestDiscordHundredSleepWakeCycles(t *testing.T) {
	t.Parallel()
	router := &DiscordRouter{Authorizer: fakeAuthorizer{}, Log: logr.Discard(), Heartbeat: time.Minute}
	srv, _ := newDiscordRelay(t, "http://127.0.0.1:1", fakeAuthorizer{}, router)
	ready := json.RawMessage(`{"v":10,"user":{"id":"100000000000000001","username":"bot","bot":true},"guilds":[],"session_id":"upstream","application":{"id":"100000000000000001"}}`)
	if _, err := router.Upstream(agentKey, "READY", ready); err != nil {
		t.Fatal(err)
	}
	var got []string
	session, seq := "", int64(0)
	for i := range 100 {
		text := fmt.Sprintf("message %d", i)
		d, _ := json.Marshal(map[string]any{"id": fmt.Sprint(1000 + i), "channel_id": "9", "content": text, "author": map[string]string{"id": "42"}})
		if msg, err := router.Upstream(agentKey, "MESSAGE_CREATE", d); err != nil || !msg {
			t.Fatalf("message %d: taken %v, %v", i, msg, err)
		}
		if _, err := router.Upstream(agentKey, "MESSAGE_CREATE", d); err != nil { // Discord again after a resume of the bot's connection
			t.Fatal(err)
		}
		g := dialRaw(t, srv.URL, session, seq)
		got = append(got, g.message())
		switch i % 3 {
		case 0: // gone before its heartbeat; it resumes next time
		case 1: // heartbeats, then starts anew
			g.send(discordgw.OpHeartbeat, g.seq)
			if p := g.read(); p.Op != discordgw.OpHeartbeatAck {
				t.Fatalf("op %d after a heartbeat", p.Op)
			}
			g.session = ""
		case 2: // heartbeats and resumes
			g.send(discordgw.OpHeartbeat, g.seq)
			g.read()
		}
		session, seq = g.session, g.seq
		_ = g.ws.Close()
		eventually(t, "the session to end", func() bool { return !router.Connected(agentKey) })
	}
	if len(got) != 100 {
		t.Fatalf("the gateway got %d messages", len(got))
	}
	for i, text := range got {
		if want := fmt.Sprintf("message %d", i); text != want {
			t.Fatalf("message %d is %q, want %q (lost, doubled or out of order)", i, text, want)
		}
	}
	if n := router.Pending(agentKey); n != 1 {
		// the last one was seen by a gateway that went away before its heartbeat: it stays
		// until a session acks it
		t.Fatalf("%d messages wait", n)
	}
}

// The REST door: gateway discovery answered by the relay on its own origin, a call relayed
// with the bot's token, a bad relay token refused as Discord refuses one, a path that climbs
// refused, and Discord or the platform down answered as such.
func TestDiscordRelayREST(t *testing.T) {
	t.Parallel()
	dc := fakediscord.New(fakediscord.Options{BotToken: discordBotToken})
	t.Cleanup(dc.Close)
	router := &DiscordRouter{Authorizer: fakeAuthorizer{}, Log: logr.Discard()}
	srv, logs := newDiscordRelay(t, dc.APIURL(), fakeAuthorizer{}, router)
	call := func(method, path, tok, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+DiscordAPIPath+path, strings.NewReader(body))
		if tok != "" {
			req.Header.Set("Authorization", "Bot "+tok)
		}
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	code, body := call("GET", "/gateway/bot", discordRelayToken, "")
	if want := `"url":"ws://` + strings.TrimPrefix(srv.URL, "http://") + DiscordGatewayPath + `"`; code != 200 || !strings.Contains(body, want) {
		t.Fatalf("gateway/bot: %d %s, want %s", code, body, want)
	}
	if code, body := call("GET", "/users/@me", discordRelayToken, ""); code != 200 || !strings.Contains(body, "100000000000000001") {
		t.Fatalf("users/@me: %d %s", code, body)
	}
	if code, _ := call("POST", "/channels/"+dc.Options().ChannelID+"/messages", discordRelayToken, `{"content":"hi"}`); code != 200 {
		t.Fatalf("a message: %d", code)
	}
	if p := dc.Posts(); len(p) != 1 || p[0].Content != "hi" {
		t.Fatalf("Discord got %+v", p)
	}
	for _, tc := range []struct {
		name, method, path, tok string
		code                    int
		body                    string
	}{
		{"no token", "GET", "/users/@me", "", 401, `"message":"401: Unauthorized"`},
		{"the bot's own token", "GET", "/users/@me", discordBotToken, 401, `"message":"401: Unauthorized"`},
		{"a climbing path", "GET", "/channels/../../oauth2/token", discordRelayToken, 404, ""},
		{"an odd path", "GET", "/channels/7/messages/<script>", discordRelayToken, 404, `"message":"404: Not Found"`},
	} {
		if code, body := call(tc.method, tc.path, tc.tok, ""); code != tc.code || !strings.Contains(body, tc.body) {
			t.Errorf("%s: %d %s, want %d %s", tc.name, code, body, tc.code, tc.body)
		}
	}
	down, _ := newDiscordRelay(t, "http://127.0.0.1:1", fakeAuthorizer{}, router)
	req, _ := http.NewRequest("GET", down.URL+DiscordAPIPath+"/users/@me", nil)
	req.Header.Set("Authorization", "Bot "+discordRelayToken)
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusBadGateway {
		t.Fatalf("Discord down: %v %v, want 502", res, err)
	} else {
		res.Body.Close()
	}
	broken, _ := newDiscordRelay(t, dc.APIURL(), fakeAuthorizer{err: fmt.Errorf("the cache is down")}, router)
	req, _ = http.NewRequest("GET", broken.URL+DiscordAPIPath+"/users/@me", nil)
	req.Header.Set("Authorization", "Bot "+discordRelayToken)
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("the platform cannot authorize: %v %v, want 503", res, err)
	} else {
		res.Body.Close()
	}
	if strings.Contains(logs.String(), discordBotToken) {
		t.Fatal("the relay logged the bot's token")
	}
}

// A gateway with a bad relay token is refused with Discord's close code for it, and one
// that identifies before the bot's own connection is ready waits for it.
func TestDiscordGatewayRefusesAndWaits(t *testing.T) {
	t.Parallel()
	router := &DiscordRouter{Authorizer: fakeAuthorizer{}, Log: logr.Discard(), Heartbeat: time.Minute}
	srv, _ := newDiscordRelay(t, "http://127.0.0.1:1", fakeAuthorizer{}, router)
	ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+DiscordGatewayPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	var hello discordgw.Payload
	if err := ws.ReadJSON(&hello); err != nil || hello.Op != discordgw.OpHello {
		t.Fatalf("hello: %+v %v", hello, err)
	}
	_ = ws.WriteJSON(map[string]any{"op": discordgw.OpIdentify, "d": map[string]any{"token": "bad", "intents": 0}})
	_, _, err = ws.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != discordgw.CloseAuthenticationFailed {
		t.Fatalf("a bad token: %v, want close %d", err, discordgw.CloseAuthenticationFailed)
	}

	g := dialRaw(t, srv.URL, "", 0)
	eventually(t, "the identify to wait", func() bool { return !router.Connected(agentKey) })
	if _, err := router.Upstream(agentKey, "READY", json.RawMessage(`{"v":10,"user":{"id":"1"},"guilds":[],"session_id":"up"}`)); err != nil {
		t.Fatal(err)
	}
	if p := g.read(); *p.T != "READY" || g.session == "" || g.session == "up" {
		t.Fatalf("got %s with session %q, want READY with the relay's own session", *p.T, g.session)
	}
}

// A browser page cannot open the gateway (a request with an Origin is refused), and a gateway
// that does not read its events stalls only its own session: the platform's events keep
// flowing, and the session is dropped once its queue is full.
func TestDiscordGatewayRefusesBrowsersAndDropsStalledSessions(t *testing.T) {
	t.Parallel()
	router := &DiscordRouter{Authorizer: fakeAuthorizer{}, Log: logr.Discard(), Heartbeat: time.Minute, MaxInbox: 2}
	srv, _ := newDiscordRelay(t, "http://127.0.0.1:1", fakeAuthorizer{}, router)
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + DiscordGatewayPath
	if _, res, err := websocket.DefaultDialer.Dial(url, http.Header{"Origin": {"https://evil.example"}}); err == nil || res == nil || res.StatusCode != http.StatusForbidden {
		t.Fatalf("a browser's request: %v, want 403", err)
	}

	if _, err := router.Upstream(agentKey, "READY", json.RawMessage(`{"v":10,"user":{"id":"1"},"guilds":[]}`)); err != nil {
		t.Fatal(err)
	}
	g := dialRaw(t, srv.URL, "", 0)
	if p := g.read(); *p.T != "READY" {
		t.Fatalf("got %s", *p.T)
	}
	eventually(t, "the session", func() bool { return router.Connected(agentKey) })
	big, _ := json.Marshal(map[string]string{"channel_id": "9", "padding": strings.Repeat("x", 64<<10)})
	for i := 0; router.Connected(agentKey); i++ { // the gateway reads nothing more
		if i > 10000 {
			t.Fatal("a session that reads nothing is never dropped")
		}
		if _, err := router.Upstream(agentKey, "TYPING_START", big); err != nil {
			t.Fatal(err)
		}
	}
}

// An attachment reaches the agent's gateway as a URL on the relay's own origin (the engine's
// plugin fetches media only there under DISCORD_API_URL), which serves the file from Discord's
// CDN; a URL the relay did not hand out opens nothing.
func TestDiscordRelayServesAttachments(t *testing.T) {
	t.Parallel()
	dc := fakediscord.New(fakediscord.Options{BotToken: discordBotToken})
	t.Cleanup(dc.Close)
	s, _ := newDiscordIngress(t, dc.APIURL(), discordChannel("agent", true), discordToken("agent"),
		&agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "agent"}})
	if _, err := s.Reconcile(context.Background(), ctrl.Request{NamespacedName: agentKey}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the bot's connection to Discord", func() bool { return dc.Connections() == 1 })
	r, err := New(Options{Authorizer: fakeAuthorizer{}, DiscordAPI: dc.APIURL(), Discord: s.Router, DiscordCDN: dc.CDNURL(), Log: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	_, got := agentGateway(t, srv.URL)

	png := []byte("\x89PNG\r\n\x1a\nnot really an image")
	dc.SendDMWithFile("look at this", "cat.png", png)
	m := next(t, got, "the DM with its attachment")
	if len(m.Attachments) != 1 {
		t.Fatalf("attachments: %+v", m.Attachments)
	}
	a := m.Attachments[0]
	for _, u := range []string{a.URL, a.ProxyURL} {
		if !strings.HasPrefix(u, srv.URL+DiscordMediaPath) {
			t.Fatalf("an attachment URL off the relay's origin: %s", u)
		}
	}
	get := func(u string) (int, []byte) {
		t.Helper()
		res, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, b
	}
	if code, b := get(a.URL); code != 200 || string(b) != string(png) {
		t.Fatalf("the attachment through the relay: %d %q", code, b)
	}
	if dc.CDNFetches() != 1 {
		t.Fatalf("the CDN served %d files", dc.CDNFetches())
	}
	mac := strings.SplitN(strings.TrimPrefix(a.URL, srv.URL+DiscordMediaPath), "/", 2)[0]
	for name, u := range map[string]string{
		"another MAC":        strings.Replace(a.URL, mac, strings.Repeat("A", len(mac)), 1),
		"another file":       strings.Replace(a.URL, "cat.png", "dog.png", 1),
		"another query":      a.URL + "&x=1",
		"another host":       strings.Replace(a.URL, "cdn.discordapp.com", "example.com", 1),
		"no MAC at all":      srv.URL + DiscordMediaPath + "cdn.discordapp.com/attachments/1/2/cat.png",
		"a path that climbs": strings.Replace(a.URL, "attachments/", "attachments/../", 1),
	} {
		if code, _ := get(u); code != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", name, code)
		}
	}
	if dc.CDNFetches() != 1 {
		t.Fatalf("refused URLs reached the CDN (%d fetches)", dc.CDNFetches())
	}
}
