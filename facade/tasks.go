package facade

import (
	"net/http"

	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/ops"
)

type taskRequest struct {
	Name     string           `json:"name"`
	Schedule *engine.Schedule `json:"schedule"`
	Payload  *engine.Payload  `json:"payload"`
}

func (s *Server) createTask(r *http.Request, c *Caller) (*Response, error) {
	var req taskRequest
	if err := decodeJSON(r, &req, ops.MsgInvalidParameters); err != nil {
		return nil, err
	}
	task, err := s.ops.CreateTask(r.Context(), c.scope(), r.PathValue("agentId"), ops.NewTask(req))
	if err != nil {
		return nil, err
	}
	return created(map[string]any{"task": task})
}

func (s *Server) listTasks(r *http.Request, c *Caller) (*Response, error) {
	tasks, err := s.ops.Tasks(r.Context(), c.scope(), r.PathValue("agentId"))
	if err != nil {
		return nil, err
	}
	return ok(map[string]any{"tasks": tasks})
}
