package fakeslack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"
)

// dm is one message event a socketmode client received.
type dm struct {
	req   socketmode.Request
	outer slackevents.EventsAPIEvent
	ev    *slackevents.MessageEvent
}

// client is slack-go's socketmode client running against the fake.
type client struct {
	msgs   chan dm       // message events, in the order received
	hellos chan struct{} // one per hello
}

// start runs a socketmode client with the fake's default tokens until the test ends; it acks
// the events that ack approves.
func start(t *testing.T, s *Server, ack func(dm) bool) *client {
	t.Helper()
	sm := socketmode.New(slack.New("xoxb-fake-bot", slack.OptionAppLevelToken("xapp-fake-app"), slack.OptionAPIURL(s.APIURL())))
	c := &client{msgs: make(chan dm, 100), hellos: make(chan struct{}, 100)}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- sm.RunContext(ctx) }()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case evt := <-sm.Events:
				switch evt.Type {
				case socketmode.EventTypeHello:
					c.hellos <- struct{}{}
				case socketmode.EventTypeEventsAPI:
					outer, _ := evt.Data.(slackevents.EventsAPIEvent)
					ev, _ := outer.InnerEvent.Data.(*slackevents.MessageEvent)
					d := dm{req: *evt.Request, outer: outer, ev: ev}
					if ack(d) {
						_ = sm.Ack(*evt.Request)
					}
					c.msgs <- d
				}
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-ran; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("socketmode client: %v", err)
		}
	})
	return c
}

// next is the next message event the client received.
func (c *client) next(t *testing.T) dm {
	t.Helper()
	select {
	case d := <-c.msgs:
		if d.ev == nil {
			t.Fatalf("not a message event: %+v", d.req)
		}
		return d
	case <-time.After(30 * time.Second):
		t.Fatal("no message event")
	}
	return dm{}
}

// hello waits for the client's next hello.
func (c *client) hello(t *testing.T) {
	t.Helper()
	select {
	case <-c.hellos:
	case <-time.After(30 * time.Second):
		t.Fatal("no hello")
	}
}

// eventually waits until cond, a condition on s, holds (s.Await: checked on each change).
func eventually(t *testing.T, s *Server, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := s.Await(ctx, cond); err != nil {
		t.Fatalf("never %s: %v", what, err)
	}
}

// slack-go's socketmode client connects, gets the DMs sent before and after it connected in
// order, and acks them.
func TestSocketMode(t *testing.T) {
	s := New(Options{})
	t.Cleanup(s.Close)
	ts1 := s.SendDM("U1", "before")
	c := start(t, s, func(dm) bool { return true })
	c.hello(t)
	d := c.next(t)
	if d.req.Type != "events_api" || d.req.RetryAttempt != 0 || d.outer.TeamID != "T0FAKE" || d.outer.APIAppID != "A0APP" {
		t.Fatalf("envelope: %+v %+v", d.req, d.outer)
	}
	if e := d.ev; e.Text != "before" || e.TimeStamp != ts1 || e.EventTimeStamp != ts1 || e.User != "U1" || e.Channel != "DU1" || e.ChannelType != "im" {
		t.Fatalf("first event: %+v", e)
	}
	if n := s.Connections(); n != 1 {
		t.Fatalf("%d connections", n)
	}
	ts2 := s.SendDM("U1", "after")
	if e := c.next(t).ev; e.Text != "after" || e.TimeStamp != ts2 || ts2 <= ts1 {
		t.Fatalf("second event: %+v (first ts %s)", e, ts1)
	}
	eventually(t, s, "both acked", func() bool { return s.Unacked() == 0 && s.Acked() == 2 })
}

// An envelope not acked when its connection closes comes again, as a retry, on the next one.
func TestRedeliveryAfterDisconnect(t *testing.T) {
	s := New(Options{})
	t.Cleanup(s.Close)
	c := start(t, s, func(d dm) bool { return d.req.RetryAttempt > 0 })
	c.hello(t)
	s.SendDM("U2", "once more")
	first := c.next(t)
	if first.req.RetryAttempt != 0 || s.Unacked() != 1 {
		t.Fatalf("first delivery: %+v, %d unacked", first.req, s.Unacked())
	}
	s.Disconnect() // the client may be connected again before it returns
	c.hello(t)
	again := c.next(t)
	if again.req.EnvelopeID != first.req.EnvelopeID || again.req.RetryAttempt != 1 || again.req.RetryReason == "" || again.ev.Text != "once more" {
		t.Fatalf("redelivery: %+v %+v", again.req, again.ev)
	}
	eventually(t, s, "the retry acked", func() bool { return s.Unacked() == 0 && s.Acked() == 1 })
	if n := s.Connections(); n != 1 {
		t.Fatalf("%d connections", n)
	}
}

