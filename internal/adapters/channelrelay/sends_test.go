package channelrelay

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-logr/logr"
)

// A call that may change something on the chat network counts as a send of its agent until
// its answer is back (Sends.Busy, which holds the agent's suspend back); Telegram's long poll
// and Discord's reads do not.
func TestSendsCountCallsInFlightThatChangeSomething(t *testing.T) {
	t.Parallel()
	arrived, release := make(chan string, 4), make(chan struct{})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		arrived <- req.Method + " " + req.URL.Path
		<-release
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true,"result":[]}`))
	}))
	defer upstream.Close()
	sends := &Sends{}
	r, err := New(Options{Authorizer: fakeAuthorizer{}, TelegramAPI: upstream.URL, SlackAPI: upstream.URL + "/api/",
		DiscordAPI: upstream.URL + "/api/v10", Sends: sends, Log: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(r)
	defer srv.Close()

	for _, c := range []struct {
		name, method, path, auth string
		sends                    bool
	}{
		{"telegram long poll", "POST", "/relay/telegram/bot" + relayToken + "/getUpdates", "", false},
		{"telegram message", "POST", "/relay/telegram/bot" + relayToken + "/sendMessage", "", true},
		{"slack message", "POST", "/relay/slack/api/chat.postMessage", "Bearer " + slackRelayToken, true},
		{"discord read", "GET", DiscordAPIPath + "/channels/1/messages", "Bot " + discordRelayToken, false},
		{"discord message", "POST", DiscordAPIPath + "/channels/1/messages", "Bot " + discordRelayToken, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			done := make(chan int)
			go func() {
				req, _ := http.NewRequest(c.method, srv.URL+c.path, strings.NewReader("{}"))
				req.Header.Set("Content-Type", "application/json")
				if c.auth != "" {
					req.Header.Set("Authorization", c.auth)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					done <- 0
					return
				}
				resp.Body.Close()
				done <- resp.StatusCode
			}()
			got := <-arrived // the call is at the chat network, its answer not back
			if busy := sends.Busy(agentKey); busy != c.sends {
				t.Errorf("%s in flight (%s): Busy = %v, want %v", c.name, got, busy, c.sends)
			}
			release <- struct{}{}
			if code := <-done; code != http.StatusOK {
				t.Fatalf("%s: HTTP %d", c.name, code)
			}
			// The relay's handler ends its count as it returns, which may be just after the
			// client has read the whole answer (it carries its length): wait for that event.
			eventually(t, c.name+" no longer Busy once answered", func() bool { return !sends.Busy(agentKey) })
		})
	}
	if (*Sends)(nil).Busy(agentKey) {
		t.Error("a nil Sends is Busy")
	}
}
