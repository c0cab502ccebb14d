package facade

import (
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/agentplane/agentplane/internal/ops"
)

// The Issues routes are a closed beta for internal accounts (Workspace.spec.internal): every
// other account gets 404, as if they did not exist (ops.Issues).

type issueRequest struct {
	Title   string `json:"title"`
	Body    string `json:"body"`
	AgentID string `json:"agentId"`
}

type issueView struct {
	ID        string    `json:"id"`
	Title     string    `json:"title"`
	Body      string    `json:"body,omitempty"`
	AgentID   string    `json:"agentId,omitempty"`
	Reporter  string    `json:"reporter"`
	CreatedAt time.Time `json:"createdAt"`
}

func viewIssue(cm *corev1.ConfigMap) issueView {
	return issueView{
		ID: cm.Name, Title: cm.Data["title"], Body: cm.Data["body"], AgentID: cm.Data["agentId"],
		Reporter: cm.Data["reporter"], CreatedAt: cm.CreationTimestamp.UTC(),
	}
}

func (s *Server) listIssues(r *http.Request, c *Caller) (*Response, error) {
	list, err := s.ops.Issues(r.Context(), c.scope(), c.Workspace)
	if err != nil {
		return nil, err
	}
	out := make([]issueView, 0, len(list))
	for i := range list {
		out = append(out, viewIssue(&list[i]))
	}
	return ok(map[string]any{"issues": out})
}

func (s *Server) createIssue(r *http.Request, c *Caller) (*Response, error) {
	if err := ops.IssuesVisible(c.Workspace); err != nil {
		return nil, err
	}
	var req issueRequest
	if err := decodeJSON(r, &req, msgInvalidBody); err != nil {
		return nil, err
	}
	cm, err := s.ops.CreateIssue(r.Context(), c.scope(), c.Workspace, ops.NewIssue{
		Title: req.Title, Body: req.Body, AgentID: req.AgentID, Reporter: c.UserID,
	})
	if err != nil {
		return nil, err
	}
	return created(map[string]any{"issue": viewIssue(cm)})
}
