package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/controllers"
	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/adapters/engine/openclaw"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/rules/auth"
	"github.com/agentplane/agentplane/internal/scheme"
)

// fileRuntime holds one agent's config file and counts the accesses to it.
type fileRuntime struct {
	runtime.Runtime
	file          []byte
	reads, writes int
	err           error
}

func (f *fileRuntime) ReadFile(context.Context, *agentsv1.Agent, string) ([]byte, error) {
	f.reads++
	return f.file, f.err
}

func (f *fileRuntime) WriteFile(_ context.Context, _ *agentsv1.Agent, _ string, b []byte) error {
	f.writes++
	f.file = b
	return nil
}

// TestSyncConfig: what a pass of the Agent controller does to the engine config file, by the
// inputs it finds.
func TestSyncConfig(t *testing.T) {
	// The seed is what the engine's InitialConfig writes (the platform's lean defaults
	// included), so a pass with nothing to add renders the same file and writes nothing.
	seed, err := openclaw.New().InitialConfig(engine.Identity{Name: "a1"}, "gw-token")
	if err != nil {
		t.Fatal(err)
	}
	tg := func(gen int64) *agentsv1.Channel {
		return &agentsv1.Channel{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "a1-telegram", Generation: gen},
			Spec: agentsv1.ChannelSpec{AgentRef: agentsv1.LocalObjectReference{Name: "a1"}, Type: agentsv1.ChannelTelegram,
				BotTokenRef: &agentsv1.SecretKeyReference{Name: "t", Key: "bot"}},
		}
	}
	userSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "a1-config"},
		Data: map[string][]byte{agentsv1.ConfigDataKey: []byte(`{tools: {profile: "coding"}}`)}}
	withToken := map[string]string{controllers.EnvTelegramBotToken: "1:x"}
	for _, tc := range []struct {
		name          string
		objs          []client.Object
		configRef     bool
		env           map[string]string
		runtimeErr    error
		applied       string // status/reason of ConfigApplied
		reads, writes int
		rendered      int // channels in status.config.channels
		pending       int
	}{
		{"a new agent: the seed is the config, no file access", nil, false, nil, nil, "True/Rendered", 0, 0, 0, 0},
		{"a channel with its token is written", []client.Object{tg(1)}, false, withToken, nil, "True/Rendered", 1, 1, 1, 0},
		{"a channel whose token is not in the environment yet is not", []client.Object{tg(1)}, false, nil, nil, "True/Rendered", 1, 0, 0, 0},
		{"the user's config replaces the seed", []client.Object{userSecret}, true, nil, nil, "True/Rendered", 1, 1, 0, 0},
		{"a missing config Secret is reported, the file left alone", nil, true, nil, nil, "False/ConfigSourceNotFound", 0, 0, 0, 0},
		{"a home that cannot be reached waits, the channel pending", []client.Object{tg(2)}, false, withToken, runtime.ErrNotRunning, "False/WaitingForAgent", 1, 0, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(tc.objs...).
				WithIndex(&agentsv1.Channel{}, agentsv1.IndexAgentRef, func(o client.Object) []string {
					return []string{o.(*agentsv1.Channel).Spec.AgentRef.Name}
				}).Build()
			rt := &fileRuntime{file: seed, err: tc.runtimeErr}
			r := &Reconciler{Client: c, Runtime: rt, Engine: openclaw.New()}
			agent := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "a1"}}
			if tc.configRef {
				agent.Spec.ConfigRef = &agentsv1.SecretKeyReference{Name: "a1-config", Key: agentsv1.ConfigDataKey}
			}
			if _, err := r.syncConfig(context.Background(), agent, tc.env, "gw-token"); err != nil {
				t.Fatal(err)
			}
			cond := meta.FindStatusCondition(agent.Status.Conditions, agentsv1.AgentConfigApplied)
			if got := string(cond.Status) + "/" + cond.Reason; got != tc.applied {
				t.Errorf("ConfigApplied = %s (%s), want %s", got, cond.Message, tc.applied)
			}
			if rt.reads != tc.reads || rt.writes != tc.writes {
				t.Errorf("reads/writes = %d/%d, want %d/%d", rt.reads, rt.writes, tc.reads, tc.writes)
			}
			if st := agent.Status.Config; st != nil && (len(st.Channels) != tc.rendered || len(st.PendingChannels) != tc.pending) {
				t.Errorf("status.config = %+v", st)
			}
			// A second pass with the same inputs after a success costs nothing.
			if tc.applied == "True/Rendered" {
				reads := rt.reads
				if _, err := r.syncConfig(context.Background(), agent, tc.env, "gw-token"); err != nil || rt.reads != reads {
					t.Errorf("an unchanged pass read the file again (%v)", err)
				}
			}
		})
	}
}

