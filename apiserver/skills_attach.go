package apiserver

import (
	"context"
	"net/http"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/clawhub"
	"github.com/agentplane/agentplane/internal/ops"
	"github.com/agentplane/agentplane/internal/storage"
)

// SkillSyncWait bounds how long attach, detach and update wait for the Agent controller to
// unpack (or remove) the bundles in the agent's workspace. Within it the answer is 200 and a
// client that then lists `skills/` sees the files; past it the answer is 202 (the change is
// recorded and lands with the controller's next pass). A stopped agent is not waited for.
const SkillSyncWait = 30 * time.Second

// skillRetry re-reads and re-applies an agent's skills on conflicts: concurrent attaches and
// the controller's status writes all bump the agent's resourceVersion.
var skillRetry = wait.Backoff{Steps: 30, Duration: 10 * time.Millisecond, Factor: 1.5, Jitter: 0.5, Cap: time.Second}

// errSkillsMax is the contract's answer to an 11th skill.
var errSkillsMax = errorf(http.StatusBadRequest, msgSkillsMax)

type attachSkillsRequest struct {
	SkillCIDs []string `json:"skillCids"`
}

// attachSkills attaches installed skills (by bundle CID) to an agent. The limit of 10 is
// checked on the agent as re-read inside the conflict retry, so concurrent attaches can
// never exceed it together.
func (s *Server) attachSkills(r *http.Request, c *Caller) (*Response, error) {
	var req attachSkillsRequest
	if err := decodeJSON(r, &req, msgInvalidBody); err != nil {
		return nil, err
	}
	if len(req.SkillCIDs) == 0 {
		return nil, errorf(http.StatusBadRequest, msgSkillCIDsRequired)
	}
	// Shape before lookups: more distinct skills than an agent may hold is a 400 whether or
	// not they (or the agent) exist.
	if distinctCIDs(req.SkillCIDs) > MaxAgentSkills {
		return nil, errSkillsMax
	}
	ctx := r.Context()
	agent, err := s.getAgent(ctx, c, r.PathValue("agentId"))
	if err != nil {
		return nil, err
	}
	skills, err := s.workspaceSkills(ctx, c.Namespace)
	if err != nil {
		return nil, err
	}
	var want []string
	for _, raw := range req.SkillCIDs {
		id, err := storage.CanonicalCID(raw)
		if err != nil || !slices.ContainsFunc(skills, func(sk agentsv1.Skill) bool { return sk.Spec.CID == id }) {
			return nil, errorf(http.StatusNotFound, msgSkillNotFound)
		}
		if !slices.Contains(want, id) {
			want = append(want, id)
		}
	}
	err = s.editAgentSkills(ctx, agent, func(cur []agentsv1.AgentSkill) ([]agentsv1.AgentSkill, error) {
		for _, id := range want {
			if !hasSkill(cur, id) {
				cur = append(cur, agentsv1.AgentSkill{CID: id})
			}
		}
		if len(cur) > MaxAgentSkills {
			return nil, errSkillsMax
		}
		return cur, nil
	})
	if err != nil {
		return nil, err
	}
	agent, synced := s.waitSkillsSynced(ctx, agent, func(installed []string) bool {
		return !slices.ContainsFunc(want, func(id string) bool { return !slices.Contains(installed, id) })
	})
	return skillsAnswer(synced, map[string]any{"agent": viewAgent(agent)})
}

// distinctCIDs counts the distinct skills named (canonical CIDs; a malformed one by its text).
func distinctCIDs(raw []string) int {
	seen := map[string]bool{}
	for _, id := range raw {
		if c, err := storage.CanonicalCID(id); err == nil {
			id = c
		}
		seen[id] = true
	}
	return len(seen)
}

