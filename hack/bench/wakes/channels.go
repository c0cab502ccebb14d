package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"github.com/agentplane/agentplane/hack/bench/internal/benchkit"
	"github.com/agentplane/agentplane/internal/devtools/fakediscord"
	"github.com/agentplane/agentplane/internal/devtools/fakeslack"
	"github.com/agentplane/agentplane/internal/devtools/faketelegram"
)

// kind is one channel kind on its fake server: how an agent is connected to it, how a user's
// message is sent, and how many of the bot's messages are the model's answer.
type kind struct {
	name string
	// connect adds the channel to agent id and waits until it is configured and the
	// platform holds its ingress.
	connect func(ctx context.Context, c benchkit.Client, id string) error
	send    func(text string)
	answers func() int
}

// fakes are the three channel kinds' fake servers and the platform's relay options for them.
type fakes struct {
	tg                 *faketelegram.Server
	sl                 *fakeslack.Server
	slackBot, slackApp string
	dc                 *fakediscord.Server
}

func newFakes() *fakes {
	stamp := fmt.Sprint(time.Now().UnixNano())
	f := &fakes{slackBot: "xoxb-wakes-bench-" + stamp, slackApp: "xapp-wakes-bench-" + stamp}
	f.tg = faketelegram.New("700000001:AAwakes-bench-bot-" + stamp)
	f.sl = fakeslack.New(fakeslack.Options{BotToken: f.slackBot, AppToken: f.slackApp})
	f.dc = fakediscord.New(fakediscord.Options{BotToken: base64.RawURLEncoding.EncodeToString([]byte("100000000000000001")) + "." + stamp + ".wakes-bench"})
	return f
}

func (f *fakes) close() {
	f.tg.Close()
	f.sl.Close()
	f.dc.Close()
}

// kinds are the kinds named in names (comma-separated), in that order.
func (f *fakes) kinds(names string) ([]kind, error) {
	all := map[string]kind{"telegram": f.telegram(), "slack": f.slack(), "discord": f.discord()}
	var out []kind
	for _, n := range strings.Split(names, ",") {
		k, ok := all[strings.TrimSpace(n)]
		if !ok {
			return nil, fmt.Errorf("unknown channel kind %q (telegram, slack, discord)", n)
		}
		out = append(out, k)
	}
	return out, nil
}

// telegramUser is the Telegram user who writes to the bot (its allowlist).
const telegramUser = 424242

func (f *fakes) telegram() kind {
	tg := f.tg
	return kind{name: "telegram",
		connect: func(_ context.Context, c benchkit.Client, id string) error {
			_, err := c.Expect("POST", "/v0/agents/"+id+"/channels/telegram", map[string]any{"botToken": tg.Token, "dmPolicy": "allowlist",
				"allowFrom": []string{fmt.Sprint(telegramUser)}}, 201)
			return err
		},
		send: func(text string) { tg.SendText(telegramUser, text) },
		answers: func() int {
			n := 0
			for _, c := range tg.Calls() {
				if benchkit.IsTelegramAnswer(c, telegramUser) {
					n++
				}
			}
			return n
		},
	}
}

// slackUser is the Slack user who DMs the app (its allowlist).
const slackUser = "U0HUMAN"

func (f *fakes) slack() kind {
	sl := f.sl
	return kind{name: "slack",
		connect: func(ctx context.Context, c benchkit.Client, id string) error {
			return connectPlugin(ctx, c, id, "slack", map[string]any{"botToken": f.slackBot, "appToken": f.slackApp,
				"dmPolicy": "allowlist", "allowFrom": []string{slackUser}}, func() bool { return sl.Connections() == 1 })
		},
		send: func(text string) { sl.SendDM(slackUser, text) },
		answers: func() int {
			n := 0
			for _, p := range sl.Posts() {
				if p.Channel == "D"+slackUser && !p.Deleted && benchkit.IsReply(p.Text) {
					n++
				}
			}
			return n
		},
	}
}

func (f *fakes) discord() kind {
	dc := f.dc
	return kind{name: "discord",
		connect: func(ctx context.Context, c benchkit.Client, id string) error {
			return connectPlugin(ctx, c, id, "discord", map[string]any{"botToken": dc.BotToken(), "dmPolicy": "allowlist",
				"allowFrom": []string{dc.Options().UserID}}, func() bool { return dc.Connections() >= 1 })
		},
		send: func(text string) { dc.SendDM(text) },
		answers: func() int {
			n := 0
			for _, p := range dc.Posts() {
				if p.ChannelID == dc.Options().DMChannelID && !p.Deleted && benchkit.IsReply(p.Content) {
					n++
				}
			}
			return n
		},
	}
}

// setupBound bounds a channel's setup: a plugin's install from the registry is a minute of npm.
const setupBound = 10 * time.Minute

// connectPlugin adds a channel whose engine plugin the platform installs (201 once configured,
// 202 when the setup's own wait ended first) and waits until the channel is configured and
// held (the platform's connection to the fake).
func connectPlugin(ctx context.Context, c benchkit.Client, id, typ string, body map[string]any, held func() bool) error {
	status, out, err := c.Call("POST", "/v0/agents/"+id+"/channels/"+typ, body)
	if err != nil || (status != 201 && status != 202) {
		return fmt.Errorf("%s setup: %d %v %s", typ, status, err, out)
	}
	deadline := time.Now().Add(setupBound)
	for {
		_, out, err := c.Call("GET", "/v0/agents/"+id+"/channels", nil)
		if err == nil && strings.Contains(string(out), `"type":"`+typ+`"`) && strings.Contains(string(out), `"configured":true`) && held() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the %s channel not configured and held after %s: %s", typ, setupBound, out)
		}
		if err := benchkit.Sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}
