package facade

import (
	"net/http"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/facade/openapi"
	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/ops"
)

// Descriptions of the meta, agent and engine routes (see openapi.go).

func metaOperations() map[string]*openapi.Operation {
	return map[string]*openapi.Operation{
		"GET /healthz": {
			ID: "getHealth", Tag: "meta", Summary: "Health of the facade",
			Replies: []openapi.Reply{openapi.Answer(http.StatusOK, "The facade serves.", openapi.Props{"status": openapi.EnumOf("ok")})},
		},
		"GET /openapi.json": {
			ID: "getOpenAPI", Tag: "meta", Summary: "This OpenAPI document",
			Replies: []openapi.Reply{openapi.Answer(http.StatusOK, "The OpenAPI document of the facade.", openapi.AnyObject())},
		},
		"GET /v0/me": {
			ID: "whoAmI", Tag: "meta", Summary: "The caller as the facade resolved its token",
			Replies: []openapi.Reply{openapi.Answer(http.StatusOK, "The caller.", openapi.Props{
				"userId": openapi.Describe(openapi.String(), "The token's subject (\"\" for gateway tokens, `agent:<id>` for platform tokens)."), "workspace": openapi.String(),
				"role":   openapi.EnumOf(string(agentsv1.RoleOwner), string(agentsv1.RoleAdmin), string(agentsv1.RoleMember), string(agentsv1.RoleViewer)),
				"scopes": openapi.Nullable(openapi.ArrayOf(openapi.String())), "plan": openapi.String(),
			})},
		},
	}
}

// agentReply is the {"agent": ...} body.
var agentReply = openapi.Props{"agent": agentView{}}

// deletedReply is the {"id": ..., "deleted": true} body of deletes.
var deletedReply = openapi.Props{"id": openapi.String(), "deleted": openapi.Bool()}

