package facade

import (
	"bytes"
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/ops"
	"github.com/agentplane/agentplane/internal/rules/admission"
	"github.com/agentplane/agentplane/internal/rules/auth"
)

const (
	conformanceCID   = "bafkreifjjcie6lypi6ny7amxnfftagclbuxndqonfipmb64f2km2devei4"
	conformanceAgent = "agt-conformance"
)

// conformanceObjects are a workspace with one of everything the read routes show.
func conformanceObjects() []client.Object {
	ns, now := "demo", metav1.NewTime(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: ns, CreationTimestamp: now}
	}
	enabled := true
	return []client.Object{
		&agentsv1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: ns}, Spec: agentsv1.WorkspaceSpec{
			Plan: agentsv1.PlanPro, Internal: true,
			Members: []agentsv1.WorkspaceMember{{UserID: "alice", Role: agentsv1.RoleAdmin}, {UserID: "vera", Role: agentsv1.RoleViewer}},
		}},
		&agentsv1.Agent{ObjectMeta: meta(conformanceAgent), Spec: agentsv1.AgentSpec{
			DisplayName: "Conformance", Engine: agentsv1.EngineSpec{Name: agentsv1.EngineOpenClaw, Version: engine.PinnedVersion},
			Skills: []agentsv1.AgentSkill{{CID: conformanceCID}}, Secrets: []agentsv1.LocalObjectReference{{Name: "sec-openai"}},
		}, Status: agentsv1.AgentStatus{
			Phase: agentsv1.AgentRunning, Endpoint: "http://127.0.0.1:1", EngineVersion: engine.PinnedVersion,
			InstalledSkills: []string{conformanceCID},
		}},
		&corev1.Secret{ObjectMeta: meta(conformanceAgent + "-gateway-token"), Data: map[string][]byte{agentsv1.GatewayTokenDataKey: []byte("gw-token")}},
		&agentsv1.AgentSecret{ObjectMeta: meta("sec-openai"), Spec: agentsv1.AgentSecretSpec{Name: "openai", Provider: "openai"},
			Status: agentsv1.AgentSecretStatus{AttachedTo: []string{conformanceAgent}}},
		&agentsv1.Skill{ObjectMeta: meta("weather"), Spec: agentsv1.SkillSpec{Slug: "weather", Version: "1.0.0", CID: conformanceCID}},
		&agentsv1.Domain{ObjectMeta: meta("dom-one"), Spec: agentsv1.DomainSpec{
			AgentRef: agentsv1.LocalObjectReference{Name: conformanceAgent}, Subdomain: "conformance", TargetPort: 18789,
		}},
		&agentsv1.Domain{ObjectMeta: meta("dom-two"), Spec: agentsv1.DomainSpec{
			AgentRef: agentsv1.LocalObjectReference{Name: conformanceAgent}, CustomDomain: "agents.example.com", TargetPort: 18789,
		}},
		&agentsv1.Snapshot{ObjectMeta: meta(conformanceAgent + "-1"), Spec: agentsv1.SnapshotSpec{AgentRef: agentsv1.LocalObjectReference{Name: conformanceAgent}},
			Status: agentsv1.SnapshotStatus{Phase: agentsv1.SnapshotCompleted, CID: conformanceCID, Size: 42}},
		&corev1.Secret{ObjectMeta: meta(ops.ChannelSecretName(conformanceAgent, agentsv1.ChannelTelegram)), Data: map[string][]byte{agentsv1.ChannelBotTokenKey: []byte("123456:telegram-bot-token")}},
		&agentsv1.Channel{ObjectMeta: meta(ops.ChannelName(conformanceAgent, agentsv1.ChannelTelegram)), Spec: agentsv1.ChannelSpec{
			AgentRef: agentsv1.LocalObjectReference{Name: conformanceAgent}, Type: agentsv1.ChannelTelegram, DMPolicy: "pairing", Enabled: &enabled,
			BotTokenRef: &agentsv1.SecretKeyReference{Name: ops.ChannelSecretName(conformanceAgent, agentsv1.ChannelTelegram), Key: agentsv1.ChannelBotTokenKey},
		}},
		&agentsv1.AgentTemplate{ObjectMeta: metav1.ObjectMeta{Name: "tpl-helper"}, Spec: agentsv1.AgentTemplateSpec{
			Slug: "helper", DisplayName: "Helper", State: agentsv1.TemplatePublished,
		}},
		&agentsv1.File{ObjectMeta: meta("public-" + conformanceCID), Spec: agentsv1.FileSpec{
			Network: agentsv1.NetworkPublic, CID: conformanceCID, ID: "public-" + conformanceCID, Name: "hello.txt", Size: 5,
			MimeType: "text/plain", CreatedAt: "2026-05-01T12:00:00.000Z",
			Signature: &agentsv1.FileSignature{Address: "0x0000000000000000000000000000000000000001", Signature: "0x" + strings.Repeat("ab", 65), SignedAt: now},
		}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "issue-1", Namespace: ns, CreationTimestamp: now, Labels: map[string]string{agentsv1.LabelIssue: "true"}},
			Data: map[string]string{"title": "It broke", "reporter": "alice"}},
	}
}

