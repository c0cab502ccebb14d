package kubeaccess

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/modelproxy"
	"github.com/agentplane/agentplane/internal/statuspatch"
)

// DefaultFlushInterval is how often a replica writes the usage its proxy counted.
const DefaultFlushInterval = 30 * time.Second

// Ledger is the proxy's usage as the recorder drains it (*modelproxy.Proxy).
type Ledger interface {
	Drain() []modelproxy.Delta
	Restore([]modelproxy.Delta)
	Acknowledge(d modelproxy.Delta, agentTotal, workspaceTotal modelproxy.Totals)
}

// Recorder is the one writer of status.usage on Agents and Workspaces. Every replica runs one
// (each proxy counts its own requests): at each interval it drains its proxy's counts and adds
// them to the stored day's totals with a merge patch under optimistic lock (a conflict with
// another replica reads again and adds again). So an agent's status is written at most once
// per interval per replica, and only when it used the proxy; flushes run one after another,
// so a slow API server stretches the interval rather than piling writes up.
type Recorder struct {
	Ledger    Ledger
	Client    client.Client
	APIReader client.Reader
	Interval  time.Duration
	Clock     clock.PassiveClock
	Log       logr.Logger
	// Currency is the proxy's price table's (Proxy.Currency; "" without one): the usage's
	// cost is counted in it.
	Currency string

	// workspaces holds workspace counts whose agents' writes landed but whose own write did
	// not: retried at the next flush (they are not restored to the proxy, which would count
	// the agents twice).
	workspaces map[wsDay]count
}

// count is usage to add: its totals and its share per model.
type count struct {
	usage  modelproxy.Usage
	models map[string]modelproxy.Usage
}

func (c count) add(d count) count {
	out := count{usage: c.usage.Add(d.usage), models: make(map[string]modelproxy.Usage, len(c.models)+len(d.models))}
	for _, m := range []map[string]modelproxy.Usage{c.models, d.models} {
		for k, u := range m {
			out.models[k] = out.models[k].Add(u)
		}
	}
	return out
}

type wsDay struct{ workspace, day string }

// NeedLeaderElection: every replica records its own proxy's usage.
func (r *Recorder) NeedLeaderElection() bool { return false }

// Start flushes every interval until ctx ends, then once more.
func (r *Recorder) Start(ctx context.Context) error {
	interval := r.Interval
	if interval <= 0 {
		interval = DefaultFlushInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			final, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			r.Flush(final)
			return nil
		case <-t.C:
			r.Flush(ctx)
		}
	}
}

// Flush writes what the proxy counted since the last flush.
func (r *Recorder) Flush(ctx context.Context) {
	if r.workspaces == nil {
		r.workspaces = map[wsDay]count{}
	}
	type written struct {
		d          modelproxy.Delta
		agentTotal modelproxy.Totals
	}
	var done []written
	for _, d := range r.Ledger.Drain() {
		ns, name := splitAgent(d.Agent)
		c := count{d.Usage, d.Models}
		total, err := r.add(ctx, &agentsv1.Agent{}, client.ObjectKey{Namespace: ns, Name: name}, d.Day, c)
		if err != nil {
			r.Log.Error(err, "recording model usage; retried at the next flush", "agent", d.Agent)
			r.Ledger.Restore([]modelproxy.Delta{d})
			continue
		}
		done = append(done, written{d, total})
		k := wsDay{d.Workspace, d.Day}
		r.workspaces[k] = r.workspaces[k].add(c)
	}
	wsTotals := map[wsDay]modelproxy.Totals{}
	for k, u := range r.workspaces {
		total, err := r.add(ctx, &agentsv1.Workspace{}, client.ObjectKey{Name: k.workspace}, k.day, u)
		if err != nil {
			r.Log.Error(err, "recording model usage; retried at the next flush", "workspace", k.workspace)
			continue
		}
		wsTotals[k] = total
		delete(r.workspaces, k)
	}
	for _, w := range done {
		r.Ledger.Acknowledge(w.d, w.agentTotal, wsTotals[wsDay{w.d.Workspace, w.d.Day}])
	}
}

