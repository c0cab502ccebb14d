package ops

import (
	"context"
	"slices"
	"time"

	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/clawhub"
	"github.com/agentplane/agentplane/internal/adapters/storage"
)

// SkillSyncWait bounds how long attach, detach and update wait for the Agent controller to
// unpack (or remove) the bundles in the agent's home. Within it the operations report
// the change synced (a client that then lists `skills/` sees the files); past it they report
// it pending (the change is recorded and lands with the controller's next pass). A stopped
// agent is not waited for.
const SkillSyncWait = 30 * time.Second

// AttachSkills attaches installed skills (by bundle CID) to an agent. The limit of
// MaxAgentSkills is checked on the agent as re-read inside the conflict retry, so concurrent
// attaches can never exceed it together. It returns the agent as last seen and whether its
// workspace holds the skills (within SkillSyncWait).
func (o *Ops) AttachSkills(ctx context.Context, t Scope, agentID string, cids []string) (*agentsv1.Agent, bool, error) {
	if len(cids) == 0 {
		return nil, false, Fail(Invalid, MsgSkillCIDsRequired)
	}
	// Shape before lookups: more distinct skills than an agent may hold is Invalid whether or
	// not they (or the agent) exist.
	if distinctCIDs(cids) > MaxAgentSkills {
		return nil, false, Fail(Invalid, MsgSkillsMax)
	}
	agent, err := o.Agent(ctx, t, agentID)
	if err != nil {
		return nil, false, err
	}
	skills, err := o.Skills(ctx, t)
	if err != nil {
		return nil, false, err
	}
	var want []string
	for _, raw := range cids {
		id, err := storage.CanonicalCID(raw)
		if err != nil || !slices.ContainsFunc(skills, func(sk agentsv1.Skill) bool { return sk.Spec.CID == id }) {
			return nil, false, Fail(NotFound, MsgSkillNotFound)
		}
		if !slices.Contains(want, id) {
			want = append(want, id)
		}
	}
	err = o.editAgentSkills(ctx, agent, func(cur []agentsv1.AgentSkill) ([]agentsv1.AgentSkill, error) {
		for _, id := range want {
			if !hasSkill(cur, id) {
				cur = append(cur, agentsv1.AgentSkill{CID: id})
			}
		}
		if len(cur) > MaxAgentSkills {
			return nil, Fail(Invalid, MsgSkillsMax)
		}
		return cur, nil
	})
	if err != nil {
		return nil, false, err
	}
	agent, synced := o.waitSkillsSynced(ctx, agent, func(installed []string) bool {
		return !slices.ContainsFunc(want, func(id string) bool { return !slices.Contains(installed, id) })
	})
	return agent, synced, nil
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

// DetachSkill removes a skill from an agent. skillID is the Skill's object name (any of its
// versions' bundles is detached) or a bundle CID the agent attaches. It returns the agent as
// last seen and whether its workspace no longer holds the skill (within SkillSyncWait).
func (o *Ops) DetachSkill(ctx context.Context, t Scope, agentID, skillID string) (*agentsv1.Agent, bool, error) {
	agent, err := o.Agent(ctx, t, agentID)
	if err != nil {
		return nil, false, err
	}
	var match []string
	if canonical, err := storage.CanonicalCID(skillID); err == nil {
		match = []string{canonical}
	} else if sk, err := o.Skill(ctx, t, skillID); err == nil {
		match = sk.CIDs()
	}
	var removed []string
	err = o.editAgentSkills(ctx, agent, func(cur []agentsv1.AgentSkill) ([]agentsv1.AgentSkill, error) {
		removed = removed[:0]
		cur = slices.DeleteFunc(cur, func(as agentsv1.AgentSkill) bool {
			if slices.Contains(match, as.CID) {
				removed = append(removed, as.CID)
				return true
			}
			return false
		})
		if len(removed) == 0 {
			return nil, Fail(NotFound, MsgSkillNotFound)
		}
		return cur, nil
	})
	if err != nil {
		return nil, false, err
	}
	agent, synced := o.waitSkillsSynced(ctx, agent, func(installed []string) bool {
		return !slices.ContainsFunc(removed, func(id string) bool { return slices.Contains(installed, id) })
	})
	return agent, synced, nil
}

// SkillUpdate is what UpdateAgentSkill is asked.
type SkillUpdate struct {
	// Version is the version to move to ("" = the registry's latest).
	Version string
	// ExpectedVersion, when set, must be the Skill's current version (else Conflict).
	ExpectedVersion string
}

// UpdateAgentSkill moves a skill the agent attaches to another version: Conflict when
// ExpectedVersion is not the Skill's current version or when the Skill changed after it was
// read (its resourceVersion guards the write). The new bundle replaces the old one in this
// agent's skills. It returns the Skill and whether the agent's home holds the new bundle
// (within SkillSyncWait).
func (o *Ops) UpdateAgentSkill(ctx context.Context, t Scope, agentID, skillID string, u SkillUpdate) (*agentsv1.Skill, bool, error) {
	for _, v := range []string{u.Version, u.ExpectedVersion} {
		if v != "" && !clawhub.ValidVersion(v) {
			return nil, false, Fail(Invalid, MsgInvalidVersion)
		}
	}
	agent, err := o.Agent(ctx, t, agentID)
	if err != nil {
		return nil, false, err
	}
	sk, err := o.Skill(ctx, t, skillID)
	if err != nil {
		return nil, false, err
	}
	if u.ExpectedVersion != "" && u.ExpectedVersion != sk.Spec.Version {
		return nil, false, Fail(Conflict, MsgSkillConflict)
	}
	cids := sk.CIDs()
	i := slices.IndexFunc(agent.Spec.Skills, func(as agentsv1.AgentSkill) bool { return slices.Contains(cids, as.CID) })
	if i < 0 {
		return nil, false, Fail(NotFound, MsgSkillNotFound)
	}
	oldCID := agent.Spec.Skills[i].CID
	if err := o.moveSkillVersion(ctx, t, sk, u.Version); err != nil {
		return nil, false, err
	}
	newCID := sk.Spec.CID
	if newCID != oldCID {
		err = o.editAgentSkills(ctx, agent, func(cur []agentsv1.AgentSkill) ([]agentsv1.AgentSkill, error) {
			cur = slices.DeleteFunc(cur, func(as agentsv1.AgentSkill) bool { return as.CID == oldCID })
			if !hasSkill(cur, newCID) {
				cur = append(cur, agentsv1.AgentSkill{CID: newCID})
			}
			return cur, nil
		})
		if err != nil {
			return nil, false, err
		}
	}
	_, synced := o.waitSkillsSynced(ctx, agent, func(installed []string) bool {
		return slices.Contains(installed, newCID) && (oldCID == newCID || !slices.Contains(installed, oldCID))
	})
	return sk, synced, nil
}

// moveSkillVersion points the Skill sk at version (the registry's latest when ""), fetching
// and storing its bundle, unless sk is at that version already.
func (o *Ops) moveSkillVersion(ctx context.Context, t Scope, sk *agentsv1.Skill, version string) error {
	displayName := ""
	if version == "" {
		info, err := clawhub.New(o.registryURL()).Skill(ctx, sk.Spec.Slug)
		if err != nil {
			return registryError(err)
		}
		if version, displayName = info.LatestVersion, info.DisplayName; version == "" {
			return Fail(NotFound, MsgSkillNotFound)
		}
	}
	if version == sk.Spec.Version {
		return nil
	}
	if t.OnlyAgent != "" {
		// The Skill is the workspace's: a credential bound to one agent (its gateway or
		// platform token) moves its agent to the workspace's version, never the Skill itself.
		return Fail(Forbidden, MsgPermissionDenied)
	}
	if o.d.Files == nil {
		return Fail(Unavailable, MsgStorageMissing)
	}
	obj, err := o.fetchBundle(ctx, t.Namespace, sk.Spec.Slug, version)
	if err != nil {
		return err
	}
	// A concurrent update of the skill's spec since it was read makes this fail.
	return o.updateSkillVersion(ctx, sk, version, obj.CID, displayName)
}

// AttachedSkill is a skill an agent attaches.
type AttachedSkill struct {
	// CID is the bundle the agent attaches.
	CID string
	// Skill is the workspace's Skill with that bundle among its versions (nil: none).
	Skill *agentsv1.Skill
	// Installed is whether the bundle is unpacked in the agent's home.
	Installed bool
}

// AgentSkills lists the skills an agent attaches, with whether each is unpacked.
func (o *Ops) AgentSkills(ctx context.Context, t Scope, agentID string) ([]AttachedSkill, error) {
	agent, err := o.Agent(ctx, t, agentID)
	if err != nil {
		return nil, err
	}
	skills, err := o.Skills(ctx, t)
	if err != nil {
		return nil, err
	}
	out := []AttachedSkill{}
	for _, as := range agent.Spec.Skills {
		a := AttachedSkill{CID: as.CID, Installed: slices.Contains(agent.Status.InstalledSkills, as.CID)}
		for i := range skills {
			if slices.Contains(skills[i].CIDs(), as.CID) {
				a.Skill = &skills[i]
				break
			}
		}
		out = append(out, a)
	}
	return out, nil
}

// editAgentSkills applies edit to the agent's skills as re-read from the API server, and
// writes them guarded by that read's resourceVersion, retrying on conflicts. An error from
// edit aborts. agent is updated to the written object.
func (o *Ops) editAgentSkills(ctx context.Context, agent *agentsv1.Agent, edit func([]agentsv1.AgentSkill) ([]agentsv1.AgentSkill, error)) error {
	return retry.RetryOnConflict(specRetry, func() error {
		cur := &agentsv1.Agent{}
		if err := o.d.APIReader.Get(ctx, client.ObjectKeyFromObject(agent), cur); err != nil {
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
		if err := o.d.Client.Update(ctx, cur); err != nil {
			return err
		}
		*agent = *cur
		return nil
	})
}

// waitSkillsSynced waits until done(status.installedSkills) holds, for at most
// SkillSyncWait (not at all for a stopped agent). It returns the last agent seen.
func (o *Ops) waitSkillsSynced(ctx context.Context, agent *agentsv1.Agent, done func([]string) bool) (*agentsv1.Agent, bool) {
	if done(agent.Status.InstalledSkills) {
		return agent, true
	}
	if agent.Spec.Stopped {
		return agent, false
	}
	ctx, cancel := context.WithTimeout(ctx, SkillSyncWait)
	defer cancel()
	got := agent.DeepCopy()
	err := o.WaitFor(ctx, got, func() (bool, error) {
		if got.Generation >= agent.Generation {
			agent = got.DeepCopy()
		}
		return done(got.Status.InstalledSkills), nil
	})
	return agent, err == nil
}

func hasSkill(list []agentsv1.AgentSkill, id string) bool {
	return slices.ContainsFunc(list, func(as agentsv1.AgentSkill) bool { return as.CID == id })
}
