package modelproxy

import (
	"fmt"
	"sort"
	"sync"
	"time"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// Budget: zero fields mean unlimited.
type Budget struct {
	RequestsPerMinute int64
	TokensPerDay      int64
	// CostMicrosPerDay caps the day's spend by the price table (Options.Prices), in millionths
	// of its currency; while it applies, a request of a model the table has no price for is
	// refused.
	CostMicrosPerDay int64
}

// Totals are an agent's or a workspace's persisted tokens and cost of a day (Acknowledge).
type Totals struct{ Tokens, CostMicros int64 }

// amount is what a budget counts: tokens and their cost (millionths of the price table's
// currency).
type amount struct{ tokens, cost int64 }

func (a amount) plus(b amount) amount { return amount{a.tokens + b.tokens, a.cost + b.cost} }

// minus is a less b, each at least 0.
func (a amount) minus(b amount) amount {
	return amount{max(0, a.tokens-b.tokens), max(0, a.cost-b.cost)}
}

func usageAmount(u Usage) amount { return amount{u.Tokens(), u.CostMicros} }

// Delta is the usage one agent spent on one UTC day ("2006-01-02") since the last Drain.
type Delta struct {
	Agent, Workspace, Day string
	Usage                 Usage
	// Models is Usage's settled part per model, as the requests named it (Usage also counts
	// requests admitted and not settled yet): at most maxTallyModels, the rest under
	// agentsv1.OtherModels.
	Models map[string]Usage
}

// maxTallyModels bounds the models an agent's pending usage tells apart (an agent names the
// model of its requests, any string).
const maxTallyModels = 32

// dayKey names a tally: an agent or a workspace on a UTC day.
type dayKey struct{ id, day string }

// tally is what this process knows of an agent's (or a workspace's) tokens and cost on a day
// beyond what its Grant says is persisted.
type tally struct {
	workspace string           // agents only
	pending   Usage            // counted, not drained yet (workspaces: tokens and cost only)
	models    map[string]Usage // pending's settled part per model (agents only)
	drained   amount           // drained, neither restored nor acknowledged yet
	floor     amount           // highest persisted totals acknowledged for the day
	reserved  amount           // held by requests admitted and not settled yet
}

// reservation is what one admitted request holds against its agent's and workspace's token
// budgets of its day, from admission until settle replaces it with what the answer cost.
type reservation struct {
	agent, workspace, day string
	model                 string
	hold                  amount // what it may cost at most, as estimated
	settled               bool   // under the ledger's mutex
}

// window is a fixed one-minute request window.
type window struct {
	minute int64 // unix minute
	n      int64
}

// ledger holds the budgets' state: request windows and token tallies, under one mutex so a
// request slot is reserved atomically for both the agent and its workspace.
type ledger struct {
	mu                sync.Mutex
	agentWin, wsWin   map[string]*window
	agents, workspace map[dayKey]*tally
}

func newLedger() *ledger {
	return &ledger{agentWin: map[string]*window{}, wsWin: map[string]*window{},
		agents: map[dayKey]*tally{}, workspace: map[dayKey]*tally{}}
}

// refusal is a budget the request would break.
type refusal struct {
	scope, kind string // "agent"/"workspace", "requests"/"tokens"/"spend"
	limit       int64
	retryAfter  time.Duration
	currency    string // spend
}

func (r *refusal) Error() string {
	switch r.kind {
	case "tokens":
		return fmt.Sprintf("agentplane: %s budget exceeded: %d tokens per day", r.scope, r.limit)
	case "spend":
		return fmt.Sprintf("agentplane: %s budget exceeded: %s %s per day", r.scope, FormatMoney(r.limit), r.currency)
	}
	return fmt.Sprintf("agentplane: %s budget exceeded: %d requests per minute", r.scope, r.limit)
}

func day(t time.Time) string { return t.UTC().Format(time.DateOnly) }

func (l *ledger) tallyOf(m map[dayKey]*tally, k dayKey) *tally {
	t := m[k]
	if t == nil {
		t = &tally{}
		m[k] = t
	}
	return t
}

// committed is persisted (the grant's count if it is for today, or the highest total
// acknowledged) + drained-not-acknowledged + pending + reserved by requests in flight.
func committed(t *tally, grantDay, today string, persisted amount) amount {
	if grantDay != today {
		persisted = amount{}
	}
	if t == nil {
		return persisted
	}
	base := amount{max(persisted.tokens, t.floor.tokens), max(persisted.cost, t.floor.cost)}
	return base.plus(t.drained).plus(usageAmount(t.pending)).plus(t.reserved)
}

// admit checks g's budgets at now and, if they allow it, reserves a request slot and hold
// (what the request may cost at most, as estimated: tokens, and their price in currency) for
// the agent and its workspace, and counts the request. A request is admitted while what is
// committed (spent and reserved) is under the limit, so requests admitted together overshoot
// a token or spend budget by at most one reservation as long as each costs at most what it
// reserved.
func (l *ledger) admit(g *Grant, now time.Time, model string, hold amount, currency string) (*reservation, *refusal) {
	today := day(now)
	minute := now.Unix() / 60
	toMinute := time.Unix((minute+1)*60, 0).Sub(now)
	y, mo, d := now.UTC().Date()
	toMidnight := time.Date(y, mo, d+1, 0, 0, 0, 0, time.UTC).Sub(now)
	ak, wk := dayKey{g.Agent, today}, dayKey{g.Workspace, today}

	l.mu.Lock()
	defer l.mu.Unlock()
	ac := committed(l.agents[ak], g.Day, today, amount{g.AgentTokens, g.AgentCostMicros})
	wc := committed(l.workspace[wk], g.Day, today, amount{g.WorkspaceTokens, g.WorkspaceCostMicros})
	if lim := g.AgentBudget.TokensPerDay; lim > 0 && ac.tokens >= lim {
		return nil, &refusal{scope: "agent", kind: "tokens", limit: lim, retryAfter: toMidnight}
	}
	if lim := g.WorkspaceBudget.TokensPerDay; lim > 0 && wc.tokens >= lim {
		return nil, &refusal{scope: "workspace", kind: "tokens", limit: lim, retryAfter: toMidnight}
	}
	if lim := g.AgentBudget.CostMicrosPerDay; lim > 0 && ac.cost >= lim {
		return nil, &refusal{scope: "agent", kind: "spend", limit: lim, retryAfter: toMidnight, currency: currency}
	}
	if lim := g.WorkspaceBudget.CostMicrosPerDay; lim > 0 && wc.cost >= lim {
		return nil, &refusal{scope: "workspace", kind: "spend", limit: lim, retryAfter: toMidnight, currency: currency}
	}
	aw, ww := l.win(l.agentWin, g.Agent, minute), l.win(l.wsWin, g.Workspace, minute)
	if lim := g.AgentBudget.RequestsPerMinute; lim > 0 && aw.n >= lim {
		return nil, &refusal{scope: "agent", kind: "requests", limit: lim, retryAfter: toMinute}
	}
	if lim := g.WorkspaceBudget.RequestsPerMinute; lim > 0 && ww.n >= lim {
		return nil, &refusal{scope: "workspace", kind: "requests", limit: lim, retryAfter: toMinute}
	}
	aw.n++
	ww.n++
	t := l.tallyOf(l.agents, ak)
	t.workspace = g.Workspace
	t.pending.Requests++
	t.reserved = t.reserved.plus(hold)
	w := l.tallyOf(l.workspace, wk)
	w.reserved = w.reserved.plus(hold)
	return &reservation{agent: g.Agent, workspace: g.Workspace, day: today, model: model, hold: hold}, nil
}

func (l *ledger) win(m map[string]*window, id string, minute int64) *window {
	w := m[id]
	if w == nil {
		w = &window{minute: minute}
		m[id] = w
	}
	if w.minute != minute {
		w.minute, w.n = minute, 0
	}
	return w
}

// settle replaces r's reservation with what the answer cost (u: its tokens and money; the
// request itself was counted at admission), on the day the request was admitted. Only the
// first call counts (it returns true): every way a request ends calls it.
func (l *ledger) settle(r *reservation, u Usage) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r.settled {
		return false
	}
	r.settled = true
	t := l.tallyOf(l.agents, dayKey{r.agent, r.day})
	t.workspace = r.workspace
	t.reserved = t.reserved.minus(r.hold)
	t.pending = t.pending.Add(u)
	u.Requests = 1
	t.addModel(r.model, u)
	w := l.tallyOf(l.workspace, dayKey{r.workspace, r.day})
	w.reserved = w.reserved.minus(r.hold)
	w.pending.InputTokens += u.InputTokens
	w.pending.OutputTokens += u.OutputTokens
	w.pending.CostMicros += u.CostMicros
	return true
}

