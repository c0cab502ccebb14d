package ops

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// meterRuntime measures the agents named in use (CPU seconds grow by cpuStep per read).
type meterRuntime struct {
	runtime.Runtime
	use     map[string]runtime.ResourceUsage
	cpuStep float64
}

func (m *meterRuntime) Usage(_ context.Context, _ string, agents []*agentsv1.Agent) map[string]runtime.ResourceUsage {
	out := map[string]runtime.ResourceUsage{}
	for _, a := range agents {
		u, ok := m.use[a.Name]
		if !ok {
			continue
		}
		if u.CPUKnown {
			u.CPUSeconds += m.cpuStep
			m.use[a.Name] = u
		}
		out[a.Name] = u
	}
	return out
}

func fleetAgentObj(ns, name string, phase agentsv1.AgentPhase, created time.Time) *agentsv1.Agent {
	return &agentsv1.Agent{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(created)},
		Spec:       agentsv1.AgentSpec{DisplayName: name},
		Status:     agentsv1.AgentStatus{Phase: phase},
	}
}

func TestFleetReadsRowsUsageBudgetsPoolsAndCPURates(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	clock := now
	busy := fleetAgentObj("ws", "busy", agentsv1.AgentRunning, now.Add(-time.Hour))
	busy.Spec.Budget = &agentsv1.ModelBudget{TokensPerDay: 1000, CostMicrosPerDay: 2000}
	busy.Status.Usage = &agentsv1.ModelUsage{Day: "2026-11-30", Requests: 2, InputTokens: 300, OutputTokens: 100,
		CostMicros: 2500, Currency: "EUR", UnpricedRequests: 1}
	busy.Status.Rendering = agentsv1.AgentRendering("Outdated")
	sleeper := fleetAgentObj("ws", "sleeper", agentsv1.AgentSuspended, now.Add(-30*time.Minute))
	wake := metav1.NewTime(now.Add(time.Hour))
	sleeper.Status.Sleep = &agentsv1.AgentSleep{NextWakeAt: &wake}
	sleeper.Status.Usage = &agentsv1.ModelUsage{Day: "2026-11-29", InputTokens: 999, CostMicros: 999, Currency: "EUR"} // yesterday's
	stranger := fleetAgentObj("other", "stranger", agentsv1.AgentRunning, now)
	ws := &agentsv1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: "ws"}, Spec: agentsv1.WorkspaceSpec{Budget: &agentsv1.ModelBudget{TokensPerDay: 300}}}
	ws.Status.Usage = &agentsv1.ModelUsage{Day: "2026-11-30", InputTokens: 400}
	mine := &agentsv1.GatewayPool{ObjectMeta: metav1.ObjectMeta{Name: "mine"}, Spec: agentsv1.GatewayPoolSpec{Replicas: 2, Workspaces: []string{"ws"}},
		Status: agentsv1.GatewayPoolStatus{Ready: 1, Booting: 1, Conditions: []metav1.Condition{{Type: agentsv1.ConditionReady, Status: metav1.ConditionFalse}}}}
	all := &agentsv1.GatewayPool{ObjectMeta: metav1.ObjectMeta{Name: "all"}, Spec: agentsv1.GatewayPoolSpec{Replicas: 1}}
	theirs := &agentsv1.GatewayPool{ObjectMeta: metav1.ObjectMeta{Name: "theirs"}, Spec: agentsv1.GatewayPoolSpec{Replicas: 1, Workspaces: []string{"other"}}}
	rt := &meterRuntime{cpuStep: 0.5, use: map[string]runtime.ResourceUsage{
		"busy": {MemoryBytes: 200 << 20, MemoryLimitBytes: 1 << 30, CPUSeconds: 10, CPUKnown: true},
	}}
	o, _ := fakeOps(Deps{Runtime: rt, Now: func() time.Time { return clock }}, busy, sleeper, stranger, ws, mine, all, theirs)

	w := o.WatchFleet(Scope{Namespace: "ws"}, "ws", time.Second)
	f, err := w.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !f.Metered || len(f.Agents) != 2 || f.Agents[0].ID != "busy" || f.Agents[1].ID != "sleeper" {
		t.Fatalf("rows: %+v", f.Agents)
	}
	b, s := f.Agents[0], f.Agents[1]
	if b.TokensToday != 400 || b.RequestsToday != 2 || b.TokensPerDay != 1000 || b.TokensLeft != 600 || b.Rendering != "Outdated" ||
		b.CostMicrosToday != 2500 || b.Currency != "EUR" || b.UnpricedToday != 1 || b.CostMicrosPerDay != 2000 || b.CostMicrosLeft != 0 {
		t.Errorf("busy's usage: %+v", b)
	}
	if !b.Measured || b.MemoryBytes != 200<<20 || b.MemoryLimitBytes != 1<<30 || b.CPUKnown {
		t.Errorf("busy's first reading (no CPU rate from one sample): %+v", b)
	}
	if s.TokensToday != 0 || s.CostMicrosToday != 0 || s.Currency != "" || !s.Asleep || s.NextWakeAt == nil || !s.NextWakeAt.Equal(wake.Time) || s.Measured {
		t.Errorf("sleeper: %+v", s)
	}
	if f.Workspace.TokensToday != 400 || f.Workspace.TokensLeft != 0 || f.Workspace.TokensPerDay != 300 {
		t.Errorf("workspace: %+v", f.Workspace)
	}
	if len(f.Pools) != 2 || f.Pools[0].Name != "all" || f.Pools[1].Name != "mine" || f.Pools[1].Ready != 1 || f.Pools[1].Healthy {
		t.Errorf("pools: %+v", f.Pools)
	}

	// Two seconds later: half a CPU second in two seconds is 25% of a core.
	clock = clock.Add(2 * time.Second)
	f, err = w.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if b := f.Agents[0]; !b.CPUKnown || b.CPUPercent != 25 {
		t.Errorf("busy's CPU rate: %+v", b)
	}
	// Within the resource interval the runtime is not read again: the last rate stands.
	clock = clock.Add(500 * time.Millisecond)
	if f, _ = w.Next(context.Background()); f.Agents[0].CPUPercent != 25 || rt.use["busy"].CPUSeconds != 11 {
		t.Errorf("read the runtime between samples: %+v, %v", f.Agents[0], rt.use["busy"])
	}
}

