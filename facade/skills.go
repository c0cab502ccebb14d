package facade

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"time"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/ops"
	"github.com/agentplane/agentplane/internal/rules/auth"
)

// +kubebuilder:rbac:groups=agentplane.io,resources=skills,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=agentplane.io,resources=skills/status,verbs=get;update;patch

// skillView is a Skill as the REST API shows it.
type skillView struct {
	ID          string    `json:"id"`
	Slug        string    `json:"slug"`
	Version     string    `json:"version"`
	CID         string    `json:"cid"`
	DisplayName string    `json:"displayName,omitempty"`
	Registry    string    `json:"registry,omitempty"`
	Size        int64     `json:"size,omitempty"`
	InstalledAt time.Time `json:"installedAt"`
}

func viewSkill(sk *agentsv1.Skill) skillView {
	v := skillView{
		ID: sk.Name, Slug: sk.Spec.Slug, Version: sk.Spec.Version, CID: sk.Spec.CID,
		DisplayName: sk.Spec.DisplayName, Registry: sk.Spec.Registry, Size: sk.Status.Size,
		InstalledAt: sk.CreationTimestamp.UTC(),
	}
	if t, err := time.Parse(time.RFC3339Nano, sk.Annotations[agentsv1.AnnotationSkillInstalledAt]); err == nil {
		v.InstalledAt = t.UTC()
	}
	return v
}

// skillRoutes registers the skill routes: installs from ClawHub (skills:write), the
// workspace's skills (agents:read), and their attachment to agents (skills:write; the agent's
// gateway token is accepted on its own agent).
func (s *Server) skillRoutes() {
	read := access{scope: auth.ScopeAgentsRead, perm: auth.PermRead}
	write := access{scope: auth.ScopeSkillsWrite, perm: auth.PermWrite}
	own := func(a access) access { a.gateway = true; return a }
	s.handle("POST /v0/clawhub/{slug}/install", write, s.installSkill)
	s.handle("GET /v0/skills", read, s.listSkills)
	s.handle("GET /v0/agents/{agentId}/skills", own(read), s.listAgentSkills)
	s.handle("POST /v0/agents/{agentId}/skills", own(write), s.attachSkills)
	s.handle("DELETE /v0/agents/{agentId}/skills/{skillId}", own(write), s.detachSkill)
	s.handle("POST /v0/agents/{agentId}/skills/{skillId}/update", own(write), s.updateAgentSkill)
}

type installSkillRequest struct {
	Version string `json:"version"`
}

// installSkill downloads a skill from ClawHub, checks and stores its bundle, and records it
// as the workspace's Skill named after the slug: 201 when new, 200 when that version is
// already installed or another version was replaced.
func (s *Server) installSkill(r *http.Request, c *Caller) (*Response, error) {
	slug := r.PathValue("slug")
	// The slug is named before the body is read: a bad slug is `Invalid slug` whatever the body.
	if err := ops.CheckSkillSlug(slug); err != nil {
		return nil, err
	}
	var req installSkillRequest
	if err := decodeOptionalJSON(r, &req); err != nil {
		return nil, err
	}
	in, err := s.ops.InstallSkill(r.Context(), c.scope(), slug, req.Version)
	if err != nil {
		return nil, err
	}
	v := viewSkill(in.Skill)
	if in.Stored != nil {
		// The size of the bundle just stored (the Skill controller records it in status, from
		// storage, on its own pass).
		v.Size = in.Stored.Size
	}
	if in.Created {
		return created(map[string]any{"skill": v})
	}
	return ok(map[string]any{"skill": v})
}

// decodeOptionalJSON is decodeJSON for a body that may be empty.
func decodeOptionalJSON(r *http.Request, v any) error {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		var maxErr *http.MaxBytesError
		if errors.As(err, &maxErr) {
			return withCause(http.StatusRequestEntityTooLarge, msgBodyTooLarge, err)
		}
		return withCause(http.StatusBadRequest, msgInvalidBody, err)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	return decodeJSONBytes(raw, v, msgInvalidBody)
}

// listSkills answers the workspace's installed skills, by slug.
func (s *Server) listSkills(r *http.Request, c *Caller) (*Response, error) {
	list, err := s.ops.Skills(r.Context(), c.scope())
	if err != nil {
		return nil, err
	}
	out := make([]skillView, 0, len(list))
	for i := range list {
		out = append(out, viewSkill(&list[i]))
	}
	return ok(map[string]any{"skills": out})
}