// add adds u (counted on day) to obj's status.usage and returns the day's stored totals.
// A delta for a day older than the stored one is dropped; an object that is gone is no error
// (its usage went with it).
func (r *Recorder) add(ctx context.Context, obj client.Object, key client.ObjectKey, day string, u count) (modelproxy.Totals, error) {
	var total modelproxy.Totals
	wrote, err := statuspatch.Run(ctx, statuspatch.Loop{
		Read: func(ctx context.Context, conflicts int) (client.Object, error) {
			var reader client.Reader = r.Client
			if conflicts > 0 {
				reader = r.APIReader // the cache was behind: read the stored object
			}
			return obj, reader.Get(ctx, key, obj)
		},
		Change: func(obj client.Object) (bool, error) {
			slot := usageOf(obj)
			next, keep := addUsage(*slot, day, u, r.Currency, metav1.NewTime(r.now()))
			if keep {
				*slot, total = next, modelproxy.Totals{Tokens: next.Tokens(), CostMicros: next.CostMicros}
			}
			return keep, nil
		},
		Write: func(ctx context.Context, obj client.Object, patch client.Patch) error {
			return r.Client.Status().Patch(ctx, obj, patch, client.FieldOwner(agentsv1.ModelProxyFieldManager))
		},
		Backoff: wait.Backoff{Steps: 5},
	})
	if !wrote {
		return modelproxy.Totals{}, client.IgnoreNotFound(err)
	}
	return total, nil
}

// addUsage is cur with c counted on day (its cost in currency): a newer day starts from zero,
// an older one is dropped (keep false).
func addUsage(cur *agentsv1.ModelUsage, day string, c count, currency string, now metav1.Time) (*agentsv1.ModelUsage, bool) {
	next := &agentsv1.ModelUsage{Day: day}
	switch {
	case cur != nil && cur.Day == day:
		next = cur.DeepCopy()
	case cur != nil && cur.Day > day:
		return nil, false
	}
	u := c.usage
	next.Requests += u.Requests
	next.InputTokens += u.InputTokens
	next.OutputTokens += u.OutputTokens
	next.CostMicros += u.CostMicros
	next.UnpricedRequests += u.Unpriced
	if currency != "" {
		// A table's currency changed within the day: the day's cost so far is in the
		// earlier one, and the totals say the latest.
		next.Currency = currency
	}
	next.Models = addModels(next.Models, c.models)
	next.UpdatedAt = &now
	return next, true
}

// addModels is cur with each model's usage in add, the costliest first (then the most
// tokens, then by name), at most agentsv1.MaxUsageModels entries: the rest add up under
// agentsv1.OtherModels, which is the last.
func addModels(cur []agentsv1.ModelTally, add map[string]modelproxy.Usage) []agentsv1.ModelTally {
	if len(add) == 0 {
		return cur
	}
	by := map[string]agentsv1.ModelTally{}
	for _, m := range cur {
		by[m.Model] = m
	}
	for name, u := range add {
		m := by[name]
		m.Model = name
		m.Requests += u.Requests
		m.InputTokens += u.InputTokens
		m.OutputTokens += u.OutputTokens
		m.CostMicros += u.CostMicros
		by[name] = m
	}
	other, hasOther := by[agentsv1.OtherModels]
	delete(by, agentsv1.OtherModels)
	out := make([]agentsv1.ModelTally, 0, len(by))
	for _, m := range by {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b agentsv1.ModelTally) int {
		if c := cmp.Compare(b.CostMicros, a.CostMicros); c != 0 {
			return c
		}
		if c := cmp.Compare(b.InputTokens+b.OutputTokens, a.InputTokens+a.OutputTokens); c != 0 {
			return c
		}
		return strings.Compare(a.Model, b.Model)
	})
	if len(out) > agentsv1.MaxUsageModels || hasOther && len(out) == agentsv1.MaxUsageModels {
		for _, m := range out[agentsv1.MaxUsageModels-1:] {
			other.Requests += m.Requests
			other.InputTokens += m.InputTokens
			other.OutputTokens += m.OutputTokens
			other.CostMicros += m.CostMicros
		}
		out, hasOther = out[:agentsv1.MaxUsageModels-1], true
	}
	if hasOther {
		other.Model = agentsv1.OtherModels
		out = append(out, other)
	}
	return out
}

func usageOf(obj client.Object) **agentsv1.ModelUsage {
	switch o := obj.(type) {
	case *agentsv1.Agent:
		return &o.Status.Usage
	case *agentsv1.Workspace:
		return &o.Status.Usage
	}
	panic("kubeaccess: usage of an unknown kind")
}

func splitAgent(id string) (string, string) {
	ns, name, _ := strings.Cut(id, "/")
	return ns, name
}

func (r *Recorder) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}
