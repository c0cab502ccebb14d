package ops

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/rules/auth"
)

func ptr[T any](v T) *T { return &v }

func TestValidateAgentName(t *testing.T) {
	for _, tc := range []struct {
		name string
		msg  string
	}{
		{"Ada", ""},
		{"名前 with spaces", ""},
		{strings.Repeat("é", MaxAgentNameRunes), ""},
		{"", MsgNameRequired},
		{" \t ", MsgNameRequired},
		{strings.Repeat("a", MaxAgentNameRunes+1), MsgNameTooLong},
		{"a<b", MsgNameBanned},
		{"a`b", MsgNameBanned},
		{"a\\b", MsgNameBanned},
		{"a\x07b", MsgNameBanned},
		{"a\xffb", MsgNameBanned},
	} {
		err := ValidateAgentName(tc.name)
		if tc.msg == "" {
			if err != nil {
				t.Errorf("%q: %v", tc.name, err)
			}
			continue
		}
		wantFail(t, tc.name, err, Invalid, tc.msg)
	}
}

// TestCreateAgentRefuses: what CreateAgent refuses it refuses before it takes a slot or
// writes anything.
func TestCreateAgentRefuses(t *testing.T) {
	draft := &agentsv1.AgentTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "tpl-draft"},
		Spec:       agentsv1.AgentTemplateSpec{Slug: "draft", DisplayName: "Draft", State: agentsv1.TemplateDraft},
	}
	o, c := fakeOps(Deps{}, draft)
	scope := Scope{Namespace: "ws"}
	for _, tc := range []struct {
		name string
		in   NewAgent
		code Code
		msg  string
	}{
		{"no name", NewAgent{}, Invalid, MsgNameRequired},
		{"banned name", NewAgent{Name: ptr("<b>")}, Invalid, MsgNameBanned},
		{"long name", NewAgent{Name: ptr(strings.Repeat("x", 101))}, Invalid, MsgNameTooLong},
		{"version not offered", NewAgent{Name: ptr("a"), EngineVersion: "9.9"}, Invalid, MsgInvalidVersion},
		{"unknown template id", NewAgent{Name: ptr("a"), TemplateID: "tpl-nope"}, NotFound, MsgTemplateNotFound},
		{"unknown slug", NewAgent{Name: ptr("a"), Template: "nope"}, NotFound, MsgTemplateNotFound},
		{"unpublished template", NewAgent{Name: ptr("a"), Template: "draft"}, NotFound, MsgTemplateNotFound},
	} {
		_, _, err := o.CreateAgent(context.Background(), scope, tc.in, false)
		wantFail(t, tc.name, err, tc.code, tc.msg)
	}
	var list agentsv1.AgentList
	if err := c.List(context.Background(), &list); err != nil || len(list.Items) != 0 {
		t.Fatalf("refused creates wrote agents: %v %v", list.Items, err)
	}
}

func TestAgentFromRequest(t *testing.T) {
	o, _ := fakeOps(Deps{})
	a, err := o.agentFrom(context.Background(), Scope{Namespace: "ws"}, &NewAgent{
		Name: ptr("Ada"), AgentProfile: agentsv1.AgentProfile{Vibe: "calm"}, EngineVersion: "1.1", CreatedBy: "user@example.com/x",
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(a.Name, "agt-") || a.Namespace != "ws" || a.Spec.DisplayName != "Ada" ||
		a.Spec.Vibe != "calm" || a.Spec.Engine.Version != "1.1" || a.Spec.Engine.Name != agentsv1.EngineOpenClaw {
		t.Errorf("agent: %+v", a)
	}
	if got := a.Labels[agentsv1.LabelCreatedBy]; got != "user_example.com_x" {
		t.Errorf("created-by label %q", got)
	}
}

func TestAgentsListsLiveOldestFirst(t *testing.T) {
	t0 := metav1.NewTime(time.Unix(1_700_000_000, 0))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	mk := func(name string, at metav1.Time) *agentsv1.Agent {
		return &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: name, CreationTimestamp: at}}
	}
	gone := mk("agt-d", t0)
	gone.DeletionTimestamp, gone.Finalizers = &t1, []string{"test"}
	other := mk("agt-x", t0)
	other.Namespace = "other"
	o, _ := fakeOps(Deps{}, mk("agt-c", t1), mk("agt-b", t0), mk("agt-a", t0), gone, other)
	list, err := o.Agents(context.Background(), Scope{Namespace: "ws"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, a := range list {
		names = append(names, a.Name)
	}
	if strings.Join(names, ",") != "agt-a,agt-b,agt-c" {
		t.Errorf("agents %v", names)
	}
}

func TestAgentBoundTenant(t *testing.T) {
	o, _ := fakeOps(Deps{}, &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "agt-a"}})
	_, err := o.DeleteAgent(context.Background(), Scope{Namespace: "ws", OnlyAgent: "agt-b"}, "agt-a")
	wantFail(t, "another agent", err, NotFound, MsgAgentNotFound)
	_, err = o.DeleteAgent(context.Background(), Scope{Namespace: "other"}, "agt-a")
	wantFail(t, "another workspace", err, NotFound, MsgAgentNotFound)
	if _, err := o.DeleteAgent(context.Background(), Scope{Namespace: "ws", OnlyAgent: "agt-a"}, "agt-a"); err != nil {
		t.Errorf("own agent: %v", err)
	}
}

