package local

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// Reserved warm gateways (runtime.GatewayReserver).
//
// Before the Agent controller makes a new agent's token Secret it asks ReserveGateway for a
// warm gateway: a ready member leaves its pool (takeMember) and is kept for that agent alone,
// and its own token (random, made by this runtime for the member and known to nobody else)
// becomes the agent's. The agent's first Ensure then claims a gateway that already serves the
// agent's token: it writes the agent's initial config over the member's and takes over at
// once, without waiting for the engine's config reload (about 1 s with OpenClaw: a 300 ms
// debounce that the config cannot shorten, the file watcher and the apply).
//
// A reservation is discarded - its gateway stopped and its dir removed, never returned to a
// pool, since its token is an agent's now - when the first Ensure cannot use it (the agent is
// to be stopped, needs environment of its own, or has another token or engine version), when
// the agent is deleted, when it is left unused for ReservationTimeout, and on Shutdown. A
// reserved member is not in its pool: PoolStatus counts it neither ready nor booting, and the
// pool refills once the reservation is claimed or discarded.

var _ runtime.GatewayReserver = (*Runtime)(nil)

// reservation is a member set aside for one agent. Guarded by Runtime.poolMu.
type reservation struct {
	m         *member
	key       types.NamespacedName
	version   string
	engineDir string
	timer     *time.Timer // discards it at its deadline
}

// ReserveGateway implements runtime.GatewayReserver.
func (r *Runtime) ReserveGateway(_ context.Context, ag *agentsv1.Agent, version string) (string, bool, error) {
	engineDir, ok := r.opts.EngineDirs[version]
	if !ok || r.admitTenant(ag.Namespace) != nil {
		return "", false, nil // Ensure reports the version
	}
	a, err := r.agentFor(keyOf(ag), true)
	if errors.Is(err, errShutdown) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return "", false, nil
	}
	if err := a.loadLocked(); err != nil {
		return "", false, err
	}
	r.poolMu.Lock()
	defer r.poolMu.Unlock()
	if res := r.reserved[a.key]; res != nil {
		return res.m.token, true, nil
	}
	if !a.freshLocked() {
		return "", false, nil
	}
	m := r.takeMemberLocked(version, engineDir)
	if m == nil {
		return "", false, nil
	}
	res := &reservation{m: m, key: a.key, version: version, engineDir: engineDir}
	res.timer = time.AfterFunc(r.opts.ReservationTimeout, func() {
		r.dropReservation(res, fmt.Sprintf("it was not claimed within %s", r.opts.ReservationTimeout))
	})
	r.reserved[a.key] = res
	a.log.Info("reserved a warm gateway", "pool", m.pool.name, "member", m.id, "port", m.port)
	return m.token, true, nil
}

// takeReservation hands the agent's reservation to its first Ensure (nil: none).
func (r *Runtime) takeReservation(key types.NamespacedName) *reservation {
	r.poolMu.Lock()
	defer r.poolMu.Unlock()
	res := r.reserved[key]
	if res != nil {
		res.timer.Stop()
		delete(r.reserved, key)
	}
	return res
}

// claimReservedLocked is the first Ensure of an agent with a reservation: it adopts the
// reserved gateway, or discards it and reports no claim (the agent starts cold).
func (a *agent) claimReservedLocked(ctx context.Context, res *reservation, d runtime.Desired, engineDir string, start time.Time) (runtime.Observed, bool) {
	m := res.m
	why := ""
	switch {
	case !a.freshLocked():
		why = "the agent has run before"
	case d.Stopped:
		why = "the agent is to be stopped"
	case len(d.Env) > 0:
		why = "the agent needs environment of its own (attached secrets or channel tokens)"
	case d.GatewayToken != m.token:
		why = "the agent's gateway token is not the reserved gateway's"
	case d.EngineVersion != res.version || engineDir != res.engineDir:
		why = "the agent runs another engine version"
	}
	if why != "" {
		a.rt.discardReserved(res, "its agent cannot use it: "+why)
		return runtime.Observed{}, false
	}
	if err := a.adoptLocked(ctx, m, d); err != nil {
		a.log.Info("a reserved warm gateway could not be adopted: it is discarded and the agent starts cold",
			"pool", m.pool.name, "member", m.id, "error", err.Error())
		a.rt.bindFailed(m, err)
		return runtime.Observed{}, false
	}
	return a.takeOverLocked(m, d, engineDir, time.Since(start)), true
}

// adoptLocked binds a reserved member to the agent: the agent's initial config (identity, and
// the member's own token, which is the agent's) is written over the member's, and the claim
// does not wait for the engine to reload it: the gateway serves the agent's token already. It
// only checks that the process lives and accepts the token (an accepted token is answered at
// once). The identity reaches the engine with its hot reload about a second later (OpenClaw:
// the 300 ms debounce, the file watcher, the apply); the token stays the same through it.
func (a *agent) adoptLocked(ctx context.Context, m *member, d runtime.Desired) error {
	if err := a.writeAgentConfigLocked(m.home, d); err != nil {
		return err
	}
	if m.proc.hasExited() {
		return fmt.Errorf("the gateway exited with %s", m.proc.exitDesc)
	}
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	url := endpoint(m.port)
	tc, ok := a.rt.opts.Engine.(engine.TokenChecker)
	if !ok {
		return a.rt.opts.Engine.Healthy(ctx, url)
	}
	accepted, err := tc.TokenAccepted(ctx, url, d.GatewayToken)
	if err == nil && !accepted {
		err = errTokenRefused
	}
	return err
}

// dropReservation discards res unless its agent took it or it was discarded already (its
// deadline).
func (r *Runtime) dropReservation(res *reservation, why string) {
	r.poolMu.Lock()
	defer r.poolMu.Unlock()
	if r.reserved[res.key] == res {
		delete(r.reserved, res.key)
		r.discardReservedLocked(res, why)
	}
}

// dropReservationOf discards the agent's reservation, if any (Delete).
func (r *Runtime) dropReservationOf(key types.NamespacedName, why string) {
	r.poolMu.Lock()
	defer r.poolMu.Unlock()
	if res := r.reserved[key]; res != nil {
		delete(r.reserved, key)
		r.discardReservedLocked(res, why)
	}
}

// discardReserved discards a reservation taken by the agent's Ensure.
func (r *Runtime) discardReserved(res *reservation, why string) {
	r.poolMu.Lock()
	defer r.poolMu.Unlock()
	r.discardReservedLocked(res, why)
}

// discardReservedLocked stops and removes a reserved member, counts the discard and lets its
// pool refill.
func (r *Runtime) discardReservedLocked(res *reservation, why string) {
	res.timer.Stop()
	p := res.m.pool
	p.discarded++
	r.opts.Log.Info("a reserved warm gateway is discarded", "pool", p.name, "member", res.m.id, "agent", res.key.String(), "why", why)
	r.discardLocked(res.m)
	p.poke()
	r.notifyPool(p.name)
}

// discardReservationsLocked discards every reservation (Shutdown).
func (r *Runtime) discardReservationsLocked() {
	for key, res := range r.reserved {
		delete(r.reserved, key)
		r.discardReservedLocked(res, "the runtime shuts down")
	}
}
