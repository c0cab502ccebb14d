package openapi

// The description of routes (Route, Operation, Reply, Fail) and the OpenAPI 3.0 objects the
// document is made of.

// Route is one route as the document describes it: its pattern and what it requires of its
// caller.
type Route struct {
	// Method is the pattern's HTTP method.
	Method string
	// Path is the pattern's path, with its {wildcards}.
	Path string
	// Scope is the scope the token must carry ("" for none).
	Scope string
	// Permission names what the caller's role must allow (unused on public routes).
	Permission string
	// Gateway routes also accept the API's gateway scheme.
	Gateway bool
	// Public routes need no token.
	Public bool
}

// Key is how operations are keyed: "GET /v0/agents".
func (r Route) Key() string { return r.Method + " " + r.Path }

// Operation describes one operation: what its handler reads and what it answers.
type Operation struct {
	ID, Tag, Summary, Description string
	// Query are the query parameters.
	Query []*Parameter
	// Body is the JSON request body: a request struct value (reflected) or a *Schema.
	Body any
	// Required are the fields of Body the handler insists on; Fields document some fields
	// (description, enum and bounds).
	Required []string
	Fields   map[string]*Schema
	// OptionalBody: an empty body is accepted.
	OptionalBody bool
	// Multipart is a multipart/form-data body (instead of Body).
	Multipart *Schema
	// TooLarge is the message of an oversized body (the API's CommonFails decides the default).
	TooLarge string
	// Replies are the success answers; Fails the error answers the handler itself writes.
	Replies []Reply
	Fails   []Fail
}

// HasBody reports whether the operation reads a request body.
func (o *Operation) HasBody() bool { return o.Body != nil || o.Multipart != nil }

// Reply is a success answer.
type Reply struct {
	Status int
	Desc   string
	// Body is the JSON body: a Go value (reflected), Props, a *Schema, or nil for null.
	Body any
	// Also are further media types of the answer (text/event-stream), by media type.
	Also map[string]*Schema
}

// Fail is an error answer: its status, the exact error strings, and extra top-level fields
// of the error envelope.
type Fail struct {
	Status int
	Msgs   []string
	Extra  Props
}

// Answer is the success answer status with a JSON body.
func Answer(status int, desc string, body any) Reply {
	return Reply{Status: status, Desc: desc, Body: body}
}

// Fails is the error answer status with the strings msgs.
func Fails(status int, msgs ...string) Fail { return Fail{Status: status, Msgs: msgs} }

// Parameter is a Parameter Object, or a reference to one.
type Parameter struct {
	Ref         string  `json:"$ref,omitempty"`
	Name        string  `json:"name,omitempty"`
	In          string  `json:"in,omitempty"`
	Description string  `json:"description,omitempty"`
	Required    bool    `json:"required,omitempty"`
	Style       string  `json:"style,omitempty"`
	Explode     *bool   `json:"explode,omitempty"`
	Schema      *Schema `json:"schema,omitempty"`
}

// QueryParam is a query parameter.
func QueryParam(name, description string, s *Schema) *Parameter {
	return &Parameter{Name: name, In: "query", Description: description, Schema: s}
}

// ParameterRef refers to the component parameter name.
func ParameterRef(name string) *Parameter {
	return &Parameter{Ref: "#/components/parameters/" + name}
}

// Info is the document's Info Object. Its fields are in the order the document writes
// them (alphabetical).
type Info struct {
	Description string   `json:"description,omitempty"`
	License     *License `json:"license,omitempty"`
	Title       string   `json:"title"`
	Version     string   `json:"version"`
}

// License is the License Object of Info.
type License struct {
	Name string `json:"name"`
	URL  string `json:"url,omitempty"`
}

// Server is a Server Object.
type Server struct {
	Description string `json:"description,omitempty"`
	URL         string `json:"url"`
}

// Tag is a Tag Object: a group of operations.
type Tag struct {
	Description string `json:"description,omitempty"`
	Name        string `json:"name"`
}

// SecurityScheme is a Security Scheme Object of type http.
type SecurityScheme struct {
	BearerFormat string `json:"bearerFormat,omitempty"`
	Description  string `json:"description,omitempty"`
	Scheme       string `json:"scheme"`
	Type         string `json:"type"`
}

// Header is a Header Object.
type Header struct {
	Description string  `json:"description,omitempty"`
	Schema      *Schema `json:"schema"`
}

// Components are the document's reusable parts the API declares; the reflected schemas and
// the shared error answers are added to them.
type Components struct {
	Headers         map[string]Header
	Parameters      map[string]*Parameter
	Schemas         map[string]*Schema
	SecuritySchemes map[string]SecurityScheme
}

// components are the document's Components Object (fields in the order it writes them).
type components struct {
	Headers         map[string]Header         `json:"headers"`
	Parameters      map[string]*Parameter     `json:"parameters"`
	Responses       map[string]*response      `json:"responses"`
	Schemas         map[string]*Schema        `json:"schemas"`
	SecuritySchemes map[string]SecurityScheme `json:"securitySchemes"`
}

// operationObject is an OpenAPI Operation Object, as the document holds it.
type operationObject struct {
	OperationID string                `json:"operationId"`
	Summary     string                `json:"summary"`
	Description string                `json:"description,omitempty"`
	Tags        []string              `json:"tags"`
	Parameters  []*Parameter          `json:"parameters,omitempty"`
	RequestBody *requestBody          `json:"requestBody,omitempty"`
	Responses   map[string]*response  `json:"responses"`
	Security    []map[string][]string `json:"security"`
	Access      access                `json:"x-agentplane-access"`
}

// access is what a route requires, as the route table declares it.
type access struct {
	Public       bool   `json:"public,omitempty"`
	Scope        string `json:"scope,omitempty"`
	Permission   string `json:"permission,omitempty"`
	GatewayToken bool   `json:"gatewayToken,omitempty"`
}

type requestBody struct {
	Description string               `json:"description,omitempty"`
	Required    bool                 `json:"required"`
	Content     map[string]mediaType `json:"content"`
}

type mediaType struct {
	Schema   *Schema            `json:"schema"`
	Examples map[string]example `json:"examples,omitempty"`
}

type example struct {
	Summary string `json:"summary,omitempty"`
	Value   any    `json:"value"`
}

// response is a Response Object, or a reference to one.
type response struct {
	Ref         string               `json:"$ref,omitempty"`
	Description string               `json:"description,omitempty"`
	Headers     map[string]ref       `json:"headers,omitempty"`
	Content     map[string]mediaType `json:"content,omitempty"`
}

type ref struct {
	Ref string `json:"$ref"`
}