// TestSyncConfigAfterLostStatusWrite: a pass renders the file but its status write is lost
// (a conflict with another writer of the status), so the status still names the render
// before. When the inputs return to that render (a channel's token removed and restored, a
// secret detached and attached again), the file is rendered again instead of trusting the
// stale hash.
func TestSyncConfigAfterLostStatusWrite(t *testing.T) {
	ch := &agentsv1.Channel{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "a1-telegram", Generation: 1},
		Spec: agentsv1.ChannelSpec{AgentRef: agentsv1.LocalObjectReference{Name: "a1"}, Type: agentsv1.ChannelTelegram,
			BotTokenRef: &agentsv1.SecretKeyReference{Name: "t", Key: "bot"}},
	}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(ch).
		WithIndex(&agentsv1.Channel{}, agentsv1.IndexAgentRef, func(o client.Object) []string {
			return []string{o.(*agentsv1.Channel).Spec.AgentRef.Name}
		}).Build()
	rt := &fileRuntime{file: []byte(`{"gateway":{"mode":"local","auth":{"mode":"token"}}}`)}
	r := &Reconciler{Client: c, Runtime: rt, Engine: openclaw.New()}
	agent := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "a1", UID: "u1"}}
	withToken := map[string]string{controllers.EnvTelegramBotToken: "1:x"}
	telegram := func() bool { return bytes.Contains(rt.file, []byte(`"telegram"`)) }
	sync := func(env map[string]string) {
		t.Helper()
		if _, err := r.syncConfig(context.Background(), agent, env, "gw-token"); err != nil {
			t.Fatal(err)
		}
	}

	sync(withToken)
	if !telegram() {
		t.Fatalf("the channel was not rendered: %s", rt.file)
	}
	written := agent.Status.DeepCopy()
	sync(nil) // the token left the environment: the channel leaves the file
	if telegram() {
		t.Fatalf("the channel stayed in the file: %s", rt.file)
	}
	agent.Status = *written // that pass's status write was lost
	sync(withToken)
	if !telegram() {
		t.Errorf("the stale status hash was trusted: the file lacks the channel: %s", rt.file)
	}
}

// testChannelRelay is the platform's relay on loopback (slack, discord: it routes Slack,
// Discord too).
type testChannelRelay struct{ slack, discord bool }

func (testChannelRelay) TelegramAPIRoot() string { return "http://127.0.0.1:8080/relay/telegram" }

func (r testChannelRelay) SlackRelay() (string, string, bool) {
	return "http://127.0.0.1:8080/relay/slack/api/", "ws://127.0.0.1:8080/relay/slack/gateway", r.slack
}

func (r testChannelRelay) DiscordRelay() (string, bool) {
	return "http://127.0.0.1:8080/relay/discord/api/v10", r.discord
}

func (testChannelRelay) Busy(types.NamespacedName) bool { return false }

