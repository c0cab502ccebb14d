package controllers_test

import (
	"context"
	"sync"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	agentctrl "github.com/agentplane/agentplane/controllers/agent"
	"github.com/agentplane/agentplane/internal/adapters/engine/openclaw"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// sleepRuntime is an in-memory runtime whose gateways sleep: a sleeping gateway answers no
// engine command (the CLI finds no gateway to talk to), and each wake of a sleeping gateway
// is counted, as each is a restore of its checkpoint.
type sleepRuntime struct {
	*memRuntime
	smu      sync.Mutex
	asleep   map[string]bool
	suspends map[string]int
	wakes    map[string]int
	// asleepExecs counts the commands run against a sleeping gateway.
	asleepExecs map[string]int
	// onFirstSuspend runs once per agent, as its gateway first goes to sleep (mid-pass).
	onFirstSuspend func(*agentsv1.Agent)
}

func newSleepRuntime() *sleepRuntime {
	return &sleepRuntime{
		memRuntime: &memRuntime{files: map[string][]byte{}},
		asleep:     map[string]bool{}, suspends: map[string]int{}, wakes: map[string]int{}, asleepExecs: map[string]int{},
	}
}

func (s *sleepRuntime) Ensure(ctx context.Context, a *agentsv1.Agent, d runtime.Desired) (runtime.Observed, error) {
	key := a.Namespace + "/" + a.Name
	s.smu.Lock()
	first := false
	switch {
	case d.Stopped && d.Suspended && !s.asleep[key]:
		s.suspends[key]++
		first = s.suspends[key] == 1
		s.asleep[key] = true
	case !d.Stopped && s.asleep[key]:
		s.wakes[key]++
		s.asleep[key] = false
	}
	s.smu.Unlock()
	if first && s.onFirstSuspend != nil {
		s.onFirstSuspend(a)
	}
	o, err := s.memRuntime.Ensure(ctx, a, d)
	if d.Stopped {
		o.Phase = runtime.PhaseStopped
	}
	return o, err
}

func (s *sleepRuntime) Exec(ctx context.Context, a *agentsv1.Agent, req runtime.ExecRequest) (runtime.ExecResult, error) {
	key := a.Namespace + "/" + a.Name
	s.smu.Lock()
	defer s.smu.Unlock()
	if s.asleep[key] {
		s.asleepExecs[key]++
		return runtime.ExecResult{ExitCode: 1, Stdout: []byte("gateway connect failed: connect ECONNREFUSED 127.0.0.1:18789")}, nil
	}
	if req.Engine && len(req.Argv) > 1 && req.Argv[0] == "cron" && req.Argv[1] == "list" {
		return runtime.ExecResult{Stdout: []byte(`{"jobs":[]}`)}, nil
	}
	return s.memRuntime.Exec(ctx, a, req)
}

func (s *sleepRuntime) counts(key string) (suspends, wakes, asleepExecs int) {
	s.smu.Lock()
	defer s.smu.Unlock()
	return s.suspends[key], s.wakes[key], s.asleepExecs[key]
}

// conflictCounter counts the status writes the API server refuses for a conflict.
type conflictCounter struct {
	client.Client
	n *atomic.Int32
}

func (c conflictCounter) Status() client.SubResourceWriter {
	return conflictStatus{SubResourceWriter: c.Client.Status(), n: c.n}
}

type conflictStatus struct {
	client.SubResourceWriter
	n *atomic.Int32
}

func (w conflictStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	err := w.SubResourceWriter.Patch(ctx, obj, patch, opts...)
	if apierrors.IsConflict(err) {
		w.n.Add(1)
	}
	return err
}

// A suspend whose status write is lost: another writer changes the agent (the facade's
// last-active stamp, say) while the pass that put the gateway to sleep runs, so the API
// server refuses that pass's status patch (optimistic lock). The next pass must know the
// gateway sleeps: taken for awake, the agent would be suspended anew, which lists its tasks
// through a gateway that no longer answers, and the failed list would wake it (a restore
// whose engine retries what it was doing when it was dumped: a chat answer sent twice).
var _ = Describe("Agent sleep", Ordered, func() {
	var (
		rt        *sleepRuntime
		conflicts atomic.Int32
		stop      func()
	)
	const ns = "agent-sleep"

	BeforeAll(func() {
		rt = newSleepRuntime()
		rt.onFirstSuspend = func(a *agentsv1.Agent) {
			defer GinkgoRecover()
			Expect(k8sClient.Patch(ctx, a.DeepCopy(), client.RawPatch("application/merge-patch+json",
				[]byte(`{"metadata":{"annotations":{"test.agentplane.io/writer":"another"}}}`)))).To(Succeed())
		}
		mgr := newManager()
		Expect((&agentctrl.Reconciler{
			Client: conflictCounter{Client: mgr.GetClient(), n: &conflicts}, APIReader: mgr.GetAPIReader(),
			Runtime: rt, Engine: openclaw.New(), Admission: testAdmitter(mgr), ModelProxy: testModelProxy{}, ChannelRelay: testChannelRelay{},
		}).SetupWithManager(mgr)).To(Succeed())
		stop = startManager(mgr)
		agentWorkspace(ns, 10)
	})
	AfterAll(func() { stop() })

	It("keeps the gateway asleep when the status write of its suspend is lost", func() {
		a := createAgent(ns, "nap")
		Eventually(func() agentsv1.AgentPhase { return getAgent(a).Status.Phase }).Should(Equal(agentsv1.AgentRunning))
		Eventually(func() error {
			got := getAgent(a)
			got.Spec.Suspended = true
			return k8sClient.Update(ctx, got)
		}).Should(Succeed())

		Eventually(func(g Gomega) {
			got := getAgent(a)
			g.Expect(got.Status.Phase).To(Equal(agentsv1.AgentSuspended))
			g.Expect(meta.FindStatusCondition(got.Status.Conditions, agentsv1.ConditionSuspended)).To(And(
				HaveField("Status", metav1.ConditionTrue), HaveField("Reason", agentsv1.ReasonSuspendedBySpec)))
		}).Should(Succeed())
		Expect(conflicts.Load()).To(BeNumerically(">=", 1), "the suspending pass's status write was not refused: the test proves nothing")
		suspends, wakes, asleepExecs := rt.counts(ns + "/nap")
		Expect(suspends).To(Equal(1), "the gateway was put to sleep more than once")
		Expect(wakes).To(BeZero(), "the sleeping gateway was woken (restored) by the pass after the lost write")
		Expect(asleepExecs).To(BeZero(), "a command was run against the sleeping gateway")
	})
})
