package apiserver

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"
	"unicode"
)

// schema is an OpenAPI 3.0 Schema Object: the subset the facade's document uses. A $ref has
// no siblings (3.0 ignores them); nullable references go through allOf.
type schema struct {
	Ref                  string             `json:"$ref,omitempty"`
	AllOf                []*schema          `json:"allOf,omitempty"`
	Type                 string             `json:"type,omitempty"`
	Format               string             `json:"format,omitempty"`
	Description          string             `json:"description,omitempty"`
	Nullable             bool               `json:"nullable,omitempty"`
	Enum                 []string           `json:"enum,omitempty"`
	Minimum              *int64             `json:"minimum,omitempty"`
	Maximum              *int64             `json:"maximum,omitempty"`
	MaxLength            *int               `json:"maxLength,omitempty"`
	MaxItems             *int               `json:"maxItems,omitempty"`
	Items                *schema            `json:"items,omitempty"`
	Properties           map[string]*schema `json:"properties,omitempty"`
	Required             []string           `json:"required,omitempty"`
	AdditionalProperties any                `json:"additionalProperties,omitempty"`
}

// Schemas of the scalar shapes the descriptions use directly.
func docString() *schema              { return &schema{Type: "string"} }
func docBool() *schema                { return &schema{Type: "boolean"} }
func docInteger() *schema             { return &schema{Type: "integer"} }
func anyObject() *schema              { return &schema{Type: "object", AdditionalProperties: true} }
func arrayOf(s *schema) *schema       { return &schema{Type: "array", Items: s} }
func enumOf(values ...string) *schema { return &schema{Type: "string", Enum: values} }
func docPtr[T any](v T) *T            { return &v }

// describe returns s with a description.
func describe(s *schema, description string) *schema { s.Description = description; return s }

// props is the shape of a JSON object a handler builds as a map literal: property names and
// their values, each a Go value (whose type is reflected) or a *schema. Every property is
// present in the answer.
type props map[string]any

// schemaSet reflects Go types into the document's components.schemas: a named struct type
// becomes a component named after it (`agentView` → `Agent`, `createAgentRequest` →
// `CreateAgentRequest`); everything else is inlined.
type schemaSet struct {
	components map[string]*schema
	// responses are the error answers many operations share (components.responses).
	responses map[string]*docResponse
	byType    map[reflect.Type]string
	// requests are the request components documented so far, with their required fields.
	requests map[string][]string
	errs     []error
}

func newSchemaSet() *schemaSet {
	return &schemaSet{components: map[string]*schema{}, responses: map[string]*docResponse{}, byType: map[reflect.Type]string{}, requests: map[string][]string{}}
}

// value is the schema of v: a *schema as it is, props as an object, any other Go value by
// its type.
func (g *schemaSet) value(v any) *schema {
	switch v := v.(type) {
	case *schema:
		return v
	case props:
		out := &schema{Type: "object", Properties: map[string]*schema{}}
		for name, pv := range v {
			out.Properties[name] = g.value(pv)
			out.Required = append(out.Required, name)
		}
		slices.Sort(out.Required)
		return out
	case nil:
		return &schema{Type: "object", Nullable: true, Description: "Always null."}
	}
	return g.typ(reflect.TypeOf(v))
}

var (
	docTimeType = reflect.TypeOf(time.Time{})
	docRawType  = reflect.TypeOf(json.RawMessage(nil))
)

// typ is the schema of t as encoding/json writes it.
func (g *schemaSet) typ(t reflect.Type) *schema {
	switch {
	case t == docTimeType:
		return &schema{Type: "string", Format: "date-time"}
	case t == docRawType:
		// The facade's only raw field is an engine config: a JSON object.
		return anyObject()
	}
	switch t.Kind() {
	case reflect.Pointer:
		return g.typ(t.Elem())
	case reflect.String:
		return docString()
	case reflect.Bool:
		return docBool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32:
		return docInteger()
	case reflect.Int32:
		return &schema{Type: "integer", Format: "int32"}
	case reflect.Int64, reflect.Uint64:
		return &schema{Type: "integer", Format: "int64"}
	case reflect.Float32, reflect.Float64:
		return &schema{Type: "number"}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return &schema{Type: "string", Format: "byte"}
		}
		return arrayOf(g.typ(t.Elem()))
	case reflect.Map:
		if t.Elem().Kind() == reflect.Interface {
			return anyObject()
		}
		return &schema{Type: "object", AdditionalProperties: g.typ(t.Elem())}
	case reflect.Interface:
		return &schema{Description: "any JSON value"}
	case reflect.Struct:
		return g.component(t)
	}
	g.errs = append(g.errs, fmt.Errorf("openapi: no schema for Go type %s", t))
	return &schema{}
}

// componentName is the component a named struct type is documented as.
func componentName(t reflect.Type) string {
	name := strings.TrimSuffix(t.Name(), "View")
	r := []rune(name)
	r[0] = unicode.ToUpper(r[0])
	return string(r)
}

// component registers the struct type t once and refers to it.
func (g *schemaSet) component(t reflect.Type) *schema {
	if t.Name() == "" {
		return g.structSchema(t)
	}
	name := componentName(t)
	if _, ok := g.components[name]; ok {
		if g.byType[t] != name {
			g.errs = append(g.errs, fmt.Errorf("openapi: %s and another type both map to component %s", t, name))
		}
		return &schema{Ref: "#/components/schemas/" + name}
	}
	g.byType[t] = name
	g.components[name] = &schema{} // placeholder: recursive types refer to it
	*g.components[name] = *g.structSchema(t)
	return &schema{Ref: "#/components/schemas/" + name}
}

// structSchema is an object with t's JSON fields. A field without omitempty is always
// written, so it is required; a pointer field without omitempty may be null.
func (g *schemaSet) structSchema(t reflect.Type) *schema {
	out := &schema{Type: "object", Properties: map[string]*schema{}}
	g.addFields(out, t)
	slices.Sort(out.Required)
	return out
}

func (g *schemaSet) addFields(out *schema, t reflect.Type) {
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
			s = docNullable(s)
		}
		out.Properties[name] = s
		if !omitempty {
			out.Required = append(out.Required, name)
		}
	}
}

// nullable marks s as possibly null (a reference through allOf).
func docNullable(s *schema) *schema {
	if s.Ref != "" {
		return &schema{AllOf: []*schema{s}, Nullable: true}
	}
	c := *s
	c.Nullable = true
	return &c
}

// request registers a request body type: required names the fields the handler insists on
// (decoding alone requires none) and fields documents some of them. A type several operations
// read must be required alike; the first description's fields are the component's.
func (g *schemaSet) request(v any, required []string, fields map[string]*schema) *schema {
	if s, ok := v.(*schema); ok {
		return s
	}
	t := reflect.TypeOf(v)
	ref := g.typ(t)
	c := g.components[componentName(t)]
	if ref.Ref == "" || c == nil {
		g.errs = append(g.errs, fmt.Errorf("openapi: request body %s is not a named struct", t))
		return ref
	}
	if prev, seen := g.requests[componentName(t)]; seen {
		if !slices.Equal(prev, required) {
			g.errs = append(g.errs, fmt.Errorf("openapi: request %s is described with required %v and %v", t, prev, required))
		}
		return ref
	}
	g.requests[componentName(t)] = required
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
