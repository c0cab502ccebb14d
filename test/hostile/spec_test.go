package hostile

import (
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/agentplane/agentplane/internal/devtools/testenv"
)

// operation is one operation of docs/openapi.json, as far as hostile input needs it.
type operation struct {
	Method, Path string
	// Params are the path parameters, in path order.
	Params []string
	// Schema is the JSON request body's schema (nil: the operation takes no JSON body).
	Schema *openapi3.Schema
	// Query are the documented query parameters: name → JSON type ("enum" for enumerations).
	Query map[string]string
	// Multipart operations take a multipart/form-data body (POST /v3/files).
	Multipart bool
	// Engine500 are the 500 messages the document lists for the operation, other than the
	// generic `Internal server error` (which always means a bug).
	Engine500 map[string]bool
}

func (o operation) String() string { return o.Method + " " + o.Path }

// v3 reports whether the operation answers errors in the /v3 envelope.
func (o operation) v3() bool { return strings.HasPrefix(o.Path, "/v3/") }

// bodyLimit is the route's request-body limit (the facade's defaults; 413 beyond).
func (o operation) bodyLimit() int64 {
	switch o.Path {
	case "/v3/files":
		return 100 << 20
	case "/v0/agents/{agentId}/files/upload":
		return (25<<20)*4/3 + 64<<10
	}
	return 1 << 20
}

var (
	paramRE = regexp.MustCompile(`\{([^}]+)\}`)
	// A listed error string in a response description: "- `message`".
	listedRE = regexp.MustCompile("(?m)^- `([^`]+)`")
)

// loadOperations reads every operation of docs/openapi.json. The order is fixed: by path and
// method, with DELETEs last and the delete of the fixture agent very last, so that real IDs
// stay real for as long as possible.
func loadOperations(tb testing.TB) []operation {
	tb.Helper()
	doc, err := openapi3.NewLoader().LoadFromFile(filepath.Join(testenv.RepoRoot(), "docs", "openapi.json"))
	if err != nil {
		tb.Fatalf("load docs/openapi.json: %v", err)
	}
	var ops []operation
	for _, path := range doc.Paths.Keys() {
		for method, op := range doc.Paths.Value(path).Operations() {
			o := operation{Method: method, Path: path, Engine500: map[string]bool{}}
			for _, m := range paramRE.FindAllStringSubmatch(path, -1) {
				o.Params = append(o.Params, m[1])
			}
			for _, p := range op.Parameters {
				if p.Value != nil && p.Value.In == "query" && p.Value.Schema != nil {
					if o.Query == nil {
						o.Query = map[string]string{}
					}
					o.Query[p.Value.Name] = schemaType(p.Value.Schema.Value)
					if len(p.Value.Schema.Value.Enum) > 0 {
						o.Query[p.Value.Name] = "enum"
					}
				}
			}
			if rb := op.RequestBody; rb != nil && rb.Value != nil {
				if mt := rb.Value.Content.Get("application/json"); mt != nil && mt.Schema != nil {
					o.Schema = mt.Schema.Value
				}
				o.Multipart = rb.Value.Content.Get("multipart/form-data") != nil
			}
			if r := op.Responses.Status(500); r != nil && r.Value != nil && r.Value.Description != nil {
				for _, m := range listedRE.FindAllStringSubmatch(*r.Value.Description, -1) {
					if m[1] != "Internal server error" {
						o.Engine500[m[1]] = true
					}
				}
			}
			ops = append(ops, o)
		}
	}
	rank := func(o operation) int {
		switch {
		case o.Method == "DELETE" && o.Path == "/v0/agents/{agentId}":
			return 2
		case o.Method == "DELETE":
			return 1
		}
		return 0
	}
	slices.SortFunc(ops, func(a, b operation) int {
		if d := rank(a) - rank(b); d != 0 {
			return d
		}
		return strings.Compare(a.String(), b.String())
	})
	if len(ops) < 50 {
		tb.Fatalf("docs/openapi.json lists only %d operations", len(ops))
	}
	return ops
}

// schemaType is a schema's JSON type ("object" when it has properties but no type).
func schemaType(s *openapi3.Schema) string {
	if s == nil {
		return "string"
	}
	if s.Type != nil && len(s.Type.Slice()) > 0 {
		return s.Type.Slice()[0]
	}
	if len(s.Properties) > 0 {
		return "object"
	}
	if len(s.AllOf) > 0 && s.AllOf[0].Value != nil {
		return schemaType(s.AllOf[0].Value)
	}
	return "string"
}

// sample is a well-typed value of s: the base that single-field mutations start from.
func sample(s *openapi3.Schema, depth int) any {
	if s != nil && len(s.Enum) > 0 {
		return s.Enum[0]
	}
	switch schemaType(s) {
	case "object":
		m := map[string]any{}
		if depth < 4 {
			for _, name := range propertyNames(s) {
				m[name] = sample(s.Properties[name].Value, depth+1)
			}
		}
		return m
	case "array":
		var item *openapi3.Schema
		if s.Items != nil {
			item = s.Items.Value
		}
		return []any{sample(item, depth+1)}
	case "integer", "number":
		return 1
	case "boolean":
		return true
	}
	if s.Format == "byte" {
		return "aG9zdGlsZQ=="
	}
	return "hostile"
}

// propertyNames are s's properties, sorted.
func propertyNames(s *openapi3.Schema) []string {
	names := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// field is a property at some depth of a request schema.
type field struct {
	path   []string
	schema *openapi3.Schema
}

// fields lists every property of s, nested objects included.
func fields(s *openapi3.Schema, prefix []string) []field {
	if schemaType(s) != "object" || len(prefix) > 3 {
		return nil
	}
	var out []field
	for _, name := range propertyNames(s) {
		p := s.Properties[name].Value
		path := append(slices.Clone(prefix), name)
		out = append(out, field{path: path, schema: p})
		out = append(out, fields(p, path)...)
	}
	return out
}

// wrongValues are JSON values that are not of type typ (or are at its edges).
func wrongValues(typ string) []string {
	switch typ {
	case "string":
		return []string{`123`, `true`, `{"a":1}`, `["x"]`, `null`, `-0.0e-0`}
	case "integer":
		return []string{`"1"`, `1.5`, `1e400`, `9223372036854775808`, `-99999999999999999999`, `true`, `[]`, `null`}
	case "number":
		return []string{`"1"`, `1e400`, `true`, `{}`}
	case "boolean":
		return []string{`"true"`, `0`, `[]`, `null`}
	case "array":
		return []string{`"x"`, `{"0":"x"}`, `[123]`, `[null,{}]`, `1`, `[[[]]]`}
	}
	return []string{`"x"`, `[]`, `1`, `null`, `{"":{"":[]}}`}
}
