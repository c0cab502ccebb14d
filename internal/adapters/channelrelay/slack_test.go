package channelrelay

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/gorilla/websocket"

	"github.com/agentplane/agentplane/internal/devtools/fakeslack"
)

func newSlackRelay(t *testing.T, api string, a Authorizer, router *SlackRouter) (*httptest.Server, *logSink) {
	t.Helper()
	logs := &logSink{}
	r, err := New(Options{Authorizer: a, SlackAPI: api, Slack: router, Log: funcr.New(logs.add, funcr.Options{Verbosity: 1})})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv, logs
}

func slackCall(t *testing.T, srv, method, header string, form url.Values) (int, map[string]any, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, srv+"/relay/slack/api/"+method, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if header != "" {
		req.Header.Set("Authorization", "Bearer "+header)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return resp.StatusCode, m, string(b)
}

// The relay swaps the agent's Slack relay token for the bot token in the Authorization header
// and in a form's token field (the fake refuses a call where either is not the bot's), and
// refuses what would end the bot for every agent; the bot token is in no answer or log line.
func TestSlackRelayForwardsWithTheBotToken(t *testing.T) {
	t.Parallel()
	sl := fakeslack.New(fakeslack.Options{BotToken: slackBotToken})
	t.Cleanup(sl.Close)
	srv, logs := newSlackRelay(t, sl.APIURL(), fakeAuthorizer{}, nil)

	for _, c := range []struct {
		name, header string
		form         url.Values
	}{
		{"header", slackRelayToken, url.Values{}},
		{"form field", "", url.Values{"token": {slackRelayToken}}},
		{"both", slackRelayToken, url.Values{"token": {slackRelayToken}}},
	} {
		code, m, raw := slackCall(t, srv.URL, "auth.test", c.header, c.form)
		if code != http.StatusOK || m["ok"] != true || m["user_id"] != "U0BOT" {
			t.Fatalf("%s: auth.test through the relay: %d %s", c.name, code, raw)
		}
	}
	code, m, raw := slackCall(t, srv.URL, "chat.postMessage", slackRelayToken, url.Values{"channel": {"D1"}, "text": {"hello"}, "token": {slackRelayToken}})
	if code != http.StatusOK || m["ok"] != true {
		t.Fatalf("chat.postMessage: %d %s", code, raw)
	}
	if p := sl.Posts(); len(p) != 1 || p[0].Text != "hello" || p[0].Channel != "D1" {
		t.Fatalf("posts: %+v", p)
	}
	for _, c := range []struct {
		name, method, header string
		form                 url.Values
		status               int
		error                string
	}{
		{"no token", "auth.test", "", url.Values{}, http.StatusOK, "not_authed"},
		{"the bot token itself", "auth.test", slackBotToken, url.Values{}, http.StatusOK, "invalid_auth"},
		{"another token in the form", "auth.test", slackRelayToken, url.Values{"token": {"xoxb-other"}}, http.StatusOK, "invalid_auth"},
		{"auth.revoke", "auth.revoke", slackRelayToken, url.Values{}, http.StatusOK, "relay_forbidden"},
		{"apps.uninstall", "apps.uninstall", slackRelayToken, url.Values{}, http.StatusOK, "relay_forbidden"},
		{"the app's socket", "apps.connections.open", slackRelayToken, url.Values{}, http.StatusOK, "relay_forbidden"},
		{"not a method", "..%2Fauth.test", slackRelayToken, url.Values{}, http.StatusOK, "unknown_method"},
	} {
		before := sl.Calls(c.method)
		code, m, raw := slackCall(t, srv.URL, c.method, c.header, c.form)
		if code != c.status || m["ok"] != false || m["error"] != c.error {
			t.Errorf("%s: %d %s, want %d %s", c.name, code, raw, c.status, c.error)
		}
		if sl.Calls(c.method) != before {
			t.Errorf("%s: reached Slack", c.name)
		}
	}
	// A method the relay does not know is Slack's to answer.
	if _, m, raw := slackCall(t, srv.URL, "no.such.method", slackRelayToken, url.Values{}); m["error"] != "unknown_method" || sl.Calls("no.such.method") != 1 {
		t.Errorf("unknown method: %s", raw)
	}
	if strings.Contains(logs.String(), slackBotToken) {
		t.Fatalf("the bot token is in the log:\n%s", logs)
	}

	// The platform cannot read the channel: 503, Slack not called.
	down, _ := newSlackRelay(t, sl.APIURL(), fakeAuthorizer{err: errors.New("kube-apiserver is down")}, nil)
	if code, m, _ := slackCall(t, down.URL, "auth.test", slackRelayToken, url.Values{}); code != http.StatusServiceUnavailable || m["error"] != "service_unavailable" {
		t.Errorf("authorizer down: %d %v", code, m)
	}
	// Slack down: 502 in the Web API's shape.
	sl.Close()
	if code, m, raw := slackCall(t, srv.URL, "auth.test", slackRelayToken, url.Values{}); code != http.StatusBadGateway || m["error"] != "relay_upstream_unavailable" || strings.Contains(raw, slackBotToken) {
		t.Errorf("slack down: %d %s", code, raw)
	}
	if strings.Contains(logs.String(), slackBotToken) {
		t.Fatalf("the bot token is in the log:\n%s", logs)
	}
}

// gateway is the engine's side of the relay websocket, as the engine speaks it.
type gateway struct {
	t  *testing.T
	ws *websocket.Conn
}

func dialGateway(t *testing.T, srv, token string) (*gateway, *http.Response, error) {
	t.Helper()
	u := "ws" + strings.TrimPrefix(srv, "http") + SlackGatewayPath + "?gateway_id=team/agent"
	ws, resp, err := websocket.DefaultDialer.Dial(u, http.Header{"Authorization": {"Bearer " + token}})
	if err != nil {
		return nil, resp, err
	}
	g := &gateway{t: t, ws: ws}
	t.Cleanup(func() { _ = ws.Close() })
	return g, resp, nil
}

// next reads the next slack_event frame: its delivery id and the message text.
func (g *gateway) next() (string, string) {
	g.t.Helper()
	_ = g.ws.SetReadDeadline(time.Now().Add(time.Minute))
	_, b, err := g.ws.ReadMessage()
	if err != nil {
		g.t.Fatalf("read: %v", err)
	}
	var f struct {
		Type       string `json:"type"`
		DeliveryID string `json:"delivery_id"`
		Route      struct{ Kind, Key string }
		Payload    struct {
			Event struct{ Type, Text, Channel string }
		}
	}
	if err := json.Unmarshal(b, &f); err != nil || f.Type != "slack_event" || f.DeliveryID == "" || f.Route.Kind != "channel_default" ||
		f.Route.Key != f.Payload.Event.Channel || f.Payload.Event.Type != "message" {
		g.t.Fatalf("not a slack_event frame the engine takes: %s", b)
	}
	return f.DeliveryID, f.Payload.Event.Text
}

func (g *gateway) ack(id string) {
	g.t.Helper()
	if err := g.ws.WriteJSON(map[string]string{"type": "ack", "delivery_id": id}); err != nil {
		g.t.Fatal(err)
	}
}

func message(text string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"type": "event_callback", "event": map[string]any{"type": "message", "channel": "D1", "text": text, "ts": text}})
	return b
}

