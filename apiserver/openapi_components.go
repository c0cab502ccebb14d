package apiserver

import (
	"fmt"

	"github.com/agentplane/agentplane/internal/auth"
)

// info is the document's Info Object.
func docInfo() map[string]any {
	return map[string]any{
		"title":   "agentplane",
		"version": APIVersion,
		"description": "The REST facade of agentplane, a Kubernetes operator that hosts AI agents. " +
			"`/v0` manages agents and their parts; `/v3` stores files by CID and attaches wallet signatures " +
			"(the hosted API the pinata SDK speaks).\n\n" +
			"**Authentication.** `Authorization: Bearer <token>` with a JWT issued by `agentplane token create` " +
			"(scheme `bearerAuth`). Routes marked with `gatewayToken` also accept the agent's gateway token, for that " +
			"agent only (another agent's routes answer 404); a rotated token is refused at once. A platform token " +
			"(POST /v0/agents/{agentId}/platform/token) opens the same routes of its agent, with `agents:read` only. " +
			"Each client address and each token is rate limited: over the limit the answer is 429 with `Retry-After`. `" + HeaderWorkspace + "` pins the workspace a token must belong to. " +
			"A token needs the route's scope (a `:write` scope implies its `:read`) and a role that allows the route's " +
			"permission: `viewer` reads, `member` also writes, `admin` and `owner` may do everything.\n\n" +
			"**Errors.** `/v0` answers `{\"error\": \"<string>\"}` (a few add fields, e.g. `agent` on `" + msgGatewayFailed +
			"`, `issues` on `" + msgInvalidConfig + "`); `/v3` answers `{\"error\": {\"code\": <status>, \"message\": \"<string>\"}}`. " +
			"Each response lists the exact strings its route can answer. The facade validates before it writes; should " +
			"the Kubernetes API server still refuse a write, the answer is 400 `Validation failed: <causes>` or 409 `" +
			msgConflict + "`. Unknown paths answer 404 `" + msgNotFound + "`, known paths with another method 405 `" +
			msgMethodNotAllowed + "`, in the envelope of the path's family.",
		"license": map[string]string{"name": "Apache-2.0", "url": "https://www.apache.org/licenses/LICENSE-2.0"},
	}
}

// docTags group the operations.
var docTags = []map[string]string{
	{"name": "meta", "description": "Health, this document, the caller."},
	{"name": "agents", "description": "Agents: create, read, delete, restart, gateway tokens, devices, templates."},
	{"name": "engine", "description": "Engine operations in an agent's home: console, config, tasks, file uploads."},
	{"name": "secrets", "description": "Workspace secrets and their attachment to agents."},
	{"name": "skills", "description": "Skills installed from ClawHub and attached to agents."},
	{"name": "snapshots", "description": "Content-addressed snapshots of an agent's workspace."},
	{"name": "channels", "description": "Chat channels of an agent (paid plans)."},
	{"name": "domains", "description": "Subdomains and custom domains of an agent."},
	{"name": "issues", "description": "Issue reports (closed beta: internal accounts only, 404 for others)."},
	{"name": "files", "description": "/v3: files stored by CID on the public or private network."},
	{"name": "signatures", "description": "/v3: EIP-712 wallet signatures attached to files."},
}

// components are the document's reusable parts: security schemes, the error envelopes, the
// reflected schemas, the common header and parameter.
func components(g *schemaSet) map[string]any {
	schemas := map[string]*schema{
		"ErrorV0": {
			Type: "object", Required: []string{"error"}, AdditionalProperties: true,
			Description: "The /v0 error envelope: the exact error string, sometimes with extra fields.",
			Properties:  map[string]*schema{"error": docString()},
		},
		"ErrorV3": {
			Type: "object", Required: []string{"error"},
			Description: "The /v3 error envelope.",
			Properties: map[string]*schema{"error": {
				Type: "object", Required: []string{"code", "message"},
				Properties: map[string]*schema{"code": describe(docInteger(), "The HTTP status."), "message": docString()},
			}},
		},
	}
	for name, s := range g.components {
		schemas[name] = s
	}
	return map[string]any{
		"securitySchemes": map[string]any{
			"bearerAuth": map[string]string{
				"type": "http", "scheme": "bearer", "bearerFormat": "JWT",
				"description": "A workspace token (JWT) from `agentplane token create`; its scopes and the caller's role decide what it may do.",
			},
			"gatewayToken": map[string]string{
				"type": "http", "scheme": "bearer",
				"description": "An agent's gateway token (GET /v0/agents/{agentId}/gateway-token), accepted on that agent's own routes only (not on domain and channel writes, which need a user's token).",
			},
		},
		"schemas":   schemas,
		"responses": g.responses,
		"headers": map[string]any{
			headerRequestID: map[string]any{
				"description": "The request's id: a well-formed incoming X-Request-Id is echoed, else a new one.",
				"schema":      docString(),
			},
			"Strict-Transport-Security": map[string]any{
				"description": "HSTS: `" + hstsValue + "`.",
				"schema":      docString(),
			},
		},
		"parameters": map[string]any{
			"Workspace": &parameter{
				Name: HeaderWorkspace, In: "header", Schema: docString(),
				Description: "The workspace the token must belong to; a token of another workspace is refused with 401.",
			},
		},
	}
}

// pathParam documents a path wildcard.
func (g *schemaSet) pathParam(name string) *parameter {
	p := &parameter{Name: name, In: "path", Required: true, Schema: docString()}
	switch name {
	case "agentId":
		p.Description = "The agent's id (`agt-…`); an agent of another workspace is not found."
	case "secretId":
		p.Description = "The secret's id (`sec-…`), as GET /v0/secrets lists it."
	case "domainId":
		p.Description = "The domain's id (`dom-…`)."
	case "skillId":
		p.Description = "The Skill's id, as GET /v0/skills lists it (detach also takes a bundle CID the agent attaches)."
	case "slug":
		p.Description = "The skill's ClawHub slug."
	case "channel":
		p.Description = "The chat network; any other value answers 400 `" + msgUnsupportedChannel + "`."
		types := make([]string, 0, len(ChannelTypes))
		for _, t := range ChannelTypes {
			types = append(types, string(t))
		}
		p.Schema = enumOf(types...)
	case "network":
		p.Description = "`public` or `private`; any other value does not match (404)."
		p.Schema = enumOf("public", "private")
	case "id":
		p.Description = "The file's id, as the upload answered it."
	case "cid":
		p.Description = "The file's CID."
	default:
		g.errs = append(g.errs, fmt.Errorf("openapi: path parameter {%s} is not documented", name))
	}
	return p
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
