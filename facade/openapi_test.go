package facade

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/go-logr/logr"

	"github.com/agentplane/agentplane/facade/openapi"
	"github.com/agentplane/agentplane/internal/rules/auth"
)

// The documentation tests need no cluster: New registers every route with nil dependencies.

func docRoutes(t *testing.T) []RouteInfo {
	t.Helper()
	routes := New(Options{Log: logr.Discard()}).Routes()
	if len(routes) == 0 {
		t.Fatal("no routes registered")
	}
	return routes
}

// embeddedDoc loads and validates the embedded document as OpenAPI 3.0, examples included.
func embeddedDoc(t *testing.T) *openapi3.T {
	t.Helper()
	raw := openapi.JSON()
	if !json.Valid(raw) {
		t.Fatal("facade/openapi/openapi.json is not valid JSON")
	}
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	if err != nil {
		t.Fatalf("load the OpenAPI document: %v", err)
	}
	if err := doc.Validate(context.Background(), openapi3.EnableExamplesValidation()); err != nil {
		t.Fatalf("the OpenAPI document is not valid: %v", err)
	}
	return doc
}

func TestRoutesRecordsEveryRegistrationWithItsAccess(t *testing.T) {
	routes := docRoutes(t)
	seen := map[string]bool{}
	for _, r := range routes {
		if r.Method == "" || !strings.HasPrefix(r.Path, "/") {
			t.Errorf("route %+v: want a method and a path", r)
		}
		if seen[routeKey(r)] {
			t.Errorf("route %s recorded twice", routeKey(r))
		}
		seen[routeKey(r)] = true
	}
	find := func(key string) RouteInfo {
		i := slices.IndexFunc(routes, func(r RouteInfo) bool { return routeKey(r) == key })
		if i < 0 {
			t.Fatalf("route %s not recorded", key)
		}
		return routes[i]
	}
	want := map[string]RouteInfo{
		"GET /healthz":      {Method: "GET", Path: "/healthz", Public: true},
		"GET /openapi.json": {Method: "GET", Path: "/openapi.json", Public: true},
		"GET /v0/agents/{agentId}": {Method: "GET", Path: "/v0/agents/{agentId}", Scope: auth.ScopeAgentsRead,
			Permission: auth.PermRead, Gateway: true},
		"GET /v0/agents/{agentId}/gateway-token": {Method: "GET", Path: "/v0/agents/{agentId}/gateway-token",
			Scope: auth.ScopeAgentsWrite, Permission: auth.PermAdmin},
		"POST /v3/files/{network}/signature/{cid}": {Method: "POST", Path: "/v3/files/{network}/signature/{cid}",
			Scope: auth.ScopeFilesWrite, Permission: auth.PermWrite},
		"POST /v0/agents/{agentId}/snapshots/reset": {Method: "POST", Path: "/v0/agents/{agentId}/snapshots/reset",
			Scope: auth.ScopeAgentsWrite, Permission: auth.PermWrite, Gateway: true},
	}
	for key, w := range want {
		if got := find(key); got != w {
			t.Errorf("%s recorded as %+v, want %+v", key, got, w)
		}
	}
	routes[0].Path = "/mutated"
	if s := New(Options{Log: logr.Discard()}); s.Routes()[0].Path == "/mutated" {
		t.Error("Routes must return a copy")
	}
}

// /healthz is documented like every other route: it is part of what the facade serves.
func TestOpenAPIDocumentsEveryRouteAndOnlyThem(t *testing.T) {
	doc := embeddedDoc(t)
	routes := docRoutes(t)
	registered := map[string]bool{}
	for _, r := range routes {
		registered[routeKey(r)] = true
		item := doc.Paths.Value(r.Path)
		if item == nil || item.GetOperation(r.Method) == nil {
			t.Errorf("route %s is not in the OpenAPI document", routeKey(r))
		}
	}
	ids := map[string]string{}
	for path, item := range doc.Paths.Map() {
		for method, o := range item.Operations() {
			key := method + " " + path
			if !registered[key] {
				t.Errorf("the OpenAPI document has %s, which is not a registered route", key)
			}
			if o.OperationID == "" || o.Summary == "" || len(o.Tags) != 1 {
				t.Errorf("%s: want an operationId, a summary and one tag", key)
			}
			if prev, dup := ids[o.OperationID]; dup {
				t.Errorf("operationId %s is both %s and %s", o.OperationID, prev, key)
			}
			ids[o.OperationID] = key
		}
	}
}

