package admission

import (
	"context"
	"fmt"
	"reflect"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// maxAgentSkills is the CRD's limit of spec.skills.
const maxAgentSkills = 10

// Template returns the published template with object name id or, without id, with slug.
// With both, the template named id must carry slug. A missing, draft or archived template
// answers an error matching ErrTemplateNotFound.
func (a *Admitter) Template(ctx context.Context, id, slug string) (*agentsv1.AgentTemplate, error) {
	notFound := fmt.Errorf("%w: %q", ErrTemplateNotFound, id+slug)
	if id != "" {
		t := &agentsv1.AgentTemplate{}
		if err := a.reader().Get(ctx, client.ObjectKey{Name: id}, t); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, notFound
			}
			return nil, err
		}
		if t.Spec.State != agentsv1.TemplatePublished || (slug != "" && t.Spec.Slug != slug) {
			return nil, notFound
		}
		return t, nil
	}
	var list agentsv1.AgentTemplateList
	if err := a.reader().List(ctx, &list); err != nil {
		return nil, err
	}
	for i := range list.Items {
		if t := &list.Items[i]; t.Spec.Slug == slug && t.Spec.State == agentsv1.TemplatePublished {
			return t, nil
		}
	}
	return nil, notFound
}

// Expand fills agent from template t, the same for both doors: what the agent sets itself
// wins, the template fills the rest (ApplyTemplate). The template's snapshot seeds the
// workspace when storage holds it for the agent's home.
func (a *Admitter) Expand(ctx context.Context, agent *agentsv1.Agent, t *agentsv1.AgentTemplate) {
	cid := t.Spec.SnapshotCID
	seed := cid != "" && a.SnapshotExists != nil && a.SnapshotExists(ctx, agent.Namespace, cid)
	ApplyTemplate(agent, t, seed)
}

// ExpandNamed expands the published template agent.spec.template names (an object name) into
// the agent (in memory; the caller writes the spec). The error matches ErrTemplateNotFound
// when no published template has that name.
func (a *Admitter) ExpandNamed(ctx context.Context, agent *agentsv1.Agent) error {
	t, err := a.Template(ctx, agent.Spec.Template, "")
	if err != nil {
		return err
	}
	a.Expand(ctx, agent, t)
	return nil
}

// NeedsExpansion reports whether the agent names a template that was not expanded into its
// spec yet: an Agent applied with kubectl (the REST facade expands before it creates). An
// agent that has already run (status.engineVersion set) was admitted before expansion was
// recorded and is left as it is.
func NeedsExpansion(agent *agentsv1.Agent) bool {
	if agent.Spec.Template == "" || agent.Status.EngineVersion != "" {
		return false
	}
	_, done := agent.Annotations[agentsv1.AnnotationTemplateApplied]
	return !done
}

// ApplyTemplate fills the agent from t. Fields the agent sets (display name, the profile,
// engine version, desired snapshot) win; the template fills the empty ones. The
// skills are the template's followed by the agent's own (at most 10). seedSnapshot says
// whether storage holds the template's snapshot, which then seeds the workspace. The
// annotation AnnotationTemplateApplied records `<template>@<generation>`.
func ApplyTemplate(agent *agentsv1.Agent, t *agentsv1.AgentTemplate, seedSnapshot bool) {
	s := &agent.Spec
	s.Template = t.Name
	fill := func(field *string, from string) {
		if *field == "" {
			*field = from
		}
	}
	fill(&s.DisplayName, t.Spec.DisplayName)
	fillProfile(&s.AgentProfile, t.Spec.AgentProfile)
	fill(&s.Engine.Version, t.Spec.EngineVersion)
	if seedSnapshot {
		fill(&s.DesiredSnapshot, t.Spec.SnapshotCID)
	}
	skills := append([]agentsv1.AgentSkill{}, t.Spec.Skills...)
	for _, own := range s.Skills {
		if !hasSkill(skills, own.CID) {
			skills = append(skills, own)
		}
	}
	if len(skills) > maxAgentSkills {
		skills = skills[:maxAgentSkills]
	}
	s.Skills = skills
	if agent.Annotations == nil {
		agent.Annotations = map[string]string{}
	}
	agent.Annotations[agentsv1.AnnotationTemplateApplied] = t.Name + "@" + strconv.FormatInt(t.Generation, 10)
}

// fillProfile sets every field of *dst that holds its zero value (unset) to from's, field by
// field, so that a field added to AgentProfile is filled with no edit here.
func fillProfile(dst *agentsv1.AgentProfile, from agentsv1.AgentProfile) {
	d, f := reflect.ValueOf(dst).Elem(), reflect.ValueOf(from)
	for i := range d.NumField() {
		if d.Field(i).IsZero() {
			d.Field(i).Set(f.Field(i))
		}
	}
}

func hasSkill(skills []agentsv1.AgentSkill, cid string) bool {
	for _, s := range skills {
		if s.CID == cid {
			return true
		}
	}
	return false
}