// call posts a form (Bearer header unless bearer is empty) and returns the answer.
func call(t *testing.T, s *Server, method, bearer string, form url.Values) map[string]any {
	t.Helper()
	req, _ := http.NewRequest("POST", s.APIURL()+method, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return do(t, req, bearer)
}

func do(t *testing.T, req *http.Request, bearer string) map[string]any {
	t.Helper()
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%s: %d %v", req.URL.Path, resp.StatusCode, err)
	}
	return out
}

func wantError(t *testing.T, what string, got map[string]any, want string) {
	t.Helper()
	if got["ok"] != false || got["error"] != want {
		t.Fatalf("%s: %v, want error %s", what, got, want)
	}
}

// Every token presented must be the right one, in the header and in the body alike.
func TestAuth(t *testing.T) {
	s := New(Options{})
	t.Cleanup(s.Close)
	const bot, app = "xoxb-fake-bot", "xapp-fake-app"
	if got := call(t, s, "auth.test", bot, url.Values{"token": {bot}}); got["ok"] != true || got["user_id"] != "U0BOT" || got["team_id"] != "T0FAKE" || got["bot_id"] != "B0BOT" {
		t.Fatalf("auth.test: %v", got)
	}
	wantError(t, "bad form token", call(t, s, "auth.test", bot, url.Values{"token": {"xoxb-placeholder"}}), "invalid_auth")
	wantError(t, "bad header", call(t, s, "auth.test", "xoxb-placeholder", url.Values{"token": {bot}}), "invalid_auth")
	wantError(t, "bad form token alone", call(t, s, "users.info", "", url.Values{"token": {"nope"}, "user": {"U1"}}), "invalid_auth")
	wantError(t, "no token", call(t, s, "auth.test", "", nil), "not_authed")
	wantError(t, "app token for auth.test", call(t, s, "auth.test", app, nil), "invalid_auth")
	wantError(t, "bot token for apps.connections.open", call(t, s, "apps.connections.open", bot, nil), "invalid_auth")
	if got := call(t, s, "apps.connections.open", app, nil); got["ok"] != true || !strings.HasPrefix(got["url"].(string), "ws://127.0.0.1:") {
		t.Fatalf("apps.connections.open: %v", got)
	}

	// JSON and multipart bodies.
	req, _ := http.NewRequest("POST", s.APIURL()+"auth.test", strings.NewReader(`{"token":"xoxb-wrong"}`))
	req.Header.Set("Content-Type", "application/json")
	wantError(t, "bad JSON token", do(t, req, bot), "invalid_auth")
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	_ = mw.WriteField("token", bot)
	_ = mw.WriteField("channel", "DU1")
	_ = mw.Close()
	req, _ = http.NewRequest("POST", s.APIURL()+"conversations.info", &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	if got := do(t, req, ""); got["ok"] != true {
		t.Fatalf("multipart: %v", got)
	}

	// slack-go sends the token in the form; a rotation refuses the old one.
	old := slack.New(bot, slack.OptionAPIURL(s.APIURL()))
	if r, err := old.AuthTest(); err != nil || r.UserID != "U0BOT" || r.TeamID != "T0FAKE" || r.BotID != "B0BOT" {
		t.Fatalf("AuthTest: %+v %v", r, err)
	}
	s.SetBotToken("xoxb-rotated")
	if _, err := old.AuthTest(); err == nil || err.Error() != "invalid_auth" {
		t.Fatalf("the old token after rotation: %v", err)
	}
	if _, err := slack.New("xoxb-rotated", slack.OptionAPIURL(s.APIURL())).AuthTest(); err != nil {
		t.Fatalf("the new token: %v", err)
	}
	if n := s.Calls("auth.test"); n != 9 {
		t.Fatalf("%d auth.test calls", n)
	}
}

// The methods a bot answering a DM calls, through slack-go.
func TestWebAPI(t *testing.T) {
	s := New(Options{})
	t.Cleanup(s.Close)
	api := slack.New("xoxb-fake-bot", slack.OptionAPIURL(s.APIURL()))
	if u, err := api.GetUserInfo("U1"); err != nil || u.ID != "U1" || u.Profile.DisplayName == "" || u.Profile.RealName == "" {
		t.Fatalf("users.info: %+v %v", u, err)
	}
	if ch, err := api.GetConversationInfo(&slack.GetConversationInfoInput{ChannelID: "DU1"}); err != nil || ch.ID != "DU1" || !ch.IsIM {
		t.Fatalf("conversations.info DU1: %+v %v", ch, err)
	}
	if ch, err := api.GetConversationInfo(&slack.GetConversationInfoInput{ChannelID: "C1"}); err != nil || ch.IsIM || !ch.IsChannel {
		t.Fatalf("conversations.info C1: %+v %v", ch, err)
	}
	ch, ts, err := api.PostMessage("DU1", slack.MsgOptionText("hello", false))
	if err != nil || ch != "DU1" || ts == "" {
		t.Fatalf("chat.postMessage: %q %q %v", ch, ts, err)
	}
	_, ts2, err := api.PostMessage("DU1", slack.MsgOptionText("reply", false), slack.MsgOptionTS(ts))
	if err != nil || ts2 <= ts {
		t.Fatalf("second chat.postMessage: %q after %q, %v", ts2, ts, err)
	}
	if _, _, _, err := api.UpdateMessage("DU1", ts, slack.MsgOptionText("hello, edited", false)); err != nil {
		t.Fatalf("chat.update: %v", err)
	}
	if _, _, _, err := api.UpdateMessage("DU1", "1.000000", slack.MsgOptionText("x", false)); err == nil || err.Error() != "message_not_found" {
		t.Fatalf("chat.update of no message: %v", err)
	}
	if _, _, err := api.DeleteMessage("DU1", ts2); err != nil {
		t.Fatalf("chat.delete: %v", err)
	}
	ref := slack.NewRefToMessage("DU1", ts)
	if err := api.AddReaction("eyes", ref); err != nil {
		t.Fatalf("reactions.add: %v", err)
	}
	if err := api.RemoveReaction("eyes", ref); err != nil {
		t.Fatalf("reactions.remove: %v", err)
	}
	want := []Post{{Channel: "DU1", Text: "hello, edited", TS: ts}, {Channel: "DU1", Text: "reply", TS: ts2, ThreadTS: ts, Deleted: true}}
	if got := s.Posts(); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("posts: %+v, want %+v", got, want)
	}
	if n := s.Calls("chat.postMessage"); n != 2 {
		t.Fatalf("%d chat.postMessage calls", n)
	}
	wantError(t, "unknown method", call(t, s, "conversations.nothing", "xoxb-fake-bot", nil), "unknown_method")
}

