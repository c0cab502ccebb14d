package controllers_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	agentctrl "github.com/agentplane/agentplane/controllers/agent"
	channelctrl "github.com/agentplane/agentplane/controllers/channel"
	"github.com/agentplane/agentplane/internal/adapters/engine/openclaw"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// memRuntime keeps agents' files in memory and records engine commands.
type memRuntime struct {
	mu         sync.Mutex
	files      map[string][]byte
	execs      []string
	execResult runtime.ExecResult
	// execQueue answers the next commands of an agent (by name), one each, the last one every
	// command after (a channel may retry its install any time: another pass can come first).
	execQueue  map[string][]runtime.ExecResult
	notRunning bool
	// desired is the last Desired of each agent (namespace/name).
	desired map[string]runtime.Desired
}

func (m *memRuntime) key(a *agentsv1.Agent, path string) string {
	return a.Namespace + "/" + a.Name + "/" + path
}

func (m *memRuntime) Name() string { return "mem" }
func (m *memRuntime) Ensure(_ context.Context, a *agentsv1.Agent, d runtime.Desired) (runtime.Observed, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.desired == nil {
		m.desired = map[string]runtime.Desired{}
	}
	m.desired[a.Namespace+"/"+a.Name] = d
	if m.notRunning {
		return runtime.Observed{Phase: runtime.PhaseCrashed}, nil
	}
	return runtime.Observed{Phase: runtime.PhaseRunning}, nil
}
func (m *memRuntime) Delete(context.Context, *agentsv1.Agent) error { return nil }
func (m *memRuntime) Exec(_ context.Context, a *agentsv1.Agent, req runtime.ExecRequest) (runtime.ExecResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.notRunning {
		return runtime.ExecResult{}, runtime.ErrNotRunning
	}
	m.execs = append(m.execs, a.Name+": "+strings.Join(req.Argv, " "))
	if q := m.execQueue[a.Name]; len(q) > 0 {
		if len(q) > 1 {
			m.execQueue[a.Name] = q[1:]
		}
		return q[0], nil
	}
	return m.execResult, nil
}
func (m *memRuntime) ReadFile(_ context.Context, a *agentsv1.Agent, path string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.notRunning {
		return nil, runtime.ErrNotRunning
	}
	b, ok := m.files[m.key(a, path)]
	if !ok {
		return nil, runtime.ErrNotFound
	}
	return b, nil
}
func (m *memRuntime) WriteFile(_ context.Context, a *agentsv1.Agent, path string, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.files[m.key(a, path)] = data
	return nil
}
func (m *memRuntime) ArchiveWorkspace(context.Context, *agentsv1.Agent, io.Writer) error {
	return errors.New("not supported")
}
func (m *memRuntime) RestoreWorkspace(context.Context, *agentsv1.Agent, io.Reader) error {
	return errors.New("not supported")
}

// Logs answers the engine commands run so far as the gateway's output.
func (m *memRuntime) Logs(ctx context.Context, _ *agentsv1.Agent, req runtime.LogRequest) ([]string, error) {
	m.mu.Lock()
	lines := append([]string(nil), m.execs[max(len(m.execs)-req.Tail, 0):]...)
	m.mu.Unlock()
	if req.Follow == nil {
		return lines, nil
	}
	for _, l := range lines {
		if !req.Follow(l) {
			return nil, nil
		}
	}
	<-ctx.Done()
	return nil, nil
}

func (m *memRuntime) set(f func(m *memRuntime)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f(m)
}

