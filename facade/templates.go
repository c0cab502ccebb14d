package facade

import (
	"net/http"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// templateView is an AgentTemplate as the REST API shows it.
type templateView struct {
	ID   string `json:"id"`
	Slug string `json:"slug"`
	Name string `json:"name"`
	// AgentProfile is spec's, under the same JSON names (description, vibe, emoji).
	agentsv1.AgentProfile `json:",inline"`
	EngineVersion         string   `json:"engineVersion,omitempty"`
	SnapshotCID           string   `json:"snapshotCid,omitempty"`
	RequiredSecrets       []string `json:"requiredSecrets"`
	Skills                []string `json:"skills"`
}

func viewTemplate(t *agentsv1.AgentTemplate) templateView {
	v := templateView{
		ID: t.Name, Slug: t.Spec.Slug, Name: t.Spec.DisplayName, AgentProfile: t.Spec.AgentProfile,
		EngineVersion: t.Spec.EngineVersion, SnapshotCID: t.Spec.SnapshotCID,
		RequiredSecrets: append([]string{}, t.Spec.RequiredSecrets...), Skills: []string{},
	}
	for _, s := range t.Spec.Skills {
		v.Skills = append(v.Skills, s.CID)
	}
	return v
}

// listTemplates answers the published templates, by slug.
func (s *Server) listTemplates(r *http.Request, _ *Caller) (*Response, error) {
	list, err := s.ops.Templates(r.Context())
	if err != nil {
		return nil, err
	}
	out := make([]templateView, 0, len(list))
	for i := range list {
		out = append(out, viewTemplate(&list[i]))
	}
	return ok(map[string]any{"templates": out})
}
