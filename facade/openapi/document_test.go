package openapi

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
)

type thingView struct {
	ID string `json:"id"`
}

type thingRequest struct {
	Name string `json:"name"`
}

// testAPI is a small API: token routes can answer 401 and 413, both generic, and the 401
// is shared.
func testAPI() *API {
	return &API{
		Info:            Info{Title: "test", Version: "1"},
		Tags:            []Tag{{Name: "things"}},
		Components:      Components{Schemas: map[string]*Schema{"Error": {Type: "object"}}},
		ResponseHeaders: []string{"X-Request-Id"},
		TokenParameters: []*Parameter{ParameterRef("Workspace")},
		TokenScheme:     "bearer", GatewayScheme: "gateway",
		PathParams: map[string]*Parameter{"id": {Name: "id", In: "path", Required: true, Schema: String()}},
		CommonFails: func(r Route, o *Operation) []Fail {
			var out []Fail
			if o.HasBody() {
				out = append(out, Fails(http.StatusRequestEntityTooLarge, "Too large"))
			}
			if !r.Public {
				out = append(out, Fails(http.StatusUnauthorized, "Unauthorized"), Fails(http.StatusNotFound, "Not found"))
			}
			return out
		},
		Generic: func(status int, _ string) bool { return status == http.StatusUnauthorized },
		Family: func(string) Family {
			return Family{Envelope: "Error", Example: func(_ int, msg string) any { return map[string]string{"error": msg} }}
		},
		Shared: func(_ Route, f Fail) string {
			if f.Status == http.StatusUnauthorized {
				return "Unauthorized"
			}
			return ""
		},
		Note: func(msg string) string {
			if msg == "Not found" {
				return " (fixed)"
			}
			return ""
		},
	}
}

func testRoutes() ([]Route, map[string]*Operation) {
	routes := []Route{
		{Method: "GET", Path: "/healthz", Public: true},
		{Method: "POST", Path: "/things/{id}", Scope: "things:write", Permission: "write", Gateway: true},
	}
	operations := map[string]*Operation{
		"GET /healthz": {ID: "health", Tag: "things", Summary: "Health", Replies: []Reply{Answer(http.StatusOK, "Up.", Props{"ok": Bool()})}},
		"POST /things/{id}": {
			ID: "putThing", Tag: "things", Summary: "Put a thing", Body: thingRequest{}, Required: []string{"name"},
			Replies: []Reply{Answer(http.StatusCreated, "The thing.", thingView{})},
			Fails: []Fail{
				Fails(http.StatusNotFound, "No thing", "Not found"),
				{Status: http.StatusConflict, Msgs: []string{"Taken"}, Extra: Props{"thing": thingView{}}},
			},
		},
	}
	return routes, operations
}

func TestCollectAndMatch(t *testing.T) {
	a := map[string]*Operation{"GET /a": {ID: "a"}}
	if _, err := Collect(a, map[string]*Operation{"GET /a": {ID: "again"}}); err == nil || !strings.Contains(err.Error(), "GET /a is described twice") {
		t.Errorf("duplicate: %v", err)
	}
	operations, err := Collect(a, map[string]*Operation{"GET /b": {ID: "b"}, "GET /c": {ID: "c"}})
	if err != nil || len(operations) != 3 {
		t.Fatalf("collect: %v %v", operations, err)
	}
	matched, err := Match([]Route{{Method: "GET", Path: "/b"}, {Method: "GET", Path: "/d"}}, operations)
	if matched[0].ID != "b" || matched[1] != nil {
		t.Errorf("matched %v", matched)
	}
	for _, want := range []string{"route GET /d has no description", "GET /a is described but not registered", "GET /c is described but not registered"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want %q", err, want)
		}
	}
}

func TestFailsMergeByStatus(t *testing.T) {
	routes, operations := testRoutes()
	got := testAPI().Fails(routes[1], operations["POST /things/{id}"])
	var statuses []int
	for _, f := range got {
		statuses = append(statuses, f.Status)
	}
	if !slices.Equal(statuses, []int{401, 404, 409, 413}) {
		t.Errorf("statuses %v", statuses)
	}
	if !slices.Equal(got[1].Msgs, []string{"No thing", "Not found"}) {
		t.Errorf("404 strings %v: want each once, the handler's first", got[1].Msgs)
	}
	if _, ok := got[2].Extra["thing"]; !ok {
		t.Errorf("409 extra %v", got[2].Extra)
	}
	if got := testAPI().Fails(routes[0], operations["GET /healthz"]); len(got) != 0 {
		t.Errorf("public route without body: %v", got)
	}
}