// TestSyncConfigRelaysTelegram: with the platform's channel relay, the telegram channel is
// written with the relay's API root and the agent's relay token of the bot (derived from the
// gateway token), never the bot token, and the environment gets no token; a gateway token
// rotation rotates the relay token; a channel whose token Secret is missing is not written.
func TestSyncConfigRelaysTelegram(t *testing.T) {
	const bot = "123456789:real-bot-token"
	ch := &agentsv1.Channel{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "a1-telegram", Generation: 1},
		Spec: agentsv1.ChannelSpec{AgentRef: agentsv1.LocalObjectReference{Name: "a1"}, Type: agentsv1.ChannelTelegram,
			BotTokenRef: &agentsv1.SecretKeyReference{Name: "t", Key: "bot"}},
	}
	tokens := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "t"}, Data: map[string][]byte{"bot": []byte(bot)}}
	for _, withSecret := range []bool{true, false} {
		objs := []client.Object{ch.DeepCopy()}
		if withSecret {
			objs = append(objs, tokens.DeepCopy())
		}
		c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).
			WithIndex(&agentsv1.Channel{}, agentsv1.IndexAgentRef, func(o client.Object) []string {
				return []string{o.(*agentsv1.Channel).Spec.AgentRef.Name}
			}).Build()
		relay := testChannelRelay{}
		rt := &fileRuntime{file: []byte(`{"gateway":{"mode":"local","auth":{"mode":"token"}}}`)}
		r := &Reconciler{Client: c, APIReader: c, Runtime: rt, Engine: openclaw.New(), ChannelRelay: relay}
		agent := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "a1", UID: "u1"}}

		env := map[string]string{}
		if err := (&SecretEnv{Client: c, APIReader: c, ChannelRelay: relay}).addChannelEnv(context.Background(), agent, env); err != nil || len(env) != 0 {
			t.Fatalf("the environment of a relayed channel: %v %v", env, err)
		}
		if _, err := r.syncConfig(context.Background(), agent, env, "gw-token"); err != nil {
			t.Fatal(err)
		}
		if !withSecret {
			if bytes.Contains(rt.file, []byte("telegram")) || len(agent.Status.Config.Channels) != 0 {
				t.Errorf("a channel without its bot token was written: %s (status %+v)", rt.file, agent.Status.Config)
			}
			continue
		}
		telegram := func() map[string]any {
			var cfg struct {
				Channels map[string]map[string]any `json:"channels"`
			}
			if err := json.Unmarshal(rt.file, &cfg); err != nil {
				t.Fatal(err)
			}
			return cfg.Channels["telegram"]
		}
		if tg := telegram(); tg["apiRoot"] != relay.TelegramAPIRoot() || tg["botToken"] != auth.NewTelegramRelayToken("123456789", "ws", "a1", "gw-token") || bytes.Contains(rt.file, []byte(bot)) {
			t.Fatalf("the relayed channel: %s", rt.file)
		}
		if _, err := r.syncConfig(context.Background(), agent, env, "rotated"); err != nil {
			t.Fatal(err)
		}
		if telegram()["botToken"] != auth.NewTelegramRelayToken("123456789", "ws", "a1", "rotated") {
			t.Errorf("the relay token did not follow the gateway token: %s", rt.file)
		}
		// A token without a bot id (the REST door does not insist on one) is relayed too: the
		// channel is written, so its setup does not wait for a render that never comes.
		sec := tokens.DeepCopy()
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(sec), sec); err != nil {
			t.Fatal(err)
		}
		sec.Data["bot"] = []byte("not-a-telegram-token")
		if err := c.Update(context.Background(), sec); err != nil {
			t.Fatal(err)
		}
		if _, err := r.syncConfig(context.Background(), agent, env, "rotated"); err != nil {
			t.Fatal(err)
		}
		if telegram()["botToken"] != auth.NewTelegramRelayToken("0", "ws", "a1", "rotated") {
			t.Errorf("a token without a bot id: %s", rt.file)
		}
	}
}

