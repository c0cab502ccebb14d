package facade

import (
	"net/http"

	"github.com/agentplane/agentplane/internal/ops"
)

type attachSkillsRequest struct {
	SkillCIDs []string `json:"skillCids"`
}

// attachSkills attaches installed skills (by bundle CID) to an agent.
func (s *Server) attachSkills(r *http.Request, c *Caller) (*Response, error) {
	var req attachSkillsRequest
	if err := decodeJSON(r, &req, msgInvalidBody); err != nil {
		return nil, err
	}
	agent, synced, err := s.ops.AttachSkills(r.Context(), c.scope(), r.PathValue("agentId"), req.SkillCIDs)
	if err != nil {
		return nil, err
	}
	return skillsAnswer(synced, map[string]any{"agent": viewAgent(agent)})
}

// detachSkill removes a skill from an agent. skillId is the Skill's object name (any of its
// versions' bundles is detached) or a bundle CID the agent attaches.
func (s *Server) detachSkill(r *http.Request, c *Caller) (*Response, error) {
	agent, synced, err := s.ops.DetachSkill(r.Context(), c.scope(), r.PathValue("agentId"), r.PathValue("skillId"))
	if err != nil {
		return nil, err
	}
	return skillsAnswer(synced, map[string]any{"agent": viewAgent(agent)})
}

type updateSkillRequest struct {
	Version         string `json:"version"`
	ExpectedVersion string `json:"expectedVersion"`
}

// updateAgentSkill moves an attached skill to another version (the registry's latest when
// none is given): 409 when expectedVersion is not the Skill's current version or when the
// Skill changed after it was read.
func (s *Server) updateAgentSkill(r *http.Request, c *Caller) (*Response, error) {
	var req updateSkillRequest
	if err := decodeOptionalJSON(r, &req); err != nil {
		return nil, err
	}
	sk, synced, err := s.ops.UpdateAgentSkill(r.Context(), c.scope(), r.PathValue("agentId"), r.PathValue("skillId"),
		ops.SkillUpdate(req))
	if err != nil {
		return nil, err
	}
	return skillsAnswer(synced, map[string]any{"skill": viewSkill(sk)})
}

// listAgentSkills answers the skills an agent attaches, with whether each is unpacked.
func (s *Server) listAgentSkills(r *http.Request, c *Caller) (*Response, error) {
	list, err := s.ops.AgentSkills(r.Context(), c.scope(), r.PathValue("agentId"))
	if err != nil {
		return nil, err
	}
	type attached struct {
		skillView
		Installed bool `json:"installed"`
	}
	out := []attached{}
	for _, as := range list {
		v := skillView{CID: as.CID}
		if as.Skill != nil {
			v = viewSkill(as.Skill)
			v.CID = as.CID
		}
		out = append(out, attached{skillView: v, Installed: as.Installed})
	}
	return ok(map[string]any{"skills": out})
}

// skillsAnswer is 200 once the workspace reflects the change, 202 while it is pending.
func skillsAnswer(synced bool, body any) (*Response, error) {
	if synced {
		return ok(body)
	}
	return &Response{Status: http.StatusAccepted, Body: body}, nil
}
