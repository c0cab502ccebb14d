package facade

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/agentplane/agentplane/facade/openapi"
	"github.com/agentplane/agentplane/internal/ops"
)

// The facade documents itself: every route registered in routes() has an operation (in the
// openapi_operations_*.go files) naming its request type, its answers and the error strings its
// handler can write. OpenAPIDocument hands the registered routes, their ops and what the
// facade's routes have in common (facadeAPI: authentication, error envelopes, shared
// answers) to package openapi, which builds the OpenAPI 3.0 document that hack/gendocs
// writes to docs/openapi.json and facade/openapi/openapi.json (embedded, served at GET
// /openapi.json); RoutesMarkdown makes the README's route table the same way. Tests fail
// when a route has no operation, an operation no route, or a generated file differs from what the
// generator makes.

// APIVersion is the version of the interface the document describes.
const APIVersion = "1.0.0"

// v3data wraps a /v3 success body in the hosted API's {"data": ...} envelope.
func v3data(body any) openapi.Props { return openapi.Props{"data": body} }

// notFoundAgent is the answer of every route that reads an agent of the caller.
var notFoundAgent = openapi.Fails(http.StatusNotFound, ops.MsgAgentNotFound)

// waitParam is the ?wait=false of the routes that otherwise wait for a controller.
var waitParam = openapi.QueryParam("wait", "`false` answers 202 at once instead of waiting for the controller.", openapi.EnumOf("true", "false"))

// contractMessages are the error strings the interface contract fixes.
var contractMessages = []string{
	msgMissingUserID, ops.MsgAgentLimit, ops.MsgStorageMissing, ops.MsgSyncFailed, ops.MsgSnapshotNotFound,
	ops.MsgInvalidSnapshotCID, ops.MsgUnsupportedChannel, ops.MsgChannelConfigFailed, ops.MsgChannelRemoveFailed,
	ops.MsgInvalidCommand, ops.MsgExecFailed, ops.MsgInvalidJSON, ops.MsgValidationFailed, ops.MsgReadConfigFailed,
	ops.MsgWriteConfigFailed, ops.MsgInvalidVersion, ops.MsgRestartFailed, ops.MsgScriptLaunch, msgFileTooLarge,
	ops.MsgCLIError, ops.MsgTokenGenFailed, ops.MsgSecretsNotConfigured, ops.MsgDuplicateSecret,
	ops.MsgConflictingSecrets, ops.MsgInvalidParameters, ops.MsgCreateCronFailed, ops.MsgListCronFailed,
	ops.MsgGatewayFailed,
}

// operations are every documented operation by "METHOD /path".
func operations() (map[string]*openapi.Operation, error) {
	return openapi.Collect(metaOperations(), agentOperations(), agentMoreOperations(), fleetOperations(), engineOperations(), secretOperations(), fileOperations(), domainOperations(), snapshotOperations(), skillOperations(), channelOperations(), chatOperations())
}

// routeKey is how ops are keyed: "GET /v0/agents".
func routeKey(r RouteInfo) string { return r.Method + " " + r.Path }

// openapiRoutes are routes as the document describes them.
func openapiRoutes(routes []RouteInfo) []openapi.Route {
	out := make([]openapi.Route, len(routes))
	for i, r := range routes {
		out[i] = openapi.Route{Method: r.Method, Path: r.Path, Scope: r.Scope, Permission: PermissionName(r.Permission), Gateway: r.Gateway, Public: r.Public}
	}
	return out
}

// describedRoutes are routes as the document describes them and the operations describing
// them.
func describedRoutes(routes []RouteInfo) ([]openapi.Route, map[string]*openapi.Operation, error) {
	ops, err := operations()
	if err != nil {
		return nil, nil, err
	}
	docs := openapiRoutes(routes)
	if _, err := openapi.Match(docs, ops); err != nil {
		return nil, nil, fmt.Errorf("%w (describe routes in a facade/openapi_operations_*.go file)", err)
	}
	return docs, ops, nil
}