func TestDocument(t *testing.T) {
	routes, operations := testRoutes()
	raw, err := Document(testAPI(), routes, operations)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(string(raw), "}\n") || !strings.Contains(string(raw), "\n  \"components\": {") {
		t.Errorf("want indented JSON ending in a newline:\n%s", raw)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	at := func(path string) string {
		var v any = doc
		for _, k := range strings.Split(path, ".") {
			v = v.(map[string]any)[k]
		}
		return asJSON(t, v)
	}
	cases := []struct{ path, want string }{
		{"openapi", `"3.0.3"`},
		{"info", `{"title":"test","version":"1"}`},
		{"paths./healthz.get.security", `[]`},
		{"paths./healthz.get.x-agentplane-access", `{"public":true}`},
		{"paths./healthz.get.responses", `{"200":{"content":{"application/json":{"schema":{"properties":{"ok":{"type":"boolean"}},"required":["ok"],"type":"object"}}},"description":"Up.","headers":{"X-Request-Id":{"$ref":"#/components/headers/X-Request-Id"}}}}`},
		{"paths./things/{id}.post.security", `[{"bearer":[]},{"gateway":[]}]`},
		{"paths./things/{id}.post.x-agentplane-access", `{"gatewayToken":true,"permission":"write","scope":"things:write"}`},
		{"paths./things/{id}.post.parameters", `[{"in":"path","name":"id","required":true,"schema":{"type":"string"}},{"$ref":"#/components/parameters/Workspace"}]`},
		{"paths./things/{id}.post.requestBody", `{"content":{"application/json":{"schema":{"$ref":"#/components/schemas/ThingRequest"}}},"required":true}`},
		{"paths./things/{id}.post.responses.401", `{"$ref":"#/components/responses/Unauthorized"}`},
		{"paths./things/{id}.post.responses.404.description", `"Not Found. Error strings:\n\n- ` + "`No thing`\\n- `Not found` (fixed)" + `"`},
		{"paths./things/{id}.post.responses.404.content.application/json.examples", `{"no-thing":{"summary":"No thing","value":{"error":"No thing"}},"not-found":{"summary":"Not found","value":{"error":"Not found"}}}`},
		{"paths./things/{id}.post.responses.409.content.application/json.schema", `{"allOf":[{"$ref":"#/components/schemas/Error"},{"properties":{"thing":{"$ref":"#/components/schemas/Thing"}},"type":"object"}]}`},
		{"components.responses.Unauthorized.description", `"Unauthorized. Error strings:\n\n- ` + "`Unauthorized`" + `"`},
		{"components.schemas.ThingRequest.required", `["name"]`},
		{"components.schemas.Error", `{"type":"object"}`},
	}
	for _, tc := range cases {
		if got := at(tc.path); got != tc.want {
			t.Errorf("%s: %s\nwant %s", tc.path, got, tc.want)
		}
	}
}

func TestDocumentErrors(t *testing.T) {
	cases := []struct {
		name   string
		change func(*API, []Route, map[string]*Operation) []Route
		want   string
	}{
		{"undocumented path parameter", func(_ *API, routes []Route, operations map[string]*Operation) []Route {
			operations["GET /other/{slug}"] = &Operation{ID: "other"}
			return append(routes, Route{Method: "GET", Path: "/other/{slug}"})
		}, "path parameter {slug} is not documented"},
		{"duplicate operationId", func(_ *API, routes []Route, operations map[string]*Operation) []Route {
			operations["GET /other"] = &Operation{ID: "health"}
			return append(routes, Route{Method: "GET", Path: "/other", Public: true})
		}, "operationId health of GET /other is also GET /healthz's"},
		{"operation without a route", func(_ *API, routes []Route, operations map[string]*Operation) []Route {
			operations["GET /other"] = &Operation{ID: "other"}
			return routes
		}, "GET /other is described but not registered"},
		{"bad request body", func(_ *API, routes []Route, operations map[string]*Operation) []Route {
			operations["POST /things/{id}"].Required = []string{"nope"}
			return routes
		}, `has no field "nope"`},
		{"no family", func(a *API, routes []Route, _ map[string]*Operation) []Route {
			a.Family = nil
			return routes
		}, "the API has no Family"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			api := testAPI()
			routes, operations := testRoutes()
			routes = tc.change(api, routes, operations)
			if _, err := Document(api, routes, operations); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestExampleKey(t *testing.T) {
	for msg, want := range map[string]string{
		"Agent not found":                  "agent-not-found",
		"Invalid JSON: unexpected EOF":     "invalid-json-unexpected-eof",
		"  Missing scope agents:read  ":    "missing-scope-agents-read",
		"Secret value must be at most 32K": "secret-value-must-be-at-most-32k",
		"Ünïcode — only":                   "n-code-only",
	} {
		if got := exampleKey(msg); got != want {
			t.Errorf("exampleKey(%q) = %q, want %q", msg, got, want)
		}
	}
}

func TestMarkdown(t *testing.T) {
	routes, operations := testRoutes()
	operations["POST /things/{id}"].Fails = append(operations["POST /things/{id}"].Fails, Fails(http.StatusBadRequest, "a|b"))
	table, err := Markdown(testAPI(), "Intro.\n\n", routes, operations)
	if err != nil {
		t.Fatal(err)
	}
	want := "Intro.\n\n| Method | Path | Scope | Role | Gateway | Errors |\n|---|---|---|---|---|---|\n" +
		"| GET | `/healthz` | public | — | — | — |\n" +
		"| POST | `/things/{id}` | `things:write` | write | yes | 400 `a\\|b`<br>404 `No thing`, `Not found`<br>409 `Taken`<br>413 `Too large` |\n"
	if table != want {
		t.Errorf("table:\n%s\nwant:\n%s", table, want)
	}
	if _, err := Markdown(testAPI(), "", routes[:1], operations); err == nil {
		t.Error("an operation without a route must fail")
	}
}

func TestSpliceREADME(t *testing.T) {
	readme := []byte("# T\n\n" + RoutesBegin + "\nold\n" + RoutesEnd + "\ntail\n")
	got, err := SpliceREADME(readme, "new\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := "# T\n\n" + RoutesBegin + "\nnew\n" + RoutesEnd + "\ntail\n"; string(got) != want {
		t.Errorf("spliced %q, want %q", got, want)
	}
	for _, bad := range []string{"no markers", RoutesEnd + RoutesBegin, RoutesBegin} {
		if _, err := SpliceREADME([]byte(bad), "x"); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
}
