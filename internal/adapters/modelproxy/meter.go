package modelproxy

import (
	"context"
	"sync"
)

// Reading is what this proxy counted for one agent since it started: what a caller that
// reads it before and after a piece of the agent's work (a chat turn) takes the difference
// of. It is this replica's count only (an agent reaches any replica of the proxy).
type Reading struct {
	// Spent is the usage of the agent's settled requests.
	Spent Usage
	// InFlight is the agent's requests admitted and not settled yet.
	InFlight int64
	// Refusals counts the requests the agent's or its workspace's budget refused;
	// LastRefusal is the latest one's message.
	Refusals    int64
	LastRefusal string
}

// meter keeps a Reading per agent ("ns/name") and wakes the waits for an agent's requests to
// settle.
type meter struct {
	mu      sync.Mutex
	agents  map[string]*Reading
	changed chan struct{} // closed and replaced on every change
}

func (m *meter) update(agent string, f func(*Reading)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.agents == nil {
		m.agents = map[string]*Reading{}
	}
	r := m.agents[agent]
	if r == nil {
		r = &Reading{}
		m.agents[agent] = r
	}
	f(r)
	if m.changed != nil {
		close(m.changed)
		m.changed = nil
	}
}

// read returns the agent's reading and a channel closed at the next change.
func (m *meter) read(agent string) (Reading, <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.changed == nil {
		m.changed = make(chan struct{})
	}
	var r Reading
	if p := m.agents[agent]; p != nil {
		r = *p
	}
	return r, m.changed
}

// Meter returns what the proxy counted for agent ("<namespace>/<name>") so far.
func (p *Proxy) Meter(agent string) Reading {
	r, _ := p.meter.read(agent)
	return r
}

// Settled waits until none of agent's requests is in flight (or ctx ends) and returns its
// reading then.
func (p *Proxy) Settled(ctx context.Context, agent string) (Reading, error) {
	for {
		r, changed := p.meter.read(agent)
		if r.InFlight == 0 {
			return r, nil
		}
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-changed:
		}
	}
}

// Currency is the currency of the proxy's price table ("" without one): Usage.CostMicros
// counts millionths of it.
func (p *Proxy) Currency() string { return p.prices.Currency() }
