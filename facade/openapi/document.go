package openapi

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

// Version is the OpenAPI version of the documents Document writes.
const Version = "3.0.3"

// API is what a document says about all its routes: its header, the components it declares
// and the conventions every route follows. Family is required; the other functions may be
// nil (no common answers, none generic, none shared, no notes).
type API struct {
	Info       Info
	Servers    []Server
	Tags       []Tag
	Components Components

	// ResponseHeaders name the component headers every answer carries.
	ResponseHeaders []string
	// TokenParameters are taken by every route that needs a token, after its path and query
	// parameters.
	TokenParameters []*Parameter
	// TokenScheme is the security scheme of the routes that need a token; GatewayScheme the
	// one their Gateway routes accept too.
	TokenScheme, GatewayScheme string
	// PathParams document the path wildcards by name; a wildcard not in it is an error.
	PathParams map[string]*Parameter

	// CommonFails are the error answers route r can give beyond its handler's (those every
	// route of its kind can: authentication, body limit, dependencies).
	CommonFails func(r Route, o *Operation) []Fail
	// Generic reports whether msg is a common answer of its status, one the route table
	// leaves out.
	Generic func(status int, msg string) bool
	// Family is the error envelope of the routes under path.
	Family func(path string) Family
	// Shared names the component responses entry an error answer of r is shared as: ""
	// when it is the route's own.
	Shared func(r Route, f Fail) string
	// Note is what an error answer's description adds after msg ("" for nothing).
	Note func(msg string) string
}

// Family is the error envelope of a family of routes.
type Family struct {
	// Envelope is the component schema of the error answers; a Fail's Extra fields join it
	// through allOf.
	Envelope string
	// Example is the body of the error answer status carrying msg.
	Example func(status int, msg string) any
}

// Collect merges groups of operations keyed by "METHOD /path"; an operation described twice is an error.
func Collect(groups ...map[string]*Operation) (map[string]*Operation, error) {
	out := map[string]*Operation{}
	var errs []error
	for _, group := range groups {
		for key, o := range group {
			if _, dup := out[key]; dup {
				errs = append(errs, fmt.Errorf("openapi: %s is described twice", key))
			}
			out[key] = o
		}
	}
	return out, errors.Join(errs...)
}

// Match pairs every route with its operation in operations (by Route.Key); a route without one or an operation
// without a route is an error.
func Match(routes []Route, operations map[string]*Operation) ([]*Operation, error) {
	var errs []error
	out := make([]*Operation, len(routes))
	seen := map[string]bool{}
	for i, r := range routes {
		key := r.Key()
		if out[i] = operations[key]; out[i] == nil {
			errs = append(errs, fmt.Errorf("openapi: route %s has no description", key))
		}
		seen[key] = true
	}
	var extra []string
	for key := range operations {
		if !seen[key] {
			extra = append(extra, key)
		}
	}
	slices.Sort(extra)
	for _, key := range extra {
		errs = append(errs, fmt.Errorf("openapi: %s is described but not registered", key))
	}
	return out, errors.Join(errs...)
}

// Fails are the error answers of route r described by o: its handler's, then the API's
// common ones, merged by status (strings and extra fields) and sorted by status.
func (a *API) Fails(r Route, o *Operation) []Fail {
	list := slices.Clone(o.Fails)
	if a.CommonFails != nil {
		list = append(list, a.CommonFails(r, o)...)
	}
	var merged []Fail
	for _, f := range list {
		i := slices.IndexFunc(merged, func(m Fail) bool { return m.Status == f.Status })
		if i < 0 {
			merged = append(merged, Fail{Status: f.Status, Extra: Props{}})
			i = len(merged) - 1
		}
		for _, m := range f.Msgs {
			if !slices.Contains(merged[i].Msgs, m) {
				merged[i].Msgs = append(merged[i].Msgs, m)
			}
		}
		for k, v := range f.Extra {
			merged[i].Extra[k] = v
		}
	}
	slices.SortStableFunc(merged, func(a, b Fail) int { return a.Status - b.Status })
	return merged
}

// pathParams are the {wildcards} of a pattern's path.
var pathParams = regexp.MustCompile(`\{([A-Za-z0-9_]+)\}`)

