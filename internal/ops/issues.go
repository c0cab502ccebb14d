package ops

import (
	"context"
	"sort"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// The Issues are a closed beta for internal accounts (Workspace.spec.internal): every other
// account is told they do not exist (NotFound). For internal accounts they keep a simple list
// of reported issues, each a ConfigMap labelled agentplane.io/issue in the workspace.
const (
	MsgIssueTitle      = "Issue title is required (at most 200 characters)"
	maxIssueTitleRunes = 200
	maxIssueBodyBytes  = 16 << 10
	issueNameGenerated = "issue-"
)

// IssuesVisible hides the issues from accounts that are not internal (NotFound): a door
// checks it before it reads a request, so they learn nothing of the issues' rules.
func IssuesVisible(ws *agentsv1.Workspace) error {
	if ws == nil || !ws.Spec.Internal {
		return Fail(NotFound, MsgNotFound)
	}
	return nil
}

// Issues lists the issues reported in the workspace's workspace ws, newest first.
func (o *Ops) Issues(ctx context.Context, t Scope, ws *agentsv1.Workspace) ([]corev1.ConfigMap, error) {
	if err := IssuesVisible(ws); err != nil {
		return nil, err
	}
	var list corev1.ConfigMapList
	if err := o.d.APIReader.List(ctx, &list, client.InNamespace(t.Namespace), client.HasLabels{agentsv1.LabelIssue}); err != nil {
		return nil, err
	}
	sort.SliceStable(list.Items, func(i, j int) bool {
		return list.Items[i].CreationTimestamp.UTC().After(list.Items[j].CreationTimestamp.UTC())
	})
	return list.Items, nil
}

// NewIssue is an issue to report.
type NewIssue struct {
	Title string
	Body  string
	// AgentID, when set, names an agent of the workspace the issue is about.
	AgentID string
	// Reporter is the reporting user.
	Reporter string
}

// validate applies the issue's rules: a title of 1 to 200 characters, a body of at most
// 16 KiB.
func (n *NewIssue) validate() error {
	n.Title = strings.TrimSpace(n.Title)
	if n.Title == "" || utf8.RuneCountInString(n.Title) > maxIssueTitleRunes || len(n.Body) > maxIssueBodyBytes {
		return Fail(Invalid, MsgIssueTitle)
	}
	return nil
}

// CreateIssue reports an issue in the workspace's workspace ws.
func (o *Ops) CreateIssue(ctx context.Context, t Scope, ws *agentsv1.Workspace, n NewIssue) (*corev1.ConfigMap, error) {
	if err := IssuesVisible(ws); err != nil {
		return nil, err
	}
	if err := n.validate(); err != nil {
		return nil, err
	}
	if n.AgentID != "" {
		if _, err := o.Agent(ctx, t, n.AgentID); err != nil {
			return nil, err
		}
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{GenerateName: issueNameGenerated, Namespace: t.Namespace, Labels: map[string]string{agentsv1.LabelIssue: "true"}},
		Data:       map[string]string{"title": n.Title, "body": n.Body, "agentId": n.AgentID, "reporter": n.Reporter},
	}
	if err := o.d.Client.Create(ctx, cm); err != nil {
		return nil, err
	}
	return cm, nil
}