// TestSyncConfigRelaysSlack: where the relay routes Slack, the slack channel is written in the
// engine's relay mode (the relay's websocket, the agent's Slack relay token), the agent's
// environment gets nothing (the relay's Web API origin is the runtime's, in every gateway's
// from its start) and neither of the app's tokens; until its plugin is
// installed, or while it lacks its app token, it is not written; where the relay cannot route
// Slack, the channel keeps Socket Mode with its tokens in the environment.
func TestSyncConfigRelaysSlack(t *testing.T) {
	const bot, app = "xoxb-real-bot", "xapp-real-app"
	ch := &agentsv1.Channel{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "a1-slack", Generation: 1},
		Spec: agentsv1.ChannelSpec{AgentRef: agentsv1.LocalObjectReference{Name: "a1"}, Type: agentsv1.ChannelSlack,
			BotTokenRef: &agentsv1.SecretKeyReference{Name: "t", Key: "bot"}, AppTokenRef: &agentsv1.SecretKeyReference{Name: "t", Key: "app"}},
		Status: agentsv1.ChannelStatus{Conditions: []metav1.Condition{{Type: agentsv1.ChannelPluginInstalled, Status: metav1.ConditionTrue, Reason: "Installed"}}},
	}
	for _, c := range []struct {
		name      string
		relay     testChannelRelay
		installed bool
		tokens    map[string][]byte
		want      string // channels.slack.mode ("" : not written)
	}{
		{"relayed", testChannelRelay{slack: true}, true, map[string][]byte{"bot": []byte(bot), "app": []byte(app)}, "relay"},
		{"plugin not installed", testChannelRelay{slack: true}, false, map[string][]byte{"bot": []byte(bot), "app": []byte(app)}, ""},
		{"no app token", testChannelRelay{slack: true}, true, map[string][]byte{"bot": []byte(bot)}, ""},
		{"not relayed", testChannelRelay{}, true, map[string][]byte{"bot": []byte(bot), "app": []byte(app)}, "socket"},
	} {
		t.Run(c.name, func(t *testing.T) {
			chc := ch.DeepCopy()
			if !c.installed {
				chc.Status.Conditions = nil
			}
			rt, env := syncChannel(t, chc, c.tokens, c.relay)
			var cfg struct {
				Channels map[string]map[string]any `json:"channels"`
			}
			if err := json.Unmarshal(rt.file, &cfg); err != nil {
				t.Fatal(err)
			}
			sl := cfg.Channels["slack"]
			if got, _ := sl["mode"].(string); got != c.want {
				t.Fatalf("mode %q, want %q: %s", got, c.want, rt.file)
			}
			api, socket, _ := c.relay.SlackRelay()
			switch c.want {
			case "relay":
				tok := auth.NewSlackRelayToken("ws", "a1", "gw-token")
				relay, _ := sl["relay"].(map[string]any)
				if sl["botToken"] != tok || relay["url"] != socket || relay["authToken"] != tok || relay["gatewayId"] != "ws/a1" || sl["appToken"] != nil {
					t.Fatalf("the relayed channel: %s", rt.file)
				}
				if len(env) != 0 || api == "" {
					// The relay's base is the runtime's, in every gateway's environment from
					// its start (local.Options.GatewayEnv): the channel adds nothing to restart for.
					t.Fatalf("the environment of a relayed slack channel: %v", env)
				}
			case "socket":
				if env[controllers.EnvSlackBotToken] != bot || env[controllers.EnvSlackAppToken] != app || env[openclaw.SlackAPIURLEnv] != "" {
					t.Fatalf("the environment of an unrelayed slack channel: %v", env)
				}
			}
			if bytes.Contains(rt.file, []byte(bot)) || bytes.Contains(rt.file, []byte(app)) {
				t.Fatalf("a token in the config: %s", rt.file)
			}
			if c.want == "relay" || c.want == "" {
				for k, v := range env {
					if v == bot || v == app {
						t.Fatalf("a token in the environment: %s", k)
					}
				}
			}
		})
	}
}

