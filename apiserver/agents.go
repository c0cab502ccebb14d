package apiserver

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"net/http"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/admission"
)

// Agent messages (the contract fixes `Agent limit reached` and `Gateway failed to start`).
const (
	msgAgentLimit        = "Agent limit reached"
	msgGatewayFailed     = "Gateway failed to start"
	msgNameRequired      = "Name is required"
	msgNameTooLong       = "Name must be at most 100 characters"
	msgNameBanned        = "Name contains invalid characters"
	msgInvalidVersion    = "Invalid version"
	msgTemplateNotFound  = "Template not found"
	maxAgentNameRunes    = 100
	defaultProvisionWait = 3 * time.Minute
)

// bannedNameRunes are refused in agent names (also by the CRD's pattern): they break
// prompts, markup and logs.
const bannedNameRunes = "<>{}`\\"

// validateAgentName applies the contract's name rules: required, at most 100 characters,
// no banned characters.
func validateAgentName(name string) error {
	switch {
	case strings.TrimSpace(name) == "":
		return errorf(http.StatusBadRequest, msgNameRequired)
	case utf8.RuneCountInString(name) > maxAgentNameRunes:
		return errorf(http.StatusBadRequest, msgNameTooLong)
	case !utf8.ValidString(name) || strings.ContainsAny(name, bannedNameRunes) ||
		strings.IndexFunc(name, func(r rune) bool { return unicode.IsControl(r) }) >= 0:
		return errorf(http.StatusBadRequest, msgNameBanned)
	}
	return nil
}

var agentIDEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// newAgentID returns a random agent id; ids are object names and unique across workspaces.
func newAgentID() string {
	b := make([]byte, 10)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return "agt-" + agentIDEncoding.EncodeToString(b)
}

// agentView is an agent as the REST API shows it.
type agentView struct {
	ID            string   `json:"id"`
	Name          string   `json:"name"`
	Description   string   `json:"description,omitempty"`
	Vibe          string   `json:"vibe,omitempty"`
	Emoji         string   `json:"emoji,omitempty"`
	Status        string   `json:"status"`
	StatusReason  string   `json:"statusReason,omitempty"`
	StatusMessage string   `json:"statusMessage,omitempty"`
	Engine        string   `json:"engine"`
	EngineVersion string   `json:"engineVersion,omitempty"`
	Endpoint      string   `json:"endpoint,omitempty"`
	Template      string   `json:"template,omitempty"`
	Skills        []string `json:"skills"`
	Secrets       []string `json:"secrets"`
	Stopped       bool     `json:"stopped"`
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
		ID: a.Name, Name: a.Spec.DisplayName, Description: a.Spec.Description, Vibe: a.Spec.Vibe, Emoji: a.Spec.Emoji,
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
	return s.ops.Agent(ctx, c.tenant(), id)
}

func (s *Server) listAgents(r *http.Request, c *Caller) (*Response, error) {
	var list agentsv1.AgentList
	if err := s.opts.APIReader.List(r.Context(), &list, client.InNamespace(c.Namespace)); err != nil {
		return nil, err
	}
	sort.Slice(list.Items, func(i, j int) bool {
		return list.Items[i].CreationTimestamp.Before(&list.Items[j].CreationTimestamp) ||
			list.Items[i].CreationTimestamp.Equal(&list.Items[j].CreationTimestamp) && list.Items[i].Name < list.Items[j].Name
	})
	out := make([]agentView, 0, len(list.Items))
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp == nil {
			out = append(out, viewAgent(&list.Items[i]))
		}
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
	Name          *string `json:"name"`
	Description   string  `json:"description"`
	Vibe          string  `json:"vibe"`
	Emoji         string  `json:"emoji"`
	EngineVersion string  `json:"engineVersion"`
	TemplateID    string  `json:"templateId"`
	Template      string  `json:"template"`
}

func (s *Server) createAgent(r *http.Request, c *Caller) (*Response, error) {
	var req createAgentRequest
	if err := decodeJSON(r, &req, msgInvalidBody); err != nil {
		return nil, err
	}
	agent, err := s.agentFromRequest(r.Context(), c, &req)
	if err != nil {
		return nil, err
	}
	if err := s.opts.Admission.ReserveAgent(r.Context(), agent); err != nil {
		if errors.Is(err, admission.ErrLimitReached) {
			return nil, errorf(http.StatusForbidden, msgAgentLimit)
		}
		return nil, err
	}
	// Once its slot is taken the create is carried out whether or not the caller waits.
	ctx := context.WithoutCancel(r.Context())
	if err := s.opts.Client.Create(ctx, agent); err != nil {
		// Only a refused create gives the slot back: after a lost answer the agent may exist
		// (the workspace controller frees the slot if it never appears).
		if admission.Refused(err) {
			_ = s.opts.Admission.ReleaseAgent(ctx, agent)
		}
		return nil, err
	}
	if r.URL.Query().Get("wait") == "false" {
		return &Response{Status: http.StatusAccepted, Body: map[string]any{"agent": viewAgent(agent)}}, nil
	}
	return s.waitForGateway(r.Context(), agent, http.StatusCreated, msgGatewayFailed, nil)
}

