// Package hostile sends hostile input to every operation of docs/openapi.json against one
// platform (envtest control plane, local runtime, fakeclaw engine) and checks what every answer
// must be: no undocumented 5xx, no panic, no dropped connection, and errors in the JSON envelope
// of the route's family. TestHostileInput does it with a fixed, seeded budget of requests per
// operation; FuzzRoutes lets `go test -fuzz` explore further.
package hostile

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/facade"
	"github.com/agentplane/agentplane/internal/adapters/clawhub/clawhubtest"
	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/adapters/storage/local"
	"github.com/agentplane/agentplane/internal/devtools/fakeclaw"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
	"github.com/agentplane/agentplane/internal/devtools/testenv/kubeenv"
	"github.com/agentplane/agentplane/internal/platform"
	"github.com/agentplane/agentplane/internal/rules/auth"
	"github.com/agentplane/agentplane/internal/rules/secrets"
	"github.com/agentplane/agentplane/internal/rules/workspacens"
)

// Names of the fixture workspace, user and published skill.
const (
	wsName    = "hostile"
	userID    = "hostile-owner"
	skillSlug = "hostile-skill"
)

// fixture is the running platform and the real objects whose IDs fill path parameters.
type fixture struct {
	base    string            // the facade's base URL
	handler http.Handler      // the facade itself (in-process requests)
	token   string            // valid, all scopes, owner
	ids     map[string]string // path parameter name → a real value
	gen     int               // how many times the objects were created
}

var (
	fixOnce sync.Once
	fix     *fixture
	fixErr  error
	stopAll func()
)

// TestMain stops the control plane and the platform (if a test started them) at the end; an
// interrupt (as `go test -fuzz` sends a worker that does not stop within a second) kills them.
func TestMain(m *testing.M) {
	reapOnInterrupt()
	code := m.Run()
	if stopAll != nil {
		stopAll()
	}
	os.Exit(code)
}

// platformFixture starts the platform and its fixtures once per process (the fuzz workers of
// `go test -fuzz` each start their own).
func platformFixture(tb testing.TB) *fixture {
	tb.Helper()
	fixOnce.Do(func() {
		start := time.Now()
		fix, fixErr = startFixture()
		if fixErr == nil {
			fmt.Fprintf(os.Stderr, "hostile: platform and fixtures ready in %s\n", time.Since(start).Round(time.Millisecond))
		}
	})
	if fixErr != nil {
		tb.Fatalf("start the platform: %v", fixErr)
	}
	return fix
}

// startFixture starts envtest, a platform with the local runtime and the fake engine, and
// creates the workspace, a token and one of each object a path can name.
func startFixture() (*fixture, error) {
	log := logr.Discard()
	if os.Getenv("HOSTILE_LOG") != "" {
		log = zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true))
	}
	logf.SetLogger(log)
	ctx, cancel := context.WithCancel(context.Background())
	env, err := kubeenv.Start()
	if err != nil {
		cancel()
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "hostile")
	if err != nil {
		cancel()
		_ = env.Stop()
		return nil, err
	}
	hub := clawhubtest.NewRegistry()
	done := make(chan struct{})
	stopAll = func() {
		cancel()
		select {
		case <-done:
		case <-time.After(40 * time.Second):
		}
		hub.Close()
		_ = env.Stop()
		_ = os.RemoveAll(tmp)
	}
	fake, err := fakeclaw.EngineDir()
	if err != nil {
		close(done)
		return nil, err
	}
	dir := skillSlug + "-1.0.0/"
	hub.Add(skillSlug, "Hostile skill", "1.0.0", clawhubtest.Files(dir+"SKILL.md", clawhubtest.SkillMD(skillSlug, "a skill")))
	files, err := local.New(tmp + "/files")
	if err != nil {
		close(done)
		return nil, err
	}
	if err := env.Client.Create(ctx, kubeenv.Namespace(platform.DefaultSystemNamespace)); err != nil {
		close(done)
		return nil, err
	}
	if err := env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: secrets.KeySecretName, Namespace: platform.DefaultSystemNamespace},
		Data:       map[string][]byte{"key": bytes.Repeat([]byte{0x5e}, 32)},
	}); err != nil {
		close(done)
		return nil, err
	}
	ready := make(chan string, 1)
	p, err := platform.New(ctx, env.Config, platform.Options{
		APIAddr: "127.0.0.1:0", MetricsAddr: "0", ProbeAddr: "0", Log: log,
		APIReady: func(a string) { ready <- a },
		Runtime: platform.RuntimeOptions{Name: platform.RuntimeLocal, StateDir: tmp + "/state",
			DefaultVersion: engine.PinnedVersion, EngineDirs: map[string]string{engine.PinnedVersion: fake}},
		ProvisionTimeout: 30 * time.Second, ClawHubURL: hub.URL, Files: files,
		// Hostile requests back to back (and fuzzing) reach the handlers, not the rate limits.
		RateLimits: facade.NoRateLimits,
	})
	if err != nil {
		close(done)
		return nil, err
	}
	go func() { defer close(done); _ = p.Start(ctx) }()
	var addr string
	select {
	case addr = <-ready:
	case <-time.After(testenv.EventBound):
		return nil, fmt.Errorf("the facade did not start")
	}
	limit := int32(4) // hostile bodies that happen to be valid create at most a few more agents
	ws := &agentsv1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: wsName}, Spec: agentsv1.WorkspaceSpec{
		Plan: agentsv1.PlanPro, Internal: true, AgentLimit: &limit,
		Members: []agentsv1.WorkspaceMember{{UserID: userID, Role: agentsv1.RoleOwner}},
	}}
	if err := workspacens.EnsureWorkspace(ctx, env.Client, ws); err != nil {
		return nil, err
	}
	tok, _, err := auth.CreateKey(ctx, env.Client, p.Signer, auth.KeyRequest{
		Workspace: wsName, UserID: userID, Scopes: []string{auth.ScopeAll}, Role: agentsv1.RoleOwner,
	})
	if err != nil {
		return nil, err
	}
	f := &fixture{base: "http://" + addr, handler: p.API, token: tok}
	if err := f.createObjects(); err != nil {
		return nil, err
	}
	return f, nil
}

