package ops

import (
	"context"
	"sort"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// Templates lists the published agent templates (live), by slug.
func (o *Ops) Templates(ctx context.Context) ([]agentsv1.AgentTemplate, error) {
	var list agentsv1.AgentTemplateList
	if err := o.d.APIReader.List(ctx, &list); err != nil {
		return nil, err
	}
	out := []agentsv1.AgentTemplate{}
	for i := range list.Items {
		if list.Items[i].Spec.State == agentsv1.TemplatePublished {
			out = append(out, list.Items[i])
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Spec.Slug < out[j].Spec.Slug })
	return out, nil
}
