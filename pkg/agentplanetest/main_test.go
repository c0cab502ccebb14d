package agentplanetest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/pkg/agentplanetest"
)

// cfg reaches the API server every test of this package shares (TestMain).
var cfg *rest.Config

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard()) // envtest's and the platforms' logs
	env := agentplanetest.NewEnvironment()
	var err error
	if cfg, err = env.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "start envtest (KUBEBUILDER_ASSETS, or `agentplane envtest-assets`):", err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil && code == 0 {
		fmt.Fprintln(os.Stderr, "stop envtest:", err)
		code = 1
	}
	os.Exit(code)
}

// startPlatform starts a platform handle for t and stops it at t's end.
func startPlatform(t *testing.T, c *rest.Config, opts ...agentplanetest.Option) *agentplanetest.Platform {
	t.Helper()
	p, err := agentplanetest.Start(context.Background(), c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return p
}

// runAgent creates an Agent in workspace ws (Token creates the workspace) and waits until it runs.
func runAgent(t *testing.T, p *agentplanetest.Platform, ws, name string) (*agentsv1.Agent, string) {
	t.Helper()
	g := NewWithT(t)
	tok, err := p.Token(ws)
	g.Expect(err).NotTo(HaveOccurred())
	ctx := context.Background()
	a := &agentsv1.Agent{
		ObjectMeta: metav1.ObjectMeta{Namespace: ws, Name: name},
		Spec:       agentsv1.AgentSpec{DisplayName: "Agent " + name},
	}
	created := time.Now()
	g.Expect(p.Client().Create(ctx, a)).To(Succeed())
	defer func() { t.Logf("agent %s/%s running %.2fs after its create", ws, name, time.Since(created).Seconds()) }()
	g.Eventually(agentplanetest.Fresh(ctx, p.Client(), a), 60*time.Second, 50*time.Millisecond).Should(And(
		agentplanetest.HavePhase(agentplanetest.PhaseRunning),
		agentplanetest.HaveCondition(agentplanetest.ConditionReady, metav1.ConditionTrue),
	))
	return a, tok
}

// getJSON sends GET url with the bearer token and decodes the answer.
func getJSON(t *testing.T, url, tok string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, raw)
	}
	return resp.StatusCode, body
}

// deleteAll removes what a test made in its workspace's namespace (Agents first, so their
// finalizers run while the platform does).
func deleteAll(t *testing.T, c client.Client, ws string) {
	t.Helper()
	ctx := context.Background()
	if err := c.DeleteAllOf(ctx, &agentsv1.Agent{}, client.InNamespace(ws)); err != nil {
		t.Error(err)
	}
	NewWithT(t).Eventually(func() (int, error) {
		l := &agentsv1.AgentList{}
		err := c.List(ctx, l, client.InNamespace(ws))
		return len(l.Items), err
	}, 30*time.Second).Should(BeZero())
}
