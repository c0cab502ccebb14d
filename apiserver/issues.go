package apiserver

import (
	"net/http"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The Issues routes are a closed beta for internal accounts (Workspace.spec.internal): every
// other account gets 404, as if they did not exist. For internal accounts they keep a simple
// list of reported issues, each a ConfigMap labelled agentplane.io/issue in the workspace.
const (
	msgIssueTitle      = "Issue title is required (at most 200 characters)"
	maxIssueBodyBytes  = 16 << 10
	issueNameGenerated = "issue-"
)

type issueRequest struct {
	Title   string `json:"title"`
	Body    string `json:"body"`
	AgentID string `json:"agentId"`
}

type issueView struct {
	ID        string    `json:"id"`
	Title     string    `json:"title"`
	Body      string    `json:"body,omitempty"`
	AgentID   string    `json:"agentId,omitempty"`
	Reporter  string    `json:"reporter"`
	CreatedAt time.Time `json:"createdAt"`
}

// internalOnly hides the route from accounts that are not internal.
func internalOnly(c *Caller) error {
	if c.Workspace == nil || !c.Workspace.Spec.Internal {
		return errorf(http.StatusNotFound, msgNotFound)
	}
	return nil
}

func viewIssue(cm *corev1.ConfigMap) issueView {
	return issueView{
		ID: cm.Name, Title: cm.Data["title"], Body: cm.Data["body"], AgentID: cm.Data["agentId"],
		Reporter: cm.Data["reporter"], CreatedAt: cm.CreationTimestamp.UTC(),
	}
}

func (s *Server) listIssues(r *http.Request, c *Caller) (*Response, error) {
	if err := internalOnly(c); err != nil {
		return nil, err
	}
	var list corev1.ConfigMapList
	if err := s.opts.APIReader.List(r.Context(), &list, client.InNamespace(c.Namespace), client.HasLabels{agentsv1.LabelIssue}); err != nil {
		return nil, err
	}
	out := make([]issueView, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, viewIssue(&list.Items[i]))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.After(out[j].CreatedAt) })
	return ok(map[string]any{"issues": out})
}

func (s *Server) createIssue(r *http.Request, c *Caller) (*Response, error) {
	if err := internalOnly(c); err != nil {
		return nil, err
	}
	var req issueRequest
	if err := decodeJSON(r, &req, msgInvalidBody); err != nil {
		return nil, err
	}
	title := strings.TrimSpace(req.Title)
	if title == "" || utf8.RuneCountInString(title) > 200 || len(req.Body) > maxIssueBodyBytes {
		return nil, errorf(http.StatusBadRequest, msgIssueTitle)
	}
	if req.AgentID != "" {
		if _, err := s.getAgent(r.Context(), c, req.AgentID); err != nil {
			return nil, err
		}
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{GenerateName: issueNameGenerated, Namespace: c.Namespace, Labels: map[string]string{agentsv1.LabelIssue: "true"}},
		Data:       map[string]string{"title": title, "body": req.Body, "agentId": req.AgentID, "reporter": c.UserID},
	}
	if err := s.opts.Client.Create(r.Context(), cm); err != nil {
		return nil, err
	}
	return created(map[string]any{"issue": viewIssue(cm)})
}