func TestOpenAPIOperationsDeclareAuthMatchingTheirRoute(t *testing.T) {
	doc := embeddedDoc(t)
	if doc.OpenAPI != openapi.Version || doc.Info.Title != "agentplane" || doc.Info.Version == "" {
		t.Errorf("openapi %q, info %q %q", doc.OpenAPI, doc.Info.Title, doc.Info.Version)
	}
	for _, name := range []string{"bearerAuth", "gatewayToken"} {
		s := doc.Components.SecuritySchemes[name]
		if s == nil || s.Value.Type != "http" || s.Value.Scheme != "bearer" {
			t.Errorf("security scheme %s: want http bearer", name)
		}
	}
	wildcard := regexp.MustCompile(`\{([^}]+)\}`)
	for _, r := range docRoutes(t) {
		key := routeKey(r)
		o := doc.Paths.Value(r.Path).GetOperation(r.Method)
		if o == nil {
			continue // reported by TestOpenAPIDocumentsEveryRouteAndOnlyThem
		}
		var schemes []string
		if o.Security != nil {
			for _, req := range *o.Security {
				for name := range req {
					schemes = append(schemes, name)
				}
			}
		}
		want := []string{"bearerAuth"}
		switch {
		case r.Public:
			want = nil
		case r.Gateway:
			want = append(want, "gatewayToken")
		}
		if o.Security == nil || !slices.Equal(schemes, want) {
			t.Errorf("%s: security %v, want %v", key, schemes, want)
		}
		for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden} {
			if got := o.Responses.Status(status) != nil; got == r.Public {
				t.Errorf("%s: declares %d = %v, want %v", key, status, got, !r.Public)
			}
		}
		access, _ := o.Extensions["x-agentplane-access"].(map[string]any)
		wantAccess := map[string]any{"public": true}
		if !r.Public {
			wantAccess = map[string]any{"permission": PermissionName(r.Permission)}
			if r.Scope != "" {
				wantAccess["scope"] = r.Scope
			}
			if r.Gateway {
				wantAccess["gatewayToken"] = true
			}
		}
		if !jsonEqual(t, access, wantAccess) {
			t.Errorf("%s: x-agentplane-access %v, want %v", key, access, wantAccess)
		}
		success := false
		for code := range o.Responses.Map() {
			success = success || strings.HasPrefix(code, "2")
		}
		if !success {
			t.Errorf("%s: no success response", key)
		}
		var params []string
		for _, p := range o.Parameters {
			if p.Value.In == openapi3.ParameterInPath {
				params = append(params, p.Value.Name)
			}
		}
		var inPath []string
		for _, m := range wildcard.FindAllStringSubmatch(r.Path, -1) {
			inPath = append(inPath, m[1])
		}
		if !slices.Equal(params, inPath) {
			t.Errorf("%s: path parameters %v, want %v", key, params, inPath)
		}
		envelope := "ErrorV0"
		if isV3(r.Path) {
			envelope = "ErrorV3"
		}
		for code, resp := range o.Responses.Map() {
			if code[0] != '4' && code[0] != '5' {
				continue
			}
			raw, _ := json.Marshal(resp)
			if !strings.Contains(string(raw), "#/components/schemas/"+envelope) && !strings.Contains(string(raw), "#/components/responses/") {
				t.Errorf("%s %s: not the %s envelope", key, code, envelope)
			}
		}
	}
}

func jsonEqual(t *testing.T, a, b any) bool {
	t.Helper()
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// Like hack/verify-generated.sh for the CRDs: the committed documents are what the generator
// makes from the routes as registered now.
func TestOpenAPIDocumentIsUpToDate(t *testing.T) {
	want, err := OpenAPIDocument(docRoutes(t))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(openapi.JSON(), want) {
		t.Error("facade/openapi/openapi.json is stale: run `make docs` (go run ./hack/gendocs)")
	}
	docs, err := os.ReadFile("../docs/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(docs, want) {
		t.Error("docs/openapi.json is stale: run `make docs` (go run ./hack/gendocs)")
	}
}

func TestDocsREADMERouteTableIsUpToDate(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	table, err := RoutesMarkdown(docRoutes(t))
	if err != nil {
		t.Fatal(err)
	}
	want, err := openapi.SpliceREADME(readme, table)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readme, want) {
		t.Error("the route table in README.md is stale: run `make docs` (go run ./hack/gendocs)")
	}
	headings := regexp.MustCompile(`(?m)^## .*$`).FindAllString(string(readme), -1)
	if len(headings) == 0 || headings[len(headings)-1] != "## REST API" {
		t.Errorf("`## REST API` must be the last section of README.md, sections: %v", headings)
	}
	for _, r := range docRoutes(t) {
		if !strings.Contains(table, "| "+r.Method+" | `"+r.Path+"` |") {
			t.Errorf("README table lacks %s", routeKey(r))
		}
	}
}

func TestOpenAPIIsServedWithoutAToken(t *testing.T) {
	s := New(Options{Log: logr.Discard()})
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/openapi.json", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /openapi.json: %d %s", rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	var served, embedded any
	if err := json.Unmarshal(rec.Body.Bytes(), &served); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(openapi.JSON(), &embedded); err != nil {
		t.Fatal(err)
	}
	if !jsonEqual(t, served, embedded) {
		t.Error("GET /openapi.json does not answer the embedded document")
	}
}

// Every error string the contract fixes is documented on some route.
func TestOpenAPIDocumentsEveryContractErrorString(t *testing.T) {
	routes := docRoutes(t)
	ops, err := matchOperations(routes)
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for i, r := range routes {
		for _, f := range allFails(r, ops[i]) {
			for _, m := range f.Msgs {
				documented[m] = true
			}
		}
	}
	for _, m := range contractMessages {
		if !documented[m] {
			t.Errorf("contract error string %q is documented on no route", m)
		}
	}
}
