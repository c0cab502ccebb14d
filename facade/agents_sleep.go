package facade

import (
	"net/http"
)

// suspendAgent asks the agent to sleep (spec.suspended) and waits for the controller to have
// drained and stopped its gateway (202 when the wait ends first).
func (s *Server) suspendAgent(r *http.Request, c *Caller) (*Response, error) {
	a, asleep, err := s.ops.SuspendAgent(r.Context(), c.scope(), r.PathValue("agentId"), !noWait(r))
	return agentAnswer(a, asleep, http.StatusOK, err)
}

// resumeAgent clears spec.suspended (and starts a new idle window) and waits for the gateway
// like a restart does.
func (s *Server) resumeAgent(r *http.Request, c *Caller) (*Response, error) {
	a, running, err := s.ops.ResumeAgent(r.Context(), c.scope(), r.PathValue("agentId"), !noWait(r))
	return agentAnswer(a, running, http.StatusOK, err)
}

// awaken runs before a route that needs the agent's gateway: the request counts as the
// agent's activity (for the idle policy) and a sleeping agent is woken, its gateway awaited
// (bounded). When the wait ends first, the route runs anyway and answers as it would for a
// gateway that does not run.
func (s *Server) awaken(r *http.Request, c *Caller) error {
	return s.ops.Awaken(r.Context(), c.scope(), r.PathValue("agentId"))
}