// detachSkill removes a skill from an agent. skillId is the Skill's object name (any of its
// versions' bundles is detached) or a bundle CID the agent attaches.
func (s *Server) detachSkill(r *http.Request, c *Caller) (*Response, error) {
	ctx := r.Context()
	agent, err := s.getAgent(ctx, c, r.PathValue("agentId"))
	if err != nil {
		return nil, err
	}
	id := r.PathValue("skillId")
	var match []string
	if canonical, err := storage.CanonicalCID(id); err == nil {
		match = []string{canonical}
	} else if sk, err := s.getSkill(ctx, c, id); err == nil {
		match = (sk).CIDs()
	}
	var removed []string
	err = s.editAgentSkills(ctx, agent, func(cur []agentsv1.AgentSkill) ([]agentsv1.AgentSkill, error) {
		removed = removed[:0]
		cur = slices.DeleteFunc(cur, func(as agentsv1.AgentSkill) bool {
			if slices.Contains(match, as.CID) {
				removed = append(removed, as.CID)
				return true
			}
			return false
		})
		if len(removed) == 0 {
			return nil, errorf(http.StatusNotFound, msgSkillNotFound)
		}
		return cur, nil
	})
	if err != nil {
		return nil, err
	}
	agent, synced := s.waitSkillsSynced(ctx, agent, func(installed []string) bool {
		return !slices.ContainsFunc(removed, func(id string) bool { return slices.Contains(installed, id) })
	})
	return skillsAnswer(synced, map[string]any{"agent": viewAgent(agent)})
}

type updateSkillRequest struct {
	Version         string `json:"version"`
	ExpectedVersion string `json:"expectedVersion"`
}

// updateAgentSkill moves an attached skill to another version (the registry's latest when
// none is given): 409 when expectedVersion is not the Skill's current version or when the
// Skill changed after it was read (its resourceVersion guards the write). The new bundle
// replaces the old one in this agent's skills.
func (s *Server) updateAgentSkill(r *http.Request, c *Caller) (*Response, error) {
	var req updateSkillRequest
	if err := decodeOptionalJSON(r, &req); err != nil {
		return nil, err
	}
	for _, v := range []string{req.Version, req.ExpectedVersion} {
		if v != "" && !clawhub.ValidVersion(v) {
			return nil, errorf(http.StatusBadRequest, msgInvalidVersion)
		}
	}
	ctx := r.Context()
	agent, err := s.getAgent(ctx, c, r.PathValue("agentId"))
	if err != nil {
		return nil, err
	}
	sk, err := s.getSkill(ctx, c, r.PathValue("skillId"))
	if err != nil {
		return nil, err
	}
	if req.ExpectedVersion != "" && req.ExpectedVersion != sk.Spec.Version {
		return nil, errorf(http.StatusConflict, msgSkillConflict)
	}
	cids := (sk).CIDs()
	i := slices.IndexFunc(agent.Spec.Skills, func(as agentsv1.AgentSkill) bool { return slices.Contains(cids, as.CID) })
	if i < 0 {
		return nil, errorf(http.StatusNotFound, msgSkillNotFound)
	}
	oldCID := agent.Spec.Skills[i].CID
	version, displayName := req.Version, ""
	if version == "" {
		info, err := clawhub.New(s.registryURL()).Skill(ctx, sk.Spec.Slug)
		if err != nil {
			return nil, registryError(err)
		}
		if version, displayName = info.LatestVersion, info.DisplayName; version == "" {
			return nil, errorf(http.StatusNotFound, msgSkillNotFound)
		}
	}
	if version != sk.Spec.Version {
		if s.opts.Files == nil {
			return nil, errorf(http.StatusServiceUnavailable, ops.MsgStorageMissing)
		}
		obj, err := s.fetchBundle(ctx, c.Namespace, sk.Spec.Slug, version)
		if err != nil {
			return nil, err
		}
		// A concurrent update of the skill's spec since the read above makes this fail.
		if err := s.updateSkillVersion(ctx, sk, version, obj.CID, displayName); err != nil {
			return nil, err
		}
	}
	newCID := sk.Spec.CID
	if newCID != oldCID {
		err = s.editAgentSkills(ctx, agent, func(cur []agentsv1.AgentSkill) ([]agentsv1.AgentSkill, error) {
			cur = slices.DeleteFunc(cur, func(as agentsv1.AgentSkill) bool { return as.CID == oldCID })
			if !hasSkill(cur, newCID) {
				cur = append(cur, agentsv1.AgentSkill{CID: newCID})
			}
			return cur, nil
		})
		if err != nil {
			return nil, err
		}
	}
	_, synced := s.waitSkillsSynced(ctx, agent, func(installed []string) bool {
		return slices.Contains(installed, newCID) && (oldCID == newCID || !slices.Contains(installed, oldCID))
	})
	return skillsAnswer(synced, map[string]any{"skill": viewSkill(sk)})
}

