package controllers

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
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