// TestSyncConfigRelaysDiscord: where the relay routes Discord, the discord channel is written
// with the agent's relay token of the bot its token names (a Discord token's shape, the bot id
// in its first segment; "0" for a token without one) and the agent's environment gets nothing
// (the relay's REST base is the runtime's) and no token; until its plugin is installed, or
// while its token Secret is missing, it is
// not written; where the relay cannot route Discord, the channel keeps its token's reference
// with the token in the environment.
func TestSyncConfigRelaysDiscord(t *testing.T) {
	const bot = "MTIzNDU2Nzg5MDEyMzQ1Njc4.GhIjKl.real-discord-secret" // bot id 123456789012345678
	ch := &agentsv1.Channel{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "a1-discord", Generation: 1},
		Spec: agentsv1.ChannelSpec{AgentRef: agentsv1.LocalObjectReference{Name: "a1"}, Type: agentsv1.ChannelDiscord,
			BotTokenRef: &agentsv1.SecretKeyReference{Name: "t", Key: "bot"}},
		Status: agentsv1.ChannelStatus{Conditions: []metav1.Condition{{Type: agentsv1.ChannelPluginInstalled, Status: metav1.ConditionTrue, Reason: "Installed"}}},
	}
	for _, c := range []struct {
		name      string
		relay     testChannelRelay
		installed bool
		tokens    map[string][]byte
		want      any // channels.discord.token (nil: not written)
	}{
		{"relayed", testChannelRelay{discord: true}, true, map[string][]byte{"bot": []byte(bot)},
			auth.NewDiscordRelayToken("123456789012345678", "ws", "a1", "gw-token")},
		{"a token without a bot id", testChannelRelay{discord: true}, true, map[string][]byte{"bot": []byte("not-a-discord-token")},
			auth.NewDiscordRelayToken("0", "ws", "a1", "gw-token")},
		{"plugin not installed", testChannelRelay{discord: true}, false, map[string][]byte{"bot": []byte(bot)}, nil},
		{"no bot token", testChannelRelay{discord: true}, true, map[string][]byte{}, nil},
		{"not relayed", testChannelRelay{slack: true}, true, map[string][]byte{"bot": []byte(bot)},
			map[string]any{"source": "env", "provider": "default", "id": controllers.EnvDiscordBotToken}},
	} {
		t.Run(c.name, func(t *testing.T) {
			chc := ch.DeepCopy()
			if !c.installed {
				chc.Status.Conditions = nil
			}
			rt, env := syncChannel(t, chc, c.tokens, c.relay)
			var cfg struct {
				Channels map[string]map[string]any `json:"channels"`
			}
			if err := json.Unmarshal(rt.file, &cfg); err != nil {
				t.Fatal(err)
			}
			dc, written := cfg.Channels["discord"]
			if got := dc["token"]; !written && c.want != nil || written && !equalJSON(got, c.want) {
				t.Fatalf("token %#v, want %#v: %s", got, c.want, rt.file)
			}
			if bytes.Contains(rt.file, []byte(bot)) || bytes.Contains(rt.file, []byte("real-discord-secret")) {
				t.Fatalf("the bot token in the config: %s", rt.file)
			}
			api, relayed := c.relay.DiscordRelay()
			if relayed {
				if len(env) != 0 || api == "" {
					t.Fatalf("the environment of a relayed discord channel: %v", env)
				}
				if tok, _ := dc["token"].(string); written {
					if b, ns, name, ok := auth.ParseDiscordRelayToken(tok); !ok || ns != "ws" || name != "a1" || !auth.VerifyDiscordRelayToken(tok, b, ns, name, "gw-token") {
						t.Fatalf("the relay token %q does not verify", tok)
					}
				}
			} else if env[controllers.EnvDiscordBotToken] != bot || env[openclaw.DiscordAPIURLEnv] != "" {
				t.Fatalf("the environment of an unrelayed discord channel: %v", env)
			}
		})
	}
}

// equalJSON compares a decoded JSON value with want through their encodings.
func equalJSON(got, want any) bool {
	a, err1 := json.Marshal(got)
	b, err2 := json.Marshal(want)
	return err1 == nil && err2 == nil && bytes.Equal(a, b)
}

// syncChannel renders agent ws/a1's config with its one channel ch, whose token Secret "t"
// holds tokens, where the relay routes as relay does: the file written and the gateway's
// environment.
func syncChannel(t *testing.T, ch *agentsv1.Channel, tokens map[string][]byte, relay testChannelRelay) (*fileRuntime, map[string]string) {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(scheme.New()).
		WithObjects(ch, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "t"}, Data: tokens}).
		WithIndex(&agentsv1.Channel{}, agentsv1.IndexAgentRef, func(o client.Object) []string {
			return []string{o.(*agentsv1.Channel).Spec.AgentRef.Name}
		}).Build()
	rt := &fileRuntime{file: []byte(`{"gateway":{"mode":"local","auth":{"mode":"token"}}}`)}
	r := &Reconciler{Client: c, APIReader: c, Runtime: rt, Engine: openclaw.New(), ChannelRelay: relay}
	agent := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "a1", UID: "u1"}}
	env := map[string]string{}
	if err := (&SecretEnv{Client: c, APIReader: c, ChannelRelay: relay}).addChannelEnv(context.Background(), agent, env); err != nil {
		t.Fatal(err)
	}
	if _, err := r.syncConfig(context.Background(), agent, env, "gw-token"); err != nil {
		t.Fatal(err)
	}
	return rt, env
}