// listAgentSkills answers the skills an agent attaches, with whether each is unpacked.
func (s *Server) listAgentSkills(r *http.Request, c *Caller) (*Response, error) {
	agent, err := s.getAgent(r.Context(), c, r.PathValue("agentId"))
	if err != nil {
		return nil, err
	}
	skills, err := s.workspaceSkills(r.Context(), c.Namespace)
	if err != nil {
		return nil, err
	}
	type attached struct {
		skillView
		Installed bool `json:"installed"`
	}
	out := []attached{}
	for _, as := range agent.Spec.Skills {
		v := skillView{CID: as.CID}
		for i := range skills {
			if slices.Contains((&skills[i]).CIDs(), as.CID) {
				v = viewSkill(&skills[i])
				v.CID = as.CID
				break
			}
		}
		out = append(out, attached{skillView: v, Installed: slices.Contains(agent.Status.InstalledSkills, as.CID)})
	}
	return ok(map[string]any{"skills": out})
}

// editAgentSkills applies edit to the agent's skills as re-read from the API server, and
// writes them guarded by that read's resourceVersion, retrying on conflicts. An error from
// edit aborts. agent is updated to the written object.
func (s *Server) editAgentSkills(ctx context.Context, agent *agentsv1.Agent, edit func([]agentsv1.AgentSkill) ([]agentsv1.AgentSkill, error)) error {
	return retry.RetryOnConflict(skillRetry, func() error {
		cur := &agentsv1.Agent{}
		if err := s.opts.APIReader.Get(ctx, client.ObjectKeyFromObject(agent), cur); err != nil {
			return err
		}
		next, err := edit(slices.Clone(cur.Spec.Skills))
		if err != nil {
			return err
		}
		if slices.Equal(next, cur.Spec.Skills) {
			*agent = *cur
			return nil
		}
		cur.Spec.Skills = next
		if err := s.opts.Client.Update(ctx, cur); err != nil {
			return err
		}
		*agent = *cur
		return nil
	})
}

// waitSkillsSynced waits until done(status.installedSkills) holds, for at most
// SkillSyncWait (not at all for a stopped agent). It returns the last agent seen.
func (s *Server) waitSkillsSynced(ctx context.Context, agent *agentsv1.Agent, done func([]string) bool) (*agentsv1.Agent, bool) {
	if done(agent.Status.InstalledSkills) {
		return agent, true
	}
	if agent.Spec.Stopped {
		return agent, false
	}
	ctx, cancel := context.WithTimeout(ctx, SkillSyncWait)
	defer cancel()
	got := agent.DeepCopy()
	err := s.ops.WaitFor(ctx, got, func() (bool, error) {
		if got.Generation >= agent.Generation {
			agent = got.DeepCopy()
		}
		return done(got.Status.InstalledSkills), nil
	})
	return agent, err == nil
}

// skillsAnswer is 200 once the workspace reflects the change, 202 while it is pending.
func skillsAnswer(synced bool, body any) (*Response, error) {
	if synced {
		return ok(body)
	}
	return &Response{Status: http.StatusAccepted, Body: body}, nil
}

func hasSkill(list []agentsv1.AgentSkill, id string) bool {
	return slices.ContainsFunc(list, func(as agentsv1.AgentSkill) bool { return as.CID == id })
}