// The Agent controller (which renders the engine config) and the Channel controller run in
// their own manager on an in-memory runtime for these specs.
var _ = Describe("Channel controller", Ordered, func() {
	var (
		rt   *memRuntime
		stop context.CancelFunc
		ns   string
		cfg  = openclaw.New().Layout().ConfigPath
	)
	const wait = 20 * time.Second

	BeforeAll(func() {
		rt = &memRuntime{files: map[string][]byte{}}
		mgr := newManager()
		Expect((&channelctrl.Reconciler{
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Runtime: rt, Engine: openclaw.New(),
			PluginRetry: 50 * time.Millisecond,
		}).SetupWithManager(mgr)).To(Succeed())
		Expect((&agentctrl.Reconciler{
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Runtime: rt, Engine: openclaw.New(),
			Admission: testAdmitter(mgr),
			Env:       &agentctrl.SecretEnv{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()},
		}).SetupWithManager(mgr)).To(Succeed())
		var mctx context.Context
		mctx, stop = context.WithCancel(ctx)
		go func() {
			defer GinkgoRecover()
			Expect(mgr.Start(mctx)).To(Succeed())
		}()
		ns = agentWorkspace("channel-ctrl", 50)
	})
	AfterAll(func() { stop() })

	// agentWithConfig creates an agent whose home holds the file a runtime seeds (with what
	// the runtime and the engine own: the gateway token, meta).
	agentWithConfig := func(name string) *agentsv1.Agent {
		a := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		Expect(rt.WriteFile(ctx, a, cfg, []byte(`{"gateway":{"mode":"local","auth":{"mode":"token","token":"gw-1"}},"meta":{"lastTouchedVersion":"2026.9.6"}}`))).To(Succeed())
		return createAgent(ns, name)
	}
	// tokenSecret creates a channel's token Secret, labelled as the facade labels it.
	tokenSecret := func(name, agent string, data map[string]string) {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-tokens", Labels: map[string]string{
			agentsv1.LabelChannelTokensOf: name, agentsv1.LabelAgent: agent,
		}}, StringData: data}
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
	}
	newChannel := func(name, agent string, t agentsv1.ChannelType, mut func(*agentsv1.Channel)) *agentsv1.Channel {
		ch := &agentsv1.Channel{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: agentsv1.ChannelSpec{AgentRef: agentsv1.LocalObjectReference{Name: agent}, Type: t,
				BotTokenRef: &agentsv1.SecretKeyReference{Name: name + "-tokens", Key: "bot"}},
		}
		if mut != nil {
			mut(ch)
		}
		Expect(k8sClient.Create(ctx, ch)).To(Succeed())
		return ch
	}
	setDMPolicy := func(ch *agentsv1.Channel, p agentsv1.DMPolicy) {
		patch := client.MergeFrom(ch.DeepCopy())
		ch.Spec.DMPolicy = p
		Expect(k8sClient.Patch(ctx, ch, patch)).To(Succeed())
	}
	condition := func(ch *agentsv1.Channel) func() string {
		return func() string {
			got := &agentsv1.Channel{}
			if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(ch), got); err != nil {
				return err.Error()
			}
			c := meta.FindStatusCondition(got.Status.Conditions, agentsv1.ChannelConfigured)
			if c == nil || c.ObservedGeneration != got.Generation {
				return "pending"
			}
			return string(c.Status) + "/" + c.Reason
		}
	}
	// ready is the Ready condition of the channel's latest acknowledged generation.
	ready := func(ch *agentsv1.Channel) func() string {
		return func() string {
			got := &agentsv1.Channel{}
			if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(ch), got); err != nil {
				return err.Error()
			}
			c := meta.FindStatusCondition(got.Status.Conditions, agentsv1.ConditionReady)
			if c == nil || got.Status.ObservedGeneration != got.Generation || c.ObservedGeneration != got.Generation {
				return "pending"
			}
			return string(c.Status) + "/" + c.Reason
		}
	}
	fileOf := func(a *agentsv1.Agent) map[string]any {
		b, err := rt.ReadFile(ctx, a, cfg)
		Expect(err).NotTo(HaveOccurred())
		var m map[string]any
		Expect(json.Unmarshal(b, &m)).To(Succeed())
		return m
	}
	channelsIn := func(a *agentsv1.Agent) map[string]any {
		c, _ := fileOf(a)["channels"].(map[string]any)
		return c
	}
	configApplied := func(a *agentsv1.Agent) func() string {
		return func() string {
			c := meta.FindStatusCondition(getAgent(a).Status.Conditions, agentsv1.AgentConfigApplied)
			if c == nil {
				return "none"
			}
			return string(c.Status) + "/" + c.Reason
		}
	}

	It("configures the oldest Channel of a type and marks a younger one Duplicate", func() {
		a := agentWithConfig("dup-agent")
		tokenSecret("dup-a", a.Name, map[string]string{"bot": "111:first-token"})
		tokenSecret("dup-b", a.Name, map[string]string{"bot": "222:second-token"})
		first := newChannel("dup-a", a.Name, agentsv1.ChannelTelegram, nil)
		Eventually(condition(first), wait).Should(Equal("True/Configured"))
		second := newChannel("dup-b", a.Name, agentsv1.ChannelTelegram, nil)
		Eventually(condition(second), wait).Should(Equal("False/Duplicate"))
		Expect(ready(first)()).To(Equal("True/Configured"))
		Expect(ready(second)()).To(Equal("False/Duplicate"))
		Expect(getAgent(a).Status.Config.Channels).To(Equal([]agentsv1.RenderedChannel{{Type: agentsv1.ChannelTelegram, Name: "dup-a", Generation: 1}}))

		env := &agentctrl.SecretEnv{Client: k8sClient, APIReader: k8sClient}
		got, _, err := env.Resolve(ctx, a)
		Expect(err).NotTo(HaveOccurred())
		Expect(got).To(HaveKeyWithValue("AGENTPLANE_TELEGRAM_BOT_TOKEN", "111:first-token"))

		Expect(k8sClient.Delete(ctx, second)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(second), &agentsv1.Channel{}))
		}, wait).Should(BeTrue())
		Expect(channelsIn(a)).To(HaveKey("telegram"), "deleting the duplicate kept the config entry")
	})

	It("renders the user's config with the channels and what the runtime and the engine own", func() {
		a := agentWithConfig("render-agent")
		tokenSecret("render", a.Name, map[string]string{"bot": "444:render-token"})
		ch := newChannel("render", a.Name, agentsv1.ChannelTelegram, nil)
		Eventually(condition(ch), wait).Should(Equal("True/Configured"))

		// The user's config, as kubectl applies it: a Secret and spec.configRef.
		user := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "render-agent-mine"},
			StringData: map[string]string{"cfg": `{gateway: {mode: "local"}, tools: {profile: "coding"}}`}}
		Expect(k8sClient.Create(ctx, user)).To(Succeed())
		patch := client.MergeFrom(getAgent(a))
		withRef := getAgent(a)
		withRef.Spec.ConfigRef = &agentsv1.SecretKeyReference{Name: user.Name, Key: "cfg"}
		Expect(k8sClient.Patch(ctx, withRef, patch)).To(Succeed())
		Eventually(func() any { return fileOf(a)["tools"] }, wait).Should(HaveKeyWithValue("profile", "coding"))
		m := fileOf(a)
		Expect(m).To(HaveKeyWithValue("gateway", HaveKeyWithValue("auth", HaveKeyWithValue("token", "gw-1"))), "the runtime's gateway token stays")
		Expect(m).To(HaveKeyWithValue("meta", HaveKeyWithValue("lastTouchedVersion", "2026.9.6")), "the engine's meta stays")
		Expect(channelsIn(a)).To(HaveKeyWithValue("telegram", HaveKeyWithValue("botToken", HaveKeyWithValue("id", "AGENTPLANE_TELEGRAM_BOT_TOKEN"))))
		Expect(configApplied(a)()).To(Equal("True/Rendered"))
		// The file is written during the pass, the status patched at its end.
		Eventually(func() string { return getAgent(a).Status.Config.SourceHash }, wait).
			Should(Equal(agentsv1.ConfigSourceHash([]byte(`{gateway: {mode: "local"}, tools: {profile: "coding"}}`))))

		// Nothing but the controller writes the file: a hand edit stays until the inputs change.
		Expect(rt.WriteFile(ctx, a, cfg, []byte(`{"gateway":{"mode":"local","auth":{"mode":"token","token":"gw-1"}}}`))).To(Succeed())
		setDMPolicy(ch, "open")
		Eventually(func() any { return channelsIn(a)["telegram"] }, wait).Should(HaveKeyWithValue("dmPolicy", "open"))
		Expect(fileOf(a)["tools"]).To(HaveKeyWithValue("profile", "coding"))
		Eventually(condition(ch), wait).Should(Equal("True/Configured"))

		// A config Secret that goes away is reported on the agent and its channel.
		Expect(k8sClient.Delete(ctx, user)).To(Succeed())
		setDMPolicy(ch, "pairing")
		Eventually(configApplied(a), wait).Should(Equal("False/ConfigSourceNotFound"))
		Eventually(condition(ch), wait).Should(Equal("False/ConfigurationFailed"))
	})

	It("waits for a missing token, then configures the channel", func() {
		a := agentWithConfig("tok-agent")
		ch := newChannel("tok", a.Name, agentsv1.ChannelTelegram, nil)
		Eventually(condition(ch), wait).Should(Equal("False/TokenNotFound"))
		Expect(channelsIn(a)).To(BeNil())
		tokenSecret("tok", a.Name, map[string]string{"bot": "333:late-token"})
		Eventually(condition(ch), wait).Should(Equal("True/Configured"))
		Expect(channelsIn(a)).To(HaveKey("telegram"))
		got := &agentsv1.Channel{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(ch), got)).To(Succeed())
		Expect(got.Status.BotTokenHint).To(Equal("****oken"))
	})

	It("reports a missing agent, and an agent it cannot reach without forgetting the config", func() {
		lost := newChannel("lost", "no-such-agent", agentsv1.ChannelTelegram, nil)
		Eventually(condition(lost), wait).Should(Equal("False/AgentNotFound"))

		a := agentWithConfig("far-agent")
		tokenSecret("far", a.Name, map[string]string{"bot": "444:far-token"})
		ch := newChannel("far", a.Name, agentsv1.ChannelTelegram, nil)
		Eventually(condition(ch), wait).Should(Equal("True/Configured"))
		rt.set(func(m *memRuntime) { m.notRunning = true })
		DeferCleanup(func() { rt.set(func(m *memRuntime) { m.notRunning = false }) })
		// The agent notices (a restart request makes it look), then the channel's change waits.
		restart := client.MergeFrom(getAgent(a))
		again := getAgent(a)
		again.Spec.RestartRequestedAt = &metav1.Time{Time: time.Now()}
		Expect(k8sClient.Patch(ctx, again, restart)).To(Succeed())
		Eventually(func() agentsv1.AgentPhase { return getAgent(a).Status.Phase }, wait).Should(Equal(agentsv1.AgentNotRunning))
		setDMPolicy(ch, "open")
		Eventually(condition(ch), wait).Should(Equal("False/AgentNotReady"))
		got := &agentsv1.Channel{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(ch), got)).To(Succeed())
		Expect(got.Status.Configured).To(BeTrue())
		Expect(configApplied(a)()).To(Equal("False/WaitingForAgent"))

		// Once the gateway runs again, the change is rendered.
		rt.set(func(m *memRuntime) { m.notRunning = false })
		again = getAgent(a)
		restart = client.MergeFrom(again.DeepCopy())
		again.Spec.RestartRequestedAt = &metav1.Time{Time: time.Now().Add(time.Second)}
		Expect(k8sClient.Patch(ctx, again, restart)).To(Succeed())
		Eventually(condition(ch), wait).Should(Equal("True/Configured"))
		Expect(channelsIn(a)["telegram"]).To(HaveKeyWithValue("dmPolicy", "open"))
	})

	It("installs an external plugin once before rendering it; an already installed one counts as installed", func() {
		a := agentWithConfig("plug-agent")
		tokenSecret("plug", a.Name, map[string]string{"bot": "discord-token-1"})
		rt.set(func(m *memRuntime) {
			m.execResult = runtime.ExecResult{ExitCode: 1, Stderr: []byte("plugin already exists: /x (delete it first)\n")}
		})
		ch := newChannel("plug", a.Name, agentsv1.ChannelDiscord, func(c *agentsv1.Channel) { c.Spec.DMPolicy = "pairing" })
		Eventually(condition(ch), wait).Should(Equal("True/Configured"))
		Expect(fileOf(a)).To(HaveKeyWithValue("plugins", HaveKeyWithValue("entries", HaveKeyWithValue("discord", HaveKeyWithValue("enabled", true)))))
		setDMPolicy(ch, "disabled")
		Eventually(func() any { return channelsIn(a)["discord"] }, wait).Should(HaveKeyWithValue("dmPolicy", "disabled"))
		Eventually(ready(ch), wait).Should(Equal("True/Configured"), "the plugin is installed and the channel configured")
		rt.mu.Lock()
		defer rt.mu.Unlock()
		Expect(rt.execs).To(Equal([]string{"plug-agent: plugins install @openclaw/discord"}))
	})

	It("waits, not fails, when the install finds the agent's gateway down, and installs once it answers", func() {
		a := agentWithConfig("gwdown-agent")
		tokenSecret("gwdown", a.Name, map[string]string{"bot": "discord-token-2"})
		rt.set(func(m *memRuntime) {
			m.execResult = runtime.ExecResult{ExitCode: 1, Stderr: []byte("Gateway not reachable at ws://127.0.0.1:18789 (ECONNREFUSED).\nStart it with `openclaw gateway run`\n")}
		})
		ch := newChannel("gwdown", a.Name, agentsv1.ChannelDiscord, func(c *agentsv1.Channel) { c.Spec.DMPolicy = "pairing" })
		got := &agentsv1.Channel{}
		Eventually(func() string {
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(ch), got)).To(Succeed())
			if c := meta.FindStatusCondition(got.Status.Conditions, agentsv1.ChannelConfigured); c != nil {
				return string(c.Status) + "/" + c.Reason + ": " + c.Message
			}
			return ""
		}, wait).Should(And(HavePrefix("Unknown/AgentNotReady: "), ContainSubstring("ECONNREFUSED")), "a setup request keeps waiting")
		Expect(meta.FindStatusCondition(got.Status.Conditions, agentsv1.ChannelPluginInstalled)).To(BeNil(), "the plugin is not at fault")

		rt.set(func(m *memRuntime) { m.execResult = runtime.ExecResult{} })
		setDMPolicy(ch, "open") // any change reconciles it at once
		Eventually(condition(ch), wait).Should(Equal("True/Configured"))
		Expect(channelsIn(a)).To(HaveKey("discord"))
	})

	It("reports a failed plugin install and leaves the channel out of the config", func() {
		a := agentWithConfig("badplug-agent")
		tokenSecret("badplug", a.Name, map[string]string{"bot": "xoxb-1", "app": "xapp-1"})
		rt.set(func(m *memRuntime) {
			m.execResult = runtime.ExecResult{ExitCode: 1, Stderr: []byte("npm error 404 Not Found\n")}
		})
		ch := newChannel("badplug", a.Name, agentsv1.ChannelSlack, func(c *agentsv1.Channel) {
			c.Spec.AppTokenRef = &agentsv1.SecretKeyReference{Name: "badplug-tokens", Key: "app"}
		})
		Eventually(condition(ch), wait).Should(Equal("False/PluginInstallFailed"))
		Expect(ready(ch)()).To(Equal("False/PluginInstallFailed"))
		got := &agentsv1.Channel{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(ch), got)).To(Succeed())
		Expect(meta.FindStatusCondition(got.Status.Conditions, agentsv1.ChannelConfigured).Message).To(ContainSubstring("npm error 404 Not Found"))
		Eventually(configApplied(a), wait).Should(Equal("True/Rendered"))
		Expect(channelsIn(a)).To(BeNil())
	})

	It("retries an install that a later try may complete, and fails the channel after three failures in a row", func() {
		// Every Configured verdict the API server stores, in order (a watch misses none).
		wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
		Expect(err).NotTo(HaveOccurred())
		w, err := wc.Watch(ctx, &agentsv1.ChannelList{}, client.InNamespace(ns))
		Expect(err).NotTo(HaveOccurred())
		defer w.Stop()
		var mu sync.Mutex
		verdicts := map[string][]string{}
		go func() {
			for ev := range w.ResultChan() {
				if got, ok := ev.Object.(*agentsv1.Channel); ok {
					if c := meta.FindStatusCondition(got.Status.Conditions, agentsv1.ChannelConfigured); c != nil {
						mu.Lock()
						if v := verdicts[got.Name]; len(v) == 0 || v[len(v)-1] != string(c.Status)+"/"+c.Reason {
							verdicts[got.Name] = append(v, string(c.Status)+"/"+c.Reason)
						}
						mu.Unlock()
					}
				}
			}
		}()
		seen := func(name string) []string {
			mu.Lock()
			defer mu.Unlock()
			return append([]string(nil), verdicts[name]...)
		}
		installs := func(agent string) int {
			rt.mu.Lock()
			defer rt.mu.Unlock()
			n := 0
			for _, e := range rt.execs {
				if strings.HasPrefix(e, agent+": plugins install") {
					n++
				}
			}
			return n
		}
		flaky := runtime.ExecResult{ExitCode: 1, Stderr: []byte("npm error code ECONNRESET\nnpm error network aborted\n")}

		a := agentWithConfig("flaky-agent")
		tokenSecret("flaky", a.Name, map[string]string{"bot": "discord-flaky"})
		rt.set(func(m *memRuntime) {
			m.execQueue = map[string][]runtime.ExecResult{a.Name: {flaky, flaky, {}}}
		})
		ch := newChannel("flaky", a.Name, agentsv1.ChannelDiscord, nil)
		Eventually(condition(ch), wait).Should(Equal("True/Configured"))
		Expect(installs(a.Name)).To(Equal(3))
		Eventually(func() []string { return seen("flaky") }, wait).Should(ContainElement("True/Configured"))
		Expect(seen("flaky")).To(ContainElement("Unknown/PluginInstallRetrying"), "a setup request waits through the retries")
		Expect(seen("flaky")).NotTo(ContainElement(HavePrefix("False/")), "no failure verdict while a retry may succeed")
		got := &agentsv1.Channel{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(ch), got)).To(Succeed())
		Expect(got.Status.PluginInstallFailures).To(BeZero(), "the success resets the count")
		Expect(channelsIn(a)).To(HaveKey("discord"))

		b := agentWithConfig("down-agent")
		tokenSecret("down", b.Name, map[string]string{"bot": "discord-down"})
		rt.set(func(m *memRuntime) { m.execQueue[b.Name] = []runtime.ExecResult{flaky} }) // failing from now on
		down := newChannel("down", b.Name, agentsv1.ChannelDiscord, nil)
		Eventually(condition(down), wait).Should(Equal("False/PluginInstallFailed"))
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(down), got)).To(Succeed())
		Expect(got.Status.PluginInstallFailures).To(BeNumerically(">=", 3))
		Expect(meta.FindStatusCondition(got.Status.Conditions, agentsv1.ChannelConfigured).Message).To(ContainSubstring("ECONNRESET"))
		Expect(installs(b.Name)).To(BeNumerically(">=", 3))
		v := seen("down")
		Expect(v[len(v)-2:]).To(HaveExactElements("Unknown/PluginInstallRetrying", "False/PluginInstallFailed"), "%v", v)
		Expect(v[:len(v)-1]).NotTo(ContainElement(HavePrefix("False/")), "%v", v)

		// A setup asked again (a new generation) gets its tries anew.
		rt.set(func(m *memRuntime) { m.execQueue[b.Name] = []runtime.ExecResult{flaky, {}} })
		setDMPolicy(down, "open")
		Eventually(condition(down), wait).Should(Equal("True/Configured"))
		Eventually(func() []string { return seen("down") }, wait).Should(HaveLen(len(v) + 3)) // the retry, the render, the verdict
		v = seen("down")[len(v):]
		Expect(v).To(HaveExactElements("Unknown/PluginInstallRetrying", "Unknown/Rendering", "True/Configured"), "%v", v)
	})

	It("renders a deleted channel out of the config before the Channel goes", func() {
		a := agentWithConfig("gone-agent")
		tokenSecret("gone", a.Name, map[string]string{"bot": "555:gone-token"})
		ch := newChannel("gone", a.Name, agentsv1.ChannelTelegram, nil)
		Eventually(condition(ch), wait).Should(Equal("True/Configured"))
		Expect(channelsIn(a)).To(HaveKey("telegram"))
		Expect(k8sClient.Delete(ctx, ch)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(ch), &agentsv1.Channel{}))
		}, wait).Should(BeTrue())
		Expect(channelsIn(a)).To(BeNil(), "the Channel went only after its agent rendered it out")
		Expect(getAgent(a).Status.Config.Channels).To(BeEmpty())
		Expect(apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "gone-tokens"}, &corev1.Secret{}))).To(BeTrue(),
			"the token Secret made for the channel went with it")
	})
})