// The router keeps an agent's events until its gateway acks them: what arrived before the
// gateway connected comes first and in order, what it did not ack comes again on its next
// connection, an envelope Slack sends twice is kept once, and a newer connection replaces an
// older one.
func TestSlackRouterDeliversUntilAcked(t *testing.T) {
	t.Parallel()
	router := &SlackRouter{Authorizer: fakeAuthorizer{}, Log: logr.Discard(), MaxInbox: 3}
	srv, _ := newSlackRelay(t, "http://127.0.0.1:1", fakeAuthorizer{}, router)

	for _, id := range []string{"e1", "e2", "e1"} {
		if err := router.Deliver(agentKey, id, message(id)); err != nil {
			t.Fatal(err)
		}
	}
	if n := router.Pending(agentKey); n != 2 {
		t.Fatalf("pending %d, want 2 (a repeated envelope is kept once)", n)
	}
	if _, resp, err := dialGateway(t, srv.URL, "xoxb-agentplane.forged"); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a forged token connected: %v", err)
	}
	// A browser page (it sends an Origin) cannot open an agent's websocket, even with its token.
	u := "ws" + strings.TrimPrefix(srv.URL, "http") + SlackGatewayPath
	if _, resp, err := websocket.DefaultDialer.Dial(u, http.Header{"Authorization": {"Bearer " + slackRelayToken}, "Origin": {"https://evil.example"}}); err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a request with an Origin connected: %v", err)
	}
	g, _, err := dialGateway(t, srv.URL, slackRelayToken)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the gateway is connected", func() bool { return router.Connected(agentKey) })
	for _, want := range []string{"e1", "e2"} {
		if id, text := g.next(); id != want || text != want {
			t.Fatalf("got %s %q, want %s", id, text, want)
		}
	}
	g.ack("e1")
	if err := router.Deliver(agentKey, "e3", message("e3")); err != nil {
		t.Fatal(err)
	}
	if id, _ := g.next(); id != "e3" {
		t.Fatalf("got %s, want e3 as it arrived", id)
	}
	eventually(t, "e1 acked", func() bool { return router.Pending(agentKey) == 2 })
	if err := router.Deliver(agentKey, "e4", message("e4")); err != nil {
		t.Fatal(err)
	}
	if err := router.Deliver(agentKey, "e5", message("e5")); !errors.Is(err, ErrInboxFull) {
		t.Fatalf("a full inbox took e5: %v", err)
	}

	// The connection ends with e2, e3 and e4 not acked: a new one gets them again, in order,
	// and replaces the old one.
	g2, _, err := dialGateway(t, srv.URL, slackRelayToken)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"e2", "e3", "e4"} {
		if id, _ := g2.next(); id != want {
			t.Fatalf("after reconnecting: got %s, want %s", id, want)
		}
	}
	_ = g.ws.SetReadDeadline(time.Now().Add(time.Minute))
	for {
		if _, _, err := g.ws.ReadMessage(); err != nil {
			break // the older connection was ended (after what it had queued)
		}
	}
	for _, id := range []string{"e2", "e3", "e4"} {
		g2.ack(id)
	}
	eventually(t, "every event acked", func() bool { return router.Pending(agentKey) == 0 })

	router.Drop(agentKey)
	eventually(t, "a dropped agent's gateway is disconnected", func() bool { return !router.Connected(agentKey) })
	_ = g2.ws.SetReadDeadline(time.Now().Add(time.Minute))
	if _, _, err := g2.ws.ReadMessage(); err == nil {
		t.Fatal("a dropped agent's gateway still reads")
	}
	// Closed (the platform stops): a gateway's connection ends at once.
	router.Close()
	if g3, _, err := dialGateway(t, srv.URL, slackRelayToken); err == nil {
		_ = g3.ws.SetReadDeadline(time.Now().Add(time.Minute))
		if _, _, err := g3.ws.ReadMessage(); err == nil {
			t.Fatal("a closed router kept a gateway's connection")
		}
	}
	if router.Connected(agentKey) {
		t.Fatal("a closed router has a connected gateway")
	}
}
