package openapi

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"
	"unicode"
)

// Schema is an OpenAPI 3.0 Schema Object: the subset the facade's document uses. A $ref has
// no siblings (3.0 ignores them); nullable references go through allOf.
type Schema struct {
	Ref                  string             `json:"$ref,omitempty"`
	AllOf                []*Schema          `json:"allOf,omitempty"`
	Type                 string             `json:"type,omitempty"`
	Format               string             `json:"format,omitempty"`
	Description          string             `json:"description,omitempty"`
	Nullable             bool               `json:"nullable,omitempty"`
	Enum                 []string           `json:"enum,omitempty"`
	Minimum              *int64             `json:"minimum,omitempty"`
	Maximum              *int64             `json:"maximum,omitempty"`
	MaxLength            *int               `json:"maxLength,omitempty"`
	MaxItems             *int               `json:"maxItems,omitempty"`
	Items                *Schema            `json:"items,omitempty"`
	Properties           map[string]*Schema `json:"properties,omitempty"`
	Required             []string           `json:"required,omitempty"`
	AdditionalProperties any                `json:"additionalProperties,omitempty"`
}

// String is the schema of a string.
func String() *Schema { return &Schema{Type: "string"} }

// Bool is the schema of a boolean.
func Bool() *Schema { return &Schema{Type: "boolean"} }

// Integer is the schema of an integer (of no particular size).
func Integer() *Schema { return &Schema{Type: "integer"} }

// AnyObject is the schema of a JSON object with any members.
func AnyObject() *Schema { return &Schema{Type: "object", AdditionalProperties: true} }

// ArrayOf is the schema of an array of s.
func ArrayOf(s *Schema) *Schema { return &Schema{Type: "array", Items: s} }

// EnumOf is the schema of a string that is one of values.
func EnumOf(values ...string) *Schema { return &Schema{Type: "string", Enum: values} }

// Ptr returns a pointer to v (for Minimum, MaxLength and the like).
func Ptr[T any](v T) *T { return &v }

// Describe sets s's description and returns s.
func Describe(s *Schema, description string) *Schema { s.Description = description; return s }

// Nullable is s, possibly null: a copy with nullable set, or a reference through allOf.
func Nullable(s *Schema) *Schema {
	if s.Ref != "" {
		return &Schema{AllOf: []*Schema{s}, Nullable: true}
	}
	c := *s
	c.Nullable = true
	return &c
}

// Ref refers to the component schema name.
func Ref(name string) *Schema { return &Schema{Ref: "#/components/schemas/" + name} }

// Props is the shape of a JSON object a handler builds as a map literal: property names and
// their values, each a Go value (whose type is reflected) or a *Schema. Every property is
// present in the answer, so every one is required.
type Props map[string]any

// schemaSet reflects Go types into the document's components.schemas: a named struct type
// becomes a component named after it (`agentView` → `Agent`, `createAgentRequest` →
// `CreateAgentRequest`); everything else is inlined.
type schemaSet struct {
	components map[string]*Schema
	// responses are the error answers many operations share (components.responses).
	responses map[string]*response
	byType    map[reflect.Type]string
	// requests are the request components documented so far, with their required fields.
	requests map[string][]string
	errs     []error
}

func newSchemaSet() *schemaSet {
	return &schemaSet{components: map[string]*Schema{}, responses: map[string]*response{}, byType: map[reflect.Type]string{}, requests: map[string][]string{}}
}

// value is the schema of v: a *Schema as it is, Props as an object, nil as null, any other
// Go value by its type.
func (g *schemaSet) value(v any) *Schema {
	switch v := v.(type) {
	case *Schema:
		return v
	case Props:
		out := &Schema{Type: "object", Properties: map[string]*Schema{}}
		for name, pv := range v {
			out.Properties[name] = g.value(pv)
			out.Required = append(out.Required, name)
		}
		slices.Sort(out.Required)
		return out
	case nil:
		return &Schema{Type: "object", Nullable: true, Description: "Always null."}
	}
	return g.typ(reflect.TypeOf(v))
}

var (
	timeType = reflect.TypeOf(time.Time{})
	rawType  = reflect.TypeOf(json.RawMessage(nil))
)

