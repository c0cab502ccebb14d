package apiserver

import (
	"net/http"

	"github.com/agentplane/agentplane/internal/auth"
)

// routes registers every route of the facade. The table is the API: scope and permission are
// declared next to each pattern.
func (s *Server) routes() {
	// Health of the facade itself (no token).
	s.handle("GET /healthz", access{public: true}, func(*http.Request, *Caller) (*Response, error) {
		return ok(map[string]string{"status": "ok"})
	})

	// Who am I: the caller as the facade resolved it.
	s.handle("GET /v0/me", access{scope: auth.ScopeAgentsRead}, s.whoami)

	// v3: the hosted API's auth check used by the pinata SDK.
	s.handle("GET /v3/data/testAuthentication", access{scope: auth.ScopeFilesRead}, s.testAuthentication)
}

func (s *Server) testAuthentication(*http.Request, *Caller) (*Response, error) {
	return ok(map[string]string{"message": "Congratulations! You are communicating with the agentplane API!"})
}

func (s *Server) whoami(_ *http.Request, c *Caller) (*Response, error) {
	return ok(map[string]any{
		"userId": c.UserID, "workspace": c.Namespace, "role": c.Role, "scopes": c.Scopes,
		"plan": c.Workspace.Spec.Plan,
	})
}