func TestRestartAgentInvalidVersion(t *testing.T) {
	o, _ := fakeOps(Deps{})
	// The version is judged before the agent is read.
	_, _, err := o.RestartAgent(context.Background(), Scope{Namespace: "ws"}, "agt-missing", "9.9", false)
	wantFail(t, "not offered", err, Invalid, MsgInvalidVersion)
	_, _, err = o.RestartAgent(context.Background(), Scope{Namespace: "ws"}, "agt-missing", "1.1", false)
	wantFail(t, "missing agent", err, NotFound, MsgAgentNotFound)
}

func TestStampAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 600_000_000, time.UTC)
	o := New(Deps{Now: func() time.Time { return now }})
	if got := o.StampAfter(nil); !got.Time.Equal(now.Truncate(time.Second)) {
		t.Errorf("no previous stamp: %v", got)
	}
	prev := metav1.NewTime(now.Add(time.Hour))
	if got := o.StampAfter(&prev); !got.Time.Equal(prev.Add(time.Second)) {
		t.Errorf("after a later stamp: %v", got)
	}
}

func TestActivityStampsDue(t *testing.T) {
	var s activityStamps
	now := time.Unix(1_700_000_000, 0)
	uid := types.UID("u1")
	if !s.due(uid, now) || s.due(uid, now.Add(30*time.Second)) || !s.due("u2", now) {
		t.Fatal("one stamp per agent and interval")
	}
	if !s.due(uid, now.Add(activityStampEvery)) {
		t.Fatal("a stamp is due again after the interval")
	}
}

// TestMintPlatformToken: a platform token names the workspace's agent and its UID and is bound to
// its gateway token; an agent the caller cannot see is not found, and one without a gateway
// token gets none.
func TestMintPlatformToken(t *testing.T) {
	signer, err := auth.NewSigner([]byte(strings.Repeat("k", 32)))
	if err != nil {
		t.Fatal(err)
	}
	a1 := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "a1", UID: "uid-a1"}}
	a2 := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "a2", UID: "uid-a2"}}
	o, _ := fakeOps(Deps{}, a1, a2, tokenSecret("ws", "a1", "gw_one"), tokenSecret("ws", "a2", ""))
	ctx, ws := context.Background(), Scope{Namespace: "ws"}

	tok, exp, err := o.MintPlatformToken(ctx, ws, "a1", signer)
	if err != nil {
		t.Fatal(err)
	}
	c, err := signer.Parse(tok)
	if err != nil || c.Agent != "a1" || c.AgentUID != "uid-a1" || c.GatewayBinding != auth.GatewayBinding("gw_one") || !exp.Equal(c.ExpiresAt.Time) {
		t.Fatalf("claims %+v (%v), expiry %s", c, err, exp)
	}
	_, _, err = o.MintPlatformToken(ctx, Scope{Namespace: "ws", OnlyAgent: "a2"}, "a1", signer)
	wantFail(t, "another agent's credential", err, NotFound, MsgAgentNotFound)
	_, _, err = o.MintPlatformToken(ctx, ws, "a2", signer)
	wantFail(t, "no gateway token", err, Internal, MsgTokenGenFailed)
}
