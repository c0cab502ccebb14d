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
	"github.com/agentplane/agentplane/controllers"
	"github.com/agentplane/agentplane/internal/engine/openclaw"
	"github.com/agentplane/agentplane/internal/runtime"
)

// memRuntime keeps agents' files in memory and records engine commands.
type memRuntime struct {
	mu         sync.Mutex
	files      map[string][]byte
	execs      []string
	execResult runtime.ExecResult
	notRunning bool
}

func (m *memRuntime) key(a *agentsv1.Agent, path string) string {
	return a.Namespace + "/" + a.Name + "/" + path
}

func (m *memRuntime) Name() string { return "mem" }
func (m *memRuntime) Ensure(context.Context, *agentsv1.Agent, runtime.Desired) (runtime.Observed, error) {
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

func (m *memRuntime) set(f func(m *memRuntime)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f(m)
}

// The Channel controller runs in its own manager on an in-memory runtime for these specs.
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
		Expect((&controllers.ChannelReconciler{
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Runtime: rt, Engine: openclaw.New(),
		}).SetupWithManager(mgr)).To(Succeed())
		var mctx context.Context
		mctx, stop = context.WithCancel(ctx)
		go func() {
			defer GinkgoRecover()
			Expect(mgr.Start(mctx)).To(Succeed())
		}()
		ns = newWorkspaceNS("channel-ctrl")
	})
	AfterAll(func() { stop() })

	agentWithConfig := func(name string) *agentsv1.Agent {
		a := newAgent(ns, name)
		Expect(rt.WriteFile(ctx, a, cfg, []byte(`{"gateway":{"mode":"local"}}`))).To(Succeed())
		return a
	}
	tokenSecret := func(name string, data map[string]string) {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: data}
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
	channelsIn := func(a *agentsv1.Agent) map[string]any {
		b, err := rt.ReadFile(ctx, a, cfg)
		Expect(err).NotTo(HaveOccurred())
		var m map[string]any
		Expect(json.Unmarshal(b, &m)).To(Succeed())
		c, _ := m["channels"].(map[string]any)
		return c
	}

	It("configures the oldest Channel of a type and marks a younger one Duplicate", func() {
		a := agentWithConfig("dup-agent")
		tokenSecret("dup-a-tokens", map[string]string{"bot": "111:first-token"})
		tokenSecret("dup-b-tokens", map[string]string{"bot": "222:second-token"})
		first := newChannel("dup-a", a.Name, agentsv1.ChannelTelegram, nil)
		Eventually(condition(first), wait).Should(Equal("True/Configured"))
		second := newChannel("dup-b", a.Name, agentsv1.ChannelTelegram, nil)
		Eventually(condition(second), wait).Should(Equal("False/Duplicate"))
		Expect(ready(first)()).To(Equal("True/Configured"))
		Expect(ready(second)()).To(Equal("False/Duplicate"))

		env := &controllers.SecretEnv{Client: k8sClient, APIReader: k8sClient}
		got, _, err := env.Resolve(ctx, a)
		Expect(err).NotTo(HaveOccurred())
		Expect(got).To(HaveKeyWithValue("AGENTPLANE_TELEGRAM_BOT_TOKEN", "111:first-token"))

		Expect(k8sClient.Delete(ctx, second)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(second), &agentsv1.Channel{}))
		}, wait).Should(BeTrue())
		Expect(channelsIn(a)).To(HaveKey("telegram"), "deleting the duplicate kept the config entry")
	})

	It("re-applies its channels when the agent's config was written whole through the facade", func() {
		a := agentWithConfig("rewrite-agent")
		tokenSecret("rewrite-tokens", map[string]string{"bot": "444:rewrite-token"})
		ch := newChannel("rewrite", a.Name, agentsv1.ChannelTelegram, nil)
		Eventually(condition(ch), wait).Should(Equal("True/Configured"))
		Expect(channelsIn(a)).To(HaveKey("telegram"))

		// A config written without the channel (what PUT /config with a whole document does).
		Expect(rt.WriteFile(ctx, a, cfg, []byte(`{"gateway":{"mode":"local"}}`))).To(Succeed())
		Consistently(func() map[string]any { return channelsIn(a) }, 2*time.Second, 200*time.Millisecond).Should(BeNil(),
			"nothing re-applies the channel before the facade says the config was written")
		Expect(k8sClient.Patch(ctx, a, client.RawPatch("application/merge-patch+json",
			[]byte(`{"metadata":{"annotations":{"`+agentsv1.AnnotationConfigWritten+`":"w1"}}}`)))).To(Succeed())
		Eventually(func() map[string]any { return channelsIn(a) }, wait).Should(HaveKey("telegram"))
	})

	It("waits for a missing token, then configures the channel", func() {
		a := agentWithConfig("tok-agent")
		ch := newChannel("tok", a.Name, agentsv1.ChannelTelegram, nil)
		Eventually(condition(ch), wait).Should(Equal("False/TokenNotFound"))
		Expect(channelsIn(a)).To(BeNil())
		tokenSecret("tok-tokens", map[string]string{"bot": "333:late-token"})
		Expect(k8sClient.Patch(ctx, ch, client.RawPatch("application/merge-patch+json",
			[]byte(`{"metadata":{"annotations":{"agentplane.io/channel-request":"r1"}}}`)))).To(Succeed())
		// The verdict is in the status before the request is acknowledged.
		got := &agentsv1.Channel{}
		Eventually(func() map[string]string {
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(ch), got)).To(Succeed())
			return got.Annotations
		}, wait).Should(HaveKeyWithValue("agentplane.io/channel-handled", "r1"))
		Expect(condition(got)()).To(Equal("True/Configured"))
		Expect(got.Status.BotTokenHint).To(Equal("****oken"))
	})

	It("reports a missing agent, and an agent it cannot reach without forgetting the config", func() {
		lost := newChannel("lost", "no-such-agent", agentsv1.ChannelTelegram, nil)
		Eventually(condition(lost), wait).Should(Equal("False/AgentNotFound"))

		a := agentWithConfig("far-agent")
		tokenSecret("far-tokens", map[string]string{"bot": "444:far-token"})
		ch := newChannel("far", a.Name, agentsv1.ChannelTelegram, nil)
		Eventually(condition(ch), wait).Should(Equal("True/Configured"))
		rt.set(func(m *memRuntime) { m.notRunning = true })
		DeferCleanup(func() { rt.set(func(m *memRuntime) { m.notRunning = false }) })
		setDMPolicy(ch, "open")
		Eventually(condition(ch), wait).Should(Equal("False/AgentNotReady"))
		got := &agentsv1.Channel{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(ch), got)).To(Succeed())
		Expect(got.Status.Configured).To(BeTrue())
	})

	It("installs an external plugin once; an already installed one counts as installed", func() {
		a := agentWithConfig("plug-agent")
		tokenSecret("plug-tokens", map[string]string{"bot": "discord-token-1"})
		rt.set(func(m *memRuntime) {
			m.execResult = runtime.ExecResult{ExitCode: 1, Stderr: []byte("plugin already exists: /x (delete it first)\n")}
		})
		ch := newChannel("plug", a.Name, agentsv1.ChannelDiscord, func(c *agentsv1.Channel) { c.Spec.DMPolicy = "pairing" })
		Eventually(condition(ch), wait).Should(Equal("True/Configured"))
		setDMPolicy(ch, "disabled")
		Eventually(func() any { return channelsIn(a)["discord"] }, wait).Should(HaveKeyWithValue("dmPolicy", "disabled"))
		Eventually(ready(ch), wait).Should(Equal("True/Configured"), "the plugin is installed and the channel configured")
		rt.mu.Lock()
		defer rt.mu.Unlock()
		Expect(rt.execs).To(Equal([]string{"plug-agent: plugins install @openclaw/discord"}))
	})

	It("reports a failed plugin install and leaves the config alone", func() {
		a := agentWithConfig("badplug-agent")
		tokenSecret("badplug-tokens", map[string]string{"bot": "xoxb-1", "app": "xapp-1"})
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
		Expect(channelsIn(a)).To(BeNil())
	})
})
