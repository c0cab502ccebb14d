package facade_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime/local"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
	"github.com/agentplane/agentplane/internal/rules/auth"
)

// shell runs a console command in the agent's home and returns its stdout.
func shell(tok, agent, command string) string {
	GinkgoHelper()
	r := call("POST", "/v0/agents/"+agent+"/console/exec", tok, map[string]string{"command": command})
	Expect(r.Status).To(Equal(200), r.Raw)
	return r.Body["stdout"].(string)
}

// engineConfig reads the agent's engine config file as it is on disk (raw and parsed).
func engineConfig(tok, agent string) (string, map[string]any) {
	GinkgoHelper()
	raw := shell(tok, agent, "cat ../openclaw.json")
	var cfg map[string]any
	Expect(json.Unmarshal([]byte(raw), &cfg)).To(Succeed(), raw)
	return raw, cfg
}

// channelConfig is channels.<typ> of the config (nil when absent).
func channelConfig(cfg map[string]any, typ string) map[string]any {
	chans, _ := cfg["channels"].(map[string]any)
	c, _ := chans[typ].(map[string]any)
	return c
}

// gatewayEnv is the value of name in the environment the runtime gave the agent's gateway,
// read on this host ("" when unset): inside the agent's sandbox the gateway's process is not
// visible (its own PID namespace), and neither is the runtime's gateway.pid.
func gatewayEnv(_, agent, name string) string {
	b, err := os.ReadFile(agentFile(agent, "gateway.pid"))
	if err != nil {
		return "<no gateway.pid: " + err.Error() + ">"
	}
	env, err := os.ReadFile("/proc/" + strings.TrimSpace(string(b)) + "/environ")
	if err != nil {
		return "<no gateway: " + err.Error() + ">"
	}
	for _, kv := range strings.Split(string(env), "\x00") {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}

// relayBase is where a gateway's environment names the platform's relays: the address that
// is the same for every platform inside the gateways' network namespaces, else the facade's.
func relayBase() string {
	if netns, _ := plat.Networks(); netns {
		return "http://" + local.PlatformAddr
	}
	return baseURL
}

// gatewayPID is the pid in the agent's gateway.pid ("" without one).
func gatewayPID(agent string) string {
	b, _ := os.ReadFile(agentFile(agent, "gateway.pid"))
	return strings.TrimSpace(string(b))
}

// agentFile is a file of the local runtime's dir of the agent (gateway.pid, gateway.log,
// state.json), on this host: the agent itself sees none of them.
func agentFile(agent, name string) string {
	dirs, _ := filepath.Glob(filepath.Join(runtimeStateDir, "agents", "*", agent))
	if len(dirs) != 1 {
		return filepath.Join(runtimeStateDir, "agents", "<"+strconv.Itoa(len(dirs))+" dirs of "+agent+">", name)
	}
	return filepath.Join(dirs[0], name)
}

// appendGatewayLog appends lines to the agent's gateway log, as its gateway would.
func appendGatewayLog(agent string, lines ...string) {
	GinkgoHelper()
	f, err := os.OpenFile(agentFile(agent, "gateway.log"), os.O_WRONLY|os.O_APPEND, 0)
	Expect(err).NotTo(HaveOccurred())
	_, err = f.WriteString(strings.Join(lines, "\n") + "\n")
	Expect(err).NotTo(HaveOccurred())
	Expect(f.Close()).To(Succeed())
}

func channelOf(r reply) map[string]any {
	c, _ := r.Body["channel"].(map[string]any)
	return c
}

func newAgentIn(tok, name string) string {
	GinkgoHelper()
	r := call("POST", "/v0/agents", tok, map[string]any{"name": name})
	Expect(r.Status).To(Equal(201), r.Raw)
	return agentOf(r)["id"].(string)
}

var _ = Describe("Channels", Ordered, func() {
	const ws = "channels-a"
	var (
		tok, agent, base string
		logs             *testenv.SyncBuffer
		stamp            = strconv.FormatInt(time.Now().UnixNano(), 36)
		tg1              = "123456789:tg-first-" + stamp
		tg2              = "123456789:tg-second-" + stamp
		slackBot         = suiteSlackBot // the suite's fake Slack knows them
		slackApp         = suiteSlackApp
	)
	channelPath := func(typ string) string { return base + "/channels/" + typ }

	BeforeAll(func() {
		logs = &testenv.SyncBuffer{}
		GinkgoWriter.TeeTo(logs)
		DeferCleanup(GinkgoWriter.ClearTeeWriters)
		workspace(ws, agentsv1.PlanPro, agentsv1.WorkspaceMember{UserID: "cat", Role: agentsv1.RoleOwner})
		tok = token(ws, "cat", "", auth.ScopeAll)
		agent = newAgentIn(tok, "Chatty")
		base = "/v0/agents/" + agent
	})

	It("refuses an unsupported channel on setup and on delete", func() {
		for _, typ := range []string{"irc", "TELEGRAM", "sms"} {
			for _, method := range []string{"POST", "DELETE"} {
				r := call(method, channelPath(typ), tok, map[string]any{"botToken": "x:1234567890"})
				Expect(r.Status).To(Equal(400), method+" "+typ+": "+r.Raw)
				Expect(r.v0Error()).To(Equal("Unsupported channel"))
			}
		}
	})

	DescribeTable("refuses an incomplete or malformed initial setup with 400",
		func(typ string, body any, msg string) {
			r := call("POST", channelPath(typ), tok, body)
			Expect(r.Status).To(Equal(400), r.Raw)
			Expect(r.v0Error()).To(Equal(msg))
			var list agentsv1.ChannelList
			Expect(k8sClient.List(ctx, &list, client.InNamespace(ws))).To(Succeed())
			Expect(list.Items).To(BeEmpty())
		},
		Entry("telegram without botToken", "telegram", map[string]any{"dmPolicy": "pairing"}, "botToken is required"),
		Entry("telegram with an empty botToken", "telegram", map[string]any{"botToken": ""}, "botToken is required"),
		Entry("discord without botToken", "discord", map[string]any{}, "botToken is required"),
		Entry("slack without appToken", "slack", map[string]any{"botToken": "xoxb-1234567890"}, "appToken is required for slack"),
		Entry("slack without botToken", "slack", map[string]any{"appToken": "xapp-1234567890"}, "botToken is required"),
		Entry("an unknown dmPolicy", "telegram", map[string]any{"botToken": "1:abcdefghij", "dmPolicy": "everyone"}, "Invalid dmPolicy"),
		Entry("a token with a newline", "telegram", map[string]any{"botToken": "1:abc\ndefghij"}, "Invalid botToken"),
		Entry("an empty allowFrom entry", "telegram", map[string]any{"botToken": "1:abcdefghij", "allowFrom": []string{" "}}, "Invalid allowFrom"),
		Entry("a body that is not JSON", "telegram", "botToken=1", "Invalid request body"),
	)

	It("needs channels:write and a paid plan", func() {
		noScope := token(ws, "cat", "", auth.ScopeAgentsRead, auth.ScopeAgentsWrite)
		r := call("POST", channelPath("telegram"), noScope, map[string]any{"botToken": tg1})
		Expect(r.Status).To(Equal(403), r.Raw)
		Expect(call("GET", base+"/channels", noScope, nil).Status).To(Equal(200))

		free := "channels-free"
		workspace(free, agentsv1.PlanFree, agentsv1.WorkspaceMember{UserID: "fay", Role: agentsv1.RoleOwner})
		freeTok := token(free, "fay", "", auth.ScopeAll)
		freeAgent := newAgentIn(freeTok, "Free")
		for _, method := range []string{"POST", "DELETE"} {
			r := call(method, "/v0/agents/"+freeAgent+"/channels/telegram", freeTok, map[string]any{"botToken": tg1})
			Expect(r.Status).To(Equal(403), method+": "+r.Raw)
			Expect(r.v0Error()).To(Equal("Channels require a paid plan"))
		}
		Expect(call("GET", "/v0/agents/"+freeAgent+"/channels", freeTok, nil).Status).To(Equal(200))
	})

	// relayToken is the relay token the agent's config holds for its telegram channel, which
	// points at the platform's relay: the bot token itself is never in the config.
	relayToken := func() string {
		GinkgoHelper()
		_, cfg := engineConfig(tok, agent)
		tg := channelConfig(cfg, "telegram")
		Expect(tg).To(HaveKeyWithValue("apiRoot", baseURL+"/relay/telegram"))
		rt, _ := tg["botToken"].(string)
		Expect(rt).To(HavePrefix("123456789:"), "the relay token keeps the bot's id")
		Expect(rt).NotTo(Or(Equal(tg1), Equal(tg2)))
		return rt
	}
	// getMe asks the bot about itself through the relay with the relay token rt, and returns
	// the relay's status and the token Telegram got (when it got the call).
	getMe := func(rt string) (int, string) {
		GinkgoHelper()
		before := len(telegram.Calls())
		resp, err := http.Get(baseURL + "/relay/telegram/bot" + rt + "/getMe")
		Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		if calls := telegram.Calls(); len(calls) > before {
			return resp.StatusCode, calls[len(calls)-1].Token
		}
		return resp.StatusCode, ""
	}

	It("sets up telegram through the platform's relay: the bot token stays in the platform", func() {
		telegram.SetToken(tg1)
		r := call("POST", channelPath("telegram"), tok, map[string]any{"botToken": tg1, "dmPolicy": "allowlist", "allowFrom": []string{"12345"}})
		Expect(r.Status).To(Equal(201), r.Raw)
		Expect(r.Raw).NotTo(ContainSubstring(tg1))
		Expect(channelOf(r)).To(HaveKeyWithValue("configured", true))
		Expect(channelOf(r)).To(HaveKeyWithValue("enabled", true))
		Expect(channelOf(r)).To(HaveKeyWithValue("botTokenHint", "****"+tg1[len(tg1)-4:]))

		raw, cfg := engineConfig(tok, agent)
		Expect(raw).NotTo(ContainSubstring(tg1))
		tg := channelConfig(cfg, "telegram")
		Expect(tg).To(HaveKeyWithValue("enabled", true))
		Expect(tg).To(HaveKeyWithValue("dmPolicy", "allowlist"))
		Expect(tg).To(HaveKeyWithValue("allowFrom", []any{"12345"}))
		rt := relayToken()
		shown := call("GET", base+"/config", tok, nil).Raw
		Expect(shown).NotTo(Or(ContainSubstring(tg1), ContainSubstring(rt)))

		ch := &agentsv1.Channel{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ws, Name: agent + "-telegram"}, ch)).To(Succeed())
		crJSON, _ := json.Marshal(ch)
		Expect(string(crJSON)).NotTo(ContainSubstring(tg1))
		Expect(ch.Spec.BotTokenRef).To(Equal(&agentsv1.SecretKeyReference{Name: agent + "-channel-telegram", Key: "botToken"}))
		Expect(ch.Status.BotTokenHint).To(Equal("****" + tg1[len(tg1)-4:]))
		cond := meta.FindStatusCondition(ch.Status.Conditions, agentsv1.ChannelConfigured)
		Expect(cond).NotTo(BeNil())
		Expect(cond.ObservedGeneration).To(Equal(ch.Generation))
		sec := &corev1.Secret{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ws, Name: agent + "-channel-telegram"}, sec)).To(Succeed())
		Expect(string(sec.Data["botToken"])).To(Equal(tg1))

		// The gateway calls Telegram through the relay, which swaps in the bot token; the
		// gateway's environment holds neither.
		status, got := getMe(rt)
		Expect(status).To(Equal(200))
		Expect(got).To(Equal(tg1))
		Expect(gatewayEnv(tok, agent, "AGENTPLANE_TELEGRAM_BOT_TOKEN")).To(BeEmpty())

		list := call("GET", base+"/channels", tok, nil)
		Expect(list.Status).To(Equal(200), list.Raw)
		Expect(list.Raw).NotTo(ContainSubstring(tg1))
		chans := list.Body["channels"].(map[string]any)
		Expect(chans).To(HaveLen(4))
		Expect(chans["telegram"]).To(HaveKeyWithValue("configured", true))
		Expect(chans["telegram"]).To(HaveKeyWithValue("dmPolicy", "allowlist"))
		Expect(chans["telegram"]).To(HaveKeyWithValue("allowFrom", []any{"12345"}))
		for _, typ := range []string{"slack", "discord", "whatsapp"} {
			Expect(chans[typ]).To(HaveKeyWithValue("configured", false), typ)
		}
	})

	It("keeps the stored token on an update without one", func() {
		rt := relayToken()
		r := call("POST", channelPath("telegram"), tok, map[string]any{"dmPolicy": "pairing", "allowFrom": []string{}})
		Expect(r.Status).To(Equal(200), r.Raw)
		Expect(channelOf(r)).To(HaveKeyWithValue("botTokenHint", "****"+tg1[len(tg1)-4:]))
		_, cfg := engineConfig(tok, agent)
		tg := channelConfig(cfg, "telegram")
		Expect(tg).To(HaveKeyWithValue("dmPolicy", "pairing"))
		Expect(tg).NotTo(HaveKey("allowFrom"))
		Expect(relayToken()).To(Equal(rt))
		status, got := getMe(rt)
		Expect([]any{status, got}).To(Equal([]any{200, tg1}))
	})

	It("relays with a new token of the same bot at once, under the same relay token", func() {
		rt := relayToken()
		telegram.SetToken(tg2) // revoked in BotFather: the old token no longer works
		r := call("POST", channelPath("telegram"), tok, map[string]any{"botToken": tg2})
		Expect(r.Status).To(Equal(200), r.Raw)
		Expect(channelOf(r)).To(HaveKeyWithValue("botTokenHint", "****"+tg2[len(tg2)-4:]))
		status, got := getMe(rt)
		Expect([]any{status, got}).To(Equal([]any{200, tg2}))
		Expect(relayToken()).To(Equal(rt))
		raw, _ := engineConfig(tok, agent)
		Expect(raw).NotTo(ContainSubstring(tg2))
	})

	It("disables a channel: the config keeps it, the relay refuses its token", func() {
		rt := relayToken()
		r := call("POST", channelPath("telegram"), tok, map[string]any{"enabled": false})
		Expect(r.Status).To(Equal(200), r.Raw)
		Expect(channelOf(r)).To(HaveKeyWithValue("enabled", false))
		_, cfg := engineConfig(tok, agent)
		Expect(channelConfig(cfg, "telegram")).To(HaveKeyWithValue("enabled", false))
		Eventually(func() []any { s, got := getMe(rt); return []any{s, got} }).Should(Equal([]any{401, ""}))
		Expect(call("POST", channelPath("telegram"), tok, map[string]any{"enabled": true}).Status).To(Equal(200))
		Eventually(func() []any { s, got := getMe(rt); return []any{s, got} }).Should(Equal([]any{200, tg2}))
	})

	It("keeps the channels the platform renders when the config is written whole", func() {
		got := call("GET", base+"/config", tok, nil)
		Expect(got.Status).To(Equal(200), got.Raw)
		cfg := got.Body["config"].(map[string]any)
		Expect(cfg).To(HaveKey("channels"))
		// The config as read back (channels included) and one without them store the same.
		for _, mut := range []func(map[string]any){func(map[string]any) {}, func(c map[string]any) { delete(c, "channels") }} {
			mut(cfg)
			cfg["tools"] = map[string]any{"profile": "coding"}
			r := call("PUT", base+"/config", tok, map[string]any{"config": cfg})
			Expect(r.Status).To(Equal(200), r.Raw)
			// The answer is the file as rendered: the user's keys and the platform's channel.
			Expect(r.Body["config"]).To(HaveKeyWithValue("tools", HaveKeyWithValue("profile", "coding")))
			Expect(channelConfig(r.Body["config"].(map[string]any), "telegram")).To(HaveKeyWithValue("apiRoot", baseURL+"/relay/telegram"))

			a := &agentsv1.Agent{}
			Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ws, Name: agent}, a)).To(Succeed())
			Expect(a.Spec.ConfigRef).To(Equal(&agentsv1.SecretKeyReference{Name: agent + "-config", Key: agentsv1.ConfigDataKey}))
			sec := &corev1.Secret{}
			Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ws, Name: agent + "-config"}, sec)).To(Succeed())
			stored := string(sec.Data[agentsv1.ConfigDataKey])
			Expect(stored).To(ContainSubstring(`"coding"`))
			Expect(stored).NotTo(Or(ContainSubstring("telegram"), ContainSubstring(`"auth"`)), "the channels and the gateway token are the platform's")
			Expect(a.Status.Config.SourceHash).To(Equal(agentsv1.ConfigSourceHash(sec.Data[agentsv1.ConfigDataKey])))
		}
		raw, _ := engineConfig(tok, agent)
		Expect(raw).NotTo(ContainSubstring(tg2))
	})

	It("sets up slack through the platform's relay: installs its plugin of the engine's version, holds the app's socket, keeps both tokens", func() {
		pid := gatewayPID(agent)
		r := call("POST", channelPath("slack"), tok, map[string]any{"botToken": slackBot, "appToken": slackApp, "dmPolicy": "open", "allowFrom": []string{"*"}})
		Expect(r.Status).To(Equal(201), r.Raw)
		Expect(channelOf(r)).To(HaveKeyWithValue("appTokenHint", "****"+slackApp[len(slackApp)-4:]))
		a := &agentsv1.Agent{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ws, Name: agent}, a)).To(Succeed())
		Expect(shell(tok, agent, "cat ../fake-plugins.json")).To(ContainSubstring(`"spec": "@openclaw/slack@` + a.Status.EngineVersion + `"`))
		raw, cfg := engineConfig(tok, agent)
		Expect(raw).NotTo(Or(ContainSubstring(slackBot), ContainSubstring(slackApp)))
		sl := channelConfig(cfg, "slack")
		relayTok := auth.NewSlackRelayToken(ws, agent, call("GET", base+"/gateway-token", tok, nil).Body["token"].(string))
		Expect(sl).To(HaveKeyWithValue("mode", "relay"))
		Expect(sl).To(HaveKeyWithValue("botToken", relayTok))
		Expect(sl).To(HaveKeyWithValue("relay", map[string]any{
			"url": "ws" + strings.TrimPrefix(baseURL, "http") + "/relay/slack/gateway", "authToken": relayTok, "gatewayId": ws + "/" + agent,
		}))
		Expect(sl).NotTo(HaveKey("appToken"))
		Expect(cfg).To(HaveKeyWithValue("plugins", HaveKeyWithValue("entries", HaveKeyWithValue("slack", HaveKeyWithValue("enabled", true)))))
		Expect(channelConfig(cfg, "telegram")).NotTo(BeNil(), "setting up slack kept telegram")
		Eventually(func() []string {
			return []string{gatewayEnv(tok, agent, "SLACK_API_URL"), gatewayEnv(tok, agent, "AGENTPLANE_SLACK_BOT_TOKEN"), gatewayEnv(tok, agent, "AGENTPLANE_SLACK_APP_TOKEN")}
		}).Should(Equal([]string{relayBase() + "/relay/slack/api/", "", ""}))
		Expect(gatewayPID(agent)).To(And(Equal(pid), Not(BeEmpty())), "a relayed channel changes only the config: no restart")
		// The platform holds the app's socket; the agent's Web API calls reach Slack with the bot
		// token.
		Eventually(slack.Connections).Should(Equal(1))
		req, _ := http.NewRequest("POST", baseURL+"/relay/slack/api/auth.test", nil)
		req.Header.Set("Authorization", "Bearer "+relayTok)
		resp, err := http.DefaultClient.Do(req)
		Expect(err).NotTo(HaveOccurred())
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		Expect(string(body)).To(ContainSubstring(`"ok":true`))

		// An update without tokens neither needs them nor reinstalls the plugin.
		r = call("POST", channelPath("slack"), tok, map[string]any{"dmPolicy": "pairing"})
		Expect(r.Status).To(Equal(200), r.Raw)
		ch := &agentsv1.Channel{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ws, Name: agent + "-slack"}, ch)).To(Succeed())
		Expect(meta.IsStatusConditionTrue(ch.Status.Conditions, "PluginInstalled")).To(BeTrue())
	})

	It("sets up discord through the platform's relay: installs its plugin of the engine's version, holds the bot's gateway connection, keeps its token", func() {
		bot := discord.BotToken()
		pid := gatewayPID(agent)
		r := call("POST", channelPath("discord"), tok, map[string]any{"botToken": bot, "dmPolicy": "open", "allowFrom": []string{"*"}})
		Expect(r.Status).To(Equal(201), r.Raw)
		Expect(r.Raw).NotTo(ContainSubstring(bot))
		a := &agentsv1.Agent{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ws, Name: agent}, a)).To(Succeed())
		Expect(shell(tok, agent, "cat ../fake-plugins.json")).To(ContainSubstring(`"spec": "@openclaw/discord@` + a.Status.EngineVersion + `"`))
		raw, cfg := engineConfig(tok, agent)
		Expect(raw).NotTo(ContainSubstring(bot))
		relayTok := auth.NewDiscordRelayToken(discord.Options().BotUserID, ws, agent, call("GET", base+"/gateway-token", tok, nil).Body["token"].(string))
		Expect(channelConfig(cfg, "discord")).To(HaveKeyWithValue("token", relayTok))
		Eventually(func() []string {
			return []string{gatewayEnv(tok, agent, "DISCORD_API_URL"), gatewayEnv(tok, agent, "AGENTPLANE_DISCORD_BOT_TOKEN")}
		}).Should(Equal([]string{relayBase() + "/relay/discord/api/v10", ""}))
		Expect(gatewayPID(agent)).To(And(Equal(pid), Not(BeEmpty())), "a relayed channel changes only the config: no restart")
		// The platform holds the bot's gateway connection; the agent's REST calls reach Discord
		// with the bot's token, and its gateway discovery names the relay's own gateway.
		Eventually(discord.Connections).Should(Equal(1))
		get := func(path, tok string) (int, string) {
			req, _ := http.NewRequest("GET", baseURL+"/relay/discord/api/v10"+path, nil)
			req.Header.Set("Authorization", "Bot "+tok)
			resp, err := http.DefaultClient.Do(req)
			Expect(err).NotTo(HaveOccurred())
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(body)
		}
		status, me := get("/users/@me", relayTok)
		Expect(status).To(Equal(200), me)
		Expect(me).To(ContainSubstring(discord.Options().BotUserID))
		_, gw := get("/gateway/bot", relayTok)
		Expect(gw).To(ContainSubstring(`"url":"ws` + strings.TrimPrefix(baseURL, "http") + `/relay/discord/gateway"`))
		status, _ = get("/users/@me", bot)
		Expect(status).To(Equal(401), "the bot's own token is not a relay token")

		// Removed: the token goes from the config, the platform ends the bot's connection and
		// refuses the relay token.
		Expect(call("DELETE", channelPath("discord"), tok, nil).Status).To(Equal(200))
		_, cfg = engineConfig(tok, agent)
		Expect(channelConfig(cfg, "discord")).To(BeNil())
		Eventually(discord.Connections).Should(Equal(0), "the platform ends a removed channel's bot connection")
		Eventually(func() int { s, _ := get("/users/@me", relayTok); return s }).Should(Equal(401))
	})

	It("sets up whatsapp without a token (it pairs by QR code)", func() {
		r := call("POST", channelPath("whatsapp"), tok, map[string]any{"dmPolicy": "allowlist", "allowFrom": []string{"+15555550123"}})
		Expect(r.Status).To(Equal(201), r.Raw)
		Expect(channelOf(r)).NotTo(HaveKey("botTokenHint"))
		Expect(shell(tok, agent, "cat ../fake-plugins.json")).To(MatchRegexp(`"spec": "@openclaw/whatsapp@[0-9.]+`), "the plugin of the engine's version")
		_, cfg := engineConfig(tok, agent)
		Expect(channelConfig(cfg, "whatsapp")).To(Equal(map[string]any{"enabled": true, "dmPolicy": "allowlist", "allowFrom": []any{"+15555550123"}}))
		Expect(call("DELETE", channelPath("whatsapp"), tok, nil).Status).To(Equal(200))
		_, cfg = engineConfig(tok, agent)
		Expect(channelConfig(cfg, "whatsapp")).To(BeNil())
	})

	It("removes channels from the config, the environment and the cluster", func() {
		rt := relayToken()
		r := call("DELETE", channelPath("telegram"), tok, nil)
		Expect(r.Status).To(Equal(200), r.Raw)
		Expect(r.Body).To(HaveKeyWithValue("deleted", true))
		_, cfg := engineConfig(tok, agent)
		Expect(channelConfig(cfg, "telegram")).To(BeNil())
		Expect(channelConfig(cfg, "slack")).NotTo(BeNil())
		err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ws, Name: agent + "-telegram"}, &agentsv1.Channel{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "channel: %v", err)
		err = k8sClient.Get(ctx, client.ObjectKey{Namespace: ws, Name: agent + "-channel-telegram"}, &corev1.Secret{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "token secret: %v", err)
		Eventually(func() int { s, _ := getMe(rt); return s }).Should(Equal(401))
		list := call("GET", base+"/channels", tok, nil)
		Expect(list.Body["channels"]).To(HaveKeyWithValue("telegram", HaveKeyWithValue("configured", false)))

		r = call("DELETE", channelPath("telegram"), tok, nil)
		Expect(r.Status).To(Equal(404), r.Raw)

		Expect(call("DELETE", channelPath("slack"), tok, nil).Status).To(Equal(200))
		Eventually(slack.Connections).Should(Equal(0), "the platform ends a removed channel's socket")
		_, cfg = engineConfig(tok, agent)
		Expect(cfg).NotTo(HaveKey("channels"))
		// The channel plugins' entries went with their channels (the platform's lean entries,
		// plugins it keeps off, stay): a relayed channel's plugin is off again.
		plugins, _ := cfg["plugins"].(map[string]any)
		Expect(plugins["entries"]).NotTo(HaveKey("telegram"))
		Expect(plugins["entries"]).To(HaveKeyWithValue("slack", Equal(map[string]any{"enabled": false})))
	})

	It("never shows a token in the platform's log or events", func() {
		var evs eventsv1.EventList
		Expect(k8sClient.List(ctx, &evs, client.InNamespace(ws))).To(Succeed())
		evJSON, _ := json.Marshal(evs)
		for _, secret := range []string{tg1, tg2, slackBot, slackApp} {
			Expect(logs.String()).NotTo(ContainSubstring(secret))
			Expect(string(evJSON)).NotTo(ContainSubstring(secret))
		}
		Expect(logs.String()).To(ContainSubstring("channel"), "the log was captured")
	})

	It("answers Configuration failed and Removal failed when the config cannot be edited", func() {
		other := newAgentIn(tok, "Broken config")
		path := "/v0/agents/" + other + "/channels/"
		shell(tok, other, "cp ../openclaw.json ../good.json && printf '{broken' > ../openclaw.json")
		r := call("POST", path+"telegram", tok, map[string]any{"botToken": tg1})
		Expect(r.Status).To(Equal(500), r.Raw)
		Expect(r.v0Error()).To(Equal("Configuration failed"))
		list := call("GET", "/v0/agents/"+other+"/channels", tok, nil)
		Expect(list.Body["channels"]).To(HaveKeyWithValue("telegram", HaveKeyWithValue("statusReason", "ConfigurationFailed")))

		shell(tok, other, "cp ../good.json ../openclaw.json")
		r = call("POST", path+"telegram", tok, map[string]any{})
		Expect(r.Status).To(Equal(200), r.Raw)
		Expect(channelOf(r)).To(HaveKeyWithValue("configured", true))

		shell(tok, other, "printf '{broken' > ../openclaw.json")
		r = call("DELETE", path+"telegram", tok, nil)
		Expect(r.Status).To(Equal(500), r.Raw)
		Expect(r.v0Error()).To(Equal("Removal failed"))
		shell(tok, other, "cp ../good.json ../openclaw.json")
		r = call("DELETE", path+"telegram", tok, nil)
		Expect(r.Status).To(Equal(200), r.Raw)
		_, cfg := engineConfig(tok, other)
		Expect(channelConfig(cfg, "telegram")).To(BeNil())

		// A plugin the registry does not have fails the setup too.
		sec := call("POST", "/v0/secrets", tok, map[string]string{"name": "fakeclaw-npm-missing", "value": "@openclaw/discord", "envName": "FAKECLAW_NPM_MISSING"})
		Expect(sec.Status).To(Equal(201), sec.Raw)
		Expect(call("POST", "/v0/agents/"+other+"/secrets", tok, map[string]any{"secretIds": []string{secretID(sec)}}).Status).To(Equal(200))
		Eventually(func() string { return gatewayEnv(tok, other, "FAKECLAW_NPM_MISSING") }).Should(Equal("@openclaw/discord"))
		r = call("POST", path+"discord", tok, map[string]any{"botToken": "discord-" + stamp})
		Expect(r.Status).To(Equal(500), r.Raw)
		Expect(r.v0Error()).To(Equal("Configuration failed"))
		list = call("GET", "/v0/agents/"+other+"/channels", tok, nil)
		Expect(list.Body["channels"]).To(HaveKeyWithValue("discord", HaveKeyWithValue("statusReason", "PluginInstallFailed")))
		_, cfg = engineConfig(tok, other)
		Expect(channelConfig(cfg, "discord")).To(BeNil())

		// Deleting the agent takes its channels and their token Secrets along.
		Expect(call("DELETE", "/v0/agents/"+other, tok, nil).Status).To(Equal(200))
		Eventually(func() bool {
			err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ws, Name: other + "-discord"}, &agentsv1.Channel{})
			return apierrors.IsNotFound(err)
		}).Should(BeTrue())
		Eventually(func() bool {
			err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ws, Name: other + "-channel-discord"}, &corev1.Secret{})
			return apierrors.IsNotFound(err)
		}).Should(BeTrue())
	})

	It("lets the agent's gateway token read its own channels but not set them up (a user's token must)", func() {
		gw := call("GET", base+"/gateway-token", tok, nil)
		Expect(gw.Status).To(Equal(200), gw.Raw)
		gwTok := gw.Body["token"].(string)
		Expect(call("GET", base+"/channels", gwTok, nil).Status).To(Equal(200))
		r := call("POST", channelPath("telegram"), gwTok, map[string]any{"botToken": tg1})
		Expect(r.Status).To(Equal(403), r.Raw)
		Expect(call("DELETE", channelPath("telegram"), gwTok, nil).Status).To(Equal(403))
		otherAgent := newAgentIn(tok, "Neighbour")
		r = call("POST", "/v0/agents/"+otherAgent+"/channels/telegram", gwTok, map[string]any{"botToken": tg1})
		Expect(r.Status).To(Equal(404), r.Raw)
		Expect(call("GET", "/v0/agents/"+otherAgent+"/channels", gwTok, nil).Status).To(Equal(404))
	})
})
