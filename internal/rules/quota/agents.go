package quota

import (
	"context"
	"reflect"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// An agent's slot of its workspace's limit goes through three states, all in the Workspace's
// status.agentSlots and each move written with optimistic concurrency:
//
//   - ReserveAgent puts the agent's name in Pending (a create in flight), refused once
//     Used + len(Pending) reaches the limit;
//   - the Agent controller binds the agent (its status.holdsSlot), and SettleAgents, batched
//     by the Workspace controller, moves bound agents from Pending into the count Used;
//   - ReleaseAgent gives the slot back when the agent is deleted: out of Pending or Used, and
//     into Releasing (its name and UID) until the agent is gone, so that a retried release
//     does not count twice and a recount does not count the agent still being deleted.
//
// So a reservation costs one write whatever the workspace holds, and the Workspace's size
// depends on the creates and deletes in flight, never on its number of agents. RecountAgents
// rebuilds Used from the agents themselves, read at the Workspace's own resourceVersion.

type workspaceHolder struct{ *agentsv1.Workspace }

func (h workspaceHolder) object() client.Object { return h.Workspace }

func (h workspaceHolder) remembered() bool { return true }

func newWorkspaceHolder() holder { return workspaceHolder{&agentsv1.Workspace{}} }

func slots(h holder) *agentsv1.AgentSlots { return &h.(workspaceHolder).Status.AgentSlots }

func indexOf(res []agentsv1.Reservation, name string) int {
	return slices.IndexFunc(res, func(r agentsv1.Reservation) bool { return r.Name == name })
}

// ReserveAgent takes a slot of workspace ws's agent limit for agent. Reserving again while the
// first reservation is pending is a no-op (callers check the agent's status.holdsSlot for a
// slot already bound). It returns ErrLimitReached when every slot is taken.
func (l *Limiter) ReserveAgent(ctx context.Context, ws, agent string) error {
	return l.update(ctx, client.ObjectKey{Name: ws}, newWorkspaceHolder, func(h holder) (bool, error) {
		s := slots(h)
		if indexOf(s.Pending, agent) >= 0 {
			return false, nil
		}
		settled := l.settleCached(ctx, ws, s)
		if s.Taken() >= h.(workspaceHolder).EffectiveAgentLimit() {
			return settled, ErrLimitReached
		}
		s.Pending = append(s.Pending, agentsv1.Reservation{Name: agent, Time: metav1.NewTime(l.Now())})
		return true, nil
	})
}

// settleCached settles s, read from ws, by the Agents cache when the Limiter has one: a write
// that goes to the API server anyway carries the moves that are due.
func (l *Limiter) settleCached(ctx context.Context, ws string, s *agentsv1.AgentSlots) bool {
	if l.Agents == nil {
		return false
	}
	return l.settle(s, func(name string) (AgentSeen, bool) {
		a := &agentsv1.Agent{}
		switch err := l.Agents.Get(ctx, client.ObjectKey{Namespace: ws, Name: name}, a); {
		case apierrors.IsNotFound(err):
			return AgentSeen{}, false
		case err != nil:
			return AgentSeen{}, true // unknown: kept as it is
		}
		return AgentSeen{UID: a.UID, Bound: a.Status.HoldsSlot}, true
	})
}

// ReleaseAgent gives back agent's slot in workspace ws: a pending one (a create refused, an
// agent deleted before it was counted) or, when held (the agent with this uid is bound), its
// place in Used. It is idempotent: a release already recorded in Releasing is a no-op.
func (l *Limiter) ReleaseAgent(ctx context.Context, ws, agent string, uid types.UID, held bool) error {
	err := l.update(ctx, client.ObjectKey{Name: ws}, newWorkspaceHolder, func(h holder) (bool, error) {
		s := slots(h)
		pending := indexOf(s.Pending, agent) >= 0
		changed := false
		if pending || held && uid != "" {
			// Only a write that happens anyway settles: a no-op release stays one.
			changed = l.settleCached(ctx, ws, s)
			pending = indexOf(s.Pending, agent) >= 0
		}
		if pending {
			s.Pending = slices.DeleteFunc(s.Pending, func(r agentsv1.Reservation) bool { return r.Name == agent })
			changed = true
		}
		if !held || uid == "" {
			return changed, nil
		}
		i := indexOf(s.Releasing, agent)
		if i >= 0 && s.Releasing[i].UID == uid {
			return changed, nil
		}
		// An entry of the same name with another UID was an earlier agent of that name, gone
		// since (two objects of one name never exist at once).
		rel := agentsv1.Reservation{Name: agent, UID: uid, Time: metav1.NewTime(l.Now())}
		if i >= 0 {
			s.Releasing[i] = rel
		} else {
			s.Releasing = append(s.Releasing, rel)
		}
		if !pending && s.Used > 0 {
			s.Used--
		}
		return true, nil
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// AgentSeen is what a reader knows of an agent named in the workspace's slots.
type AgentSeen struct {
	UID types.UID
	// Bound: its status.holdsSlot.
	Bound bool
}

// AgentLookup finds an agent of the workspace by name (ok false: it does not exist).
type AgentLookup func(name string) (seen AgentSeen, ok bool)

// SettleAgents moves the pending slots of bound agents into Used, frees the pending slots
// whose agent does not exist once they are stale (a create that never happened: the caller
// died or was refused without giving its slot back) and forgets the releases whose agent is
// gone. lookup answers from a cache: a pending slot it does not see bound stays pending.
func (l *Limiter) SettleAgents(ctx context.Context, ws string, lookup AgentLookup) error {
	err := l.update(ctx, client.ObjectKey{Name: ws}, newWorkspaceHolder, func(h holder) (bool, error) {
		return l.settle(slots(h), lookup), nil
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// SettleNeeded reports whether SettleAgents would change s (read from a cache): the Workspace
// controller calls the Limiter, and so the API server, only then.
func (l *Limiter) SettleNeeded(s agentsv1.AgentSlots, lookup AgentLookup) bool {
	s.Pending, s.Releasing = slices.Clone(s.Pending), slices.Clone(s.Releasing)
	return l.settle(&s, lookup)
}

func (l *Limiter) settle(s *agentsv1.AgentSlots, lookup AgentLookup) bool {
	changed := false
	s.Pending = slices.DeleteFunc(s.Pending, func(r agentsv1.Reservation) bool {
		seen, ok := lookup(r.Name)
		switch {
		case ok && seen.Bound:
			s.Used++
		case !ok && l.Stale(r.Time.Time):
		default:
			return false
		}
		changed = true
		return true
	})
	s.Releasing = slices.DeleteFunc(s.Releasing, func(r agentsv1.Reservation) bool {
		seen, ok := lookup(r.Name)
		gone := !ok || seen.UID != r.UID
		changed = changed || gone
		return gone
	})
	return changed
}

// Settling waits for a quiet workspace: a write of its own per burst, since the reservations
// and releases of the burst settle what is due as they go (Limiter.Agents).
const (
	// SettleQuiet is how long no slot of a workspace has been taken or given back before the
	// Workspace controller settles it.
	SettleQuiet = 5 * time.Second
	// settleMaxEntries: slots listing this many in-flight entries are settled without waiting,
	// which bounds the Workspace's size under a steady stream.
	settleMaxEntries = 256
)

// SettleAt is when the Workspace controller should settle s: SettleQuiet after its newest
// pending or releasing entry, or at once (the zero time) when it lists settleMaxEntries.
func (l *Limiter) SettleAt(s agentsv1.AgentSlots) time.Time {
	if len(s.Pending)+len(s.Releasing) >= settleMaxEntries {
		return time.Time{}
	}
	var newest time.Time
	for _, r := range slices.Concat(s.Pending, s.Releasing) {
		if r.Time.After(newest) {
			newest = r.Time.Time
		}
	}
	return newest.Add(SettleQuiet)
}

// NextStale is when the first pending slot whose agent lookup does not find turns stale (zero:
// none waits).
func (l *Limiter) NextStale(s agentsv1.AgentSlots, lookup AgentLookup) (at metav1.Time) {
	for _, r := range s.Pending {
		if _, ok := lookup(r.Name); ok {
			continue
		}
		if t := r.Time.Add(l.StaleAge()); at.IsZero() || t.Before(at.Time) {
			at = metav1.NewTime(t)
		}
	}
	return at
}

// recountPage is how many agents one page of a recount lists.
const recountPage = 500

// RecountAgents rebuilds workspace ws's count from its agents, listed live at exactly the
// Workspace's resourceVersion (so the count and the slots it replaces describe one moment,
// and the write, guarded by that resourceVersion, fails if anything took or gave back a slot
// since): Used becomes the number of bound agents not releasing, pending slots of bound
// agents are dropped (counted), and releases of agents gone are forgotten. It repairs what a
// lost write or a bug left behind; the usual moves never need it.
func (l *Limiter) RecountAgents(ctx context.Context, ws string) error {
	key := client.ObjectKey{Name: ws}
	l.last.Delete(key) // a no-op must be decided live (update would list twice otherwise)
	err := l.update(ctx, key, newWorkspaceHolder, func(h holder) (bool, error) {
		agents, err := l.listAgentsAt(ctx, ws, h.object().GetResourceVersion())
		if err != nil {
			return false, err
		}
		s := slots(h)
		released := make(map[types.UID]bool, len(s.Releasing))
		for _, r := range s.Releasing {
			released[r.UID] = true
		}
		var used int32
		for _, seen := range agents {
			if seen.Bound && !released[seen.UID] {
				used++
			}
		}
		lookup := func(name string) (AgentSeen, bool) { seen, ok := agents[name]; return seen, ok }
		next := agentsv1.AgentSlots{Pending: slices.Clone(s.Pending), Releasing: slices.Clone(s.Releasing)}
		l.settle(&next, lookup) // drops what is counted, stale or gone; its Used is not needed
		next.Used = used
		if reflect.DeepEqual(next, *s) {
			return false, nil
		}
		*s = next
		return true, nil
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// listAgentsAt lists workspace ws's agents as they were at resourceVersion rv, page by page.
func (l *Limiter) listAgentsAt(ctx context.Context, ws, rv string) (map[string]AgentSeen, error) {
	agents := map[string]AgentSeen{}
	opts := &client.ListOptions{Namespace: ws, Limit: recountPage, Raw: &metav1.ListOptions{
		ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchExact,
	}}
	for {
		var page agentsv1.AgentList
		if err := l.Reader.List(ctx, &page, opts); err != nil {
			return nil, err
		}
		for _, a := range page.Items {
			agents[a.Name] = AgentSeen{UID: a.UID, Bound: a.Status.HoldsSlot}
		}
		if page.Continue == "" {
			return agents, nil
		}
		// The continue token carries the resourceVersion; the API server refuses both.
		opts.Continue, opts.Raw = page.Continue, nil
	}
}