// typ is the schema of t as encoding/json writes it.
func (g *schemaSet) typ(t reflect.Type) *Schema {
	switch {
	case t == timeType:
		return &Schema{Type: "string", Format: "date-time"}
	case t == rawType:
		// A raw field holds an embedded document (the facade's only one is an engine
		// config): a JSON object.
		return AnyObject()
	}
	switch t.Kind() {
	case reflect.Pointer:
		return g.typ(t.Elem())
	case reflect.String:
		return String()
	case reflect.Bool:
		return Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32:
		return Integer()
	case reflect.Int32:
		return &Schema{Type: "integer", Format: "int32"}
	case reflect.Int64, reflect.Uint64:
		return &Schema{Type: "integer", Format: "int64"}
	case reflect.Float32, reflect.Float64:
		return &Schema{Type: "number"}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return &Schema{Type: "string", Format: "byte"}
		}
		return ArrayOf(g.typ(t.Elem()))
	case reflect.Map:
		if t.Elem().Kind() == reflect.Interface {
			return AnyObject()
		}
		return &Schema{Type: "object", AdditionalProperties: g.typ(t.Elem())}
	case reflect.Interface:
		return &Schema{Description: "any JSON value"}
	case reflect.Struct:
		return g.component(t)
	}
	g.errs = append(g.errs, fmt.Errorf("openapi: no schema for Go type %s", t))
	return &Schema{}
}

// componentName is the component a named struct type is documented as: its name without a
// View suffix, capitalised.
func componentName(t reflect.Type) string {
	name := strings.TrimSuffix(t.Name(), "View")
	r := []rune(name)
	r[0] = unicode.ToUpper(r[0])
	return string(r)
}

// component registers the struct type t once and refers to it.
func (g *schemaSet) component(t reflect.Type) *Schema {
	if t.Name() == "" {
		return g.structSchema(t)
	}
	name := componentName(t)
	if _, ok := g.components[name]; ok {
		if g.byType[t] != name {
			g.errs = append(g.errs, fmt.Errorf("openapi: %s and another type both map to component %s", t, name))
		}
		return Ref(name)
	}
	g.byType[t] = name
	g.components[name] = &Schema{} // placeholder: recursive types refer to it
	*g.components[name] = *g.structSchema(t)
	return Ref(name)
}

// structSchema is an object with t's JSON fields. A field without omitempty is always
// written, so it is required; a pointer field without omitempty may be null.
func (g *schemaSet) structSchema(t reflect.Type) *Schema {
	out := &Schema{Type: "object", Properties: map[string]*Schema{}}
	g.addFields(out, t)
	slices.Sort(out.Required)
	return out
}

func (g *schemaSet) addFields(out *Schema, t reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			g.addFields(out, f.Type)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		s := g.typ(f.Type)
		omitempty := slices.Contains(strings.Split(opts, ","), "omitempty")
		if f.Type.Kind() == reflect.Pointer && !omitempty {
			s = Nullable(s)
		}
		out.Properties[name] = s
		if !omitempty {
			out.Required = append(out.Required, name)
		}
	}
}

// request registers a request body type: required names the fields the handler insists on
// (decoding alone requires none) and fields documents some of them. A type several operations
// read must be required alike; the first description's fields are the component's.
func (g *schemaSet) request(v any, required []string, fields map[string]*Schema) *Schema {
	if s, ok := v.(*Schema); ok {
		return s
	}
	t := reflect.TypeOf(v)
	ref := g.typ(t)
	if ref.Ref == "" {
		g.errs = append(g.errs, fmt.Errorf("openapi: request body %s is not a named struct", t))
		return ref
	}
	name := strings.TrimPrefix(ref.Ref, "#/components/schemas/")
	c := g.components[name]
	if prev, seen := g.requests[name]; seen {
		if !slices.Equal(prev, required) {
			g.errs = append(g.errs, fmt.Errorf("openapi: request %s is described with required %v and %v", t, prev, required))
		}
		return ref
	}
	g.requests[name] = required
	c.Required = nil
	for _, name := range required {
		p, ok := c.Properties[name]
		if !ok {
			g.errs = append(g.errs, fmt.Errorf("openapi: %s has no field %q", t, name))
			continue
		}
		// A required field may not be null either.
		if len(p.AllOf) == 1 && p.Nullable {
			p = p.AllOf[0]
		} else if p.Nullable {
			cp := *p
			cp.Nullable = false
			p = &cp
		}
		c.Properties[name] = p
		c.Required = append(c.Required, name)
	}
	for name, doc := range fields {
		p, ok := c.Properties[name]
		if !ok {
			g.errs = append(g.errs, fmt.Errorf("openapi: %s has no field %q", t, name))
			continue
		}
		merged := *p
		if doc.Description != "" {
			merged.Description = doc.Description
		}
		if doc.Enum != nil {
			merged.Enum = doc.Enum
		}
		merged.Minimum, merged.Maximum, merged.MaxLength, merged.MaxItems = doc.Minimum, doc.Maximum, doc.MaxLength, doc.MaxItems
		c.Properties[name] = &merged
	}
	return ref
}
