package channelrelay

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/gorilla/websocket"

	"github.com/agentplane/agentplane/internal/adapters/channelrelay/discordgw"
	"github.com/agentplane/agentplane/internal/devtools/faketelegram"
)

// quiescedRelay is a relay with o's routers and its test server.
func quiescedRelay(t *testing.T, o Options) (*Relay, *httptest.Server) {
	t.Helper()
	o.Authorizer, o.Log = fakeAuthorizer{}, logr.Discard()
	r, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return r, srv
}

// getUpdates polls through the relay and returns the answer and whether its connection closes
// after it.
func getUpdates(t *testing.T, base string, timeout int) (answer, bool) {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/getUpdates", strings.NewReader(fmt.Sprintf(`{"timeout":%d}`, timeout)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return answer{}, false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, raw: string(b)}
	_ = json.Unmarshal(b, &a.body)
	return a, resp.Close
}

// asleepAnswered reports whether a is the relay's answer to a poll of a quiesced agent: Telegram's
// 429 with a retry_after, which the engine's polling worker waits out before it polls again.
func asleepAnswered(a answer) bool {
	p, _ := a.body["parameters"].(map[string]any)
	return a.status == http.StatusTooManyRequests && a.body["ok"] == false && a.body["error_code"] == 429.0 && p["retry_after"] == 1.0
}

// A quiesce answers the agent's long poll that Telegram holds (it would be in flight in the
// gateway's checkpoint and come back closed), and every poll of the agent until it is
// released, with a 429 and the connection closed; the agent's other calls still go through,
// and once released its polls reach Telegram again. Another agent's poll is not touched.
func TestQuiesceAnswersTheAgentsTelegramPolls(t *testing.T) {
	t.Parallel()
	tg := faketelegram.New(realToken)
	defer tg.Close()
	r, srv := quiescedRelay(t, Options{TelegramAPI: tg.URL})
	base := srv.URL + "/relay/telegram/bot" + relayToken

	type polled struct {
		a      answer
		closes bool
	}
	held := make(chan polled, 1)
	go func() {
		a, closes := getUpdates(t, base, 30)
		held <- polled{a, closes}
	}()
	eventually(t, "Telegram to hold the poll", func() bool { return len(tg.Calls()) == 1 })

	release := r.Quiesce(agentKey)
	r.polls.mu.Lock()
	inflight := len(r.polls.inflight[agentKey])
	r.polls.mu.Unlock()
	if inflight != 0 {
		t.Fatalf("Quiesce returned with %d polls of the agent in flight", inflight)
	}
	if p := <-held; !asleepAnswered(p.a) || !p.closes {
		t.Fatalf("the held poll got %d %s (connection closes: %v), want the 429 with retry_after and the connection closed", p.a.status, p.a.raw, p.closes)
	}
	if a, closes := getUpdates(t, base, 30); !asleepAnswered(a) || !closes {
		t.Fatalf("a poll while quiesced got %d %s (closes %v)", a.status, a.raw, closes)
	}
	if sent := call(t, "POST", base+"/sendMessage", map[string]any{"chat_id": 42, "text": "still answering"}); sent.status != 200 {
		t.Fatalf("sendMessage while quiesced: %d %s", sent.status, sent.raw)
	}
	if calls := tg.Calls(); len(calls) != 2 || calls[1].Method != "sendMessage" {
		t.Fatalf("Telegram got %v, want the held poll and the send only", calls)
	}

	release()
	release() // twice is once
	tg.SendText(42, "hi")
	if a, _ := getUpdates(t, base, 0); a.status != 200 || len(a.body["result"].([]any)) != 1 {
		t.Fatalf("a poll after the release: %d %s", a.status, a.raw)
	}
}

