package apiserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The facade documents itself: every route registered in routes() has an op (in the
// openapi_ops_*.go files) naming its request type, its answers and the error strings its
// handler can write. OpenAPIDocument turns the registered routes and their ops into the
// OpenAPI 3.0 document that hack/gendocs writes to docs/openapi.json and
// apiserver/openapi/openapi.json (embedded, served at GET /openapi.json); RoutesMarkdown
// turns them into the README's route table. Tests fail when a route has no op, an op no
// route, or a generated file differs from what the generator makes.

// OpenAPIVersion is the OpenAPI version of the document.
const OpenAPIVersion = "3.0.3"

// APIVersion is the version of the interface the document describes.
const APIVersion = "1.0.0"

// op describes one operation: what its handler reads and what it answers.
type op struct {
	id, tag, summary, description string
	// query parameters.
	query []*parameter
	// body is the JSON request body: a request struct value (reflected) or a *schema.
	body any
	// required fields of body and documentation of some fields.
	required []string
	fields   map[string]*schema
	// optionalBody: an empty body is accepted.
	optionalBody bool
	// multipart is a multipart/form-data body (instead of body).
	multipart *schema
	// tooLarge is the 413 message of an oversized body (msgBodyTooLarge when "").
	tooLarge string
	// replies are the success answers; fails the error answers the handler itself writes.
	replies []reply
	fails   []fail
}

// reply is a success answer.
type reply struct {
	status int
	desc   string
	body   any
	// also are further media types of the answer (text/event-stream), by media type.
	also map[string]*schema
}

// fail is an error answer: its status, the exact strings, and (/v0) extra top-level fields.
type fail struct {
	status int
	msgs   []string
	extra  props
}

func answer(status int, desc string, body any) reply {
	return reply{status: status, desc: desc, body: body}
}
func fails(status int, msgs ...string) fail { return fail{status: status, msgs: msgs} }

// v3data wraps a /v3 success body in the hosted API's {"data": ...} envelope.
func v3data(body any) props { return props{"data": body} }

// notFoundAgent is the answer of every route that reads an agent of the caller.
var notFoundAgent = fails(http.StatusNotFound, msgAgentNotFound)

// contractMessages are the error strings the interface contract fixes.
var contractMessages = []string{
	msgMissingUserID, msgAgentLimit, msgStorageMissing, msgSyncFailed, msgSnapshotNotFound,
	msgInvalidSnapshotCID, msgUnsupportedChannel, msgChannelConfigFailed, msgChannelRemoveFailed,
	msgInvalidCommand, msgExecFailed, msgInvalidJSON, msgValidationFailed, msgReadConfigFailed,
	msgWriteConfigFailed, msgInvalidVersion, msgRestartFailed, msgScriptLaunch, msgFileTooLarge,
	msgCLIError, msgTokenGenFailed, msgSecretsNotConfigured, msgDuplicateSecret,
	msgConflictingSecrets, msgInvalidParameters, msgCreateCronFailed, msgListCronFailed,
	msgGatewayFailed,
}

// operations are every documented operation by "METHOD /path".
func operations() (map[string]*op, error) {
	out := map[string]*op{}
	var errs []error
	for _, group := range []map[string]*op{metaOps(), agentOps(), engineOps(), secretOps(), fileOps(), domainOps(), snapshotOps(), skillOps(), channelOps()} {
		for key, o := range group {
			if _, dup := out[key]; dup {
				errs = append(errs, fmt.Errorf("openapi: %s is described twice", key))
			}
			out[key] = o
		}
	}
	return out, errors.Join(errs...)
}

// routeKey is how ops are keyed: "GET /v0/agents".
func routeKey(r RouteInfo) string { return r.Method + " " + r.Path }

// matchOps pairs every route with its op; a route without one or an op without a route is
// an error.
func matchOps(routes []RouteInfo) ([]*op, error) {
	ops, err := operations()
	if err != nil {
		return nil, err
	}
	var errs []error
	out := make([]*op, len(routes))
	seen := map[string]bool{}
	for i, r := range routes {
		key := routeKey(r)
		if out[i] = ops[key]; out[i] == nil {
			errs = append(errs, fmt.Errorf("openapi: route %s has no description (add it to an openapi_ops_*.go file)", key))
		}
		seen[key] = true
	}
	for key := range ops {
		if !seen[key] {
			errs = append(errs, fmt.Errorf("openapi: %s is described but not registered", key))
		}
	}
	return out, errors.Join(errs...)
}

// allFails are the error answers of route r: its handler's, then those every route of its
// kind can give (authentication, body limit, dependencies), merged by status.
func allFails(r RouteInfo, o *op) []fail {
	list := slices.Clone(o.fails)
	if o.body != nil || o.multipart != nil {
		msg := o.tooLarge
		if msg == "" {
			msg = msgBodyTooLarge
		}
		list = append(list, fails(http.StatusRequestEntityTooLarge, msg))
	}
	if !r.Public {
		unauth := []string{msgUnauthorized, "Invalid token", "Token expired", "Token revoked", "Token does not belong to this workspace"}
		if !isV3(r.Path) {
			unauth = append(unauth, msgMissingUserID)
		}
		forbidden := []string{msgForbidden}
		if r.Scope != "" {
			forbidden = append([]string{"Missing scope " + r.Scope}, forbidden...)
		}
		list = append(list, fail{status: http.StatusUnauthorized, msgs: unauth}, fail{status: http.StatusForbidden, msgs: forbidden},
			fails(http.StatusTooManyRequests, msgTooManyRequests),
			fails(http.StatusInternalServerError, msgInternal), fails(http.StatusServiceUnavailable, msgUnavailable))
	}
	var merged []fail
	for _, f := range list {
		i := slices.IndexFunc(merged, func(m fail) bool { return m.status == f.status })
		if i < 0 {
			merged = append(merged, fail{status: f.status, extra: props{}})
			i = len(merged) - 1
		}
		for _, m := range f.msgs {
			if !slices.Contains(merged[i].msgs, m) {
				merged[i].msgs = append(merged[i].msgs, m)
			}
		}
		for k, v := range f.extra {
			merged[i].extra[k] = v
		}
	}
	slices.SortStableFunc(merged, func(a, b fail) int { return a.status - b.status })
	return merged
}

// generic reports whether msg is one every route of its kind can answer (not the handler's).
func generic(status int, msg string) bool {
	switch status {
	case http.StatusUnauthorized:
		return true
	case http.StatusForbidden:
		return msg == msgForbidden || strings.HasPrefix(msg, "Missing scope ")
	case http.StatusTooManyRequests:
		return true
	case http.StatusInternalServerError:
		return msg == msgInternal
	case http.StatusServiceUnavailable:
		return msg == msgUnavailable
	}
	return false
}

// pathParams are the {wildcards} of a pattern's path.
var pathParams = regexp.MustCompile(`\{([A-Za-z0-9_]+)\}`)

// OpenAPIDocument is the OpenAPI document of routes (normally Server.Routes()), as indented
// JSON ending in a newline. It fails when a route has no description or a description no
// route.
func OpenAPIDocument(routes []RouteInfo) ([]byte, error) {
	ops, err := matchOps(routes)
	if err != nil {
		return nil, err
	}
	g := newSchemaSet()
	paths := map[string]map[string]*operation{}
	ids := map[string]string{}
	var errs []error
	for i, r := range routes {
		o := ops[i]
		if prev, dup := ids[o.id]; dup {
			errs = append(errs, fmt.Errorf("openapi: operationId %s of %s is also %s's", o.id, routeKey(r), prev))
		}
		ids[o.id] = routeKey(r)
		if paths[r.Path] == nil {
			paths[r.Path] = map[string]*operation{}
		}
		paths[r.Path][strings.ToLower(r.Method)] = g.operation(r, o)
	}
	errs = append(errs, g.errs...)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	doc := map[string]any{
		"openapi":    OpenAPIVersion,
		"info":       docInfo(),
		"servers":    []map[string]string{{"url": "http://127.0.0.1:8080", "description": "`agentplane dev` (the manager serves on :8080 too)"}},
		"tags":       docTags,
		"paths":      paths,
		"components": components(g),
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// operation is an OpenAPI Operation Object.
type operation struct {
	OperationID string                  `json:"operationId"`
	Summary     string                  `json:"summary"`
	Description string                  `json:"description,omitempty"`
	Tags        []string                `json:"tags"`
	Parameters  []*parameter            `json:"parameters,omitempty"`
	RequestBody *requestBody            `json:"requestBody,omitempty"`
	Responses   map[string]*docResponse `json:"responses"`
	Security    []map[string][]string   `json:"security"`
	Access      accessDoc               `json:"x-agentplane-access"`
}

// accessDoc is what a route requires, as the route table declares it.
type accessDoc struct {
	Public       bool   `json:"public,omitempty"`
	Scope        string `json:"scope,omitempty"`
	Permission   string `json:"permission,omitempty"`
	GatewayToken bool   `json:"gatewayToken,omitempty"`
}

// parameter is a Parameter Object, or a reference to one.
type parameter struct {
	Ref         string  `json:"$ref,omitempty"`
	Name        string  `json:"name,omitempty"`
	In          string  `json:"in,omitempty"`
	Description string  `json:"description,omitempty"`
	Required    bool    `json:"required,omitempty"`
	Style       string  `json:"style,omitempty"`
	Explode     *bool   `json:"explode,omitempty"`
	Schema      *schema `json:"schema,omitempty"`
}

type requestBody struct {
	Description string               `json:"description,omitempty"`
	Required    bool                 `json:"required"`
	Content     map[string]mediaType `json:"content"`
}

type mediaType struct {
	Schema   *schema               `json:"schema"`
	Examples map[string]docExample `json:"examples,omitempty"`
}

type docExample struct {
	Summary string `json:"summary,omitempty"`
	Value   any    `json:"value"`
}

type docResponse struct {
	Ref         string               `json:"$ref,omitempty"`
	Description string               `json:"description,omitempty"`
	Headers     map[string]docRef    `json:"headers,omitempty"`
	Content     map[string]mediaType `json:"content,omitempty"`
}

type docRef struct {
	Ref string `json:"$ref"`
}

// responseHeaders are on every answer of the facade.
var responseHeaders = map[string]docRef{
	headerRequestID:             {Ref: "#/components/headers/" + headerRequestID},
	"Strict-Transport-Security": {Ref: "#/components/headers/Strict-Transport-Security"},
}

// query is a query parameter.
func queryParam(name, description string, s *schema) *parameter {
	return &parameter{Name: name, In: "query", Description: description, Schema: s}
}

// waitParam is the ?wait=false of the routes that otherwise wait for a controller.
var waitParam = queryParam("wait", "`false` answers 202 at once instead of waiting for the controller.", enumOf("true", "false"))

func (g *schemaSet) operation(r RouteInfo, o *op) *operation {
	out := &operation{
		OperationID: o.id, Summary: o.summary, Description: o.description, Tags: []string{o.tag},
		Responses: map[string]*docResponse{}, Security: []map[string][]string{}, Access: accessOf(r),
	}
	for _, m := range pathParams.FindAllStringSubmatch(r.Path, -1) {
		out.Parameters = append(out.Parameters, g.pathParam(m[1]))
	}
	out.Parameters = append(out.Parameters, o.query...)
	if !r.Public {
		out.Parameters = append(out.Parameters, &parameter{Ref: "#/components/parameters/Workspace"})
		out.Security = append(out.Security, map[string][]string{"bearerAuth": {}})
		if r.Gateway {
			out.Security = append(out.Security, map[string][]string{"gatewayToken": {}})
		}
	}
	switch {
	case o.multipart != nil:
		out.RequestBody = &requestBody{Required: true, Content: map[string]mediaType{"multipart/form-data": {Schema: o.multipart}}}
	case o.body != nil:
		out.RequestBody = &requestBody{Required: !o.optionalBody, Content: map[string]mediaType{
			"application/json": {Schema: g.request(o.body, o.required, o.fields)},
		}}
		if o.optionalBody {
			out.RequestBody.Description = "Optional: an empty body is accepted."
		}
	}
	for _, rep := range o.replies {
		resp := &docResponse{Description: rep.desc, Headers: responseHeaders}
		resp.Content = map[string]mediaType{"application/json": {Schema: g.value(rep.body)}}
		for mt, sc := range rep.also {
			resp.Content[mt] = mediaType{Schema: sc}
		}
		out.Responses[strconv.Itoa(rep.status)] = resp
	}
	for _, f := range allFails(r, o) {
		if name := sharedResponse(r, f); name != "" {
			out.Responses[strconv.Itoa(f.status)] = &docResponse{Ref: "#/components/responses/" + name}
			g.responses[name] = g.errorResponse(r, f)
			continue
		}
		out.Responses[strconv.Itoa(f.status)] = g.errorResponse(r, f)
	}
	return out
}

// sharedResponse names the component an error answer is shared as: the 401 of each API
// family, and the 500 and 503 that carry only the generic string. "" when f is the route's own.
func sharedResponse(r RouteInfo, f fail) string {
	family := "V0"
	if isV3(r.Path) {
		family = "V3"
	}
	switch {
	case f.status == http.StatusUnauthorized:
		return "Unauthorized" + family
	case len(f.msgs) == 1 && f.status == http.StatusInternalServerError && f.msgs[0] == msgInternal:
		return "InternalError" + family
	case len(f.msgs) == 1 && f.status == http.StatusServiceUnavailable && f.msgs[0] == msgUnavailable:
		return "Unavailable" + family
	}
	return ""
}

// accessOf documents r's access.
func accessOf(r RouteInfo) accessDoc {
	if r.Public {
		return accessDoc{Public: true}
	}
	return accessDoc{Scope: r.Scope, Permission: PermissionName(r.Permission), GatewayToken: r.Gateway}
}

// errorResponse is the error envelope of r's family with f's strings as examples.
func (g *schemaSet) errorResponse(r RouteInfo, f fail) *docResponse {
	var desc strings.Builder
	desc.WriteString(http.StatusText(f.status) + ". Error strings:\n")
	examples := map[string]docExample{}
	for _, m := range f.msgs {
		note := ""
		if slices.Contains(contractMessages, m) {
			note = " (fixed by the interface contract)"
		}
		fmt.Fprintf(&desc, "\n- `%s`%s", m, note)
		var value any = map[string]any{"error": m}
		if isV3(r.Path) {
			value = map[string]any{"error": map[string]any{"code": f.status, "message": m}}
		}
		examples[exampleKey(m)] = docExample{Summary: m, Value: value}
	}
	var s *schema
	switch {
	case isV3(r.Path):
		s = &schema{Ref: "#/components/schemas/ErrorV3"}
	case len(f.extra) > 0:
		extra := &schema{Type: "object", Properties: map[string]*schema{}}
		for k, v := range f.extra {
			extra.Properties[k] = g.value(v)
		}
		s = &schema{AllOf: []*schema{{Ref: "#/components/schemas/ErrorV0"}, extra}}
	default:
		s = &schema{Ref: "#/components/schemas/ErrorV0"}
	}
	return &docResponse{Description: desc.String(), Headers: responseHeaders, Content: map[string]mediaType{
		"application/json": {Schema: s, Examples: examples},
	}}
}

// exampleKey turns an error string into an example name.
func exampleKey(msg string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(msg) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "-"):
			b.WriteByte('-')
		}
	}
	return strings.TrimSuffix(b.String(), "-")
}
