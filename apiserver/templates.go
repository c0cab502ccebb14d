package apiserver

import (
	"context"
	"net/http"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// templateView is an AgentTemplate as the REST API shows it.
type templateView struct {
	ID              string   `json:"id"`
	Slug            string   `json:"slug"`
	Name            string   `json:"name"`
	Description     string   `json:"description,omitempty"`
	EngineVersion   string   `json:"engineVersion,omitempty"`
	SnapshotCID     string   `json:"snapshotCid,omitempty"`
	RequiredSecrets []string `json:"requiredSecrets"`
	Skills          []string `json:"skills"`
	Vibe            string   `json:"vibe,omitempty"`
	Emoji           string   `json:"emoji,omitempty"`
}

func viewTemplate(t *agentsv1.AgentTemplate) templateView {
	v := templateView{
		ID: t.Name, Slug: t.Spec.Slug, Name: t.Spec.DisplayName, Description: t.Spec.Description,
		EngineVersion: t.Spec.EngineVersion, SnapshotCID: t.Spec.SnapshotCID, Vibe: t.Spec.Vibe, Emoji: t.Spec.Emoji,
		RequiredSecrets: append([]string{}, t.Spec.RequiredSecrets...), Skills: []string{},
	}
	for _, s := range t.Spec.Skills {
		v.Skills = append(v.Skills, s.CID)
	}
	return v
}

// listTemplates answers the published templates, by slug.
func (s *Server) listTemplates(r *http.Request, _ *Caller) (*Response, error) {
	var list agentsv1.AgentTemplateList
	if err := s.opts.APIReader.List(r.Context(), &list); err != nil {
		return nil, err
	}
	out := []templateView{}
	for i := range list.Items {
		if list.Items[i].Spec.State == agentsv1.TemplatePublished {
			out = append(out, viewTemplate(&list.Items[i]))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Slug < out[j].Slug })
	return ok(map[string]any{"templates": out})
}

// publishedTemplate finds a published template by id (object name) or slug; a missing, draft
// or archived one is 404.
func (s *Server) publishedTemplate(ctx context.Context, id, slug string) (*agentsv1.AgentTemplate, error) {
	notFound := errorf(http.StatusNotFound, msgTemplateNotFound)
	if id != "" {
		t := &agentsv1.AgentTemplate{}
		if err := s.opts.APIReader.Get(ctx, client.ObjectKey{Name: id}, t); err != nil {
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
	if err := s.opts.APIReader.List(ctx, &list); err != nil {
		return nil, err
	}
	for i := range list.Items {
		if t := &list.Items[i]; t.Spec.Slug == slug && t.Spec.State == agentsv1.TemplatePublished {
			return t, nil
		}
	}
	return nil, notFound
}

// applyTemplate fills an agent from a template; seedSnapshot says whether storage holds the
// template's snapshot, which then seeds the workspace.
func applyTemplate(a *agentsv1.Agent, t *agentsv1.AgentTemplate, seedSnapshot bool) {
	a.Spec.Template = t.Name
	a.Spec.DisplayName = t.Spec.DisplayName
	if a.Spec.Description == "" {
		a.Spec.Description = t.Spec.Description
	}
	if a.Spec.Vibe == "" {
		a.Spec.Vibe = t.Spec.Vibe
	}
	if a.Spec.Emoji == "" {
		a.Spec.Emoji = t.Spec.Emoji
	}
	a.Spec.Engine.Version = t.Spec.EngineVersion
	a.Spec.Skills = append([]agentsv1.AgentSkill{}, t.Spec.Skills...)
	if seedSnapshot {
		a.Spec.DesiredSnapshot = t.Spec.SnapshotCID
	}
}

// snapshotAvailable reports whether the workspace's storage holds a snapshot CID.
func (s *Server) snapshotAvailable(ctx context.Context, c *Caller, cid string) bool {
	return cid != "" && s.opts.SnapshotExists != nil && s.opts.SnapshotExists(ctx, c.Namespace, cid)
}
