package ops

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

func TestIssues(t *testing.T) {
	ctx := context.Background()
	internal := &agentsv1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: "ws"}, Spec: agentsv1.WorkspaceSpec{Internal: true}}
	external := &agentsv1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: "ws"}}
	o, c := fakeOps(Deps{}, &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "agt-a"}})
	scope := Scope{Namespace: "ws"}

	// Accounts that are not internal are told the issues do not exist, whatever they send.
	_, err := o.Issues(ctx, scope, external)
	wantFail(t, "list, external", err, NotFound, MsgNotFound)
	_, err = o.CreateIssue(ctx, scope, nil, NewIssue{})
	wantFail(t, "create, no workspace", err, NotFound, MsgNotFound)

	for _, tc := range []struct {
		name string
		in   NewIssue
		code Code
		msg  string
	}{
		{"no title", NewIssue{Title: "  "}, Invalid, MsgIssueTitle},
		{"long title", NewIssue{Title: strings.Repeat("t", 201)}, Invalid, MsgIssueTitle},
		{"long body", NewIssue{Title: "t", Body: strings.Repeat("b", maxIssueBodyBytes+1)}, Invalid, MsgIssueTitle},
		{"unknown agent", NewIssue{Title: "t", AgentID: "agt-nope"}, NotFound, MsgAgentNotFound},
	} {
		_, err := o.CreateIssue(ctx, scope, internal, tc.in)
		wantFail(t, tc.name, err, tc.code, tc.msg)
	}

	cm, err := o.CreateIssue(ctx, scope, internal, NewIssue{Title: "  It broke ", Body: "b", AgentID: "agt-a", Reporter: "u1"})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Namespace != "ws" || cm.Labels[agentsv1.LabelIssue] != "true" || cm.Data["title"] != "It broke" ||
		cm.Data["agentId"] != "agt-a" || cm.Data["reporter"] != "u1" {
		t.Errorf("issue: %+v", cm)
	}
	// Unlabelled ConfigMaps are not issues.
	if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "plain"}}); err != nil {
		t.Fatal(err)
	}
	list, err := o.Issues(ctx, scope, internal)
	if err != nil || len(list) != 1 {
		t.Fatalf("issues: %v %v", list, err)
	}
}

func TestTemplatesPublishedBySlug(t *testing.T) {
	tpl := func(name, slug string, state agentsv1.TemplateState) client.Object {
		return &agentsv1.AgentTemplate{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: agentsv1.AgentTemplateSpec{Slug: slug, DisplayName: name, State: state}}
	}
	o, _ := fakeOps(Deps{}, tpl("t1", "zeta", agentsv1.TemplatePublished), tpl("t2", "alpha", agentsv1.TemplatePublished),
		tpl("t3", "beta", agentsv1.TemplateDraft), tpl("t4", "gamma", agentsv1.TemplateArchived))
	list, err := o.Templates(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var slugs []string
	for _, t := range list {
		slugs = append(slugs, t.Spec.Slug)
	}
	if strings.Join(slugs, ",") != "alpha,zeta" {
		t.Errorf("templates %v", slugs)
	}
}

func TestLogTail(t *testing.T) {
	for _, tc := range []struct {
		tail *int
		want int
		ok   bool
	}{
		{nil, 7, true}, {ptr(1), 1, true}, {ptr(MaxLogTail), MaxLogTail, true},
		{ptr(0), 0, false}, {ptr(-3), 0, false}, {ptr(MaxLogTail + 1), 0, false},
	} {
		got, err := logTail(tc.tail, 7)
		switch {
		case tc.ok && (err != nil || got != tc.want):
			t.Errorf("%v: got %d %v, want %d", tc.tail, got, err, tc.want)
		case !tc.ok:
			wantFail(t, "tail", err, Invalid, MsgInvalidTail)
		}
	}
	// The tail is judged before the agent is read.
	o, _ := fakeOps(Deps{})
	_, err := o.AgentLogs(context.Background(), Scope{Namespace: "ws"}, "agt-missing", ptr(0))
	wantFail(t, "logs", err, Invalid, MsgInvalidTail)
	_, err = o.FollowLogs(context.Background(), Scope{Namespace: "ws"}, "agt-missing", nil)
	wantFail(t, "follow", err, NotFound, MsgAgentNotFound)
}

// TestConfigMustBeAnObject: a candidate config that is not a JSON object is `Invalid JSON`,
// judged before the agent is read.
func TestConfigMustBeAnObject(t *testing.T) {
	o, _ := fakeOps(Deps{})
	scope := Scope{Namespace: "ws"}
	for _, raw := range []string{"", "null", "[1]", `"x"`, "3"} {
		_, err := o.ValidateConfig(context.Background(), scope, "agt-missing", json.RawMessage(raw))
		wantFail(t, "validate "+raw, err, Invalid, MsgInvalidJSON)
		_, _, err = o.PutConfig(context.Background(), scope, "agt-missing", json.RawMessage(raw))
		wantFail(t, "put "+raw, err, Invalid, MsgInvalidJSON)
	}
	_, err := o.ValidateConfig(context.Background(), scope, "agt-missing", json.RawMessage(`{}`))
	wantFail(t, "object", err, NotFound, MsgAgentNotFound)
}

// TestAwakenLeavesOthersAlone: a request for an agent the caller cannot see, or that does not
// exist, is not held up (the request answers for it), and nothing is written.
func TestAwakenLeavesOthersAlone(t *testing.T) {
	sleepy := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "agt-a"},
		Status: agentsv1.AgentStatus{Phase: agentsv1.AgentSuspended}}
	o, c := fakeOps(Deps{}, sleepy)
	ctx := context.Background()
	for _, tc := range []struct {
		t  Scope
		id string
	}{
		{Scope{Namespace: "ws", OnlyAgent: "agt-b"}, "agt-a"},
		{Scope{Namespace: "other"}, "agt-a"},
		{Scope{Namespace: "ws"}, "agt-missing"},
		{Scope{Namespace: "ws"}, ""},
	} {
		if err := o.Awaken(ctx, tc.t, tc.id); err != nil {
			t.Errorf("%+v %q: %v", tc.t, tc.id, err)
		}
	}
	got := &agentsv1.Agent{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(sleepy), got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.WakeRequestedAt != nil || got.Annotations[agentsv1.AnnotationLastActive] != "" {
		t.Errorf("the agent was touched: %+v", got)
	}
}

// TestAwakenStampsActivity: a request for an awake agent counts as its activity, stamped at
// most once per interval.
func TestAwakenStampsActivity(t *testing.T) {
	awake := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "agt-a"},
		Status: agentsv1.AgentStatus{Phase: agentsv1.AgentRunning}}
	o, c := fakeOps(Deps{}, awake)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	o.d.Now = func() time.Time { return now }
	ctx := context.Background()
	stamp := func() string {
		got := &agentsv1.Agent{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(awake), got); err != nil {
			t.Fatal(err)
		}
		return got.Annotations[agentsv1.AnnotationLastActive]
	}
	if err := o.Awaken(ctx, Scope{Namespace: "ws"}, "agt-a"); err != nil {
		t.Fatal(err)
	}
	if got := stamp(); got != now.Format(time.RFC3339) {
		t.Fatalf("last active %q", got)
	}
	first := now
	now = now.Add(30 * time.Second)
	if err := o.Awaken(ctx, Scope{Namespace: "ws"}, "agt-a"); err != nil {
		t.Fatal(err)
	}
	if got := stamp(); got != first.Format(time.RFC3339) {
		t.Fatalf("stamped again within the interval: %q", got)
	}
}
