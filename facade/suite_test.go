package facade_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/adapters/modelproxy/providertest"
	"github.com/agentplane/agentplane/internal/adapters/storage/local"
	"github.com/agentplane/agentplane/internal/devtools/fakeclaw"
	"github.com/agentplane/agentplane/internal/devtools/fakediscord"
	"github.com/agentplane/agentplane/internal/devtools/fakeslack"
	"github.com/agentplane/agentplane/internal/devtools/faketelegram"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
	"github.com/agentplane/agentplane/internal/devtools/testenv/kubeenv"
	"github.com/agentplane/agentplane/internal/platform"
	"github.com/agentplane/agentplane/internal/rules/auth"
	"github.com/agentplane/agentplane/internal/rules/secrets"
	"github.com/agentplane/agentplane/internal/rules/workspacens"
)

// The suite's Slack app's tokens (the fake Slack knows them).
const (
	suiteSlackBot = "xoxb-suite-slack-bot-0123456789"
	suiteSlackApp = "xapp-suite-slack-app-0123456789"
)

var (
	env       *kubeenv.Env
	k8sClient client.Client
	ctx       context.Context
	cancel    context.CancelFunc
	plat      *platform.Platform
	// platStopped is closed once the main platform stopped.
	platStopped <-chan struct{}
	// runtimeStateDir is the main platform's local runtime state dir (warm gateways in pool/).
	runtimeStateDir string
	// llm is the fake model provider behind the main platform's model proxy.
	llm *providertest.Provider
	// telegram is the Bot API the channel relay calls (channels_test.go).
	telegram *faketelegram.Server
	// slack is the Slack the channel relay calls and holds the app's socket with
	// (channels_test.go), with the suite's bot and app tokens.
	slack   *fakeslack.Server
	discord *fakediscord.Server
	baseURL string
)

func TestFacade(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "REST facade suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	// CI machines are small and busy: give asynchronous assertions room.
	SetDefaultEventuallyTimeout(testenv.EventBound)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	ctx, cancel = context.WithCancel(context.Background())
	var err error
	env, err = kubeenv.Start()
	Expect(err).NotTo(HaveOccurred())
	k8sClient = env.Client
	fake, err := fakeclaw.EngineDir()
	Expect(err).NotTo(HaveOccurred())
	llm = providertest.New()
	telegram = faketelegram.New("123456789:suite-bot-token")
	slack = fakeslack.New(fakeslack.Options{BotToken: suiteSlackBot, AppToken: suiteSlackApp})
	discord = fakediscord.New(fakediscord.Options{})
	runtimeStateDir = GinkgoT().TempDir()
	plat, baseURL, platStopped = startPlatformWith(ctx, env.Config, platform.Options{
		Runtime: platform.RuntimeOptions{
			Name: platform.RuntimeLocal, StateDir: runtimeStateDir, DefaultVersion: engine.PinnedVersion,
			// One fake engine offered under two versions (restarts that change version), and
			// versions whose engine fails in one way each (fault tests).
			EngineDirs: map[string]string{
				engine.PinnedVersion: fake, "2026.9.7": fake,
				versionBrokenStart: faultyEngine(fake, "FAKECLAW_FAIL_START=1"),
				versionBrokenCLI:   faultyEngine(fake, "FAKECLAW_FAIL=devices,config,cron"),
			},
		},
		ProvisionTimeout: 30 * time.Second,
		ClawHubURL:       hubURL(),
		Files:            suiteFiles(),
		// Short sleep timers for the suspend specs (agents_sleep_test.go).
		WakeLead: 20 * time.Second, WakeWindow: 4 * time.Second, TaskGrace: 5 * time.Second,
		// The model proxy forwards to a fake provider, writes usage often and prices the
		// Anthropic model its specs call (modelproxy_test.go), not the chat's (chat_test.go).
		ModelProxy: platform.ModelProxyOptions{
			Upstreams: map[string]string{"anthropic": llm.URL, "openai": llm.URL}, FlushInterval: 300 * time.Millisecond,
			PricesFile: suitePrices(),
		},
		ChannelRelay: platform.ChannelRelayOptions{
			TelegramAPI: telegram.URL, SlackAPI: slack.APIURL(), Slack: true, DiscordAPI: discord.APIURL(), Discord: true,
		},
	})
	// The secrets key of the main platform's system namespace.
	Expect(k8sClient.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: secrets.KeySecretName, Namespace: platform.DefaultSystemNamespace},
		Data:       map[string][]byte{"key": bytes.Repeat([]byte{0x5e}, 32)},
	})).To(Succeed())
})