// The hello, the pings, and a connection URL that is good once.
func TestSocketHelloAndPings(t *testing.T) {
	s := New(Options{AppID: "A0MINE", PingInterval: 10 * time.Millisecond})
	t.Cleanup(s.Close)
	open := call(t, s, "apps.connections.open", "xapp-fake-app", nil)
	u, _ := open["url"].(string)
	ws, _, err := websocket.DefaultDialer.Dial(u, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	var hello struct {
		Type           string `json:"type"`
		NumConnections int    `json:"num_connections"`
		ConnectionInfo struct {
			AppID string `json:"app_id"`
		} `json:"connection_info"`
	}
	if err := ws.ReadJSON(&hello); err != nil || hello.Type != "hello" || hello.NumConnections != 1 || hello.ConnectionInfo.AppID != "A0MINE" {
		t.Fatalf("hello: %+v %v", hello, err)
	}
	pinged := make(chan struct{}, 1)
	ws.SetPingHandler(func(string) error {
		select {
		case pinged <- struct{}{}:
		default:
		}
		return nil
	})
	go func() {
		for {
			if _, _, err := ws.ReadMessage(); err != nil {
				return
			}
		}
	}()
	select {
	case <-pinged:
	case <-time.After(30 * time.Second):
		t.Fatal("no ping")
	}
	if _, resp, err := websocket.DefaultDialer.Dial(u, nil); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a used ticket: %v", err)
	}
	if n := s.Connections(); n != 1 {
		t.Fatalf("%d connections", n)
	}
}
