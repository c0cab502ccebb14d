package agent

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
)

func provisionCount(t *testing.T) uint64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(provisionDuration)
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 {
		t.Fatalf("gather: %v (%d families)", err, len(mfs))
	}
	return mfs[0].GetMetric()[0].GetHistogram().GetSampleCount()
}

// Only an agent's first move to running is a provisioning: a gateway back after a crash, a
// stop, a restart or a sleep is not.
func TestObserveFirstRunning(t *testing.T) {
	created := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(created.Add(d)) }
	cond := func(typ string, s metav1.ConditionStatus, when metav1.Time) metav1.Condition {
		return metav1.Condition{Type: typ, Status: s, LastTransitionTime: when, Reason: "R"}
	}
	starting := func(mut func(*agentsv1.AgentStatus)) *agentsv1.Agent {
		a := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)}}
		a.Status.Phase = agentsv1.AgentStarting
		a.Status.Conditions = []metav1.Condition{
			cond(agentsv1.AgentProvisioned, metav1.ConditionTrue, at(time.Second)),
			cond(agentsv1.ConditionReady, metav1.ConditionFalse, at(time.Second)),
		}
		if mut != nil {
			mut(&a.Status)
		}
		return a
	}
	cases := []struct {
		name   string
		before *agentsv1.Agent
		counts bool
	}{
		{"straight to running on the first pass", &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)}}, true},
		{"starting since provisioned", starting(nil), true},
		{"provisioned after waiting (a limit, a failure)", starting(func(s *agentsv1.AgentStatus) {
			s.Conditions[0].LastTransitionTime = at(time.Minute)
		}), true},
		{"already running", starting(func(s *agentsv1.AgentStatus) { s.Phase = agentsv1.AgentRunning }), false},
		{"ready once, then crashed", starting(func(s *agentsv1.AgentStatus) {
			s.Conditions[1].LastTransitionTime = at(time.Hour)
		}), false},
		{"ready (asleep or stopped)", starting(func(s *agentsv1.AgentStatus) {
			s.Conditions[1].Status = metav1.ConditionTrue
		}), false},
		{"a crash counted by the runtime", starting(func(s *agentsv1.AgentStatus) { s.Restarts = 1 }), false},
		{"restarted", starting(func(s *agentsv1.AgentStatus) { r := at(time.Minute); s.LastRestartAt = &r }), false},
		{"slept", starting(func(s *agentsv1.AgentStatus) { w := at(time.Second); s.Sleep = &agentsv1.AgentSleep{SuspendedAt: &w} }), false},
		{"woken for a task", starting(func(s *agentsv1.AgentStatus) { w := at(time.Second); s.Sleep = &agentsv1.AgentSleep{WokenAt: &w} }), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			agent := c.before.DeepCopy()
			agent.Status.Phase = agentsv1.AgentRunning
			n := provisionCount(t)
			observeFirstRunning(agent, c.before, created.Add(90*time.Second))
			if got := provisionCount(t) - n; got != map[bool]uint64{true: 1, false: 0}[c.counts] {
				t.Errorf("observed %d times, want counted=%v", got, c.counts)
			}
		})
	}
	// The phase to running is what counts: starting does not.
	n := provisionCount(t)
	observeFirstRunning(starting(nil), &agentsv1.Agent{}, created)
	if provisionCount(t) != n {
		t.Error("a move to starting was observed")
	}
}

// listReader lists fixed agents (the manager's cache in the collector's place).
type listReader struct {
	client.Reader
	agents []agentsv1.Agent
}

func (r listReader) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	list.(*agentsv1.AgentList).Items = r.agents
	return nil
}

// agentplane_agents counts every phase (zeros included; not reconciled yet is starting), and
// agentplane_agents_failed the not_running agents that are not stopped. Once the manager
// stops, nothing is reported rather than stale numbers.
func TestAgentCollector(t *testing.T) {
	agent := func(phase agentsv1.AgentPhase, stopped bool) agentsv1.Agent {
		a := agentsv1.Agent{}
		a.Status.Phase, a.Spec.Stopped = phase, stopped
		return a
	}
	r := listReader{agents: []agentsv1.Agent{
		agent("", false), agent(agentsv1.AgentStarting, false), agent(agentsv1.AgentRunning, false),
		agent(agentsv1.AgentNotRunning, true), agent(agentsv1.AgentNotRunning, false), agent(agentsv1.AgentNotRunning, false),
	}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- Metrics{Reader: r}.Start(ctx) }()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(agentsByPhase)
	want := `
# HELP agentplane_agents Agents by phase (starting, running, not_running, suspended), from the manager's cache at scrape time.
# TYPE agentplane_agents gauge
agentplane_agents{phase="not_running"} 3
agentplane_agents{phase="running"} 1
agentplane_agents{phase="starting"} 2
agentplane_agents{phase="suspended"} 0
# HELP agentplane_agents_failed Agents whose gateway should run but does not: phase not_running while spec.stopped is false (crashed, failed to provision).
# TYPE agentplane_agents_failed gauge
agentplane_agents_failed 2
`
	deadline := time.Now().Add(testenv.EventBound)
	for {
		err := testutil.GatherAndCompare(reg, strings.NewReader(want))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond) // Start has not set the reader yet
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 0 {
		t.Errorf("after the manager stopped: %d series (%v), want none", n, err)
	}
}