// matchOperations pairs every route with its operation; a route without one or an operation without a route is
// an error.
func matchOperations(routes []RouteInfo) ([]*openapi.Operation, error) {
	docs, ops, err := describedRoutes(routes)
	if err != nil {
		return nil, err
	}
	return openapi.Match(docs, ops)
}

// OpenAPIDocument is the OpenAPI document of routes (normally Server.Routes()), as indented
// JSON ending in a newline. It fails when a route has no description or a description no
// route.
func OpenAPIDocument(routes []RouteInfo) ([]byte, error) {
	docs, ops, err := describedRoutes(routes)
	if err != nil {
		return nil, err
	}
	return openapi.Document(facadeAPI(), docs, ops)
}

// facadeAPI is what the document says about every route of the facade.
func facadeAPI() *openapi.API {
	return &openapi.API{
		Info: docInfo(),
		Servers: []openapi.Server{
			{URL: "http://127.0.0.1:8080", Description: "`agentplane dev` (the manager serves on :8080 too)"},
		},
		Tags:            docTags,
		Components:      components(),
		ResponseHeaders: []string{headerRequestID, "Strict-Transport-Security"},
		TokenParameters: []*openapi.Parameter{openapi.ParameterRef("Workspace")},
		TokenScheme:     "bearerAuth", GatewayScheme: "gatewayToken",
		PathParams:  pathParams(),
		CommonFails: commonFails,
		Generic:     generic,
		Family:      family,
		Shared:      sharedResponse,
		Note: func(msg string) string {
			if slices.Contains(contractMessages, msg) {
				return " (fixed by the interface contract)"
			}
			return ""
		},
	}
}

// commonFails are the error answers every route of r's kind can give: body limit,
// authentication, rate limit, dependencies.
func commonFails(r openapi.Route, o *openapi.Operation) []openapi.Fail {
	var list []openapi.Fail
	if o.HasBody() {
		msg := o.TooLarge
		if msg == "" {
			msg = msgBodyTooLarge
		}
		list = append(list, openapi.Fails(http.StatusRequestEntityTooLarge, msg))
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
		list = append(list, openapi.Fails(http.StatusUnauthorized, unauth...), openapi.Fails(http.StatusForbidden, forbidden...),
			openapi.Fails(http.StatusTooManyRequests, msgTooManyRequests),
			openapi.Fails(http.StatusInternalServerError, msgInternal), openapi.Fails(http.StatusServiceUnavailable, msgUnavailable))
	}
	return list
}

// allFails are the error answers of route r: its handler's, then those every route of its
// kind can give, merged by status.
func allFails(r RouteInfo, o *openapi.Operation) []openapi.Fail {
	return facadeAPI().Fails(openapiRoutes([]RouteInfo{r})[0], o)
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

// family is the error envelope of the routes under path: /v0's {"error": "<string>"} or
// /v3's {"error": {"code", "message"}}.
func family(path string) openapi.Family {
	if isV3(path) {
		return openapi.Family{Envelope: "ErrorV3", Example: func(status int, msg string) any {
			return map[string]any{"error": map[string]any{"code": status, "message": msg}}
		}}
	}
	return openapi.Family{Envelope: "ErrorV0", Example: func(_ int, msg string) any {
		return map[string]any{"error": msg}
	}}
}

// sharedResponse names the component an error answer is shared as: the 401 of each API
// family, and the 500 and 503 that carry only the generic string. "" when f is the route's own.
func sharedResponse(r openapi.Route, f openapi.Fail) string {
	suffix := "V0"
	if isV3(r.Path) {
		suffix = "V3"
	}
	switch {
	case f.Status == http.StatusUnauthorized:
		return "Unauthorized" + suffix
	case len(f.Msgs) == 1 && f.Status == http.StatusInternalServerError && f.Msgs[0] == msgInternal:
		return "InternalError" + suffix
	case len(f.Msgs) == 1 && f.Status == http.StatusServiceUnavailable && f.Msgs[0] == msgUnavailable:
		return "Unavailable" + suffix
	}
	return ""
}
