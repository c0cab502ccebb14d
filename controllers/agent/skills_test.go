package agent

import (
	"bytes"
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/clawhub/clawhubtest"
	"github.com/agentplane/agentplane/internal/adapters/engine/openclaw"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/storage"
	"github.com/agentplane/agentplane/internal/adapters/storage/local"
	"github.com/agentplane/agentplane/internal/scheme"
)

// homeRuntime holds one agent's home as a map of paths (relative to the home) to contents;
// Exec runs only `rm -rf -- <dir>` relative to the workspace.
type homeRuntime struct {
	runtime.Runtime
	files map[string][]byte
}

func (h *homeRuntime) WriteFile(_ context.Context, _ *agentsv1.Agent, path string, b []byte) error {
	h.files[path] = b
	return nil
}

func (h *homeRuntime) Exec(_ context.Context, _ *agentsv1.Agent, req runtime.ExecRequest) (runtime.ExecResult, error) {
	if len(req.Argv) != 4 || req.Argv[0] != "rm" {
		return runtime.ExecResult{ExitCode: 127}, nil
	}
	dir := openclaw.WorkspaceDir + "/" + req.Argv[3] + "/"
	maps.DeleteFunc(h.files, func(p string, _ []byte) bool { return strings.HasPrefix(p, dir) })
	return runtime.ExecResult{}, nil
}

// TestSyncSkillsAfterLostStatusWrite: a pass unpacks a skill but its status write is lost (a
// conflict with another writer of the status), so status.installedSkills still says none.
// When the skill is detached before the status caught up, its files are still removed.
func TestSyncSkillsAfterLostStatusWrite(t *testing.T) {
	ctx := context.Background()
	store, err := local.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	obj, err := store.Put(ctx, storage.SkillsSpace("ws"), bytes.NewReader(clawhubtest.Files("SKILL.md", clawhubtest.SkillMD("hello", "says hello"))))
	if err != nil {
		t.Fatal(err)
	}
	skill := &agentsv1.Skill{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "hello"},
		Spec: agentsv1.SkillSpec{Slug: "hello", Version: "1.0.0", CID: obj.CID}}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(skill).
		WithIndex(&agentsv1.Skill{}, agentsv1.IndexSkillCID, func(o client.Object) []string { return o.(*agentsv1.Skill).CIDs() }).
		Build()
	rt := &homeRuntime{files: map[string][]byte{}}
	r := &Reconciler{Client: c, Runtime: rt, Engine: openclaw.New(), Skills: store}
	agent := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "a1", UID: "u1"}}
	skillFiles := func() (out []string) {
		for p := range rt.files {
			if strings.HasPrefix(p, openclaw.SkillsDir+"/hello/") {
				out = append(out, p)
			}
		}
		return out
	}

	agent.Spec.Skills = []agentsv1.AgentSkill{{CID: obj.CID}}
	if err := r.syncSkills(ctx, agent); err != nil {
		t.Fatal(err)
	}
	if len(skillFiles()) == 0 || !slices.Equal(agent.Status.InstalledSkills, []string{obj.CID}) {
		t.Fatalf("the skill was not unpacked: files %v, installed %v", skillFiles(), agent.Status.InstalledSkills)
	}
	agent.Status.InstalledSkills = nil // that pass's status write was lost
	agent.Spec.Skills = nil
	if err := r.syncSkills(ctx, agent); err != nil {
		t.Fatal(err)
	}
	if files := skillFiles(); len(files) > 0 {
		t.Errorf("the detached skill's files stayed in the workspace: %v", files)
	}
	if len(agent.Status.InstalledSkills) != 0 {
		t.Errorf("installed %v after the detach", agent.Status.InstalledSkills)
	}
}
