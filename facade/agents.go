package facade

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/ops"
)

// agentView is an agent as the REST API shows it.
type agentView struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// AgentProfile is spec's, under the same JSON names (description, vibe, emoji).
	agentsv1.AgentProfile `json:",inline"`
	Status                string   `json:"status"`
	StatusReason          string   `json:"statusReason,omitempty"`
	StatusMessage         string   `json:"statusMessage,omitempty"`
	Engine                string   `json:"engine"`
	EngineVersion         string   `json:"engineVersion,omitempty"`
	Endpoint              string   `json:"endpoint,omitempty"`
	Template              string   `json:"template,omitempty"`
	Skills                []string `json:"skills"`
	Secrets               []string `json:"secrets"`
	Stopped               bool     `json:"stopped"`
	// Suspended is spec.suspended; NextWakeAt is when a sleeping agent wakes for its next
	// scheduled task (additions beyond the contract).
	Suspended   bool       `json:"suspended,omitempty"`
	NextWakeAt  *time.Time `json:"nextWakeAt,omitempty"`
	Restarts    int32      `json:"restarts"`
	SnapshotCID string     `json:"snapshotCid,omitempty"`
	CreatedAt   time.Time  `json:"createdAt"`
}

func viewAgent(a *agentsv1.Agent) agentView {
	v := agentView{
		ID: a.Name, Name: a.Spec.DisplayName, AgentProfile: a.Spec.AgentProfile,
		Status: string(a.Status.Phase), Engine: string(a.Spec.Engine.Name), EngineVersion: a.Status.EngineVersion,
		Endpoint: a.Status.Endpoint, Template: a.Spec.Template, Stopped: a.Spec.Stopped, Restarts: a.Status.Restarts,
		SnapshotCID: a.Status.SnapshotCID, CreatedAt: a.CreationTimestamp.UTC(),
		Skills: []string{}, Secrets: []string{},
	}
	if v.Status == "" {
		v.Status = string(agentsv1.AgentStarting)
	}
	v.Suspended = a.Spec.Suspended
	if sl := a.Status.Sleep; sl != nil && sl.NextWakeAt != nil && a.Status.Phase == agentsv1.AgentSuspended {
		t := sl.NextWakeAt.UTC()
		v.NextWakeAt = &t
	}
	if v.Engine == "" {
		v.Engine = string(agentsv1.EngineOpenClaw)
	}
	if c := meta.FindStatusCondition(a.Status.Conditions, agentsv1.AgentGatewayReady); c != nil && c.Status != metav1.ConditionTrue {
		v.StatusReason, v.StatusMessage = c.Reason, c.Message
	}
	for _, s := range a.Spec.Skills {
		v.Skills = append(v.Skills, s.CID)
	}
	for _, s := range a.Spec.Secrets {
		v.Secrets = append(v.Secrets, s.Name)
	}
	return v
}

// getAgent reads the caller's agent; an agent of another workspace is simply not found.
func (s *Server) getAgent(ctx context.Context, c *Caller, id string) (*agentsv1.Agent, error) {
	return s.ops.Agent(ctx, c.scope(), id)
}

func (s *Server) listAgents(r *http.Request, c *Caller) (*Response, error) {
	list, err := s.ops.Agents(r.Context(), c.scope())
	if err != nil {
		return nil, err
	}
	out := make([]agentView, 0, len(list))
	for i := range list {
		out = append(out, viewAgent(&list[i]))
	}
	return ok(map[string]any{"agents": out})
}

func (s *Server) getAgentRoute(r *http.Request, c *Caller) (*Response, error) {
	a, err := s.getAgent(r.Context(), c, r.PathValue("agentId"))
	if err != nil {
		return nil, err
	}
	return ok(map[string]any{"agent": viewAgent(a)})
}

// createAgentRequest is the body of POST /v0/agents.
type createAgentRequest struct {
	Name *string `json:"name"`
	// AgentProfile: description, vibe, emoji (as in the view and the Agent's spec).
	agentsv1.AgentProfile `json:",inline"`
	EngineVersion         string `json:"engineVersion"`
	TemplateID            string `json:"templateId"`
	Template              string `json:"template"`
}

func (s *Server) createAgent(r *http.Request, c *Caller) (*Response, error) {
	var req createAgentRequest
	if err := decodeJSON(r, &req, msgInvalidBody); err != nil {
		return nil, err
	}
	a, running, err := s.ops.CreateAgent(r.Context(), c.scope(), ops.NewAgent{
		Name: req.Name, AgentProfile: req.AgentProfile,
		EngineVersion: req.EngineVersion, TemplateID: req.TemplateID, Template: req.Template, CreatedBy: c.UserID,
	}, !noWait(r))
	return agentAnswer(a, running, http.StatusCreated, err)
}

func (s *Server) deleteAgent(r *http.Request, c *Caller) (*Response, error) {
	a, err := s.ops.DeleteAgent(r.Context(), c.scope(), r.PathValue("agentId"))
	if err != nil {
		return nil, err
	}
	return ok(map[string]any{"id": a.Name, "deleted": true})
}

// noWait: the caller asked not to wait for the controllers (?wait=false).
func noWait(r *http.Request) bool { return r.URL.Query().Get("wait") == "false" }

// agentAnswer answers an operation that changes an agent and waits for the controllers:
// status once they carried it out (settled), 202 with the agent as it is otherwise. A
// failure the operation reports with the agent (`Gateway failed to start`, ...) shows it as
// the REST API does.
func agentAnswer(a *agentsv1.Agent, settled bool, status int, err error) (*Response, error) {
	if err != nil {
		var e *ops.Error
		if errors.As(err, &e) {
			if got, isAgent := e.Fields["agent"].(*agentsv1.Agent); isAgent {
				shown := *e
				shown.Fields = maps.Clone(e.Fields)
				shown.Fields["agent"] = viewAgent(got)
				return nil, &shown
			}
		}
		return nil, err
	}
	if !settled {
		status = http.StatusAccepted
	}
	return &Response{Status: status, Body: map[string]any{"agent": viewAgent(a)}}, nil
}