// agentOperations: an agent's life: list, create, get, delete, restart, suspend and resume.
func agentOperations() map[string]*openapi.Operation {
	gatewayFailed := openapi.Fail{Status: http.StatusInternalServerError, Msgs: []string{ops.MsgGatewayFailed}, Extra: openapi.Props{
		"agent": openapi.Describe(&openapi.Schema{AllOf: []*openapi.Schema{{Ref: "#/components/schemas/Agent"}}}, "With `"+ops.MsgGatewayFailed+"` and `"+ops.MsgRestartFailed+"`: the agent, which is listed and can be restarted."),
	}}
	return map[string]*openapi.Operation{
		"GET /v0/agents": {
			ID: "listAgents", Tag: "agents", Summary: "List the workspace's agents",
			Replies: []openapi.Reply{openapi.Answer(http.StatusOK, "The agents, oldest first.", openapi.Props{"agents": []agentView{}})},
		},
		"POST /v0/agents": {
			ID: "createAgent", Tag: "agents", Summary: "Create an agent and wait for its gateway",
			Description: "Creates the agent (from a template when `templateId` or `template` names one) and waits until its " +
				"gateway answers (about 30 s). `name` is required unless a template gives it.",
			Query: []*openapi.Parameter{waitParam},
			Body:  createAgentRequest{},
			Fields: map[string]*openapi.Schema{
				"name":     {Description: "1 to 100 characters, not blank, none of `<>{}`\\` or control characters.", MaxLength: openapi.Ptr(ops.MaxAgentNameRunes)},
				"template": {Description: "A published template's slug."}, "templateId": {Description: "A published template's id."},
			},
			Replies: []openapi.Reply{
				openapi.Answer(http.StatusCreated, "The agent; its gateway answers.", agentReply),
				openapi.Answer(http.StatusAccepted, "The agent, still starting (`wait=false`, or the wait ended).", agentReply),
			},
			Fails: []openapi.Fail{
				openapi.Fails(http.StatusBadRequest, msgInvalidBody, ops.MsgNameRequired, ops.MsgNameTooLong, ops.MsgNameBanned, ops.MsgInvalidVersion),
				openapi.Fails(http.StatusForbidden, ops.MsgAgentLimit),
				openapi.Fails(http.StatusNotFound, ops.MsgTemplateNotFound),
				gatewayFailed,
			},
		},
		"GET /v0/agents/{agentId}": {
			ID: "getAgent", Tag: "agents", Summary: "Read an agent",
			Replies: []openapi.Reply{openapi.Answer(http.StatusOK, "The agent.", agentReply)},
			Fails:   []openapi.Fail{notFoundAgent},
		},
		"DELETE /v0/agents/{agentId}": {
			ID: "deleteAgent", Tag: "agents", Summary: "Delete an agent",
			Replies: []openapi.Reply{openapi.Answer(http.StatusOK, "Deleted (the controller tears the agent down).", deletedReply)},
			Fails:   []openapi.Fail{notFoundAgent},
		},
		"POST /v0/agents/{agentId}/restart": {
			ID: "restartAgent", Tag: "agents", Summary: "Restart an agent, optionally on another engine version",
			Query: []*openapi.Parameter{waitParam}, Body: restartRequest{}, OptionalBody: true,
			Fields: map[string]*openapi.Schema{"version": {Description: "An offered engine version (GET .../versions)."}, "engineVersion": {Description: "Same as `version`."}},
			Replies: []openapi.Reply{
				openapi.Answer(http.StatusOK, "Restarted; the gateway answers.", agentReply),
				openapi.Answer(http.StatusAccepted, "Restart requested, not done yet (`wait=false`, or the wait ended).", agentReply),
			},
			Fails: []openapi.Fail{
				openapi.Fails(http.StatusBadRequest, msgInvalidBody, ops.MsgInvalidVersion), notFoundAgent,
				{Status: http.StatusInternalServerError, Msgs: []string{ops.MsgRestartFailed}, Extra: gatewayFailed.Extra},
			},
		},
		"POST /v0/agents/{agentId}/suspend": {
			ID: "suspendAgent", Tag: "agents", Summary: "Suspend an agent (an addition beyond the contract)",
			Description: "Sets `spec.suspended`: the gateway is drained and stopped, the agent's home and workspace are kept " +
				"and it holds no process or pod (status `suspended`). It still wakes by itself ahead of its next scheduled " +
				"task, and for a request that needs its gateway (console, config, tasks, devices, files, snapshots), which " +
				"waits for the gateway instead of failing. Waits until the gateway is stopped.",
			Query: []*openapi.Parameter{waitParam},
			Replies: []openapi.Reply{
				openapi.Answer(http.StatusOK, "Suspended; no gateway runs.", agentReply),
				openapi.Answer(http.StatusAccepted, "Suspension requested, not done yet (`wait=false`, or the wait ended).", agentReply),
			},
			Fails: []openapi.Fail{notFoundAgent, openapi.Fails(http.StatusInternalServerError, ops.MsgSuspendFailed)},
		},
		"POST /v0/agents/{agentId}/resume": {
			ID: "resumeAgent", Tag: "agents", Summary: "Resume a suspended agent (an addition beyond the contract)",
			Description: "Clears `spec.suspended`, starts a new idle window and waits until the gateway answers, like a restart.",
			Query:       []*openapi.Parameter{waitParam},
			Replies: []openapi.Reply{
				openapi.Answer(http.StatusOK, "Resumed; the gateway answers.", agentReply),
				openapi.Answer(http.StatusAccepted, "Resume requested, not done yet (`wait=false`, or the wait ended).", agentReply),
			},
			Fails: []openapi.Fail{notFoundAgent, {Status: http.StatusInternalServerError, Msgs: []string{ops.MsgResumeFailed}, Extra: gatewayFailed.Extra}},
		},
	}
}

