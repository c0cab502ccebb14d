package apiserver

import (
	"net/http"
	"sort"

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
