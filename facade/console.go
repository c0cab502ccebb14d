package facade

import (
	"net/http"
	"time"

	"github.com/agentplane/agentplane/internal/ops"
)

type execRequest struct {
	Command string `json:"command"`
	Cwd     string `json:"cwd"`
}

// consoleExec runs a shell command in the agent's home (ops.Exec).
func (s *Server) consoleExec(r *http.Request, c *Caller) (*Response, error) {
	var req execRequest
	if err := decodeJSON(r, &req, ops.MsgInvalidCommand); err != nil {
		return nil, err
	}
	res, err := s.ops.Exec(r.Context(), c.scope(), r.PathValue("agentId"), ops.Command(req))
	if err != nil {
		return nil, err
	}
	return ok(map[string]any{
		"stdout": res.Stdout, "stderr": res.Stderr, "exitCode": res.ExitCode,
		"command": req.Command, "timestamp": res.Started.Format(time.RFC3339Nano),
		"timedOut": res.TimedOut, "truncated": res.Truncated,
	})
}
