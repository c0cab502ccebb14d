package ops

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/clawhub"
	"github.com/agentplane/agentplane/internal/adapters/clawhub/clawhubtest"
	"github.com/agentplane/agentplane/internal/adapters/storage"
	"github.com/agentplane/agentplane/internal/adapters/storage/local"
)

// stored puts n distinct bundles into a local store and returns their CIDs.
func stored(t *testing.T, n int) (storage.Store, []string) {
	t.Helper()
	st, err := local.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var cids []string
	for i := range n {
		obj, err := st.Put(context.Background(), storage.SkillsSpace("ws"), strings.NewReader(fmt.Sprintf("bundle %d", i)))
		if err != nil {
			t.Fatal(err)
		}
		cids = append(cids, obj.CID)
	}
	return st, cids
}

func skillObject(slug, cid string) *agentsv1.Skill {
	return &agentsv1.Skill{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: SkillObjectName(slug)},
		Spec:       agentsv1.SkillSpec{Slug: slug, Version: "1.0.0", CID: cid},
	}
}

func agentObject(name string, stopped bool, cids ...string) *agentsv1.Agent {
	a := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: name}}
	a.Spec.Stopped = stopped
	for _, c := range cids {
		a.Spec.Skills = append(a.Spec.Skills, agentsv1.AgentSkill{CID: c})
	}
	return a
}

// TestSkillInputRules: the rules the skill operations apply to their input before any lookup,
// with the contract's codes and messages.
func TestSkillInputRules(t *testing.T) {
	ctx := context.Background()
	ws := Scope{Namespace: "ws"}
	_, cids := stored(t, MaxAgentSkills+1)
	o, _ := fakeOps(Deps{})
	many := cids
	for _, tc := range []struct {
		what    string
		err     error
		code    Code
		message string
	}{
		{"a slug ClawHub cannot hold", CheckSkillSlug("../etc"), Invalid, MsgInvalidSlug},
		{"install: a bad slug", second(o.InstallSkill(ctx, ws, "no slug", "")), Invalid, MsgInvalidSlug},
		{"install: a bad version", second(o.InstallSkill(ctx, ws, "weather", "not a version!")), Invalid, MsgInvalidVersion},
		{"install without storage", second(o.InstallSkill(ctx, ws, "weather", "1.0.0")), Unavailable, MsgStorageMissing},
		{"attach: no CIDs", third(o.AttachSkills(ctx, ws, "a1", nil)), Invalid, MsgSkillCIDsRequired},
		{"attach: over the limit, before the agent is looked up", third(o.AttachSkills(ctx, ws, "nobody", many)), Invalid, MsgSkillsMax},
		{"attach: a missing agent", third(o.AttachSkills(ctx, ws, "nobody", cids[:1])), NotFound, MsgAgentNotFound},
		{"attach: another agent than a bound credential's", third(o.AttachSkills(ctx, Scope{Namespace: "ws", OnlyAgent: "a2"}, "a1", cids[:1])), NotFound, MsgAgentNotFound},
		{"update: a bad version", third(o.UpdateAgentSkill(ctx, ws, "a1", "weather", SkillUpdate{Version: "x y"})), Invalid, MsgInvalidVersion},
		{"update: a bad expected version", third(o.UpdateAgentSkill(ctx, ws, "a1", "weather", SkillUpdate{ExpectedVersion: "x y"})), Invalid, MsgInvalidVersion},
		{"a skill name the API server refuses", second(o.Skill(ctx, ws, "Not_A_Name")), NotFound, MsgSkillNotFound},
	} {
		wantFail(t, tc.what, tc.err, tc.code, tc.message)
	}
	// Eleven CIDs of which only ten are distinct are within the limit.
	dup := append(append([]string{}, cids[:MaxAgentSkills]...), cids[0])
	wantFail(t, "attach: ten distinct CIDs", third(o.AttachSkills(ctx, ws, "nobody", dup)), NotFound, MsgAgentNotFound)
}

func second[A any](_ A, err error) error        { return err }
func third[A, B any](_ A, _ B, err error) error { return err }

