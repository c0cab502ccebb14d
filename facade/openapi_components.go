package facade

import (
	"fmt"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/facade/openapi"
	"github.com/agentplane/agentplane/internal/ops"
	"github.com/agentplane/agentplane/internal/rules/auth"
)

// docInfo is the document's Info Object.
func docInfo() openapi.Info {
	return openapi.Info{
		Title:   "agentplane",
		Version: APIVersion,
		Description: "The REST facade of agentplane, a Kubernetes operator that hosts AI agents. " +
			"`/v0` manages agents and their parts; `/v3` stores files by CID and attaches wallet signatures " +
			"(the hosted API the pinata SDK speaks).\n\n" +
			"**Authentication.** `Authorization: Bearer <token>` with a JWT issued by `agentplane token create` " +
			"(scheme `bearerAuth`). Routes marked with `gatewayToken` also accept the agent's gateway token, for that " +
			"agent only (another agent's routes answer 404); a rotated token is refused at once. A platform token " +
			"(POST /v0/agents/{agentId}/platform/token) opens the same routes of its agent, with `agents:read` only. " +
			"Each client address and each token is rate limited: over the limit the answer is 429 with `Retry-After`. `" + HeaderWorkspace + "` pins the workspace a token must belong to. " +
			"A token needs the route's scope (a `:write` scope implies its `:read`) and a role that allows the route's " +
			"permission: `viewer` reads, `member` also writes, `admin` and `owner` may do everything.\n\n" +
			"**Errors.** `/v0` answers `{\"error\": \"<string>\"}` (a few add fields, e.g. `agent` on `" + ops.MsgGatewayFailed +
			"`, `issues` on `" + ops.MsgInvalidConfig + "`); `/v3` answers `{\"error\": {\"code\": <status>, \"message\": \"<string>\"}}`. " +
			"Each response lists the exact strings its route can answer. The facade validates before it writes; should " +
			"the Kubernetes API server still refuse a write, the answer is 400 `Validation failed: <causes>` or 409 `" +
			msgConflict + "`. Unknown paths answer 404 `" + msgNotFound + "`, known paths with another method 405 `" +
			msgMethodNotAllowed + "`, in the envelope of the path's family.",
		License: &openapi.License{Name: "Apache-2.0", URL: "https://www.apache.org/licenses/LICENSE-2.0"},
	}
}

// docTags group the operations.
var docTags = []openapi.Tag{
	{Name: "meta", Description: "Health, this document, the caller."},
	{Name: "agents", Description: "Agents: create, read, delete, restart, gateway tokens, devices, templates."},
	{Name: "engine", Description: "Engine operations in an agent's home: console, config, tasks, file uploads."},
	{Name: "secrets", Description: "Workspace secrets and their attachment to agents."},
	{Name: "skills", Description: "Skills installed from ClawHub and attached to agents."},
	{Name: "snapshots", Description: "Content-addressed snapshots of an agent's home."},
	{Name: "channels", Description: "Chat channels of an agent (paid plans)."},
	{Name: "domains", Description: "Subdomains and custom domains of an agent."},
	{Name: "issues", Description: "Issue reports (closed beta: internal accounts only, 404 for others)."},
	{Name: "files", Description: "/v3: files stored by CID on the public or private network."},
	{Name: "signatures", Description: "/v3: EIP-712 wallet signatures attached to files."},
}

// components are the document's reusable parts the facade declares: security schemes, the
// error envelopes, the common headers and parameter (the reflected schemas and the shared
// error answers are added to them).
func components() openapi.Components {
	return openapi.Components{
		SecuritySchemes: map[string]openapi.SecurityScheme{
			"bearerAuth": {
				Type: "http", Scheme: "bearer", BearerFormat: "JWT",
				Description: "A workspace token (JWT) from `agentplane token create`; its scopes and the caller's role decide what it may do.",
			},
			"gatewayToken": {
				Type: "http", Scheme: "bearer",
				Description: "An agent's gateway token (GET /v0/agents/{agentId}/gateway-token), accepted on that agent's own routes only (not on domain and channel writes, which need a user's token).",
			},
		},
		Schemas: map[string]*openapi.Schema{
			"ErrorV0": {
				Type: "object", Required: []string{"error"}, AdditionalProperties: true,
				Description: "The /v0 error envelope: the exact error string, sometimes with extra fields.",
				Properties:  map[string]*openapi.Schema{"error": openapi.String()},
			},
			"ErrorV3": {
				Type: "object", Required: []string{"error"},
				Description: "The /v3 error envelope.",
				Properties: map[string]*openapi.Schema{"error": {
					Type: "object", Required: []string{"code", "message"},
					Properties: map[string]*openapi.Schema{"code": openapi.Describe(openapi.Integer(), "The HTTP status."), "message": openapi.String()},
				}},
			},
		},
		Headers: map[string]openapi.Header{
			headerRequestID: {
				Description: "The request's id: a well-formed incoming X-Request-Id is echoed, else a new one.",
				Schema:      openapi.String(),
			},
			"Strict-Transport-Security": {
				Description: "HSTS: `" + hstsValue + "`.",
				Schema:      openapi.String(),
			},
		},
		Parameters: map[string]*openapi.Parameter{
			"Workspace": {
				Name: HeaderWorkspace, In: "header", Schema: openapi.String(),
				Description: "The workspace the token must belong to; a token of another workspace is refused with 401.",
			},
		},
	}
}

// pathParams document the path wildcards of the facade's routes.
func pathParams() map[string]*openapi.Parameter {
	channels := make([]string, 0, len(agentsv1.ChannelTypes))
	for _, t := range agentsv1.ChannelTypes {
		channels = append(channels, string(t))
	}
	param := func(name, description string) *openapi.Parameter {
		return &openapi.Parameter{Name: name, In: "path", Required: true, Description: description, Schema: openapi.String()}
	}
	out := map[string]*openapi.Parameter{
		"agentId":        param("agentId", "The agent's id (`agt-…`); an agent of another workspace is not found."),
		"secretId":       param("secretId", "The secret's id (`sec-…`), as GET /v0/secrets lists it."),
		"conversationId": param("conversationId", "A conversation's id (`cnv-…`), as GET /v0/agents/{agentId}/chat/conversations lists it."),
		"domainId":       param("domainId", "The domain's id (`dom-…`)."),
		"skillId":        param("skillId", "The Skill's id, as GET /v0/skills lists it (detach also takes a bundle CID the agent attaches)."),
		"slug":           param("slug", "The skill's ClawHub slug."),
		"channel":        param("channel", "The chat network; any other value answers 400 `"+ops.MsgUnsupportedChannel+"`."),
		"network":        param("network", "`public` or `private`; any other value does not match (404)."),
		"id":             param("id", "The file's id, as the upload answered it."),
		"cid":            param("cid", "The file's CID."),
	}
	out["channel"].Schema = openapi.EnumOf(channels...)
	out["network"].Schema = openapi.EnumOf("public", "private")
	return out
}

// PermissionName names what a route requires of the caller's role: read (viewer and up),
// write (member and up) or admin (admin and owner).
func PermissionName(p auth.Permission) string {
	switch p {
	case auth.PermRead:
		return "read"
	case auth.PermWrite:
		return "write"
	case auth.PermAdmin:
		return "admin"
	}
	return fmt.Sprintf("permission(%d)", int(p))
}
