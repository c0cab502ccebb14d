package devmode

import (
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/adapters/modelproxy/providertest"
	"github.com/agentplane/agentplane/internal/devtools/faketelegram"
	"github.com/agentplane/agentplane/test/e2e"
)

// gatewayEnvValue is the value of name in the environment the runtime gave the agent's
// running gateway ("" when unset), read on this host: inside the agent's sandbox the gateway's
// process and the runtime's gateway.pid are not visible. ok is false when no gateway runs.
func gatewayEnvValue(p *e2e.Platform, base, name string) (value string, ok bool) {
	id := strings.TrimPrefix(base, "/v0/agents/")
	raw, err := os.ReadFile(filepath.Join(p.StateDir, "runtime", "agents", "dev", id, "gateway.pid"))
	if err != nil {
		return "", false
	}
	env, err := os.ReadFile("/proc/" + strings.TrimSpace(string(raw)) + "/environ")
	if err != nil {
		return "", false
	}
	for _, kv := range strings.Split(string(env), "\x00") {
		if v, found := strings.CutPrefix(kv, name+"="); found {
			return v, true
		}
	}
	return "", true
}

// replies are the bot's messages to chat that carry the fake model's answer (the engine sends
// chat ids as strings).
func replies(tg *faketelegram.Server, chat int) int {
	n := 0
	for _, c := range tg.Calls() {
		if text, _ := c.Params["text"].(string); c.Method == "sendMessage" && fmt.Sprint(c.Params["chat_id"]) == strconv.Itoa(chat) && strings.Contains(text, providertest.Reply) {
			n++
		}
	}
	return n
}

// sent lists the bot's messages, for a failure's message.
func sent(tg *faketelegram.Server) []map[string]any {
	var out []map[string]any
	for _, c := range tg.Calls() {
		if c.Method == "sendMessage" {
			out = append(out, c.Params)
		}
	}
	return out
}

// suspendGateway suspends the agent at base and returns once its gateway process ended.
func suspendGateway(t *testing.T, p *e2e.Platform, base string) time.Time {
	t.Helper()
	pid := pidOf(t, p, strings.TrimPrefix(base, "/v0/agents/"))
	if got := e2e.Must(t, p.Call("POST", base+"/suspend", nil), 200, "suspend").Obj("agent"); got["status"] != "suspended" {
		t.Fatalf("suspended agent: %v", got)
	}
	e2e.Eventually(t, "the gateway process to end", func() bool { return !e2e.Alive(pid) })
	return time.Now()
}