// createObjects creates, through the REST facade, a running agent and a secret, skill,
// domain, channel and file of it, and records their IDs by path parameter name. Each call
// makes new ones (TestHostileInput deletes them at its end and then calls it again).
func (f *fixture) createObjects() error {
	f.gen++
	n := strconv.Itoa(f.gen)
	f.ids = map[string]string{"channel": "telegram", "network": "public", "slug": skillSlug}
	agent, err := f.create("POST", "/v0/agents", map[string]any{"name": "Hostile " + n}, "agent")
	if err != nil {
		return err
	}
	f.ids["agentId"] = agent["id"].(string)
	a := "/v0/agents/" + f.ids["agentId"]
	sec, err := f.create("POST", "/v0/secrets", map[string]any{"name": "hostile-" + n, "value": "v"}, "secret")
	if err != nil {
		return err
	}
	f.ids["secretId"] = sec["id"].(string)
	if _, err := f.create("POST", a+"/secrets", map[string]any{"secretIds": []string{f.ids["secretId"]}}, ""); err != nil {
		return err
	}
	sk, err := f.create("POST", "/v0/clawhub/"+skillSlug+"/install", nil, "skill")
	if err != nil {
		return err
	}
	f.ids["skillId"] = sk["id"].(string)
	if _, err := f.create("POST", a+"/skills", map[string]any{"skillCids": []string{sk["cid"].(string)}}, ""); err != nil {
		return err
	}
	dom, err := f.create("POST", a+"/domains", map[string]any{"subdomain": "hostile-" + n}, "domain")
	if err != nil {
		return err
	}
	f.ids["domainId"] = dom["id"].(string)
	if _, err := f.create("POST", a+"/channels/telegram", map[string]any{"botToken": "123456789:hostile-bot"}, ""); err != nil {
		return err
	}
	file, err := f.uploadFile("hostile fixture " + n)
	if err != nil {
		return err
	}
	f.ids["id"], f.ids["cid"] = file["id"].(string), file["cid"].(string)
	return nil
}

// create sends a setup request that must succeed and returns the member key of its body.
func (f *fixture) create(method, path string, body any, key string) (map[string]any, error) {
	var rd io.Reader = http.NoBody
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = bytes.NewReader(raw)
	}
	req, _ := http.NewRequest(method, f.base+path, rd)
	req.Header.Set("Authorization", "Bearer "+f.token)
	req.Header.Set("Content-Type", "application/json")
	return f.do(req, key)
}

// uploadFile stores a small /v3 file and returns its data.
func (f *fixture) uploadFile(content string) (map[string]any, error) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, _ := mw.CreateFormFile("file", "hostile.txt")
	_, _ = fw.Write([]byte(content))
	_ = mw.Close()
	req, _ := http.NewRequest("POST", f.base+"/v3/files", &buf)
	req.Header.Set("Authorization", "Bearer "+f.token)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	return f.do(req, "data")
}

func (f *fixture) do(req *http.Request, key string) (map[string]any, error) {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return nil, fmt.Errorf("%s %s: %d %s", req.Method, req.URL.Path, resp.StatusCode, strings.TrimSpace(string(raw)))
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, err
	}
	if key == "" {
		return out, nil
	}
	m, ok := out[key].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s %s: no %q in %s", req.Method, req.URL.Path, key, raw)
	}
	return m, nil
}
