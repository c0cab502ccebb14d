package openapi

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// asJSON is s as the document writes it.
func asJSON(t *testing.T, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

type leafView struct {
	Name string `json:"name"`
}

type nodeView struct {
	Name     string     `json:"name"`
	Children []nodeView `json:"children,omitempty"`
	Parent   *nodeView  `json:"parent"`
}

type embedded struct {
	Inner string `json:"inner"`
}

type widgetRequest struct {
	embedded
	Name    string            `json:"name"`
	Note    *string           `json:"note"`
	Leaf    *leafView         `json:"leaf"`
	Count   int               `json:"count,omitempty"`
	Skipped string            `json:"-"`
	hidden  string            //nolint:unused // unexported: not documented (the fixture needs one)
	Plain   bool              // no tag: the field name
	Labels  map[string]string `json:"labels,omitempty"`
}

func TestTypeSchemas(t *testing.T) {
	cases := []struct {
		name string
		v    any
		want string
	}{
		{"string", "", `{"type":"string"}`},
		{"bool", true, `{"type":"boolean"}`},
		{"int", 0, `{"type":"integer"}`},
		{"uint16", uint16(0), `{"type":"integer"}`},
		{"int32", int32(0), `{"type":"integer","format":"int32"}`},
		{"int64", int64(0), `{"type":"integer","format":"int64"}`},
		{"uint64", uint64(0), `{"type":"integer","format":"int64"}`},
		{"float", 0.5, `{"type":"number"}`},
		{"bytes", []byte{}, `{"type":"string","format":"byte"}`},
		{"time", time.Time{}, `{"type":"string","format":"date-time"}`},
		{"raw", json.RawMessage(nil), `{"type":"object","additionalProperties":true}`},
		{"pointer", new(string), `{"type":"string"}`},
		{"slice", []string{}, `{"type":"array","items":{"type":"string"}}`},
		{"array", [2]int{}, `{"type":"array","items":{"type":"integer"}}`},
		{"map of any", map[string]any{}, `{"type":"object","additionalProperties":true}`},
		{"map", map[string]int64{}, `{"type":"object","additionalProperties":{"type":"integer","format":"int64"}}`},
		{"named struct", leafView{}, `{"$ref":"#/components/schemas/Leaf"}`},
		{"anonymous struct", struct {
			A string `json:"a"`
		}{}, `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`},
		{"schema", EnumOf("x"), `{"type":"string","enum":["x"]}`},
		{"props", Props{"b": 1, "a": String()}, `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}},"required":["a","b"]}`},
		{"null", nil, `{"type":"object","description":"Always null.","nullable":true}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := newSchemaSet()
			if got := asJSON(t, g.value(tc.v)); got != tc.want {
				t.Errorf("schema %s, want %s", got, tc.want)
			}
			if len(g.errs) > 0 {
				t.Errorf("errors: %v", g.errs)
			}
		})
	}
}

func TestTypeWithoutSchemaIsAnError(t *testing.T) {
	g := newSchemaSet()
	g.value(make(chan int))
	if len(g.errs) != 1 || !strings.Contains(g.errs[0].Error(), "no schema for Go type chan int") {
		t.Errorf("errors %v", g.errs)
	}
}

func TestStructComponents(t *testing.T) {
	g := newSchemaSet()
	g.value(widgetRequest{})
	g.value(nodeView{})
	cases := []struct {
		component, want string
	}{
		// Without omitempty a field is required; a pointer without omitempty may be null
		// (a reference through allOf); embedded fields are promoted; "-" and unexported
		// fields are left out.
		{"WidgetRequest", `{"type":"object","properties":{"Plain":{"type":"boolean"},"count":{"type":"integer"},` +
			`"inner":{"type":"string"},"labels":{"type":"object","additionalProperties":{"type":"string"}},` +
			`"leaf":{"allOf":[{"$ref":"#/components/schemas/Leaf"}],"nullable":true},"name":{"type":"string"},` +
			`"note":{"type":"string","nullable":true}},"required":["Plain","inner","leaf","name","note"]}`},
		{"Leaf", `{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`},
		// A recursive type refers to itself.
		{"Node", `{"type":"object","properties":{"children":{"type":"array","items":{"$ref":"#/components/schemas/Node"}},` +
			`"name":{"type":"string"},"parent":{"allOf":[{"$ref":"#/components/schemas/Node"}],"nullable":true}},"required":["name","parent"]}`},
	}
	for _, tc := range cases {
		if got := asJSON(t, g.components[tc.component]); got != tc.want {
			t.Errorf("%s: %s\nwant %s", tc.component, got, tc.want)
		}
	}
	if len(g.components) != 3 || len(g.errs) > 0 {
		t.Errorf("components %v, errors %v", g.components, g.errs)
	}
}

type clashView struct{}

type clash struct{}

func TestComponentNames(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want string
	}{{leafView{}, "Leaf"}, {widgetRequest{}, "WidgetRequest"}, {embedded{}, "Embedded"}} {
		if got := componentName(reflect.TypeOf(tc.v)); got != tc.want {
			t.Errorf("component of %T: %s, want %s", tc.v, got, tc.want)
		}
	}
	g := newSchemaSet()
	g.value(clashView{})
	g.value(clash{})
	if len(g.errs) != 1 || !strings.Contains(g.errs[0].Error(), "both map to component Clash") {
		t.Errorf("errors %v", g.errs)
	}
}

func TestNullable(t *testing.T) {
	s := String()
	if got := asJSON(t, Nullable(s)); got != `{"type":"string","nullable":true}` {
		t.Errorf("nullable string: %s", got)
	}
	if s.Nullable {
		t.Error("Nullable changed its argument")
	}
	if got := asJSON(t, Nullable(Ref("Agent"))); got != `{"allOf":[{"$ref":"#/components/schemas/Agent"}],"nullable":true}` {
		t.Errorf("nullable reference: %s", got)
	}
}

func TestRequestBodies(t *testing.T) {
	g := newSchemaSet()
	ref := g.request(widgetRequest{}, []string{"leaf", "note"}, map[string]*Schema{
		"name":  {Description: "The name.", MaxLength: Ptr(10)},
		"count": {Minimum: Ptr[int64](1), Enum: []string{"1"}},
	})
	if got := asJSON(t, ref); got != `{"$ref":"#/components/schemas/WidgetRequest"}` {
		t.Errorf("reference %s", got)
	}
	c := g.components["WidgetRequest"]
	// Only the fields the handler insists on are required, and they may not be null.
	want := map[string]string{
		"leaf":  `{"$ref":"#/components/schemas/Leaf"}`,
		"note":  `{"type":"string"}`,
		"name":  `{"type":"string","description":"The name.","maxLength":10}`,
		"count": `{"type":"integer","enum":["1"],"minimum":1}`,
	}
	for name, w := range want {
		if got := asJSON(t, c.Properties[name]); got != w {
			t.Errorf("%s: %s, want %s", name, got, w)
		}
	}
	if asJSON(t, c.Required) != `["leaf","note"]` {
		t.Errorf("required %v", c.Required)
	}
	// A second description of the same type must require the same fields; its fields do not count.
	g.request(widgetRequest{}, []string{"leaf", "note"}, map[string]*Schema{"name": {Description: "ignored"}})
	if c.Properties["name"].Description != "The name." || len(g.errs) > 0 {
		t.Errorf("second description: %q, errors %v", c.Properties["name"].Description, g.errs)
	}
	g.request(widgetRequest{}, []string{"name"}, nil)
	g.request(leafView{}, []string{"missing"}, map[string]*Schema{"other": {}})
	g.request(map[string]string{}, nil, nil)
	wantErrs := []string{"described with required [leaf note] and [name]", `has no field "missing"`, `has no field "other"`, "is not a named struct"}
	if len(g.errs) != len(wantErrs) {
		t.Fatalf("errors %v, want %d", g.errs, len(wantErrs))
	}
	for i, w := range wantErrs {
		if !strings.Contains(g.errs[i].Error(), w) {
			t.Errorf("error %d: %v, want %q", i, g.errs[i], w)
		}
	}
	// A *Schema body is used as it is.
	if s := Describe(String(), "raw"); g.request(s, nil, nil) != s {
		t.Error("a *Schema body must be used as it is")
	}
}