func TestFleetWithoutAMeterSaysNotAvailable(t *testing.T) {
	o, _ := fakeOps(Deps{}, fleetAgentObj("ws", "a", "", time.Now()))
	f, err := o.Fleet(context.Background(), Scope{Namespace: "ws"}, "ws")
	if err != nil {
		t.Fatal(err)
	}
	if f.Metered || len(f.Agents) != 1 || f.Agents[0].Measured || f.Agents[0].Phase != agentsv1.AgentStarting {
		t.Fatalf("fleet: %+v", f)
	}
}

func TestFleetTakesARuntimesOwnCPURate(t *testing.T) {
	rt := &meterRuntime{use: map[string]runtime.ResourceUsage{
		"pod": {MemoryBytes: 300 << 20, MemoryLimitBytes: 2 << 30, CPUCores: 0.25, CPURateKnown: true},
	}}
	o, _ := fakeOps(Deps{Runtime: rt}, fleetAgentObj("ws", "pod", agentsv1.AgentRunning, time.Now()))
	f, err := o.Fleet(context.Background(), Scope{Namespace: "ws"}, "ws")
	if err != nil {
		t.Fatal(err)
	}
	if a := f.Agents[0]; !a.Measured || !a.CPUKnown || a.CPUPercent != 25 || a.MemoryLimitBytes != 2<<30 {
		t.Fatalf("a rate from the first reading: %+v", a)
	}
}

// agentEvent is an event about the agent named agent of namespace ns, last seen at last.
func agentEvent(ns, name, agent, typ string, last time.Time, series int32) *eventsv1.Event {
	e := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Regarding:  corev1.ObjectReference{Kind: agentsv1.KindAgent, Namespace: ns, Name: agent},
		Type:       typ, Reason: "R", EventTime: metav1.NewMicroTime(last),
	}
	if series > 0 {
		e.EventTime = metav1.NewMicroTime(last.Add(-3 * time.Hour))
		e.Series = &eventsv1.EventSeries{Count: series, LastObservedTime: metav1.NewMicroTime(last)}
	}
	return e
}

func TestFleetCountsEachAgentsWarningsOfTheLastHour(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	clock := now
	o, c := fakeOps(Deps{Now: func() time.Time { return clock }},
		fleetAgentObj("ws", "crashy", agentsv1.AgentRunning, now.Add(-2*time.Hour)),
		fleetAgentObj("ws", "calm", agentsv1.AgentRunning, now.Add(-time.Hour)),
		agentEvent("ws", "e1", "crashy", corev1.EventTypeWarning, now.Add(-10*time.Minute), 0),
		agentEvent("ws", "e2", "crashy", corev1.EventTypeWarning, now.Add(-time.Minute), 3),    // a series: 3
		agentEvent("ws", "e3", "crashy", corev1.EventTypeWarning, now.Add(-61*time.Minute), 0), // too old
		agentEvent("ws", "e4", "calm", corev1.EventTypeNormal, now.Add(-time.Minute), 0),       // not an error
		agentEvent("other", "e5", "calm", corev1.EventTypeWarning, now.Add(-time.Minute), 0),   // another workspace's
	)
	w := o.WatchFleet(Scope{Namespace: "ws"}, "ws", 5*time.Second)
	f, err := w.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if f.Agents[0].ID != "crashy" || f.Agents[0].Errors != 4 || f.Agents[1].Errors != 0 {
		t.Fatalf("errors: %+v", f.Agents)
	}
	// A new warning counts at the next count, not between counts.
	if err := c.Create(context.Background(), agentEvent("ws", "e6", "calm", corev1.EventTypeWarning, now, 0)); err != nil {
		t.Fatal(err)
	}
	clock = now.Add(time.Second)
	if f, _ = w.Next(context.Background()); f.Agents[1].Errors != 0 {
		t.Errorf("counted between counts: %+v", f.Agents[1])
	}
	clock = now.Add(5 * time.Second)
	if f, _ = w.Next(context.Background()); f.Agents[1].Errors != 1 {
		t.Errorf("the new warning: %+v", f.Agents[1])
	}
	// An hour on, the old ones have left the window (the series' last at -1 min is gone too).
	clock = now.Add(time.Hour)
	if f, _ = w.Next(context.Background()); f.Agents[0].Errors != 0 || f.Agents[1].Errors != 1 {
		t.Errorf("an hour later: %+v", f.Agents)
	}
}
