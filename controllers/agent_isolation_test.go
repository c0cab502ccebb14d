package controllers_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	agentctrl "github.com/agentplane/agentplane/controllers/agent"
	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/adapters/engine/openclaw"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/rules/admission"
	"github.com/agentplane/agentplane/internal/rules/quota"
)

// What the Agent controller asks the runtime for that isolates the agent: its RuntimeClass
// (its own, else its workspace's) and what it talks to (runtime.Desired.Egress).
var _ = Describe("Agent isolation", Ordered, func() {
	var (
		rt   *memRuntime
		stop func()
	)
	const ns, wait = "agent-isolation", 20 * time.Second

	BeforeAll(func() {
		rt = &memRuntime{files: map[string][]byte{}}
		mgr := newManager()
		Expect((&agentctrl.Reconciler{
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Runtime: rt, Engine: openclaw.New(),
			Admission: testAdmitter(mgr), ModelProxy: testModelProxy{}, ChannelRelay: testChannelRelay{},
		}).SetupWithManager(mgr)).To(Succeed())
		stop = startManager(mgr)
		agentWorkspace(ns, 10)
	})
	AfterAll(func() { stop() })

	desired := func(agent string) func() runtime.Desired {
		return func() runtime.Desired {
			rt.mu.Lock()
			defer rt.mu.Unlock()
			return rt.desired[ns+"/"+agent]
		}
	}
	secret := func(name, provider string) {
		Expect(k8sClient.Create(ctx, &agentsv1.AgentSecret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: agentsv1.AgentSecretSpec{Name: name, Provider: provider, SecretRef: &agentsv1.SecretKeyReference{Name: name + "-value", Key: "v"}}})).To(Succeed())
	}

	It("takes the workspace's RuntimeClass, and the agent's own over it", func() {
		a := createAgent(ns, "rc")
		Eventually(desired("rc"), wait).Should(HaveField("EngineVersion", engine.PinnedVersion))
		Expect(desired("rc")().RuntimeClassName).To(BeEmpty())

		ws := &agentsv1.Workspace{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: ns}, ws)).To(Succeed())
		ws.Spec.RuntimeClassName = "gvisor"
		Expect(k8sClient.Update(ctx, ws)).To(Succeed())
		Eventually(func() string { return desired("rc")().RuntimeClassName }, wait).Should(Equal("gvisor"))

		a = getAgent(a)
		a.Spec.RuntimeClassName = "kata"
		Expect(k8sClient.Update(ctx, a)).To(Succeed())
		Eventually(func() string { return desired("rc")().RuntimeClassName }, wait).Should(Equal("kata"))
	})

	It("names the providers whose keys the agent holds itself and its channels' types but those relayed", func() {
		secret("openai-key", "openai")
		secret("anthropic-key", "anthropic") // served by the model proxy: no egress of its own
		createAgent(ns, "eg", func(a *agentsv1.Agent) {
			a.Spec.Secrets = []agentsv1.LocalObjectReference{{Name: "openai-key"}, {Name: "anthropic-key"}}
		})
		Eventually(func() []string { return desired("eg")().Egress }, wait).Should(Equal([]string{"openai"}))

		// Telegram is relayed by the platform: the agent reaches it through the relay. Discord
		// is not (this relay, as on the kube runtime, cannot route it): the agent talks to it
		// itself.
		tg := &agentsv1.Channel{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tg"},
			Spec: agentsv1.ChannelSpec{AgentRef: agentsv1.LocalObjectReference{Name: "eg"}, Type: agentsv1.ChannelTelegram,
				BotTokenRef: &agentsv1.SecretKeyReference{Name: "tg-tokens", Key: "bot"}}}
		Expect(k8sClient.Create(ctx, tg)).To(Succeed())
		dc := &agentsv1.Channel{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dc"},
			Spec: agentsv1.ChannelSpec{AgentRef: agentsv1.LocalObjectReference{Name: "eg"}, Type: agentsv1.ChannelDiscord,
				BotTokenRef: &agentsv1.SecretKeyReference{Name: "dc-tokens", Key: "bot"}}}
		Expect(k8sClient.Create(ctx, dc)).To(Succeed())
		Eventually(func() []string { return desired("eg")().Egress }, wait).Should(Equal([]string{"discord", "openai"}))

		Expect(k8sClient.Delete(ctx, dc)).To(Succeed())
		Eventually(func() []string { return desired("eg")().Egress }, wait).Should(Equal([]string{"openai"}))
	})
})

// testChannelRelay relays telegram, as the platform's relay does on the kube runtime (where
// it cannot route Slack or Discord: the engine takes a plain websocket on loopback only).
type testChannelRelay struct{}

func (testChannelRelay) TelegramAPIRoot() string {
	return "http://agentplane-api.agentplane-system.svc/relay/telegram"
}

func (testChannelRelay) SlackRelay() (string, string, bool) { return "", "", false }

func (testChannelRelay) DiscordRelay() (string, bool) { return "", false }

func (testChannelRelay) Busy(types.NamespacedName) bool { return false }

// testAdmitter admits agents as the platform does, offering engine version 2026.9.6.
func testAdmitter(mgr ctrl.Manager) *admission.Admitter {
	return &admission.Admitter{
		Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Cache: mgr.GetClient(),
		Limiter:  &quota.Limiter{Reader: mgr.GetAPIReader(), Writer: mgr.GetClient()},
		Versions: admission.Versions{Default: engine.PinnedVersion, Available: []string{engine.PinnedVersion}},
	}
}