// Real answers of the handlers conform to the document: status documented, body valid
// against the response's schema (required fields present, types right), error envelope.
func TestOpenAPIDescribesWhatTheHandlersAnswer(t *testing.T) {
	doc := embeddedDoc(t)
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := agentsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(conformanceObjects()...).
		WithIndex(&agentsv1.Channel{}, agentsv1.IndexAgentRef, func(o client.Object) []string {
			return []string{o.(*agentsv1.Channel).Spec.AgentRef.Name}
		}).
		WithIndex(&agentsv1.Domain{}, agentsv1.IndexAgentRef, func(o client.Object) []string {
			return []string{o.(*agentsv1.Domain).Spec.AgentRef.Name}
		}).
		WithIndex(&corev1.Secret{}, agentsv1.IndexGatewayTokenHash, auth.GatewayTokenIndex).Build()
	signer, err := auth.NewSigner(bytes.Repeat([]byte("k"), 32))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	mint := func(user string, scopes ...string) string {
		tok, _, err := auth.CreateKey(ctx, c, signer, auth.KeyRequest{Workspace: "demo", UserID: user, Scopes: scopes, Role: agentsv1.RoleMember})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	admin, viewer, narrow := mint("alice", auth.ScopeAll), mint("vera", auth.ScopeAll), mint("alice", auth.ScopeFilesRead)
	s := New(Options{Signer: signer, Log: logr.Discard(), Deps: ops.Deps{Client: c, APIReader: c,
		Admission: &admission.Admitter{Versions: admission.Versions{Default: engine.PinnedVersion, Available: []string{engine.PinnedVersion}}}}})

	agent := "/v0/agents/" + conformanceAgent
	cases := []struct {
		method, pattern, path, token, body string
		status                             int
	}{
		{"GET", "/healthz", "/healthz", "", "", 200},
		{"GET", "/v0/me", "/v0/me", admin, "", 200},
		{"GET", "/v0/agents", "/v0/agents", admin, "", 200},
		{"GET", "/v0/agents", "/v0/agents", "", "", 401},
		{"GET", "/v0/agents/{agentId}", agent, admin, "", 200},
		{"GET", "/v0/agents/{agentId}", "/v0/agents/agt-missing", admin, "", 404},
		{"GET", "/v0/agents/{agentId}/versions", agent + "/versions", admin, "", 200},
		{"GET", "/v0/agents/{agentId}/logs", agent + "/logs?tail=abc", admin, "", 400},
		{"GET", "/v0/agents/{agentId}/logs", "/v0/agents/agt-missing/logs", admin, "", 404},
		{"GET", "/v0/agents/{agentId}/logs", agent + "/logs", admin, "", 500},
		{"GET", "/v0/agents/{agentId}/gateway-token", agent + "/gateway-token", admin, "", 200},
		{"GET", "/v0/agents/{agentId}/gateway-token", agent + "/gateway-token", narrow, "", 403},
		{"POST", "/v0/agents", "/v0/agents", viewer, `{"name":"x"}`, 403},
		{"POST", "/v0/agents", "/v0/agents", admin, `{"name":""}`, 400},
		{"GET", "/v0/templates", "/v0/templates", admin, "", 200},
		{"POST", "/v0/agents/{agentId}/console/exec", agent + "/console/exec", admin, `{"command":" "}`, 400},
		{"POST", "/v0/agents/{agentId}/tasks", agent + "/tasks", admin, `{"name":"t"}`, 400},
		{"POST", "/v0/secrets", "/v0/secrets", admin, `{"name":"n","value":"v"}`, 503},
		{"GET", "/v0/secrets", "/v0/secrets", admin, "", 200},
		{"GET", "/v0/agents/{agentId}/secrets", agent + "/secrets", admin, "", 200},
		{"GET", "/v0/issues", "/v0/issues", admin, "", 200},
		{"GET", "/v0/skills", "/v0/skills", admin, "", 200},
		{"GET", "/v0/agents/{agentId}/skills", agent + "/skills", admin, "", 200},
		{"POST", "/v0/agents/{agentId}/skills", agent + "/skills", admin, `{"skillCids":[]}`, 400},
		{"GET", "/v0/agents/{agentId}/domains", agent + "/domains", admin, "", 200},
		{"GET", "/v0/agents/{agentId}/domains/{domainId}", agent + "/domains/dom-two", admin, "", 200},
		{"GET", "/v0/agents/{agentId}/domains/{domainId}", agent + "/domains/dom-none", admin, "", 404},
		{"GET", "/v0/agents/{agentId}/snapshots", agent + "/snapshots", admin, "", 200},
		{"POST", "/v0/agents/{agentId}/snapshots/sync", agent + "/snapshots/sync", admin, "", 400},
		{"POST", "/v0/agents/{agentId}/snapshots/reset", agent + "/snapshots/reset", admin, `{"snapshotCid":"nope"}`, 400},
		{"GET", "/v0/agents/{agentId}/channels", agent + "/channels", admin, "", 200},
		{"DELETE", "/v0/agents/{agentId}/channels/{channel}", agent + "/channels/fax", admin, "", 400},
		{"GET", "/v3/data/testAuthentication", "/v3/data/testAuthentication", admin, "", 200},
		{"GET", "/v3/files/{network}", "/v3/files/public", admin, "", 200},
		{"GET", "/v3/files/{network}", "/v3/files/public", "", "", 401},
		{"GET", "/v3/files/{network}/{id}", "/v3/files/public/public-" + conformanceCID, admin, "", 200},
		{"GET", "/v3/files/{network}/{id}", "/v3/files/private/nope", admin, "", 404},
		{"GET", "/v3/files/{network}/signature/{cid}", "/v3/files/public/signature/" + conformanceCID, admin, "", 200},
		{"POST", "/v3/files/{network}/signature/{cid}", "/v3/files/public/signature/" + conformanceCID, admin, `{}`, 400},
		{"POST", "/v3/files", "/v3/files", admin, "", 503},
	}
	for _, tc := range cases {
		name := tc.method + " " + tc.path
		var body io.Reader
		if tc.body != "" {
			body = strings.NewReader(tc.body)
		}
		req := httptest.NewRequest(tc.method, tc.path, body)
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code != tc.status {
			t.Errorf("%s: status %d, want %d (%s)", name, rec.Code, tc.status, rec.Body)
			continue
		}
		item := doc.Paths.Value(tc.pattern)
		if item == nil || item.GetOperation(tc.method) == nil {
			t.Errorf("%s: %s is not documented", name, tc.pattern)
			continue
		}
		input := &openapi3filter.ResponseValidationInput{
			RequestValidationInput: &openapi3filter.RequestValidationInput{
				Request: req,
				Route: &routers.Route{Spec: doc, Path: tc.pattern, PathItem: item, Method: tc.method,
					Operation: item.GetOperation(tc.method)},
			},
			Status: rec.Code, Header: rec.Header(),
			Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
		}
		input.SetBodyBytes(rec.Body.Bytes())
		if err := openapi3filter.ValidateResponse(ctx, input); err != nil {
			t.Errorf("%s: the answer does not conform to the document: %v\nbody: %s", name, err, rec.Body)
		}
	}
}
