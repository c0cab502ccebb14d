package agentplanetest_test

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.uber.org/goleak"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/config/crd"
	"github.com/agentplane/agentplane/internal/adapters/clawhub/clawhubtest"
	"github.com/agentplane/agentplane/internal/devtools/fakeclaw"
	"github.com/agentplane/agentplane/pkg/agentplanetest"
)

// An Agent created through the client runs on the engine double, and the facade serves it to
// a token of its workspace, and to no other workspace's token.
func TestAgentRunsAndTheFacadeServesIt(t *testing.T) {
	p := startPlatform(t, cfg)
	a, tok := runAgent(t, p, "kit-basic", "first")
	defer deleteAll(t, p.Client(), "kit-basic")

	if a.Status.EngineVersion == "" || !strings.HasPrefix(a.Status.EngineVersion, agentplanetest.FakeEngineVersion) {
		t.Errorf("engine version %q, want the double's %s", a.Status.EngineVersion, agentplanetest.FakeEngineVersion)
	}
	code, body := getJSON(t, p.URL()+"/v0/agents/first", tok)
	got, _ := body["agent"].(map[string]any)
	if code != http.StatusOK || got["id"] != "first" || got["status"] != "running" || got["name"] != "Agent first" {
		t.Errorf("GET /v0/agents/first: %d %v", code, body)
	}
	other, err := p.Token("kit-basic-other")
	if err != nil {
		t.Fatal(err)
	}
	if code, body := getJSON(t, p.URL()+"/v0/agents/first", other); code != http.StatusNotFound {
		t.Errorf("another workspace's token: %d %v, want 404", code, body)
	}
}

// Parallel tests on one API server each start the kit and use a workspace of their own; they
// share one platform, which the last Stop stops. Start then gives a new one.
func TestParallelPlatformsShareOneAPIServer(t *testing.T) {
	urls := make(chan string, 2)
	t.Run("group", func(t *testing.T) {
		for _, ws := range []string{"kit-par-a", "kit-par-b"} {
			t.Run(ws, func(t *testing.T) {
				t.Parallel()
				p := startPlatform(t, cfg)
				_, tok := runAgent(t, p, ws, "agent")
				defer deleteAll(t, p.Client(), ws)
				if code, _ := getJSON(t, p.URL()+"/v0/agents/agent", tok); code != http.StatusOK {
					t.Errorf("GET: %d", code)
				}
				urls <- p.URL()
			})
		}
	})
	a, b := <-urls, <-urls
	if a != b {
		t.Errorf("two platforms on one API server: %s and %s", a, b)
	}
	p := startPlatform(t, cfg)
	if p.URL() == a {
		t.Errorf("after the last Stop, Start reuses the stopped facade %s", a)
	}
	if code, _ := getJSON(t, p.URL()+"/v0/agents", "x"); code != http.StatusUnauthorized {
		t.Errorf("the new facade answers %d to a bad token, want 401", code)
	}
}

// A Start whose options differ from the platform already running on the API server fails
// instead of silently ignoring them; Stop twice is harmless.
func TestStartWithOtherOptionsFails(t *testing.T) {
	p := startPlatform(t, cfg)
	if _, err := agentplanetest.Start(context.Background(), cfg, agentplanetest.WithProvisionTimeout(time.Second)); err == nil {
		t.Fatal("Start with another provision timeout succeeded")
	}
	q, err := agentplanetest.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := q.Stop(); err != nil {
		t.Fatal(err)
	}
	// p still serves: q's second Stop did not release p's reference.
	if code, _ := getJSON(t, p.URL()+"/v0/agents", "x"); code != http.StatusUnauthorized {
		t.Errorf("facade answers %d after the other handle's Stops, want 401", code)
	}
}

