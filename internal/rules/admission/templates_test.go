package admission_test

import (
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"testing"
	"testing/quick"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/rules/admission"
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
			Slug: "research", DisplayName: "Researcher", AgentProfile: agentsv1.AgentProfile{Description: "finds things", Vibe: "curious", Emoji: "🔎"},
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
			DisplayName: "Researcher", AgentProfile: agentsv1.AgentProfile{Description: "finds things", Vibe: "curious", Emoji: "🔎"},
			Engine: agentsv1.EngineSpec{Version: "2026.9.7"}, Template: "tpl-research",
			Skills: []agentsv1.AgentSkill{{CID: cidA}}, DesiredSnapshot: cidS,
		},
	}, {
		name: "a snapshot storage does not hold seeds nothing",
		want: agentsv1.AgentSpec{
			DisplayName: "Researcher", AgentProfile: agentsv1.AgentProfile{Description: "finds things", Vibe: "curious", Emoji: "🔎"},
			Engine: agentsv1.EngineSpec{Version: "2026.9.7"}, Template: "tpl-research",
			Skills: []agentsv1.AgentSkill{{CID: cidA}},
		},
	}, {
		name: "what the agent sets wins; its own skills follow the template's",
		seed: true,
		agent: agentsv1.AgentSpec{
			DisplayName: "Mine", AgentProfile: agentsv1.AgentProfile{Description: "my own", Vibe: "calm", Emoji: "🐢"},
			Engine:          agentsv1.EngineSpec{Name: agentsv1.EngineOpenClaw, Version: "2026.9.6"},
			Skills:          []agentsv1.AgentSkill{{CID: cidB}, {CID: cidA}},
			DesiredSnapshot: cidB, Stopped: true,
		},
		want: agentsv1.AgentSpec{
			DisplayName: "Mine", AgentProfile: agentsv1.AgentProfile{Description: "my own", Vibe: "calm", Emoji: "🐢"},
			Engine: agentsv1.EngineSpec{Name: agentsv1.EngineOpenClaw, Version: "2026.9.6"}, Template: "tpl-research",
			Skills:          []agentsv1.AgentSkill{{CID: cidA}, {CID: cidB}},
			DesiredSnapshot: cidB, Stopped: true,
		},
	}, {
		name:  "skills stop at the CRD's limit of 10",
		agent: agentsv1.AgentSpec{DisplayName: "Many", Skills: manySkills},
		want: agentsv1.AgentSpec{
			DisplayName: "Many", AgentProfile: agentsv1.AgentProfile{Description: "finds things", Vibe: "curious", Emoji: "🔎"},
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

// TestApplyTemplateFillsEveryProfileField: each field of AgentProfile, found by reflection
// (a field added to it is covered with no edit here), is filled from the template when the
// agent leaves it unset and kept when the agent sets it; no other profile field changes.
func TestApplyTemplateFillsEveryProfileField(t *testing.T) {
	rnd := rand.New(rand.NewSource(1))
	typ := reflect.TypeOf(agentsv1.AgentProfile{})
	if typ.NumField() == 0 {
		t.Fatal("AgentProfile has no fields")
	}
	for i := range typ.NumField() {
		f := typ.Field(i)
		t.Run(f.Name, func(t *testing.T) {
			fromTemplate, own := sample(t, f.Type, "template's "+f.Name, rnd), sample(t, f.Type, "own "+f.Name, rnd)
			tmpl := template()
			tmpl.Spec.AgentProfile = profileWith(i, fromTemplate)

			unset := &agentsv1.Agent{}
			admission.ApplyTemplate(unset, tmpl, false)
			if want := profileWith(i, fromTemplate); !reflect.DeepEqual(unset.Spec.AgentProfile, want) {
				t.Errorf("agent without it: profile %+v, want the template's %+v", unset.Spec.AgentProfile, want)
			}

			set := &agentsv1.Agent{Spec: agentsv1.AgentSpec{AgentProfile: profileWith(i, own)}}
			admission.ApplyTemplate(set, tmpl, false)
			if want := profileWith(i, own); !reflect.DeepEqual(set.Spec.AgentProfile, want) {
				t.Errorf("agent with it: profile %+v, want its own %+v", set.Spec.AgentProfile, want)
			}
		})
	}
}

// profileWith is a profile with only field i set, to v.
func profileWith(i int, v reflect.Value) agentsv1.AgentProfile {
	var p agentsv1.AgentProfile
	reflect.ValueOf(&p).Elem().Field(i).Set(v)
	return p
}

// sample is a value of type typ that is not its zero value: label for a string, a random
// value (testing/quick) for any other type.
func sample(t *testing.T, typ reflect.Type, label string, rnd *rand.Rand) reflect.Value {
	t.Helper()
	if typ.Kind() == reflect.String {
		return reflect.ValueOf(label).Convert(typ)
	}
	for range 100 {
		v, ok := quick.Value(typ, rnd)
		if !ok {
			t.Fatalf("testing/quick makes no values of %s", typ)
		}
		if !v.IsZero() {
			return v
		}
	}
	t.Fatalf("no non-zero value of %s", typ)
	return reflect.Value{}
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
			Spec: agentsv1.AgentSpec{Template: "t"}, Status: agentsv1.AgentStatus{EngineVersion: engine.PinnedVersion},
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
	offered := admission.Versions{Default: engine.PinnedVersion, Available: []string{engine.PinnedVersion, "2026.9.7"}}
	for _, tc := range []struct {
		name      string
		versions  admission.Versions
		requested string
		want      string
		invalid   bool
	}{
		{"unset runs the default", offered, "", engine.PinnedVersion, false},
		{"an offered version", offered, "2026.9.7", "2026.9.7", false},
		{"a version not offered", offered, "2025.1.1", "2025.1.1", true},
		{"a default that is not offered", admission.Versions{Default: "1.0.0"}, "", "1.0.0", true},
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
