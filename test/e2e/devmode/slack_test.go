package devmode

import (
	"encoding/json"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/adapters/modelproxy/providertest"
	"github.com/agentplane/agentplane/internal/devtools/fakeslack"
	"github.com/agentplane/agentplane/test/e2e"
)

// slackReplies counts the bot's posts to user's DM that carry the model's answer.
func slackReplies(sl *fakeslack.Server, user string) int {
	n := 0
	for _, p := range sl.Posts() {
		if p.Channel == "D"+user && !p.Deleted && strings.Contains(p.Text, providertest.Reply) {
			n++
		}
	}
	return n
}

// checkSlack connects the agent to a Slack app on the real engine in its relay mode (p runs
// with the default --slack-relay and --slack-api-url sl.APIURL(), and the agent's model is the fake
// provider's: checkModelProxy): the engine's Slack plugin is installed from the registry into
// the agent, the config puts the channel in relay mode with the agent's relay token and
// neither Slack token, the platform holds the app's Socket Mode connection, the engine answers
// a DM through the relay's Web API; asleep, the agent is woken by the next DM and answers it,
// each message answered once; removing the channel takes it out of the config.
func checkSlack(t *testing.T, p *e2e.Platform, sl *fakeslack.Server, bot, app, base string) {
	const user = "U0HUMAN"
	start := time.Now()
	// The gateway's environment names the relay from its first start, and the engine applies
	// a channel's config live: the setup restarts no gateway.
	pid, restarts := pidOf(t, p, path.Base(base)), specRestarts(p, path.Base(base))
	// 201 once configured, or 202 when the setup's wait ended first (the plugin's install is a
	// minute of npm, more on a loaded machine).
	r := p.Call("POST", base+"/channels/slack", map[string]any{"botToken": bot, "appToken": app, "dmPolicy": "allowlist", "allowFrom": []string{user}})
	if (r.Status != 201 && r.Status != 202) || strings.Contains(r.Raw, bot) || strings.Contains(r.Raw, app) {
		t.Fatalf("slack setup: status %d, want 201 or 202 without a token: %s", r.Status, r.Raw)
	}
	e2e.Eventually(t, "the slack channel to be configured (its plugin installed from the registry)", func() bool {
		got := p.Call("GET", base+"/channels", nil)
		return strings.Contains(got.Raw, `"type":"slack"`) && strings.Contains(got.Raw, `"configured":true`)
	})
	t.Logf("slack configured after %s", time.Since(start).Round(time.Millisecond))

	disk := e2e.Must(t, p.Call("POST", base+"/console/exec", map[string]string{"command": "cat ../openclaw.json"}), 200, "read config").Str("stdout")
	var cfg map[string]any
	if err := json.Unmarshal([]byte(disk), &cfg); err != nil {
		t.Fatalf("config on disk: %v\n%s", err, disk)
	}
	sc, _ := cfg["channels"].(map[string]any)["slack"].(map[string]any)
	if sc["mode"] != "relay" || sc["enabled"] != true || strings.Contains(disk, bot) || strings.Contains(disk, app) {
		t.Fatalf("channels.slack: %v", sc)
	}
	e2e.Eventually(t, "the platform to hold the app's Socket Mode connection", func() bool { return sl.Connections() == 1 })

	// Awake: a DM gets the model's answer, posted through the relay.
	sl.SendDM(user, "hello")
	awaitAnswer(t, p, path.Base(base), "slack", "the agent to answer a DM", func() bool { return slackReplies(sl, user) >= 1 })
	t.Logf("answered after %s", time.Since(start).Round(time.Millisecond))
	checkNoSpecRestart(t, p, path.Base(base), "the relayed slack channel", pid, restarts)
	search := e2e.Must(t, p.Call("POST", base+"/console/exec", map[string]string{
		"command": `{ cat /proc/[0-9]*/environ | tr '\0' '\n'; env; } | tr A-Za-z N-ZA-Mn-za-m; grep -rlF -e '` + bot + `' -e '` + app + `' ../../.. ; echo searched`,
	}), 200, "search the agent for the Slack tokens").Str("stdout")
	for _, tok := range []string{bot, app} {
		if strings.Contains(search, e2e.Rot13(tok)) || strings.Contains(search, tok) || !strings.Contains(search, "searched") || strings.Contains(search, "../") {
			t.Fatalf("a Slack token is readable inside the agent:\n%s", search)
		}
	}

	// Asleep: the platform keeps the socket and wakes the agent for the next DM.
	asleep := suspendGateway(t, p, base)
	sl.SendDM(user, "are you there?")
	awaitAnswer(t, p, path.Base(base), "slack", "the sleeping agent to be woken and answer", func() bool { return slackReplies(sl, user) >= 2 })
	t.Logf("a DM to the sleeping agent answered after %s", time.Since(asleep).Round(time.Millisecond))
	if n := slackReplies(sl, user); n != 2 {
		t.Errorf("the bot answered %d times to 2 DMs: %v", n, sl.Posts())
	}
	if sl.Unacked() != 0 {
		t.Errorf("%d envelopes not acked to Slack", sl.Unacked())
	}
	e2e.Must(t, p.Call("POST", base+"/resume", nil), 200, "resume")

	e2e.Must(t, p.Call("DELETE", base+"/channels/slack", nil), 200, "slack removal")
	e2e.Eventually(t, "the removed channel to leave the config", func() bool {
		after := p.Call("GET", base+"/config", nil).Obj("config")
		chans, _ := after["channels"].(map[string]any)
		return after != nil && chans["slack"] == nil
	})
	if l := p.Log.String(); strings.Contains(l, bot) || strings.Contains(l, app) {
		t.Fatal("a Slack token appears in the platform's log")
	}
}