// TestAttachSkills: attach resolves CIDs against the workspace's Skills, keeps the agent
// within MaxAgentSkills as it stands, and reports a stopped agent's change pending.
func TestAttachSkills(t *testing.T) {
	ctx := context.Background()
	ws := Scope{Namespace: "ws"}
	_, cids := stored(t, MaxAgentSkills+1)
	objs := []client.Object{agentObject("full", true, cids[:MaxAgentSkills]...), agentObject("a1", true)}
	for i, c := range cids {
		objs = append(objs, skillObject(fmt.Sprintf("skill-%d", i), c))
	}
	o, c := fakeOps(Deps{}, objs...)

	wantFail(t, "an eleventh skill", third(o.AttachSkills(ctx, ws, "full", cids[MaxAgentSkills:])), Invalid, MsgSkillsMax)
	wantFail(t, "a CID no Skill has", third(o.AttachSkills(ctx, ws, "a1", []string{"bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy"})), NotFound, MsgSkillNotFound)
	wantFail(t, "not a CID", third(o.AttachSkills(ctx, ws, "a1", []string{"nope"})), NotFound, MsgSkillNotFound)

	agent, synced, err := o.AttachSkills(ctx, ws, "a1", []string{cids[0], cids[1], cids[0]})
	if err != nil {
		t.Fatal(err)
	}
	if synced {
		t.Fatal("a stopped agent unpacks nothing: the attach is pending")
	}
	live := &agentsv1.Agent{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(agent), live); err != nil {
		t.Fatal(err)
	}
	if len(live.Spec.Skills) != 2 || live.Spec.Skills[0].CID != cids[0] || live.Spec.Skills[1].CID != cids[1] {
		t.Fatalf("spec.skills: want the two CIDs once each, got %v", live.Spec.Skills)
	}

	// Detach by the Skill's name, then again: nothing left to detach.
	if _, _, err := o.DetachSkill(ctx, ws, "a1", SkillObjectName("skill-0")); err != nil {
		t.Fatal(err)
	}
	wantFail(t, "detach twice", third(o.DetachSkill(ctx, ws, "a1", SkillObjectName("skill-0"))), NotFound, MsgSkillNotFound)
	wantFail(t, "detach what is not attached", third(o.DetachSkill(ctx, ws, "a1", "unknown")), NotFound, MsgSkillNotFound)

	list, err := o.AgentSkills(ctx, ws, "a1")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].CID != cids[1] || list[0].Skill == nil || list[0].Skill.Spec.Slug != "skill-1" || list[0].Installed {
		t.Fatalf("the agent's skills: %+v", list)
	}
}

// TestInstallSkill: an install from a registry stores the bundle and creates the Skill; the
// same version again is no change; a bad bundle or a registry failure reads as the contract
// says.
func TestInstallSkill(t *testing.T) {
	ctx := context.Background()
	ws := Scope{Namespace: "ws"}
	reg := clawhubtest.NewRegistry()
	defer reg.Close()
	reg.Add("weather", "Weather", "1.0.0", clawhubtest.Files("SKILL.md", clawhubtest.SkillMD("weather", "forecasts")))
	reg.Add("evil", "Evil", "1.0.0", clawhubtest.Files("../SKILL.md", "x"))
	st, _ := stored(t, 0)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	o, _ := fakeOps(Deps{Files: st, ClawHubURL: reg.URL + "/", Now: func() time.Time { return now }})

	in, err := o.InstallSkill(ctx, ws, "weather", "")
	if err != nil {
		t.Fatal(err)
	}
	if !in.Created || in.Stored == nil || in.Skill.Spec.CID != in.Stored.CID || in.Skill.Spec.Version != "1.0.0" ||
		in.Skill.Spec.Registry != reg.URL || in.Skill.Spec.DisplayName != "Weather" {
		t.Fatalf("first install: %+v %+v", in, in.Skill.Spec)
	}
	if got := in.Skill.Annotations[agentsv1.AnnotationSkillInstalledAt]; got != now.Format(time.RFC3339Nano) {
		t.Fatalf("installedAt: %q", got)
	}
	again, err := o.InstallSkill(ctx, ws, "weather", "1.0.0")
	if err != nil || again.Created || again.Stored != nil {
		t.Fatalf("the same version again: %+v, %v", again, err)
	}

	wantFail(t, "a version the registry lacks", second(o.InstallSkill(ctx, ws, "weather", "9.9.9")), NotFound, MsgSkillNotFound)
	wantFail(t, "a slug the registry lacks", second(o.InstallSkill(ctx, ws, "nothing", "")), NotFound, MsgSkillNotFound)
	var e *Error
	if err := second(o.InstallSkill(ctx, ws, "evil", "")); !errors.As(err, &e) || e.Code != Unprocessable || !strings.HasPrefix(e.Message, MsgInvalidBundle+": ") {
		t.Fatalf("a zip-slip bundle: %v", err)
	}
	reg.FailWith(503)
	wantFail(t, "a failing registry", second(o.InstallSkill(ctx, ws, "weather", "")), Unavailable, MsgRegistryUnavailable)
}

