package devmode

import (
	"encoding/json"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/adapters/modelproxy/providertest"
	"github.com/agentplane/agentplane/internal/devtools/fakediscord"
	"github.com/agentplane/agentplane/test/e2e"
)

// discordReplies counts the bot's posts to the user's DM channel that carry the model's answer.
func discordReplies(dc *fakediscord.Server) int {
	n := 0
	for _, p := range dc.Posts() {
		if p.ChannelID == dc.Options().DMChannelID && !p.Deleted && strings.Contains(p.Content, providertest.Reply) {
			n++
		}
	}
	return n
}

// checkDiscord connects the agent to a Discord bot on the real engine through the platform's
// relay (p runs with the default --discord-relay and --discord-api-url dc.APIURL(), and the
// agent's model is the fake provider's: checkModelProxy): the engine's Discord plugin is
// installed from the registry into the agent, the config holds the agent's relay token and not
// the bot's, the gateway's DISCORD_API_URL is the relay, the platform holds the bot's gateway
// connection to Discord, the engine answers a DM through the relay and fetches a DM's attachment
// from the relay's origin; asleep, the agent is woken
// by the next DM and answers it, each DM answered once; removing the channel takes it out of
// the config and ends the bot's connection.
func checkDiscord(t *testing.T, p *e2e.Platform, dc *fakediscord.Server, base string) {
	bot, user := dc.BotToken(), dc.Options().UserID
	start := time.Now()
	// The gateway's environment names the relay from its first start, and the engine applies
	// a channel's config live: the setup restarts no gateway.
	pid, restarts := pidOf(t, p, path.Base(base)), specRestarts(p, path.Base(base))
	// 201 once configured, or 202 when the setup's wait ended first (the plugin's install).
	r := p.Call("POST", base+"/channels/discord", map[string]any{"botToken": bot, "dmPolicy": "allowlist", "allowFrom": []string{user}})
	if (r.Status != 201 && r.Status != 202) || strings.Contains(r.Raw, bot) {
		t.Fatalf("discord setup: status %d, want 201 or 202 without the token: %s", r.Status, r.Raw)
	}
	e2e.Eventually(t, "the discord channel to be configured (its plugin installed from the registry)", func() bool {
		got := p.Call("GET", base+"/channels", nil)
		return strings.Contains(got.Raw, `"type":"discord"`) && strings.Contains(got.Raw, `"configured":true`)
	})
	t.Logf("discord configured after %s", time.Since(start).Round(time.Millisecond))

	disk := e2e.Must(t, p.Call("POST", base+"/console/exec", map[string]string{"command": "cat ../openclaw.json"}), 200, "read config").Str("stdout")
	var cfg map[string]any
	if err := json.Unmarshal([]byte(disk), &cfg); err != nil {
		t.Fatalf("config on disk: %v\n%s", err, disk)
	}
	dcfg, _ := cfg["channels"].(map[string]any)["discord"].(map[string]any)
	if tok, _ := dcfg["token"].(string); dcfg["enabled"] != true || tok == "" || strings.Contains(disk, bot) {
		t.Fatalf("channels.discord: %v", dcfg)
	}
	e2e.Eventually(t, "the platform to hold the bot's gateway connection", func() bool { return dc.Connections() >= 1 })

	// Awake: a DM gets the model's answer, posted through the relay.
	dc.SendDM("hello")
	awaitAnswer(t, p, path.Base(base), "discord", "the agent to answer a DM", func() bool { return discordReplies(dc) >= 1 })
	t.Logf("answered after %s", time.Since(start).Round(time.Millisecond))
	checkNoSpecRestart(t, p, path.Base(base), "the relayed discord channel", pid, restarts)
	search := e2e.Must(t, p.Call("POST", base+"/console/exec", map[string]string{
		"command": `{ cat /proc/[0-9]*/environ | tr '\0' '\n'; env; } | tr A-Za-z N-ZA-Mn-za-m; grep -rlF -e '` + bot + `' ../../.. ; echo searched`,
	}), 200, "search the agent for the Discord token").Str("stdout")
	if strings.Contains(search, e2e.Rot13(bot)) || strings.Contains(search, bot) || !strings.Contains(search, "searched") || strings.Contains(search, "../") {
		t.Fatalf("the Discord token is readable inside the agent:\n%s", search)
	}

	// An attachment: the relay serves it on its own origin (the plugin fetches media only
	// from DISCORD_API_URL's), from Discord's CDN, and the DM is answered.
	dc.SendDMWithFile("what is in this file?", "note.txt", []byte("a note for the agent"))
	awaitAnswer(t, p, path.Base(base), "discord", "the agent to fetch the attachment through the relay and answer", func() bool {
		return dc.CDNFetches() >= 1 && discordReplies(dc) >= 2
	})

	// Asleep: the platform keeps the bot's connection and wakes the agent for the next DM.
	asleep := suspendGateway(t, p, base)
	dc.SendDM("are you there?")
	awaitAnswer(t, p, path.Base(base), "discord", "the sleeping agent to be woken and answer", func() bool { return discordReplies(dc) >= 3 })
	t.Logf("a DM to the sleeping agent answered after %s", time.Since(asleep).Round(time.Millisecond))
	if n := discordReplies(dc); n != 3 {
		t.Errorf("the bot answered %d times to 3 DMs: %+v", n, dc.Posts())
	}
	if u := dc.Unhandled(); len(u) > 0 {
		t.Logf("Discord routes the fake does not serve, called through the relay: %v", u)
	}
	e2e.Must(t, p.Call("POST", base+"/resume", nil), 200, "resume")

	e2e.Must(t, p.Call("DELETE", base+"/channels/discord", nil), 200, "discord removal")
	e2e.Eventually(t, "the removed channel to leave the config", func() bool {
		after := p.Call("GET", base+"/config", nil).Obj("config")
		chans, _ := after["channels"].(map[string]any)
		return after != nil && chans["discord"] == nil
	})
	e2e.Eventually(t, "the bot's connection to end", func() bool { return dc.Connections() == 0 })
	if strings.Contains(p.Log.String(), bot) {
		t.Fatal("the Discord token appears in the platform's log")
	}
}