// agentMoreOperations: an agent's logs, engine versions, gateway and platform tokens, scripts and
// devices, and the templates agents are made from.
func agentMoreOperations() map[string]*openapi.Operation {
	return map[string]*openapi.Operation{
		"GET /v0/agents/{agentId}/logs": {
			ID: "getAgentLogs", Tag: "agents", Summary: "Read or follow the agent's gateway logs (an addition beyond the contract)",
			Description: "The last lines of the gateway's output (stdout and stderr), oldest first. Secrets are redacted: the " +
				"agent's gateway token, the values of its attached secrets and channel tokens, and anything that looks like a " +
				"credential (`token=...`, `Bearer ...`, long opaque strings) read `[REDACTED]`. Reading logs never wakes a " +
				"suspended agent: it answers what the runtime still keeps (the local log file; on Kubernetes what the API " +
				"server still has, none without a pod).\n\nWith `follow=true` the answer is `text/event-stream`: the tail " +
				"lines, then every new line, each one event `data: <line>`; a comment `: keep-alive` every 15 s; `event: end` " +
				"with `data: agent deleted` when the agent is deleted. A follower that does not read keeps at most 1,000 lines " +
				"waiting; when they stay full it is cut off with `event: error` and `data: too slow`.",
			Query: []*openapi.Parameter{
				openapi.QueryParam("tail", "How many of the last lines: 1 to 5000 (default 200, 50 with `follow=true`).",
					&openapi.Schema{Type: "integer", Minimum: openapi.Ptr(int64(1)), Maximum: openapi.Ptr(int64(ops.MaxLogTail))}),
				openapi.QueryParam("follow", "`true` streams the lines as server-sent events until the client leaves.", openapi.EnumOf("true", "false")),
			},
			Replies: []openapi.Reply{{
				Status: http.StatusOK, Desc: "The lines (`application/json`), or with `follow=true` the stream (`text/event-stream`).",
				Body: openapi.Props{"lines": openapi.ArrayOf(openapi.String())},
				Also: map[string]*openapi.Schema{"text/event-stream": openapi.Describe(openapi.String(),
					"Server-sent events: `data: <line>` per line, `: keep-alive` comments, `event: end` / `event: error` before the stream closes.")},
			}},
			Fails: []openapi.Fail{openapi.Fails(http.StatusBadRequest, ops.MsgInvalidTail), notFoundAgent, openapi.Fails(http.StatusInternalServerError, ops.MsgReadLogsFailed)},
		},
		"GET /v0/agents/{agentId}/versions": {
			ID: "getAgentVersions", Tag: "agents", Summary: "Engine versions: the agent's and the offered ones",
			Replies: []openapi.Reply{openapi.Answer(http.StatusOK, "The versions.", openapi.Props{
				"current": openapi.Describe(openapi.String(), "The version the agent asks for."), "running": openapi.Describe(openapi.String(), "The version its gateway runs."),
				"default": openapi.String(), "available": openapi.Nullable(openapi.ArrayOf(openapi.String())),
			})},
			Fails: []openapi.Fail{notFoundAgent},
		},
		"GET /v0/agents/{agentId}/gateway-token": {
			ID: "getGatewayToken", Tag: "agents", Summary: "Read the agent's gateway token",
			Replies: []openapi.Reply{openapi.Answer(http.StatusOK, "The token and the gateway's endpoint.", openapi.Props{"agentId": openapi.String(), "token": openapi.String(), "endpoint": openapi.String()})},
			Fails:   []openapi.Fail{openapi.Fails(http.StatusNotFound, ops.MsgAgentNotFound, msgNotFound)},
		},
		"POST /v0/agents/{agentId}/gateway-token/rotate": {
			ID: "rotateGatewayToken", Tag: "agents", Summary: "Replace the agent's gateway token",
			Description: "The previous token is refused as soon as this answers.",
			Replies:     []openapi.Reply{openapi.Answer(http.StatusOK, "The new token.", openapi.Props{"agentId": openapi.String(), "token": openapi.String()})},
			Fails:       []openapi.Fail{openapi.Fails(http.StatusNotFound, ops.MsgAgentNotFound, msgNotFound)},
		},
		"POST /v0/agents/{agentId}/platform/token": {
			ID: "createPlatformToken", Tag: "agents", Summary: "Mint a short-lived platform token for the agent",
			Description: "A one-hour JWT the agent uses to read its own routes (`agents:read`, this agent only; no /v3 files). " +
				"It is stateless (no object is stored per mint) and is refused once the agent is deleted or its gateway token rotated.",
			Replies: []openapi.Reply{openapi.Answer(http.StatusCreated, "The token.", openapi.Props{"token": openapi.String(), "expiresAt": &openapi.Schema{Type: "string", Format: "date-time"}})},
			Fails:   []openapi.Fail{notFoundAgent, openapi.Fails(http.StatusInternalServerError, ops.MsgTokenGenFailed)},
		},
		"POST /v0/agents/{agentId}/scripts/retry": {
			ID: "retryStartupScripts", Tag: "agents", Summary: "Re-run the agent's start-up scripts",
			Description: "Runs startup.sh and .agentplane/startup/*.sh in the agent's home, in order, stopping at the first failure; a failing script is a 200 with its exit code.",
			Replies: []openapi.Reply{openapi.Answer(http.StatusOK, "The scripts ran.", openapi.Props{
				"exitCode": openapi.Integer(), "stdout": openapi.String(), "stderr": openapi.String(), "timestamp": &openapi.Schema{Type: "string", Format: "date-time"},
			})},
			Fails: []openapi.Fail{notFoundAgent, openapi.Fails(http.StatusInternalServerError, ops.MsgScriptLaunch)},
		},
		"GET /v0/agents/{agentId}/devices": {
			ID: "listDevices", Tag: "agents", Summary: "The gateway's paired and pending devices",
			Replies: []openapi.Reply{openapi.Answer(http.StatusOK, "The devices, as the engine reports them.", engine.Devices{})},
			Fails:   []openapi.Fail{notFoundAgent, openapi.Fails(http.StatusInternalServerError, ops.MsgCLIError)},
		},
		"GET /v0/templates": {
			ID: "listTemplates", Tag: "agents", Summary: "List the published agent templates",
			Replies: []openapi.Reply{openapi.Answer(http.StatusOK, "The templates, by slug.", openapi.Props{"templates": []templateView{}})},
		},
	}
}