// Start installs the CRDs on an API server that lacks them, and a second API server in the same
// process gets a platform of its own.
func TestStartInstallsTheCRDs(t *testing.T) {
	bare := &envtest.Environment{BinaryAssetsDirectory: agentplanetest.AssetsDir()}
	bareCfg, err := bare.Start()
	if err != nil {
		t.Fatal(err)
	}
	// Cleanups run last first: the platform stops before its API server does.
	t.Cleanup(func() {
		if err := bare.Stop(); err != nil {
			t.Error(err)
		}
	})
	p := startPlatform(t, bareCfg)
	s := k8sruntime.NewScheme()
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(bareCfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := c.List(context.Background(), crds); err != nil {
		t.Fatal(err)
	}
	if want := len(crd.MustCRDs()); len(crds.Items) != want {
		t.Errorf("%d CRDs installed, want %d", len(crds.Items), want)
	}
	other := startPlatform(t, cfg)
	if other.URL() == p.URL() {
		t.Error("two API servers share a platform")
	}
	runAgent(t, p, "kit-bare", "agent")
	deleteAll(t, p.Client(), "kit-bare")
}

// The last Stop leaves no goroutine and no file behind: controllers, informers, the facade, the
// engine processes' watchers and the API server connections all end.
func TestStopLeavesNoGoroutine(t *testing.T) {
	cycle := func() {
		p, err := agentplanetest.Start(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, tok := runAgent(t, p, "kit-leak", "agent")
		getJSON(t, p.URL()+"/v0/agents/agent", tok)
		deleteAll(t, p.Client(), "kit-leak")
		if err := p.Stop(); err != nil {
			t.Fatal(err)
		}
		http.DefaultClient.CloseIdleConnections() // the test's own connections to the facade
	}
	// A first cycle starts what a process starts once (client-go's and the kit's globals);
	// a leak is what a second cycle leaves on top of that.
	cycle()
	before := goleak.IgnoreCurrent()
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // where the platform keeps its files
	cycle()
	goleak.VerifyNone(t, before)
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("the platform's files stay after Stop: %v", left)
	}
}

// The matchers report what they saw.
func TestMatchers(t *testing.T) {
	g := NewWithT(t)
	a := &agentsv1.Agent{}
	a.Name, a.Namespace, a.Generation = "x", "ws", 2
	a.Status.Phase = agentsv1.AgentStarting
	a.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: "True", ObservedGeneration: 1}}
	ok, err := agentplanetest.HavePhase(agentplanetest.PhaseRunning).Match(a)
	g.Expect(ok, err).To(BeFalse())
	g.Expect(agentplanetest.HavePhase(agentplanetest.PhaseRunning).FailureMessage(a)).To(ContainSubstring(`ws/x to be in phase running; it is in phase "starting"`))
	// A Ready condition of an older generation does not count.
	g.Expect(agentplanetest.HaveCondition("Ready", "True").Match(a)).To(BeFalse())
	a.Status.Conditions[0].ObservedGeneration = 2
	g.Expect(agentplanetest.HaveCondition("Ready", "True").Match(a)).To(BeTrue())
	g.Expect(agentplanetest.HaveCondition("Ready", "False").Match(a)).To(BeFalse())
	g.Expect(agentplanetest.HaveCondition("Other", "True").Match(a)).To(BeFalse())
}

// WithClawHubURL points skill installs at a registry of the test's own; a Workspace created
// before Token keeps its own spec.
func TestSkillInstallFromARegistryDouble(t *testing.T) {
	hub := clawhubtest.NewRegistry()
	defer hub.Close()
	hub.Add("kit-skill", "Kit skill", "1.0.0", clawhubtest.Files("kit-skill-1.0.0/SKILL.md", clawhubtest.SkillMD("kit-skill", "a skill")))
	p := startPlatform(t, cfg, agentplanetest.WithClawHubURL(hub.URL))
	ctx := context.Background()
	ws := &agentsv1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: "kit-hub"}, Spec: agentsv1.WorkspaceSpec{Plan: agentsv1.PlanFree}}
	if err := p.Client().Create(ctx, ws); err != nil {
		t.Fatal(err)
	}
	tok, err := p.Token("kit-hub")
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, p.URL()+"/v0/clawhub/kit-skill/install", http.NoBody)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("install: %s", resp.Status)
	}
	skills := &agentsv1.SkillList{}
	if err := p.Client().List(ctx, skills, client.InNamespace("kit-hub")); err != nil || len(skills.Items) != 1 {
		t.Fatalf("skills %v, %v", skills.Items, err)
	}
	if err := p.Client().Get(ctx, client.ObjectKeyFromObject(ws), ws); err != nil || ws.Spec.Plan != agentsv1.PlanFree {
		t.Errorf("workspace plan %q (%v), want free as created", ws.Spec.Plan, err)
	}
}

// WithEngineDirs offers each engine dir under the version its bin/openclaw reports (here the
// double's own dir, which reports 2026.9.6-fake, standing in for a real install).
func TestWithEngineDirsOffersTheReportedVersion(t *testing.T) {
	dir, err := fakeclaw.EngineDir()
	if err != nil {
		t.Fatal(err)
	}
	p := startPlatform(t, cfg, agentplanetest.WithEngineDirs(dir))
	a, _ := runAgent(t, p, "kit-engines", "agent")
	defer deleteAll(t, p.Client(), "kit-engines")
	if a.Status.EngineVersion != agentplanetest.FakeEngineVersion+"-fake" {
		t.Errorf("engine version %q, want %s-fake", a.Status.EngineVersion, agentplanetest.FakeEngineVersion)
	}
	if _, err := agentplanetest.Start(context.Background(), cfg, agentplanetest.WithEngineDirs(t.TempDir())); err == nil {
		t.Error("Start with another engine dir succeeded while a platform runs")
	}
}
