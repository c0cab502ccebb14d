package ops

import (
	"context"
	"slices"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// Fleet is a workspace's agents as the fleet view shows them: what each runs, sleeps, uses
// and spends, with the workspace's totals and the warm pools that serve it. It is read from
// the manager's informer cache (no request to the API server per agent), the runtime, and one
// list of the namespace's Warning events (the agents' errors in the last hour).
type Fleet struct {
	At time.Time
	// Workspace is the workspace's model usage today and its budget.
	Workspace FleetWorkspace
	Agents    []FleetAgent
	Pools     []FleetPool
	// Metered: the runtime measures memory (and maybe CPU); false: every agent's reads n/a.
	Metered bool
	// Currency is the platform's model price table's, the spend budgets' ("": no table).
	Currency string
}

// FleetWorkspace is the workspace's model usage today (UTC) against its budget.
type FleetWorkspace struct {
	Name string
	ModelUse
}

// ModelUse is model usage today (UTC) through the model proxy against a daily token budget.
type ModelUse struct {
	TokensToday, RequestsToday int64
	// CostMicrosToday is today's spend by the platform's price table, in millionths of
	// Currency ("": nothing priced today); UnpricedToday counts requests it had no price for.
	CostMicrosToday, UnpricedToday int64
	Currency                       string
	// TokensPerDay is the budget (0: unlimited); TokensLeft what remains of it today.
	TokensPerDay, TokensLeft int64
	// RequestsPerMinute is the request budget (0: unlimited).
	RequestsPerMinute int64
	// CostMicrosPerDay is the spend budget (0: unlimited); CostMicrosLeft what remains of it.
	CostMicrosPerDay, CostMicrosLeft int64
}

// FleetAgent is one agent's row.
type FleetAgent struct {
	ID, Name string
	Phase    agentsv1.AgentPhase
	// Asleep: the agent is suspended (by request or idle); NextWakeAt when it wakes for its
	// next scheduled task (nil: none known).
	Asleep     bool
	NextWakeAt *time.Time
	// Memory and CPU now, from the runtime (Measured false: not available).
	Measured                      bool
	MemoryBytes, MemoryLimitBytes int64
	// CPUPercent of one core over the last sampling interval (CPUKnown false: not available,
	// or no earlier sample yet).
	CPUPercent float64
	CPUKnown   bool
	ModelUse
	EngineVersion string
	// Rendering is Current, Outdated or "" (a runtime without renderings).
	Rendering agentsv1.AgentRendering
	Restarts  int32
	// Errors is how many Warning events the agent had in the last hour (ErrorWindow).
	Errors    int64
	CreatedAt time.Time
}

// FleetPool is a warm pool that serves the workspace, as its status says.
type FleetPool struct {
	Name, EngineVersion               string
	Desired, Replicas, Ready, Booting int32
	Claimed                           int64
	// Healthy is the pool's Ready condition.
	Healthy bool
}

// FleetWatch reads a workspace's fleet over and over (a stream's lifetime): it keeps the last
// CPU samples so each read has CPU rates, and reads the runtime and counts the agents'
// warnings (one live list of the namespace's Warning events) at most every resourceEvery.
type FleetWatch struct {
	o         *Ops
	t         Scope
	workspace string
	every     time.Duration
	sampledAt time.Time
	samples   map[types.UID]cpuSample
	usage     map[types.UID]FleetAgent // the last resource readings, between samples
	errorsAt  time.Time                // when the agents' warnings were last counted
	errors    map[string]int64         // the last count, by agent name
	read      bool                     // a first read was answered
}

type cpuSample struct {
	at      time.Time
	seconds float64
}

// DefaultFleetResourceEvery is how often a FleetWatch reads the runtime's resource use.
const DefaultFleetResourceEvery = 5 * time.Second

// WatchFleet starts reading the fleet of workspace (the workspace's namespace). A credential
// bound to one agent is refused by the door before (the route does not take it).
func (o *Ops) WatchFleet(t Scope, workspace string, resourceEvery time.Duration) *FleetWatch {
	if resourceEvery <= 0 {
		resourceEvery = DefaultFleetResourceEvery
	}
	return &FleetWatch{o: o, t: t, workspace: workspace, every: resourceEvery,
		samples: map[types.UID]cpuSample{}, usage: map[types.UID]FleetAgent{}}
}

// Fleet reads the workspace's fleet once (no CPU rates: they need two samples).
func (o *Ops) Fleet(ctx context.Context, t Scope, workspace string) (Fleet, error) {
	return o.WatchFleet(t, workspace, 0).Next(ctx)
}

// Next reads the fleet now.
func (w *FleetWatch) Next(ctx context.Context) (Fleet, error) {
	c, now := w.o.d.Client, w.o.d.Now().UTC()
	var list agentsv1.AgentList
	if err := c.List(ctx, &list, client.InNamespace(w.t.Namespace)); err != nil {
		return Fleet{}, err
	}
	f := Fleet{At: now, Workspace: FleetWorkspace{Name: w.workspace}}
	// The first read checks kube-apiserver (a live read of the workspace): a fleet is not
	// answered from the cache alone while it is down (503, as every route); later reads of a
	// stream are the cache's.
	reader := client.Reader(c)
	if !w.read {
		reader = w.o.d.APIReader
	}
	var ws agentsv1.Workspace
	if err := reader.Get(ctx, client.ObjectKey{Name: w.workspace}, &ws); err == nil {
		f.Workspace.ModelUse = modelUse(ws.Spec.Budget, ws.Status.Usage, now)
	} else if client.IgnoreNotFound(err) != nil {
		return Fleet{}, err
	}
	meter, metered := w.o.d.Runtime.(runtime.Meter)
	f.Metered = metered
	if m := w.o.d.ModelMeter; m != nil {
		f.Currency = m.Currency()
	}
	sample := metered && now.Sub(w.sampledAt) >= w.every
	if sample {
		w.sampledAt = now
	}
	live := make([]*agentsv1.Agent, 0, len(list.Items))
	for i := range list.Items {
		a := &list.Items[i]
		if a.DeletionTimestamp == nil && (w.t.OnlyAgent == "" || a.Name == w.t.OnlyAgent) {
			live = append(live, a)
		}
	}
	if !w.read || now.Sub(w.errorsAt) >= w.every {
		errs, err := warningsByAgent(ctx, w.o.d.APIReader, w.t.Namespace, now)
		if err != nil {
			return Fleet{}, err
		}
		w.errors, w.errorsAt = errs, now
	}
	if sample {
		use := meter.Usage(ctx, w.t.Namespace, live)
		for _, a := range live {
			u, ok := use[a.Name]
			w.measure(a.UID, u, ok, now)
		}
	}
	seen := make(map[types.UID]bool, len(live))
	for _, a := range live {
		seen[a.UID] = true
		row := fleetAgent(a, now)
		row.Errors = w.errors[a.Name]
		if u, ok := w.usage[a.UID]; ok {
			row.Measured, row.MemoryBytes, row.MemoryLimitBytes = u.Measured, u.MemoryBytes, u.MemoryLimitBytes
			row.CPUPercent, row.CPUKnown = u.CPUPercent, u.CPUKnown
		}
		f.Agents = append(f.Agents, row)
	}
	for uid := range w.usage {
		if !seen[uid] {
			delete(w.usage, uid)
			delete(w.samples, uid)
		}
	}
	sort.Slice(f.Agents, func(i, j int) bool {
		a, b := f.Agents[i], f.Agents[j]
		return a.CreatedAt.Before(b.CreatedAt) || a.CreatedAt.Equal(b.CreatedAt) && a.ID < b.ID
	})
	pools, err := w.pools(ctx)
	if err != nil {
		return Fleet{}, err
	}
	f.Pools = pools
	w.read = true
	return f, nil
}

// measure records an agent's reading (ok false: not available) into w.usage: the runtime's
// CPU rate, or one from its CPU time since the last reading.
func (w *FleetWatch) measure(uid types.UID, u runtime.ResourceUsage, ok bool, now time.Time) {
	if !ok {
		delete(w.samples, uid)
		w.usage[uid] = FleetAgent{}
		return
	}
	row := FleetAgent{Measured: true, MemoryBytes: u.MemoryBytes, MemoryLimitBytes: u.MemoryLimitBytes}
	switch {
	case u.CPURateKnown:
		row.CPUPercent, row.CPUKnown = 100*u.CPUCores, true
	case u.CPUKnown:
		if prev, had := w.samples[uid]; had && now.After(prev.at) && u.CPUSeconds >= prev.seconds {
			row.CPUPercent = 100 * (u.CPUSeconds - prev.seconds) / now.Sub(prev.at).Seconds()
			row.CPUKnown = true
		}
		w.samples[uid] = cpuSample{at: now, seconds: u.CPUSeconds}
	}
	w.usage[uid] = row
}

// pools are the GatewayPools that serve the workspace: those naming it, and those naming no
// workspace (the local runtime's serve all).
func (w *FleetWatch) pools(ctx context.Context) ([]FleetPool, error) {
	var list agentsv1.GatewayPoolList
	if err := w.o.d.Client.List(ctx, &list); err != nil {
		return nil, err
	}
	var out []FleetPool
	for _, p := range list.Items {
		if len(p.Spec.Workspaces) > 0 && !slices.Contains(p.Spec.Workspaces, w.workspace) {
			continue
		}
		healthy := false
		for _, c := range p.Status.Conditions {
			if c.Type == agentsv1.ConditionReady {
				healthy = c.Status == "True"
			}
		}
		out = append(out, FleetPool{
			Name: p.Name, EngineVersion: p.Status.EngineVersion, Desired: p.Spec.Replicas,
			Replicas: p.Status.Replicas, Ready: p.Status.Ready, Booting: p.Status.Booting,
			Claimed: p.Status.Claimed, Healthy: healthy,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// fleetAgent is a's row without the runtime's readings.
func fleetAgent(a *agentsv1.Agent, now time.Time) FleetAgent {
	row := FleetAgent{
		ID: a.Name, Name: a.Spec.DisplayName, Phase: a.Status.Phase, EngineVersion: a.Status.EngineVersion,
		Rendering: a.Status.Rendering, Restarts: a.Status.Restarts, CreatedAt: a.CreationTimestamp.UTC(),
		ModelUse: modelUse(a.Spec.Budget, a.Status.Usage, now),
	}
	if row.Phase == "" {
		row.Phase = agentsv1.AgentStarting
	}
	row.Asleep = row.Phase == agentsv1.AgentSuspended
	if sl := a.Status.Sleep; sl != nil && sl.NextWakeAt != nil && row.Asleep {
		t := sl.NextWakeAt.UTC()
		row.NextWakeAt = &t
	}
	return row
}

// modelUse is today's usage (a count of an earlier day is today's zero) against budget.
func modelUse(b *agentsv1.ModelBudget, u *agentsv1.ModelUsage, now time.Time) ModelUse {
	var m ModelUse
	if u != nil && u.Day == now.Format(time.DateOnly) {
		m.TokensToday, m.RequestsToday = u.Tokens(), u.Requests
		m.CostMicrosToday, m.UnpricedToday, m.Currency = u.CostMicros, u.UnpricedRequests, u.Currency
	}
	if b != nil {
		m.TokensPerDay, m.RequestsPerMinute = b.TokensPerDay, b.RequestsPerMinute
		if b.TokensPerDay > 0 {
			m.TokensLeft = max(b.TokensPerDay-m.TokensToday, 0)
		}
		if m.CostMicrosPerDay = b.CostMicrosPerDay; m.CostMicrosPerDay > 0 {
			m.CostMicrosLeft = max(b.CostMicrosPerDay-m.CostMicrosToday, 0)
		}
	}
	return m
}
