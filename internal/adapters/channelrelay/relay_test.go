package channelrelay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/types"

	"github.com/agentplane/agentplane/internal/devtools/faketelegram"
)

const (
	realToken  = "123456789:AAreal-bot-token-never-in-the-agent"
	relayToken = "123456789:relay-token-of-the-agent"

	slackBotToken   = "xoxb-real-slack-bot-token-never-in-the-agent"
	slackRelayToken = "xoxb-agentplane.relay-token-of-the-agent"
)

var agentKey = types.NamespacedName{Namespace: "team", Name: "agent"}

type fakeAuthorizer struct{ err error }

func (f fakeAuthorizer) AuthorizeTelegram(_ context.Context, tok string) (Grant, error) {
	switch {
	case f.err != nil:
		return Grant{}, f.err
	case tok != relayToken:
		return Grant{}, ErrUnauthorized
	}
	return Grant{Agent: agentKey, BotToken: realToken}, nil
}

func (f fakeAuthorizer) AuthorizeSlack(_ context.Context, tok string) (Grant, error) {
	switch {
	case f.err != nil:
		return Grant{}, f.err
	case tok != slackRelayToken:
		return Grant{}, ErrUnauthorized
	}
	return Grant{Agent: agentKey, BotToken: slackBotToken}, nil
}

// logSink collects log lines.
type logSink struct {
	mu    sync.Mutex
	lines []string
}

func (l *logSink) add(prefix, args string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, prefix+" "+args)
}

func (l *logSink) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

func newRelay(t *testing.T, api string, a Authorizer, polled func(types.NamespacedName)) (*httptest.Server, *logSink) {
	t.Helper()
	logs := &logSink{}
	r, err := New(Options{Authorizer: a, TelegramAPI: api, Polled: polled, Log: funcr.New(logs.add, funcr.Options{Verbosity: 1})})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv, logs
}

type answer struct {
	status int
	body   map[string]any
	raw    string
}

func call(t *testing.T, method, url string, params map[string]any) answer {
	t.Helper()
	var body io.Reader
	if params != nil {
		b, _ := json.Marshal(params)
		body = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, body)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, raw: string(b)}
	_ = json.Unmarshal(b, &a.body)
	return a
}

// The relay swaps the agent's relay token for the bot's real one on every Bot API method and
// file download, and refuses what it must not forward; the real token is in no answer and no
// log line.
func TestRelayForwardsWithTheRealToken(t *testing.T) {
	t.Parallel()
	tg := faketelegram.New(realToken)
	defer tg.Close()
	var polledMu sync.Mutex
	var polled []types.NamespacedName
	srv, logs := newRelay(t, tg.URL, fakeAuthorizer{}, func(a types.NamespacedName) {
		polledMu.Lock()
		defer polledMu.Unlock()
		polled = append(polled, a)
	})
	base := srv.URL + "/relay/telegram/bot" + relayToken

	me := call(t, "GET", base+"/getMe", nil)
	if me.status != 200 || me.body["ok"] != true || me.body["result"].(map[string]any)["id"] != 123456789.0 {
		t.Fatalf("getMe: %d %s", me.status, me.raw)
	}
	sent := call(t, "POST", base+"/sendMessage", map[string]any{"chat_id": 42, "text": "hello"})
	if sent.status != 200 || sent.body["result"].(map[string]any)["text"] != "hello" {
		t.Fatalf("sendMessage: %d %s", sent.status, sent.raw)
	}
	tg.SendText(42, "hi")
	up := call(t, "POST", base+"/getUpdates", map[string]any{"timeout": 0})
	if got, _ := up.body["result"].([]any); up.status != 200 || len(got) != 1 {
		t.Fatalf("getUpdates: %d %s", up.status, up.raw)
	}
	file := call(t, "GET", srv.URL+"/relay/telegram/file/bot"+relayToken+"/photos/a.jpg", nil)
	if file.status != 200 || file.raw != "file:photos/a.jpg" {
		t.Fatalf("file download: %d %q", file.status, file.raw)
	}
	var methods []string
	for _, c := range tg.Calls() {
		if c.Token != realToken {
			t.Errorf("Telegram got %s with the token %q", c.Method, c.Token)
		}
		methods = append(methods, c.Method)
	}
	if strings.Join(methods, ",") != "getMe,sendMessage,getUpdates,file" {
		t.Errorf("Telegram got %v", methods)
	}
	if tg.Calls()[1].Params["text"] != "hello" {
		t.Errorf("sendMessage's body did not arrive: %v", tg.Calls()[1].Params)
	}
	polledMu.Lock()
	if len(polled) != 1 || polled[0] != agentKey {
		t.Errorf("polled hook: %v", polled)
	}
	polledMu.Unlock()

	// Refused before Telegram is asked.
	n := len(tg.Calls())
	for _, c := range []struct {
		name, method, url string
		status            int
	}{
		{"a foreign token", "POST", srv.URL + "/relay/telegram/bot" + realToken + "/getMe", 401},
		{"no bot prefix", "POST", srv.URL + "/relay/telegram/" + relayToken + "/getMe", 404},
		{"setWebhook", "POST", base + "/setWebhook", 403},
		{"logOut in another case", "POST", base + "/LOGOUT", 403},
		{"close", "POST", base + "/close", 403},
		{"a method that is not a name", "POST", base + "/..%2F..%2Fbot1:x%2FgetMe", 404},
		{"a file path that climbs", "GET", srv.URL + "/relay/telegram/file/bot" + relayToken + "/a%2F..%2F..%2Fbot1:x%2FgetMe", 404},
	} {
		a := call(t, c.method, c.url, map[string]any{"url": "https://elsewhere.example"})
		if a.status != c.status || a.body["ok"] != false || a.body["error_code"] != float64(c.status) {
			t.Errorf("%s: %d %s, want %d", c.name, a.status, a.raw, c.status)
		}
	}
	if len(tg.Calls()) != n {
		t.Errorf("refused calls reached Telegram: %v", tg.Calls()[n:])
	}
	if strings.Contains(logs.String(), "AAreal") {
		t.Errorf("the real token is in the relay's log:\n%s", logs)
	}
}

// A platform that cannot read the channel answers 503; a Telegram that cannot be reached 502,
// and the transport's error (which names the URL, so the real token) is not logged whole.
func TestRelayFailures(t *testing.T) {
	t.Parallel()
	srv, _ := newRelay(t, "http://127.0.0.1:1", fakeAuthorizer{err: errors.New("kube-apiserver is down")}, nil)
	if a := call(t, "POST", srv.URL+"/relay/telegram/bot"+relayToken+"/getMe", nil); a.status != 503 || a.body["ok"] != false {
		t.Errorf("authorizer down: %d %s", a.status, a.raw)
	}
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()
	srv, logs := newRelay(t, downURL, fakeAuthorizer{}, nil)
	if a := call(t, "POST", srv.URL+"/relay/telegram/bot"+relayToken+"/getMe", nil); a.status != 502 || a.body["ok"] != false {
		t.Errorf("Telegram down: %d %s", a.status, a.raw)
	}
	if !strings.Contains(logs.String(), "Telegram did not answer") || strings.Contains(logs.String(), "AAreal") {
		t.Errorf("log:\n%s", logs)
	}
}
