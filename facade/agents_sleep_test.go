package facade_test

import (
	"net/http"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/rules/auth"
)

// counter reads a counter of the controllers' registry by its one label's value.
func counter(name, label string) float64 {
	GinkgoHelper()
	families, err := crmetrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == label {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// agentPassed changes the agent's model budget (nothing its controller acts on: the model
// proxy reads it) and waits for the Agent controller's pass over that generation: a pass that
// began after this call has ended.
func agentPassed(ns, id string) {
	GinkgoHelper()
	a := &agentsv1.Agent{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: id}, a)).To(Succeed())
	patch := client.MergeFrom(a.DeepCopy())
	budget := agentsv1.ModelBudget{TokensPerDay: 1 << 40}
	if a.Spec.Budget != nil {
		budget.TokensPerDay = a.Spec.Budget.TokensPerDay + 1
	}
	a.Spec.Budget = &budget
	Expect(k8sClient.Patch(ctx, a, patch)).To(Succeed())
	Eventually(func() int64 {
		got := &agentsv1.Agent{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(a), got)).To(Succeed())
		return got.Status.ObservedGeneration
	}).Should(Equal(a.Generation))
}

// The suite's platform wakes a suspended agent 20 s before its next task, keeps a woken
// agent awake 4 s after its last request, and 5 s after its task's time.
var _ = Describe("Suspend and resume", Ordered, func() {
	const ws = "sleep-a"
	var tok string

	agentObj := func(id string) *agentsv1.Agent {
		GinkgoHelper()
		a := &agentsv1.Agent{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ws, Name: id}, a)).To(Succeed())
		return a
	}
	phaseOf := func(id string) func() agentsv1.AgentPhase {
		return func() agentsv1.AgentPhase { return agentObj(id).Status.Phase }
	}
	// refused: nothing listens on the gateway's old address any more.
	refused := func(endpoint string) func() error {
		return func() error {
			resp, err := (&http.Client{Timeout: time.Second}).Get(endpoint + "/healthz")
			if err == nil {
				resp.Body.Close()
			}
			return err
		}
	}

	// addTaskIn adds a one-shot task to the agent, due in about d; it returns its time.
	addTaskIn := func(id string, d time.Duration) time.Time {
		GinkgoHelper()
		due := time.Now().Add(d).UTC().Truncate(time.Second)
		r := call("POST", "/v0/agents/"+id+"/tasks", tok, map[string]any{
			"name": "report", "schedule": map[string]any{"kind": "at", "at": due.Format(time.RFC3339)},
			"payload": map[string]any{"kind": "agentTurn", "message": "write the report"},
		})
		Expect(r.Status).To(BeNumerically("<", 300), r.Raw)
		return due
	}

	BeforeAll(func() {
		workspace(ws, agentsv1.PlanPro, agentsv1.WorkspaceMember{UserID: "sam", Role: agentsv1.RoleOwner})
		tok = token(ws, "sam", agentsv1.RoleOwner, auth.ScopeAgentsRead, auth.ScopeAgentsWrite, auth.ScopeAgentsExec)
	})

	It("suspends: no gateway runs, the files stay byte-identical, and resume brings the gateway back", func() {
		id := newAgentIn(tok, "sleeper")
		sum := shell(tok, id, "mkdir -p notes && head -c 65536 /dev/urandom > notes/blob && echo hello > notes/a.txt && "+
			"find . -path ./.git -prune -o -type f -print | LC_ALL=C sort | xargs sha256sum | sha256sum")
		endpoint := agentObj(id).Status.Endpoint
		Expect(endpoint).NotTo(BeEmpty())

		r := call("POST", "/v0/agents/"+id+"/suspend", tok, nil)
		Expect(r.Status).To(Equal(200), r.Raw)
		Expect(agentOf(r)["status"]).To(Equal("suspended"))
		Expect(agentOf(r)["suspended"]).To(BeTrue())
		Expect(agentOf(r)).NotTo(HaveKey("endpoint"))
		Eventually(refused(endpoint)).Should(HaveOccurred())
		a := agentObj(id)
		c := meta.FindStatusCondition(a.Status.Conditions, agentsv1.ConditionSuspended)
		Expect(c).NotTo(BeNil())
		Expect(c.Status).To(Equal(metav1.ConditionTrue))
		Expect(c.Reason).To(Equal(agentsv1.ReasonSuspendedBySpec))
		Expect(meta.IsStatusConditionTrue(a.Status.Conditions, agentsv1.ConditionReady)).To(BeTrue(), "a suspended agent is as its spec asks")
		// No task: nothing to wake for (no next wake, the one timer a sleeping agent has), and a
		// later pass of the controller keeps it asleep.
		Expect(a.Status.Sleep.NextWakeAt).To(BeNil())
		agentPassed(ws, id)
		a = agentObj(id)
		Expect(a.Status.Phase).To(Equal(agentsv1.AgentSuspended))
		Expect(a.Status.Sleep.NextWakeAt).To(BeNil())
		Expect(meta.FindStatusCondition(a.Status.Conditions, agentsv1.ConditionSuspended)).To(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", agentsv1.ReasonSuspendedBySpec)))

		r = call("POST", "/v0/agents/"+id+"/resume", tok, nil)
		Expect(r.Status).To(Equal(200), r.Raw)
		Expect(agentOf(r)["status"]).To(Equal("running"))
		Expect(shell(tok, id, "find . -path ./.git -prune -o -type f -print | LC_ALL=C sort | xargs sha256sum | sha256sum")).To(Equal(sum))
		Expect(agentObj(id).Spec.Suspended).To(BeFalse())
	})

	It("wakes a suspended agent for a request that needs its gateway, and lets it sleep again after the window", func() {
		id := newAgentIn(tok, "napper")
		suspended, woken := counter("agentplane_agent_suspensions_total", "Suspended"), counter("agentplane_agent_wakes_total", "Request")
		Expect(call("POST", "/v0/agents/"+id+"/suspend", tok, nil).Status).To(Equal(200))
		Expect(counter("agentplane_agent_suspensions_total", "Suspended")).To(BeNumerically(">", suspended))
		// The console needs the gateway's home: the request waits for the wake instead of failing.
		Expect(strings.TrimSpace(shell(tok, id, "echo awake"))).To(Equal("awake"))
		a := agentObj(id)
		Expect(a.Status.Phase).To(Equal(agentsv1.AgentRunning))
		Expect(a.Spec.WakeRequestedAt).NotTo(BeNil())
		Expect(meta.FindStatusCondition(a.Status.Conditions, agentsv1.ConditionSuspended).Reason).To(Equal(agentsv1.ReasonWokenByRequest))
		Expect(a.Spec.Suspended).To(BeTrue(), "a wake is not a resume")
		Expect(counter("agentplane_agent_wakes_total", "Request")).To(BeNumerically(">", woken))
		// Reading the agent is no activity; after the 4 s window it sleeps again.
		Eventually(phaseOf(id)).Should(Equal(agentsv1.AgentSuspended))
	})

	It("wakes a suspended agent for a channel message as the relay asks, and says so", func() {
		id := newAgentIn(tok, "listener")
		woken := counter("agentplane_agent_wakes_total", "Message")
		Expect(call("POST", "/v0/agents/"+id+"/suspend", tok, nil).Status).To(Equal(200))
		// What the channel relay writes for a message to a sleeping agent (wakeAgent).
		a := agentObj(id)
		patch := client.MergeFrom(a.DeepCopy())
		at := metav1.NewTime(time.Now().UTC().Truncate(time.Second))
		a.Spec.WakeRequestedAt = &at
		metav1.SetMetaDataAnnotation(&a.ObjectMeta, agentsv1.AnnotationMessageWake, at.Format(time.RFC3339))
		Expect(k8sClient.Patch(ctx, a, patch)).To(Succeed())
		Eventually(phaseOf(id)).Should(Equal(agentsv1.AgentRunning))
		a = agentObj(id)
		Expect(meta.FindStatusCondition(a.Status.Conditions, agentsv1.ConditionSuspended)).To(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", agentsv1.ReasonWokenByMessage)))
		Expect(counter("agentplane_agent_wakes_total", "Message")).To(BeNumerically(">", woken))
		// A request after it is a request's wake, even in the same second (the API keeps
		// seconds): the suspend takes the message's annotation away.
		Expect(call("POST", "/v0/agents/"+id+"/suspend", tok, nil).Status).To(Equal(200))
		Expect(agentObj(id).Annotations).NotTo(HaveKey(agentsv1.AnnotationMessageWake))
		Expect(strings.TrimSpace(shell(tok, id, "echo awake"))).To(Equal("awake"))
		Expect(meta.FindStatusCondition(agentObj(id).Status.Conditions, agentsv1.ConditionSuspended).Reason).To(Equal(agentsv1.ReasonWokenByRequest))
	})

	It("suspends an idle agent after its idleAfter, and a request wakes it", func() {
		id := newAgentIn(tok, "idler")
		a := agentObj(id)
		patch := client.MergeFrom(a.DeepCopy())
		a.Spec.IdleAfter = &metav1.Duration{Duration: 3 * time.Second}
		Expect(k8sClient.Patch(ctx, a, patch)).To(Succeed())
		Eventually(phaseOf(id)).Should(Equal(agentsv1.AgentSuspended))
		c := meta.FindStatusCondition(agentObj(id).Status.Conditions, agentsv1.ConditionSuspended)
		Expect(c.Reason).To(Equal(agentsv1.ReasonIdle))
		Expect(agentObj(id).Spec.Suspended).To(BeFalse(), "the idle policy does not touch the spec")

		r := call("GET", "/v0/agents/"+id+"/tasks", tok, nil)
		Expect(r.Status).To(Equal(200), r.Raw)
		Expect(phaseOf(id)()).To(Equal(agentsv1.AgentRunning))
	})

	It("wakes a suspended agent ahead of its next scheduled task", func() {
		id := newAgentIn(tok, "early-bird")
		due := addTaskIn(id, 28*time.Second)
		r := call("POST", "/v0/agents/"+id+"/suspend", tok, nil)
		Expect(r.Status).To(Equal(200), r.Raw)
		sl := agentObj(id).Status.Sleep
		Expect(sl).NotTo(BeNil())
		Expect(sl.NextTaskAt).NotTo(BeNil())
		Expect(sl.NextTaskAt.Time.Equal(due)).To(BeTrue(), "next task %v, want %v", sl.NextTaskAt, due)
		Expect(sl.NextWakeAt.Time.Equal(due.Add(-20*time.Second))).To(BeTrue(), "next wake %v", sl.NextWakeAt)
		Expect(agentOf(call("GET", "/v0/agents/"+id, tok, nil))["nextWakeAt"]).To(Equal(due.Add(-20 * time.Second).Format(time.RFC3339)))

		tasks := counter("agentplane_agent_wakes_total", "Task")
		Eventually(phaseOf(id)).Should(Equal(agentsv1.AgentRunning))
		Expect(counter("agentplane_agent_wakes_total", "Task")).To(BeNumerically(">", tasks))
		a := agentObj(id)
		Expect(a.Status.Sleep.WakeReason).To(Equal(agentsv1.WakeForTask))
		// Woken as planned, never before its lead began. How soon after is the machine's (a
		// loaded one wakes it later): the order is the platform's, not the delay.
		Expect(a.Status.Sleep.WokenAt.Time).NotTo(BeTemporally("<", due.Add(-20*time.Second)), "woken before its lead began")
		Expect(a.Spec.WakeRequestedAt).To(BeNil(), "no request woke it")
		// Awake through the task's time, then asleep again once its grace has passed.
		Eventually(phaseOf(id)).Should(Equal(agentsv1.AgentSuspended))
		Expect(time.Now()).To(BeTemporally(">", due.Add(5*time.Second)))
	})

	It("keeps an idle agent awake for a task due within the lead instead of stopping and starting it", func() {
		id := newAgentIn(tok, "keeper")
		due := addTaskIn(id, 14*time.Second)
		a := agentObj(id)
		patch := client.MergeFrom(a.DeepCopy())
		a.Spec.IdleAfter = &metav1.Duration{Duration: 2 * time.Second}
		Expect(k8sClient.Patch(ctx, a, patch)).To(Succeed())
		// Idle while its task is due within the 20 s lead: the gateway is not stopped (it would
		// be woken again at once), the agent is held awake for the task.
		Eventually(func() string {
			c := meta.FindStatusCondition(agentObj(id).Status.Conditions, agentsv1.ConditionSuspended)
			if c == nil {
				return ""
			}
			return c.Reason + ": " + c.Message
		}).Should(Equal(agentsv1.ReasonWokenForTask + ": awake for its scheduled task at " + due.Format(time.RFC3339)))
		a = agentObj(id)
		Expect(a.Status.Sleep.SuspendedAt).To(BeNil(), "the agent was never put to sleep")
		Expect(a.Status.Phase).To(Equal(agentsv1.AgentRunning))
		// Asleep once the task's time and its grace have passed.
		Eventually(phaseOf(id)).Should(Equal(agentsv1.AgentSuspended))
		Expect(time.Now()).To(BeTemporally(">", due.Add(5*time.Second)))
	})
})