// checkTelegram connects the agent to a Telegram bot on the real engine, through the
// platform's relay to a fake Bot API on loopback (p runs with --telegram-api-url tg.URL, and
// the agent's model is the fake provider's: checkModelProxy): the config points the engine at
// the relay with a relay token (`openclaw config validate` accepts it), nothing in the agent
// holds the bot token, the engine polls its bot and answers a message; asleep, the agent is
// woken by the next message and answers it; removing the channel takes it out of the config.
func checkTelegram(t *testing.T, p *e2e.Platform, tg *faketelegram.Server, base string) {
	const user = 424242
	start := time.Now()
	r := e2e.Must(t, p.Call("POST", base+"/channels/telegram", map[string]any{"botToken": tg.Token, "dmPolicy": "allowlist", "allowFrom": []string{strconv.Itoa(user)}}), 201, "telegram setup")
	t.Logf("telegram configured after %s", time.Since(start).Round(time.Millisecond))
	if ch := r.Obj("channel"); ch["configured"] != true || ch["botTokenHint"] != "****"+tg.Token[len(tg.Token)-4:] || strings.Contains(r.Raw, tg.Token) {
		t.Fatalf("setup answer: %s", r.Raw)
	}

	disk := e2e.Must(t, p.Call("POST", base+"/console/exec", map[string]string{"command": "cat ../openclaw.json"}), 200, "read config").Str("stdout")
	var cfg map[string]any
	if err := json.Unmarshal([]byte(disk), &cfg); err != nil {
		t.Fatalf("config on disk: %v\n%s", err, disk)
	}
	tgc, _ := cfg["channels"].(map[string]any)["telegram"].(map[string]any)
	relayTok, _ := tgc["botToken"].(string)
	if !strings.HasSuffix(fmt.Sprint(tgc["apiRoot"]), "/relay/telegram") || !strings.HasPrefix(relayTok, strconv.FormatInt(tg.BotID, 10)+":") ||
		relayTok == tg.Token || tgc["enabled"] != true || tgc["dmPolicy"] != "allowlist" {
		t.Fatalf("channels.telegram: %v", tgc)
	}
	v := e2e.Must(t, p.Call("POST", base+"/config/validate", map[string]any{"config": cfg}), 200, "validate")
	if v.Body["valid"] != true {
		t.Fatalf("openclaw config validate refuses the relayed channel: %s", v.Raw)
	}
	if got := p.Call("GET", base+"/channels", nil); !strings.Contains(got.Raw, `"configured":true`) || strings.Contains(got.Raw, tg.Token) {
		t.Fatalf("channel list: %s", got.Raw)
	}

	e2e.Eventually(t, "the engine to poll its bot through the relay", func() bool {
		for _, c := range tg.Calls() {
			if c.Method == "getUpdates" && c.Token == tg.Token {
				return true
			}
		}
		return false
	})
	t.Logf("the engine polls its bot after %s", time.Since(start).Round(time.Millisecond))
	search := e2e.Must(t, p.Call("POST", base+"/console/exec", map[string]string{
		// ROT13: console output would hide the token itself.
		"command": `{ cat /proc/[0-9]*/environ | tr '\0' '\n'; env; } | tr A-Za-z N-ZA-Mn-za-m; grep -rlF '` + tg.Token + `' ../../.. ; echo searched`,
	}), 200, "search the agent for the bot token").Str("stdout")
	if strings.Contains(search, e2e.Rot13(tg.Token)) || strings.Contains(search, tg.Token) || !strings.Contains(search, "searched") || strings.Contains(search, "../") {
		t.Fatalf("the bot token is readable inside the agent:\n%s", search)
	}

	// Awake: a message gets the model's answer.
	tg.SendText(user, "hello")
	awaitAnswer(t, p, path.Base(base), "telegram", "the agent to answer a message", func() bool { return replies(tg, user) >= 1 })
	t.Logf("answered after %s", time.Since(start).Round(time.Millisecond))

	// Asleep: the platform polls the bot for it and wakes it for the next message.
	asleep := suspendGateway(t, p, base)
	tg.SendText(user, "are you there?")
	awaitAnswer(t, p, path.Base(base), "telegram", "the sleeping agent to be woken and answer", func() bool { return replies(tg, user) >= 2 })
	t.Logf("a message to the sleeping agent answered after %s", time.Since(asleep).Round(time.Millisecond))
	if n := replies(tg, user); n != 2 {
		t.Errorf("the bot answered %d times to 2 messages: %v", n, sent(tg))
	}
	if a := p.Call("GET", base, nil).Obj("agent"); a["status"] != "running" {
		t.Fatalf("the agent that answered: %v", a)
	}
	if tg.Pending() != 0 {
		t.Errorf("%d updates not confirmed to Telegram", tg.Pending())
	}
	e2e.Must(t, p.Call("POST", base+"/resume", nil), 200, "resume")

	e2e.Must(t, p.Call("DELETE", base+"/channels/telegram", nil), 200, "telegram removal")
	after := e2e.Must(t, p.Call("GET", base+"/config", nil), 200, "read config").Obj("config")
	if chans, _ := after["channels"].(map[string]any); chans["telegram"] != nil {
		t.Fatalf("the removed channel is still configured: %v", chans)
	}
	if strings.Contains(p.Log.String(), tg.Token) {
		t.Fatal("the bot token appears in the platform's log")
	}
}