// agentFromRequest validates the body and builds the Agent (expanded from a template when
// one is named: the Agent controller expands an Agent applied with kubectl the same way).
func (s *Server) agentFromRequest(ctx context.Context, c *Caller, req *createAgentRequest) (*agentsv1.Agent, error) {
	a := &agentsv1.Agent{
		ObjectMeta: metav1.ObjectMeta{
			Name: newAgentID(), Namespace: c.Namespace,
			Labels: map[string]string{agentsv1.LabelCreatedBy: labelSafe(c.UserID)},
		},
		Spec: agentsv1.AgentSpec{
			Description: req.Description, Vibe: req.Vibe, Emoji: req.Emoji,
			Engine: agentsv1.EngineSpec{Name: agentsv1.EngineOpenClaw},
		},
	}
	if req.TemplateID != "" || req.Template != "" {
		t, err := s.opts.Admission.Template(ctx, req.TemplateID, req.Template)
		if errors.Is(err, admission.ErrTemplateNotFound) {
			return nil, errorf(http.StatusNotFound, msgTemplateNotFound)
		}
		if err != nil {
			return nil, err
		}
		s.opts.Admission.Expand(ctx, a, t)
	}
	if req.Name != nil {
		a.Spec.DisplayName = *req.Name
	}
	if err := validateAgentName(a.Spec.DisplayName); err != nil {
		return nil, err
	}
	if req.EngineVersion != "" {
		a.Spec.Engine.Version = req.EngineVersion
	}
	if a.Spec.Engine.Version != "" {
		if _, err := s.opts.Admission.Version(a); err != nil {
			return nil, errorf(http.StatusBadRequest, msgInvalidVersion)
		}
	}
	return a, nil
}

func (s *Server) deleteAgent(r *http.Request, c *Caller) (*Response, error) {
	a, err := s.getAgent(r.Context(), c, r.PathValue("agentId"))
	if err != nil {
		return nil, err
	}
	if err := s.opts.Client.Delete(r.Context(), a); err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	return ok(map[string]any{"id": a.Name, "deleted": true})
}

// provisionWait bounds a wait for a controller's verdict (Options.ProvisionTimeout).
func (s *Server) provisionWait() time.Duration {
	if s.opts.ProvisionTimeout > 0 {
		return s.opts.ProvisionTimeout
	}
	return defaultProvisionWait
}

// waitForGateway waits until the agent's gateway answers (answering status), crashes (500
// failMsg with the agent in the body) or the wait ends (202: still starting). done, when set,
// says whether the observed status already reflects the request being waited for.
func (s *Server) waitForGateway(ctx context.Context, agent *agentsv1.Agent, status int, failMsg string, done func(*agentsv1.Agent) bool) (*Response, error) {
	return s.waitForAgent(ctx, agent, status, func(got *agentsv1.Agent) (bool, error) {
		if got.Status.ObservedGeneration < got.Generation || done != nil && !done(got) {
			return false, nil
		}
		switch {
		case got.Status.Phase == agentsv1.AgentRunning:
			return true, nil
		case got.Status.Phase == agentsv1.AgentNotRunning && !got.Spec.Stopped:
			return true, &Error{Status: http.StatusInternalServerError, Message: failMsg,
				Fields: map[string]any{"agent": viewAgent(got)}}
		}
		return false, nil
	})
}

// waitForAgent waits (bounded by provisionWait) until until says the agent is as asked, and
// answers it with status; 202 with the agent as it is when the wait ends first.
func (s *Server) waitForAgent(ctx context.Context, agent *agentsv1.Agent, status int, until func(*agentsv1.Agent) (bool, error)) (*Response, error) {
	wctx, cancel := context.WithTimeout(ctx, s.provisionWait())
	defer cancel()
	got := agent.DeepCopy()
	err := s.ops.WaitFor(wctx, got, func() (bool, error) { return until(got) })
	switch {
	case err == nil:
		return &Response{Status: status, Body: map[string]any{"agent": viewAgent(got)}}, nil
	case ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
		return &Response{Status: http.StatusAccepted, Body: map[string]any{"agent": viewAgent(got)}}, nil
	}
	return nil, err
}

// labelSafe keeps a value usable as a label value.
func labelSafe(v string) string {
	var b strings.Builder
	for _, r := range v {
		if b.Len() >= 63 {
			break
		}
		if r < 128 && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_' || r == '.') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return strings.Trim(b.String(), "-_.")
}
