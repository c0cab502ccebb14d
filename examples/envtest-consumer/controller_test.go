package consumer_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/pkg/agentplanetest"

	consumer "example.com/envtest-consumer"
)

// A labelled ConfigMap becomes an Agent that runs, and the REST facade shows it to a token of
// its workspace.
func TestConfigMapBecomesARunningAgent(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()

	// 1. A control plane with agentplane's CRDs, 2. agentplane on it.
	env := agentplanetest.NewEnvironment()
	cfg, err := env.Start()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(env.Stop()).To(Succeed()) })
	envUp := time.Now()
	p, err := agentplanetest.Start(ctx, cfg)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(p.Stop()).To(Succeed()) })
	platformUp := time.Now()

	// 3. Our own controller, in a manager of our own.
	scheme := runtime.NewScheme()
	g.Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	g.Expect(agentsv1.AddToScheme(scheme)).To(Succeed())
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect((&consumer.AgentFromConfigMap{Client: mgr.GetClient()}).SetupWithManager(mgr)).To(Succeed())
	mgrDone := make(chan error, 1)
	go func() { mgrDone <- mgr.Start(ctx) }()
	t.Cleanup(func() { cancel(); g.Expect(<-mgrDone).To(Succeed()) })

	// The workspace "team-a" (a namespace of the same name) and a token of it.
	tok, err := p.Token("team-a")
	g.Expect(err).NotTo(HaveOccurred())
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "support-bot", Labels: map[string]string{consumer.AgentLabel: "true"}},
		Data:       map[string]string{"displayName": "Support bot", "description": "answers tickets"},
	}
	g.Expect(p.Client().Create(ctx, cm)).To(Succeed())

	agent := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "support-bot"}}
	g.Eventually(agentplanetest.Fresh(ctx, p.Client(), agent), time.Minute, 50*time.Millisecond).Should(And(
		agentplanetest.HavePhase(agentplanetest.PhaseRunning),
		agentplanetest.HaveCondition(agentplanetest.ConditionReady, metav1.ConditionTrue),
	))
	running := time.Now()
	t.Logf("control plane up in %.1fs, agentplane in %.1fs, agent running %.1fs later: %.1fs from start to first Agent running",
		envUp.Sub(start).Seconds(), platformUp.Sub(envUp).Seconds(), running.Sub(platformUp).Seconds(), running.Sub(start).Seconds())
	g.Expect(agent.OwnerReferences).To(HaveLen(1))

	// Read it back through the REST facade, as the platform's users do.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL()+"/v0/agents/support-bot", nil)
	g.Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	var body struct {
		Agent struct{ ID, Name, Description, Status string }
	}
	g.Expect(json.NewDecoder(resp.Body).Decode(&body)).To(Succeed())
	g.Expect(body.Agent.ID).To(Equal("support-bot"))
	g.Expect(body.Agent.Name).To(Equal("Support bot"))
	g.Expect(body.Agent.Description).To(Equal("answers tickets"))
	g.Expect(body.Agent.Status).To(Equal("running"))
}