// A quiesce lets the agent's gateway ack the event it holds, then closes its Slack relay
// websocket with a close frame and returns once the gateway has answered it; the agent's
// gateway cannot connect until the release, and then gets only what came since.
func TestQuiesceClosesTheAgentsSlackWebsocket(t *testing.T) {
	t.Parallel()
	router := &SlackRouter{Authorizer: fakeAuthorizer{}, Log: logr.Discard()}
	r, srv := quiescedRelay(t, Options{Slack: router})
	g, _, err := dialGateway(t, srv.URL, slackRelayToken)
	if err != nil {
		t.Fatal(err)
	}
	if err := router.Deliver(agentKey, "e1", message("e1")); err != nil {
		t.Fatal(err)
	}
	if id, _ := g.next(); id != "e1" {
		t.Fatalf("got %s", id)
	}

	released := make(chan func(), 1)
	go func() { released <- r.Quiesce(agentKey) }()
	g.ack("e1") // the engine acks once the event is in its queue, then reads on
	_, _, err = g.ws.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.CloseServiceRestart {
		t.Fatalf("the gateway's connection ended with %v, want close %d", err, websocket.CloseServiceRestart)
	}
	release := <-released // gorilla answered the close frame
	if router.Connected(agentKey) || router.Pending(agentKey) != 0 {
		t.Fatalf("Quiesce returned with the gateway connected (%v) or %d events unacked", router.Connected(agentKey), router.Pending(agentKey))
	}
	if _, resp, err := dialGateway(t, srv.URL, slackRelayToken); err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("the gateway connected while quiesced: %v", err)
	}
	if err := router.Deliver(agentKey, "e2", message("e2")); err != nil {
		t.Fatal(err)
	}

	release()
	g2, _, err := dialGateway(t, srv.URL, slackRelayToken)
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := g2.next(); id != "e2" {
		t.Fatalf("after the release: got %s, want e2 (e1 was acked)", id)
	}
}

// A quiesce asks the agent's Discord gateway session for a heartbeat, so that what it has seen
// leaves the inbox (else it would wake the agent again as soon as it sleeps), and then to
// reconnect (op 7), and returns once the gateway has closed it; the agent's gateway is turned
// away with a resumable close until the release, and then resumes its session.
func TestQuiesceAsksTheAgentsDiscordSessionToReconnect(t *testing.T) {
	t.Parallel()
	router := &DiscordRouter{Authorizer: fakeAuthorizer{}, Log: logr.Discard(), Heartbeat: time.Minute}
	r, srv := quiescedRelay(t, Options{DiscordAPI: "http://127.0.0.1:1", Discord: router})
	if _, err := router.Upstream(agentKey, "READY", json.RawMessage(`{"v":10,"user":{"id":"1"},"guilds":[],"session_id":"up"}`)); err != nil {
		t.Fatal(err)
	}
	send := func(id, text string) {
		d, _ := json.Marshal(map[string]any{"id": id, "channel_id": "9", "content": text, "author": map[string]string{"id": "42"}})
		if _, err := router.Upstream(agentKey, "MESSAGE_CREATE", d); err != nil {
			t.Fatal(err)
		}
	}
	send("1000", "seen before the sleep")
	g := dialRaw(t, srv.URL, "", 0)
	if got := g.message(); got != "seen before the sleep" {
		t.Fatalf("got %q", got)
	}

	asked := make(chan []int, 1)
	go func() { // the engine's client: a heartbeat when asked for one, its connection closed on op 7
		var ops []int
		defer func() { asked <- ops }()
		for {
			var p discordgw.Payload
			if err := g.ws.ReadJSON(&p); err != nil {
				return
			}
			ops = append(ops, p.Op)
			switch p.Op {
			case discordgw.OpHeartbeat:
				_ = g.ws.WriteJSON(map[string]any{"op": discordgw.OpHeartbeat, "d": g.seq})
			case discordgw.OpReconnect:
				_ = g.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
				return
			}
		}
	}()
	release := r.Quiesce(agentKey)
	if ops := <-asked; len(ops) == 0 || ops[0] != discordgw.OpHeartbeat || ops[len(ops)-1] != discordgw.OpReconnect {
		t.Fatalf("the session got ops %v, want a HEARTBEAT request, then RECONNECT", ops)
	}
	if router.Connected(agentKey) || router.Pending(agentKey) != 0 {
		t.Fatalf("Quiesce returned with the session connected (%v) or %d messages unseen", router.Connected(agentKey), router.Pending(agentKey))
	}
	turned := dialRaw(t, srv.URL, g.session, g.seq)
	_, _, err := turned.ws.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != discordgw.CloseUnknownError {
		t.Fatalf("a resume while quiesced ended with %v, want the resumable close %d", err, discordgw.CloseUnknownError)
	}
	send("1001", "sent while it sleeps")

	release()
	g2 := dialRaw(t, srv.URL, g.session, g.seq)
	if p := g2.read(); p.Op != discordgw.OpDispatch || *p.T != "RESUMED" {
		t.Fatalf("after the release: op %d, want RESUMED", p.Op)
	}
	if got := g2.message(); got != "sent while it sleeps" {
		t.Fatalf("after the release: got %q, want only the message sent since", got)
	}
}