// addModel adds u to model's pending usage (past maxTallyModels models, to OtherModels'; a
// request that named none, to UnnamedModel's).
func (t *tally) addModel(model string, u Usage) {
	if model == "" {
		model = agentsv1.UnnamedModel
	}
	if t.models == nil {
		t.models = map[string]Usage{}
	}
	if _, ok := t.models[model]; !ok && len(t.models) >= maxTallyModels {
		model = agentsv1.OtherModels
	}
	t.models[model] = t.models[model].Add(u)
}

// reserved is what requests in flight hold for an agent and for a workspace on day.
func (l *ledger) reserved(agent, workspace, day string) (int64, int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var a, w int64
	if t := l.agents[dayKey{agent, day}]; t != nil {
		a = t.reserved.tokens
	}
	if t := l.workspace[dayKey{workspace, day}]; t != nil {
		w = t.reserved.tokens
	}
	return a, w
}

// drain moves pending usage to drained and returns it, sorted by day and agent. It forgets
// request windows of past minutes and tallies of past days with nothing pending.
func (l *ledger) drain(now time.Time) []Delta {
	today, minute := day(now), now.Unix()/60
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Delta
	for k, t := range l.agents {
		if t.pending != (Usage{}) || len(t.models) > 0 {
			out = append(out, Delta{Agent: k.id, Workspace: t.workspace, Day: k.day, Usage: t.pending, Models: t.models})
			amt := usageAmount(t.pending)
			w := l.tallyOf(l.workspace, dayKey{t.workspace, k.day})
			w.pending.InputTokens -= t.pending.InputTokens
			w.pending.OutputTokens -= t.pending.OutputTokens
			w.pending.CostMicros -= t.pending.CostMicros
			w.drained = w.drained.plus(amt)
			t.drained = t.drained.plus(amt)
			t.pending, t.models = Usage{}, nil
		} else if k.day < today && t.reserved == (amount{}) {
			delete(l.agents, k)
		}
	}
	for k, t := range l.workspace {
		if k.day < today && t.pending == (Usage{}) && t.reserved == (amount{}) {
			delete(l.workspace, k)
		}
	}
	for _, m := range []map[string]*window{l.agentWin, l.wsWin} {
		for id, w := range m {
			if w.minute < minute {
				delete(m, id)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Day != out[j].Day {
			return out[i].Day < out[j].Day
		}
		return out[i].Agent < out[j].Agent
	})
	return out
}

// restore puts drained deltas back to pending.
func (l *ledger) restore(ds []Delta) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, d := range ds {
		amt := usageAmount(d.Usage)
		t := l.tallyOf(l.agents, dayKey{d.Agent, d.Day})
		t.workspace = d.Workspace
		t.drained = t.drained.minus(amt)
		t.pending = t.pending.Add(d.Usage)
		for m, u := range d.Models {
			t.addModel(m, u)
		}
		w := l.tallyOf(l.workspace, dayKey{d.Workspace, d.Day})
		w.drained = w.drained.minus(amt)
		w.pending.InputTokens += d.Usage.InputTokens
		w.pending.OutputTokens += d.Usage.OutputTokens
		w.pending.CostMicros += d.Usage.CostMicros
	}
}

// acknowledge forgets a drained delta once persisted, and raises the day's persisted floor
// to the totals the write produced.
func (l *ledger) acknowledge(d Delta, agentTotal, workspaceTotal Totals) {
	amt := usageAmount(d.Usage)
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.tallyOf(l.agents, dayKey{d.Agent, d.Day})
	if t.workspace == "" {
		t.workspace = d.Workspace
	}
	t.drained = t.drained.minus(amt)
	t.floor = amount{max(t.floor.tokens, agentTotal.Tokens), max(t.floor.cost, agentTotal.CostMicros)}
	w := l.tallyOf(l.workspace, dayKey{d.Workspace, d.Day})
	w.drained = w.drained.minus(amt)
	w.floor = amount{max(w.floor.tokens, workspaceTotal.Tokens), max(w.floor.cost, workspaceTotal.CostMicros)}
}