// TestRegistryError: how registry and bundle failures read.
func TestRegistryError(t *testing.T) {
	other := errors.New("other")
	for _, tc := range []struct {
		err     error
		code    Code
		message string
	}{
		{&clawhub.BundleError{Reason: "no SKILL.md"}, Unprocessable, MsgInvalidBundle + ": no SKILL.md"},
		{fmt.Errorf("download: %w", clawhub.ErrTooLarge), Unprocessable, MsgBundleTooLarge},
		{clawhub.ErrNotFound, NotFound, MsgSkillNotFound},
		{clawhub.ErrInvalidSlug, Invalid, MsgInvalidSlug},
		{clawhub.ErrUnavailable, Unavailable, MsgRegistryUnavailable},
		{clawhub.ErrRegistry, BadGateway, MsgRegistryError},
	} {
		wantFail(t, tc.err.Error(), registryError(tc.err), tc.code, tc.message)
	}
	if got := registryError(other); got != other { //nolint:errorlint // the same error, not one wrapping it
		t.Fatalf("an unknown error passes as it is; got %v", got)
	}
}

// TestSetSkillVersion: a new version keeps the old bundles as previous CIDs, bounded, without
// the new one.
func TestSetSkillVersion(t *testing.T) {
	o := New(Deps{})
	sk := skillObject("weather", "c1")
	o.setSkillVersion(sk, "2", "c2", strings.Repeat("n", 300))
	o.setSkillVersion(sk, "3", "c3", "")
	o.setSkillVersion(sk, "2", "c2", "")
	if got := strings.Join(sk.CIDs(), ","); got != "c2,c3,c1" {
		t.Fatalf("CIDs: %s", got)
	}
	if len(sk.Spec.DisplayName) != maxSkillDisplayName || sk.Spec.Version != "2" {
		t.Fatalf("spec: %+v", sk.Spec)
	}
	for i := range 3 * maxPreviousCIDs {
		o.setSkillVersion(sk, "v", fmt.Sprintf("x%d", i), "")
	}
	if n := len(sk.CIDs()); n != 1+maxPreviousCIDs {
		t.Fatalf("previous CIDs are bounded: %d", n)
	}
}

// TestBoundCredentialCannotMoveTheWorkspacesSkill: an agent's own credential (gateway or
// platform token) cannot point the workspace's Skill, which other agents attach too, at
// another version: 403, and the Skill is unchanged. Its agent may still take the version the
// workspace has.
func TestBoundCredentialCannotMoveTheWorkspacesSkill(t *testing.T) {
	ctx := context.Background()
	st, cids := stored(t, 1)
	sk := skillObject("weather", cids[0])
	o, c := fakeOps(Deps{Files: st}, agentObject("a1", true, cids[0]), agentObject("a2", true, cids[0]), sk)
	bound := Scope{Namespace: "ws", OnlyAgent: "a1"}
	wantFail(t, "a bound credential moving the Skill", third(o.UpdateAgentSkill(ctx, bound, "a1", sk.Name, SkillUpdate{Version: "2.0.0"})), Forbidden, MsgPermissionDenied)
	got := &agentsv1.Skill{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(sk), got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Version != "1.0.0" || got.Spec.CID != cids[0] {
		t.Fatalf("the workspace's Skill moved: %+v", got.Spec)
	}
	if _, _, err := o.UpdateAgentSkill(ctx, bound, "a1", sk.Name, SkillUpdate{Version: "1.0.0"}); err != nil {
		t.Fatalf("a bound credential taking the workspace's version: %v", err)
	}
}
