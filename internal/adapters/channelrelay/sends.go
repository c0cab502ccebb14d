package channelrelay

import "sync"

// Sends counts each agent's calls in flight through the relay that may change something on
// the chat network (a message sent, edited or deleted): every call but Telegram's long poll
// and Discord's reads. The platform holds an agent's suspend back while one is (Busy): a
// checkpoint closes the gateway's connections (CRIU's --tcp-close), the restored engine
// retries a call whose answer it did not read, and a message the network had already taken
// would be sent twice. The zero value is ready; a nil *Sends counts nothing.
type Sends struct {
	mu sync.Mutex
	n  map[AgentKey]int
}

// begin counts a call of agent's until the returned func is called (once: the callers defer it).
func (s *Sends) begin(agent AgentKey) func() {
	if s == nil {
		return func() {}
	}
	s.mu.Lock()
	if s.n == nil {
		s.n = map[AgentKey]int{}
	}
	s.n[agent]++
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		if s.n[agent]--; s.n[agent] <= 0 {
			delete(s.n, agent)
		}
		s.mu.Unlock()
	}
}

// Busy reports whether a call of agent's that may change something is in flight.
func (s *Sends) Busy(agent AgentKey) bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n[agent] > 0
}