// Document is the OpenAPI document of routes, each described by the operation of its key in operations,
// as indented JSON ending in a newline. It fails when a route has no operation, an operation no route, two
// operations share an operationId, or an operation cannot be documented.
func Document(api *API, routes []Route, operations map[string]*Operation) ([]byte, error) {
	if api.Family == nil {
		return nil, errors.New("openapi: the API has no Family")
	}
	matched, err := Match(routes, operations)
	if err != nil {
		return nil, err
	}
	g := newSchemaSet()
	paths := map[string]map[string]*operationObject{}
	ids := map[string]string{}
	var errs []error
	for i, r := range routes {
		o := matched[i]
		if prev, dup := ids[o.ID]; dup {
			errs = append(errs, fmt.Errorf("openapi: operationId %s of %s is also %s's", o.ID, r.Key(), prev))
		}
		ids[o.ID] = r.Key()
		if paths[r.Path] == nil {
			paths[r.Path] = map[string]*operationObject{}
		}
		paths[r.Path][strings.ToLower(r.Method)] = api.render(g, r, o)
	}
	errs = append(errs, g.errs...)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	schemas := map[string]*Schema{}
	for name, s := range api.Components.Schemas {
		schemas[name] = s
	}
	for name, s := range g.components {
		schemas[name] = s
	}
	doc := map[string]any{
		"openapi": Version,
		"info":    api.Info,
		"servers": api.Servers,
		"tags":    api.Tags,
		"paths":   paths,
		"components": components{
			Headers: api.Components.Headers, Parameters: api.Components.Parameters, Responses: g.responses,
			Schemas: schemas, SecuritySchemes: api.Components.SecuritySchemes,
		},
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

// responseHeaders refer to the headers every answer carries.
func (a *API) responseHeaders() map[string]ref {
	out := map[string]ref{}
	for _, name := range a.ResponseHeaders {
		out[name] = ref{Ref: "#/components/headers/" + name}
	}
	return out
}

func (a *API) render(g *schemaSet, r Route, o *Operation) *operationObject {
	out := &operationObject{
		OperationID: o.ID, Summary: o.Summary, Description: o.Description, Tags: []string{o.Tag},
		Responses: map[string]*response{}, Security: []map[string][]string{}, Access: accessOf(r),
	}
	for _, m := range pathParams.FindAllStringSubmatch(r.Path, -1) {
		p, ok := a.PathParams[m[1]]
		if !ok {
			g.errs = append(g.errs, fmt.Errorf("openapi: path parameter {%s} is not documented", m[1]))
			p = &Parameter{Name: m[1], In: "path", Required: true, Schema: String()}
		}
		out.Parameters = append(out.Parameters, p)
	}
	out.Parameters = append(out.Parameters, o.Query...)
	if !r.Public {
		out.Parameters = append(out.Parameters, a.TokenParameters...)
		out.Security = append(out.Security, map[string][]string{a.TokenScheme: {}})
		if r.Gateway {
			out.Security = append(out.Security, map[string][]string{a.GatewayScheme: {}})
		}
	}
	switch {
	case o.Multipart != nil:
		out.RequestBody = &requestBody{Required: true, Content: map[string]mediaType{"multipart/form-data": {Schema: o.Multipart}}}
	case o.Body != nil:
		out.RequestBody = &requestBody{Required: !o.OptionalBody, Content: map[string]mediaType{
			"application/json": {Schema: g.request(o.Body, o.Required, o.Fields)},
		}}
		if o.OptionalBody {
			out.RequestBody.Description = "Optional: an empty body is accepted."
		}
	}
	headers := a.responseHeaders()
	for _, rep := range o.Replies {
		resp := &response{Description: rep.Desc, Headers: headers}
		resp.Content = map[string]mediaType{"application/json": {Schema: g.value(rep.Body)}}
		for mt, sc := range rep.Also {
			resp.Content[mt] = mediaType{Schema: sc}
		}
		out.Responses[strconv.Itoa(rep.Status)] = resp
	}
	for _, f := range a.Fails(r, o) {
		name := ""
		if a.Shared != nil {
			name = a.Shared(r, f)
		}
		if name != "" {
			out.Responses[strconv.Itoa(f.Status)] = &response{Ref: "#/components/responses/" + name}
			g.responses[name] = a.errorResponse(g, r, f)
			continue
		}
		out.Responses[strconv.Itoa(f.Status)] = a.errorResponse(g, r, f)
	}
	return out
}

// accessOf documents r's access.
func accessOf(r Route) access {
	if r.Public {
		return access{Public: true}
	}
	return access{Scope: r.Scope, Permission: r.Permission, GatewayToken: r.Gateway}
}

// errorResponse is the error envelope of r's family with f's strings as examples.
func (a *API) errorResponse(g *schemaSet, r Route, f Fail) *response {
	family := a.Family(r.Path)
	var desc strings.Builder
	desc.WriteString(http.StatusText(f.Status) + ". Error strings:\n")
	examples := map[string]example{}
	for _, m := range f.Msgs {
		note := ""
		if a.Note != nil {
			note = a.Note(m)
		}
		fmt.Fprintf(&desc, "\n- `%s`%s", m, note)
		examples[exampleKey(m)] = example{Summary: m, Value: family.Example(f.Status, m)}
	}
	s := Ref(family.Envelope)
	if len(f.Extra) > 0 {
		extra := &Schema{Type: "object", Properties: map[string]*Schema{}}
		for k, v := range f.Extra {
			extra.Properties[k] = g.value(v)
		}
		s = &Schema{AllOf: []*Schema{s, extra}}
	}
	return &response{Description: desc.String(), Headers: a.responseHeaders(), Content: map[string]mediaType{
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