// agentUploadBody is the body of POST /v0/agents/{agentId}/files/upload (parsed as it streams).
var agentUploadBody = &openapi.Schema{
	Type: "object", Required: []string{"filename", "contentBase64"},
	Properties: map[string]*openapi.Schema{
		"filename":      openapi.Describe(openapi.String(), "A relative path inside the agent's home (no `..`, no leading `/`)."),
		"contentBase64": openapi.Describe(&openapi.Schema{Type: "string", Format: "byte"}, "The content, standard base64 without a data-URL prefix."),
	},
}

func engineOperations() map[string]*openapi.Operation {
	configReply := openapi.Props{"config": openapi.Describe(openapi.AnyObject(), "The engine config, secrets redacted.")}
	return map[string]*openapi.Operation{
		"POST /v0/agents/{agentId}/console/exec": {
			ID: "consoleExec", Tag: "engine", Summary: "Run a shell command in the agent's home",
			Description: "Bounded in time (the process tree is killed) and output; a non-zero exit is a 200 with its exit code.",
			Body:        execRequest{}, Required: []string{"command"},
			Fields: map[string]*openapi.Schema{"cwd": {Description: "A directory inside the agent's home."}},
			Replies: []openapi.Reply{openapi.Answer(http.StatusOK, "The command ran.", openapi.Props{
				"stdout": openapi.String(), "stderr": openapi.String(), "exitCode": openapi.Integer(), "command": openapi.String(),
				"timestamp": &openapi.Schema{Type: "string", Format: "date-time"}, "timedOut": openapi.Bool(), "truncated": openapi.Bool(),
			})},
			Fails: []openapi.Fail{openapi.Fails(http.StatusBadRequest, ops.MsgInvalidCommand), notFoundAgent, openapi.Fails(http.StatusInternalServerError, ops.MsgExecFailed)},
		},
		"GET /v0/agents/{agentId}/config": {
			ID: "getConfig", Tag: "engine", Summary: "Read the agent's engine config",
			Replies: []openapi.Reply{openapi.Answer(http.StatusOK, "The config.", configReply)},
			Fails:   []openapi.Fail{notFoundAgent, openapi.Fails(http.StatusInternalServerError, ops.MsgReadConfigFailed)},
		},
		"PUT /v0/agents/{agentId}/config": {
			ID: "putConfig", Tag: "engine", Summary: "Validate and replace the agent's engine config",
			Description: "The config is stored as the agent's own (the Secret `<agent>-config`, named by the Agent's `spec.configRef`) and the Agent controller renders the engine's file from it and the agent's channels; the gateway hot-reloads it. Redacted values keep their current secrets; the gateway token and the channels stay the platform's.",
			Body:        configRequest{}, Required: []string{"config"},
			Replies: []openapi.Reply{openapi.Answer(http.StatusOK, "The config as rendered.", configReply),
				openapi.Answer(http.StatusAccepted, "Stored; the agent has not rendered it yet (its gateway does not run, or the wait ended).", configReply)},
			Fails: []openapi.Fail{
				{Status: http.StatusBadRequest, Msgs: []string{ops.MsgInvalidJSON, ops.MsgInvalidConfig}, Extra: openapi.Props{
					"issues": openapi.Describe(openapi.Nullable(openapi.ArrayOf(openapi.String())), "With `"+ops.MsgInvalidConfig+"` from the engine's validator: what is wrong."),
				}},
				notFoundAgent,
				openapi.Fails(http.StatusInternalServerError, ops.MsgWriteConfigFailed, ops.MsgValidationFailed, ops.MsgReadConfigFailed),
			},
		},
		"POST /v0/agents/{agentId}/config/validate": {
			ID: "validateConfig", Tag: "engine", Summary: "Check a config with the engine's validator",
			Body: configRequest{}, Required: []string{"config"},
			Replies: []openapi.Reply{openapi.Answer(http.StatusOK, "The verdict (an invalid config is a 200 with valid false).", openapi.Props{"valid": openapi.Bool(), "output": openapi.String()})},
			Fails: []openapi.Fail{
				openapi.Fails(http.StatusBadRequest, ops.MsgInvalidJSON), notFoundAgent, openapi.Fails(http.StatusInternalServerError, ops.MsgValidationFailed),
			},
		},
		"GET /v0/agents/{agentId}/tasks": {
			ID: "listTasks", Tag: "engine", Summary: "List the agent's scheduled tasks",
			Replies: []openapi.Reply{openapi.Answer(http.StatusOK, "The tasks.", openapi.Props{"tasks": []engine.Task{}})},
			Fails:   []openapi.Fail{notFoundAgent, openapi.Fails(http.StatusInternalServerError, ops.MsgListCronFailed)},
		},
		"POST /v0/agents/{agentId}/tasks": {
			ID: "createTask", Tag: "engine", Summary: "Schedule a task",
			Description: "`schedule.kind` is `cron` (`expr`, optional `tz`), `every` (`everyMs` ≥ 1000) or `at` (a future RFC 3339 time); " +
				"`payload.kind` is `agentTurn` (`message`) or `systemEvent` (`text`).",
			Body: taskRequest{}, Required: []string{"name", "schedule", "payload"},
			Fields:  map[string]*openapi.Schema{"name": {Description: "1 to 100 characters.", MaxLength: openapi.Ptr(100)}},
			Replies: []openapi.Reply{openapi.Answer(http.StatusCreated, "The task.", openapi.Props{"task": engine.Task{}})},
			Fails: []openapi.Fail{
				openapi.Fails(http.StatusBadRequest, ops.MsgInvalidParameters), notFoundAgent, openapi.Fails(http.StatusInternalServerError, ops.MsgCreateCronFailed),
			},
		},
		"POST /v0/agents/{agentId}/files/upload": {
			ID: "uploadAgentFile", Tag: "engine", Summary: "Write a file into the agent's home",
			Description: "The body is decoded as it streams; a file over the upload limit (25 MiB by default) is refused with 413, one that would take the workspace over its uploads quota (`spec.quotas.uploads`) with 403.",
			Body:        agentUploadBody, TooLarge: msgFileTooLarge,
			Replies: []openapi.Reply{openapi.Answer(http.StatusCreated, "Written.", openapi.Props{"path": openapi.String(), "filename": openapi.String(), "size": &openapi.Schema{Type: "integer", Format: "int64"}})},
			Fails: []openapi.Fail{
				openapi.Fails(http.StatusBadRequest, ops.MsgInvalidFilename, msgInvalidContent, msgInvalidBody), notFoundAgent,
				openapi.Fails(http.StatusForbidden, ops.MsgStorageQuota),
				openapi.Fails(http.StatusInternalServerError, ops.MsgUploadFailed),
			},
		},
	}
}
