package admission_test

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/admission"
	"github.com/agentplane/agentplane/internal/engine"
)

// Skill bundle CIDs (well formed; nothing needs to be stored).
const (
	cidA = "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy"
	cidB = "bafkreidivzimqfqtoqxkrpge6bjyhlvxqs3rhe73owtmdulaxr5do5in7u"
	cidS = "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"
)

func template() *agentsv1.AgentTemplate {
	return &agentsv1.AgentTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "tpl-research", Generation: 3},
		Spec: agentsv1.AgentTemplateSpec{
			Slug: "research", DisplayName: "Researcher", Description: "finds things", Vibe: "curious", Emoji: "🔎",
			EngineVersion: "2026.9.7", SnapshotCID: cidS, State: agentsv1.TemplatePublished,
			Skills: []agentsv1.AgentSkill{{CID: cidA}},
		},
	}
}

func TestApplyTemplate(t *testing.T) {
	manySkills := make([]agentsv1.AgentSkill, 12)
	for i := range manySkills {
		manySkills[i] = agentsv1.AgentSkill{CID: fmt.Sprintf("own-%02d", i)}
	}
	for _, tc := range []struct {
		name  string
		agent agentsv1.AgentSpec
		seed  bool
		want  agentsv1.AgentSpec
	}{{
		name: "an empty agent (POST /v0/agents with only a template) gets everything",
		seed: true,
		want: agentsv1.AgentSpec{
			DisplayName: "Researcher", Description: "finds things", Vibe: "curious", Emoji: "🔎",
			Engine: agentsv1.EngineSpec{Version: "2026.9.7"}, Template: "tpl-research",
			Skills: []agentsv1.AgentSkill{{CID: cidA}}, DesiredSnapshot: cidS,
		},
	}, {
		name: "a snapshot storage does not hold seeds nothing",
		want: agentsv1.AgentSpec{
			DisplayName: "Researcher", Description: "finds things", Vibe: "curious", Emoji: "🔎",
			Engine: agentsv1.EngineSpec{Version: "2026.9.7"}, Template: "tpl-research",
			Skills: []agentsv1.AgentSkill{{CID: cidA}},
		},
	}, {
		name: "what the agent sets wins; its own skills follow the template's",
		seed: true,
		agent: agentsv1.AgentSpec{
			DisplayName: "Mine", Description: "my own", Vibe: "calm", Emoji: "🐢",
			Engine:          agentsv1.EngineSpec{Name: agentsv1.EngineOpenClaw, Version: "2026.9.6"},
			Skills:          []agentsv1.AgentSkill{{CID: cidB}, {CID: cidA}},
			DesiredSnapshot: cidB, Stopped: true,
		},
		want: agentsv1.AgentSpec{
			DisplayName: "Mine", Description: "my own", Vibe: "calm", Emoji: "🐢",
			Engine: agentsv1.EngineSpec{Name: agentsv1.EngineOpenClaw, Version: "2026.9.6"}, Template: "tpl-research",
			Skills:          []agentsv1.AgentSkill{{CID: cidA}, {CID: cidB}},
			DesiredSnapshot: cidB, Stopped: true,
		},
	}, {
		name:  "skills stop at the CRD's limit of 10",
		agent: agentsv1.AgentSpec{DisplayName: "Many", Skills: manySkills},
		want: agentsv1.AgentSpec{
			DisplayName: "Many", Description: "finds things", Vibe: "curious", Emoji: "🔎",
			Engine: agentsv1.EngineSpec{Version: "2026.9.7"}, Template: "tpl-research",
			Skills: append([]agentsv1.AgentSkill{{CID: cidA}}, manySkills[:9]...),
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			a := &agentsv1.Agent{Spec: tc.agent}
			admission.ApplyTemplate(a, template(), tc.seed)
			if !reflect.DeepEqual(a.Spec, tc.want) {
				t.Errorf("spec:\n got %+v\nwant %+v", a.Spec, tc.want)
			}
			if got := a.Annotations[agentsv1.AnnotationTemplateApplied]; got != "tpl-research@3" {
				t.Errorf("annotation %q, want tpl-research@3", got)
			}
			if admission.NeedsExpansion(a) {
				t.Error("an expanded agent still needs expansion")
			}
		})
	}
}

func TestNeedsExpansion(t *testing.T) {
	for _, tc := range []struct {
		name  string
		agent agentsv1.Agent
		want  bool
	}{
		{"no template", agentsv1.Agent{}, false},
		{"a template, not expanded (kubectl)", agentsv1.Agent{Spec: agentsv1.AgentSpec{Template: "t"}}, true},
		{"expanded already (REST or an earlier pass)", agentsv1.Agent{
			ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{agentsv1.AnnotationTemplateApplied: "t@1"}},
			Spec:       agentsv1.AgentSpec{Template: "t"},
		}, false},
		{"ran before expansion was recorded", agentsv1.Agent{
			Spec: agentsv1.AgentSpec{Template: "t"}, Status: agentsv1.AgentStatus{EngineVersion: "2026.9.6"},
		}, false},
		{"waiting for its template", agentsv1.Agent{
			Spec: agentsv1.AgentSpec{Template: "t"},
			Status: agentsv1.AgentStatus{Conditions: []metav1.Condition{{
				Type: agentsv1.AgentProvisioned, Status: metav1.ConditionFalse, Reason: agentsv1.ReasonTemplateNotFound,
			}}},
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := admission.NeedsExpansion(&tc.agent); got != tc.want {
				t.Errorf("NeedsExpansion = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	offered := engine.Versions{Default: "2026.9.6", Available: []string{"2026.9.6", "2026.9.7"}}
	for _, tc := range []struct {
		name      string
		versions  engine.Versions
		requested string
		want      string
		invalid   bool
	}{
		{"unset runs the default", offered, "", "2026.9.6", false},
		{"an offered version", offered, "2026.9.7", "2026.9.7", false},
		{"a version not offered", offered, "2025.1.1", "2025.1.1", true},
		{"a default that is not offered", engine.Versions{Default: "1.0.0"}, "", "1.0.0", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &admission.Admitter{Versions: tc.versions}
			got, err := a.Version(&agentsv1.Agent{Spec: agentsv1.AgentSpec{Engine: agentsv1.EngineSpec{Version: tc.requested}}})
			if got != tc.want || errors.Is(err, admission.ErrInvalidVersion) != tc.invalid {
				t.Errorf("Version = %q, %v; want %q, invalid %v", got, err, tc.want, tc.invalid)
			}
		})
	}
}