var _ = AfterSuite(func() {
	cancel()
	// The main platform stops while its control plane still serves.
	if platStopped != nil {
		Eventually(platStopped).WithTimeout(testenv.EventBound).Should(BeClosed())
	}
	if llm != nil {
		llm.Close()
	}
	if slack != nil {
		slack.Close()
	}
	if discord != nil {
		discord.Close()
	}
	if telegram != nil {
		telegram.Close()
	}
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

// startPlatform runs one replica of the manager and facade (o adds to the defaults) against
// the suite's control plane and returns it with the facade's base URL.
func startPlatform(ctx context.Context, o platform.Options) (*platform.Platform, string) {
	p, url, _ := startPlatformWith(ctx, env.Config, o)
	return p, url
}

// startPlatformWith is startPlatform with its own client configuration (an impersonated
// identity, for instance); done closes once the platform has stopped after ctx ended.
func startPlatformWith(ctx context.Context, cfg *rest.Config, o platform.Options) (p *platform.Platform, url string, done <-chan struct{}) {
	ready := make(chan string, 1)
	if o.Files == nil {
		files, err := local.New(GinkgoT().TempDir())
		Expect(err).NotTo(HaveOccurred())
		o.Files = files
	}
	o.APIAddr, o.MetricsAddr, o.ProbeAddr = "127.0.0.1:0", "0", "0"
	o.Log = logf.Log
	o.APIReady = func(a string) { ready <- a }
	p, err := platform.New(ctx, cfg, o)
	Expect(err).NotTo(HaveOccurred())
	stopped := make(chan struct{})
	pctx, stop := context.WithCancel(ctx)
	go func() {
		defer GinkgoRecover()
		defer close(stopped)
		Expect(p.Start(pctx)).To(Succeed())
	}()
	// What the platform started stops before the spec's (or the suite's) temp dirs go: its
	// runtime's gateways, and the homes' volumes they are mounted on.
	DeferCleanup(func() {
		stop()
		Eventually(stopped).WithTimeout(testenv.EventBound).Should(BeClosed())
	})
	var addr string
	Eventually(ready).Should(Receive(&addr))
	return p, "http://" + addr, stopped
}

// Engine versions whose fake engine fails.
const (
	versionBrokenStart = "2026.1.1-broken"
	versionBrokenCLI   = "2026.1.2-nocli"
)

// faultyEngine is an engine dir whose bin/openclaw runs the fake with env set.
func faultyEngine(fake, env string) string {
	dir := GinkgoT().TempDir()
	Expect(os.MkdirAll(filepath.Join(dir, "bin"), 0o755)).To(Succeed())
	script := "#!/bin/sh\nexport " + env + "\nexec " + filepath.Join(fake, "bin", "openclaw") + " \"$@\"\n"
	Expect(os.WriteFile(filepath.Join(dir, "bin", "openclaw"), []byte(script), 0o755)).To(Succeed())
	return dir
}

// workspace creates a workspace (and its namespace) with the given plan and members.
func workspace(name string, plan agentsv1.Plan, members ...agentsv1.WorkspaceMember) *agentsv1.Workspace {
	ws := &agentsv1.Workspace{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       agentsv1.WorkspaceSpec{Plan: plan, Members: members},
	}
	Expect(workspacens.EnsureWorkspace(ctx, k8sClient, ws)).To(Succeed())
	return ws
}

// token mints a token for user in ws with the given scopes and role.
func token(ws, user string, role agentsv1.Role, scopes ...string) string {
	tok, _, err := auth.CreateKey(ctx, k8sClient, plat.Signer, auth.KeyRequest{
		Workspace: ws, UserID: user, Scopes: scopes, Role: role,
	})
	Expect(err).NotTo(HaveOccurred())
	return tok
}

// reply is a decoded HTTP answer.
type reply struct {
	Status int
	Header http.Header
	Raw    string
	Body   map[string]any
}

// call sends a request with an optional bearer token and JSON body.
func call(method, path, tok string, body any, headers ...string) reply {
	return send(method, path, tok, "", body, headers...)
}

// callURL is call against another facade replica.
func callURL(url, method, path, tok string, body any) reply {
	return sendTo(url, method, path, tok, "", body)
}

// send is call with an explicit Content-Type ("" for none).
func send(method, path, tok, contentType string, body any, headers ...string) reply {
	return sendTo(baseURL, method, path, tok, contentType, body, headers...)
}

// sendTo is send to the facade at url.
func sendTo(url, method, path, tok, contentType string, body any, headers ...string) reply {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		Expect(err).NotTo(HaveOccurred())
		rd = strings.NewReader(string(raw))
	}
	req, err := http.NewRequestWithContext(ctx, method, url+path, rd)
	Expect(err).NotTo(HaveOccurred())
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	r := reply{Status: resp.StatusCode, Header: resp.Header, Raw: string(raw)}
	_ = json.Unmarshal(raw, &r.Body)
	return r
}

// v0Error is the error string of a /v0 answer.
func (r reply) v0Error() string {
	s, _ := r.Body["error"].(string)
	return s
}

// v3Error is the (code, message) of a /v3 answer.
func (r reply) v3Error() (float64, string) {
	e, _ := r.Body["error"].(map[string]any)
	code, _ := e["code"].(float64)
	msg, _ := e["message"].(string)
	return code, msg
}
