package apiserver

import (
	"net/http"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/engine"
)

// Descriptions of the meta, agent and engine routes (see openapi.go).

func metaOps() map[string]*op {
	return map[string]*op{
		"GET /healthz": {
			id: "getHealth", tag: "meta", summary: "Health of the facade",
			replies: []reply{answer(http.StatusOK, "The facade serves.", props{"status": enumOf("ok")})},
		},
		"GET /openapi.json": {
			id: "getOpenAPI", tag: "meta", summary: "This OpenAPI document",
			replies: []reply{answer(http.StatusOK, "The OpenAPI document of the facade.", anyObject())},
		},
		"GET /v0/me": {
			id: "whoAmI", tag: "meta", summary: "The caller as the facade resolved its token",
			replies: []reply{answer(http.StatusOK, "The caller.", props{
				"userId": describe(docString(), "The token's subject (\"\" for gateway tokens, `agent:<id>` for platform tokens)."), "workspace": docString(),
				"role":   enumOf(string(agentsv1.RoleOwner), string(agentsv1.RoleAdmin), string(agentsv1.RoleMember), string(agentsv1.RoleViewer)),
				"scopes": docNullable(arrayOf(docString())), "plan": docString(),
			})},
		},
	}
}

// agentReply is the {"agent": ...} body.
var agentReply = props{"agent": agentView{}}

// deletedReply is the {"id": ..., "deleted": true} body of deletes.
var deletedReply = props{"id": docString(), "deleted": docBool()}

func agentOps() map[string]*op {
	gatewayFailed := fail{status: http.StatusInternalServerError, msgs: []string{msgGatewayFailed}, extra: props{
		"agent": describe(&schema{AllOf: []*schema{{Ref: "#/components/schemas/Agent"}}}, "With `"+msgGatewayFailed+"` and `"+msgRestartFailed+"`: the agent, which is listed and can be restarted."),
	}}
	return map[string]*op{
		"GET /v0/agents": {
			id: "listAgents", tag: "agents", summary: "List the workspace's agents",
			replies: []reply{answer(http.StatusOK, "The agents, oldest first.", props{"agents": []agentView{}})},
		},
		"POST /v0/agents": {
			id: "createAgent", tag: "agents", summary: "Create an agent and wait for its gateway",
			description: "Creates the agent (from a template when `templateId` or `template` names one) and waits until its " +
				"gateway answers (about 30 s). `name` is required unless a template gives it.",
			query: []*parameter{waitParam},
			body:  createAgentRequest{},
			fields: map[string]*schema{
				"name":     {Description: "1 to 100 characters, not blank, none of `<>{}`\\` or control characters.", MaxLength: docPtr(maxAgentNameRunes)},
				"template": {Description: "A published template's slug."}, "templateId": {Description: "A published template's id."},
			},
			replies: []reply{
				answer(http.StatusCreated, "The agent; its gateway answers.", agentReply),
				answer(http.StatusAccepted, "The agent, still starting (`wait=false`, or the wait ended).", agentReply),
			},
			fails: []fail{
				fails(http.StatusBadRequest, msgInvalidBody, msgNameRequired, msgNameTooLong, msgNameBanned, msgInvalidVersion),
				fails(http.StatusForbidden, msgAgentLimit),
				fails(http.StatusNotFound, msgTemplateNotFound),
				gatewayFailed,
			},
		},
		"GET /v0/agents/{agentId}": {
			id: "getAgent", tag: "agents", summary: "Read an agent",
			replies: []reply{answer(http.StatusOK, "The agent.", agentReply)},
			fails:   []fail{notFoundAgent},
		},
		"DELETE /v0/agents/{agentId}": {
			id: "deleteAgent", tag: "agents", summary: "Delete an agent",
			replies: []reply{answer(http.StatusOK, "Deleted (the controller tears the agent down).", deletedReply)},
			fails:   []fail{notFoundAgent},
		},
		"POST /v0/agents/{agentId}/restart": {
			id: "restartAgent", tag: "agents", summary: "Restart an agent, optionally on another engine version",
			query: []*parameter{waitParam}, body: restartRequest{}, optionalBody: true,
			fields: map[string]*schema{"version": {Description: "An offered engine version (GET .../versions)."}, "engineVersion": {Description: "Same as `version`."}},
			replies: []reply{
				answer(http.StatusOK, "Restarted; the gateway answers.", agentReply),
				answer(http.StatusAccepted, "Restart requested, not done yet (`wait=false`, or the wait ended).", agentReply),
			},
			fails: []fail{
				fails(http.StatusBadRequest, msgInvalidBody, msgInvalidVersion), notFoundAgent,
				{status: http.StatusInternalServerError, msgs: []string{msgRestartFailed}, extra: gatewayFailed.extra},
			},
		},
		"POST /v0/agents/{agentId}/suspend": {
			id: "suspendAgent", tag: "agents", summary: "Suspend an agent (an addition beyond the contract)",
			description: "Sets `spec.suspended`: the gateway is drained and stopped, the agent's home and workspace are kept " +
				"and it holds no process or pod (status `suspended`). It still wakes by itself ahead of its next scheduled " +
				"task, and for a request that needs its gateway (console, config, tasks, devices, files, snapshots), which " +
				"waits for the gateway instead of failing. Waits until the gateway is stopped.",
			query: []*parameter{waitParam},
			replies: []reply{
				answer(http.StatusOK, "Suspended; no gateway runs.", agentReply),
				answer(http.StatusAccepted, "Suspension requested, not done yet (`wait=false`, or the wait ended).", agentReply),
			},
			fails: []fail{notFoundAgent, fails(http.StatusInternalServerError, msgSuspendFailed)},
		},
		"POST /v0/agents/{agentId}/resume": {
			id: "resumeAgent", tag: "agents", summary: "Resume a suspended agent (an addition beyond the contract)",
			description: "Clears `spec.suspended`, starts a new idle window and waits until the gateway answers, like a restart.",
			query:       []*parameter{waitParam},
			replies: []reply{
				answer(http.StatusOK, "Resumed; the gateway answers.", agentReply),
				answer(http.StatusAccepted, "Resume requested, not done yet (`wait=false`, or the wait ended).", agentReply),
			},
			fails: []fail{notFoundAgent, {status: http.StatusInternalServerError, msgs: []string{msgResumeFailed}, extra: gatewayFailed.extra}},
		},
		"GET /v0/agents/{agentId}/logs": {
			id: "getAgentLogs", tag: "agents", summary: "Read or follow the agent's gateway logs (an addition beyond the contract)",
			description: "The last lines of the gateway's output (stdout and stderr), oldest first. Secrets are redacted: the " +
				"agent's gateway token, the values of its attached secrets and channel tokens, and anything that looks like a " +
				"credential (`token=...`, `Bearer ...`, long opaque strings) read `[REDACTED]`. Reading logs never wakes a " +
				"suspended agent: it answers what the runtime still keeps (the local log file; on Kubernetes what the API " +
				"server still has, none without a pod).\n\nWith `follow=true` the answer is `text/event-stream`: the tail " +
				"lines, then every new line, each one event `data: <line>`; a comment `: keep-alive` every 15 s; `event: end` " +
				"with `data: agent deleted` when the agent is deleted. A follower that does not read keeps at most 1,000 lines " +
				"waiting; when they stay full it is cut off with `event: error` and `data: too slow`.",
			query: []*parameter{
				queryParam("tail", "How many of the last lines: 1 to 5000 (default 200, 50 with `follow=true`).",
					&schema{Type: "integer", Minimum: docPtr(int64(1)), Maximum: docPtr(int64(maxLogTail))}),
				queryParam("follow", "`true` streams the lines as server-sent events until the client leaves.", enumOf("true", "false")),
			},
			replies: []reply{{
				status: http.StatusOK, desc: "The lines (`application/json`), or with `follow=true` the stream (`text/event-stream`).",
				body: props{"lines": arrayOf(docString())},
				also: map[string]*schema{"text/event-stream": describe(docString(),
					"Server-sent events: `data: <line>` per line, `: keep-alive` comments, `event: end` / `event: error` before the stream closes.")},
			}},
			fails: []fail{fails(http.StatusBadRequest, msgInvalidTail), notFoundAgent, fails(http.StatusInternalServerError, msgReadLogsFailed)},
		},
		"GET /v0/agents/{agentId}/versions": {
			id: "getAgentVersions", tag: "agents", summary: "Engine versions: the agent's and the offered ones",
			replies: []reply{answer(http.StatusOK, "The versions.", props{
				"current": describe(docString(), "The version the agent asks for."), "running": describe(docString(), "The version its gateway runs."),
				"default": docString(), "available": docNullable(arrayOf(docString())),
			})},
			fails: []fail{notFoundAgent},
		},
		"GET /v0/agents/{agentId}/gateway-token": {
			id: "getGatewayToken", tag: "agents", summary: "Read the agent's gateway token",
			replies: []reply{answer(http.StatusOK, "The token and the gateway's endpoint.", props{"agentId": docString(), "token": docString(), "endpoint": docString()})},
			fails:   []fail{fails(http.StatusNotFound, msgAgentNotFound, msgNotFound)},
		},
		"POST /v0/agents/{agentId}/gateway-token/rotate": {
			id: "rotateGatewayToken", tag: "agents", summary: "Replace the agent's gateway token",
			description: "The previous token is refused as soon as this answers.",
			replies:     []reply{answer(http.StatusOK, "The new token.", props{"agentId": docString(), "token": docString()})},
			fails:       []fail{fails(http.StatusNotFound, msgAgentNotFound, msgNotFound)},
		},
		"POST /v0/agents/{agentId}/platform/token": {
			id: "createPlatformToken", tag: "agents", summary: "Mint a short-lived platform token for the agent",
			description: "A one-hour JWT the agent uses to read its own routes (`agents:read`, this agent only; no /v3 files). " +
				"It is stateless (no object is stored per mint) and is refused once the agent is deleted or its gateway token rotated.",
			replies: []reply{answer(http.StatusCreated, "The token.", props{"token": docString(), "expiresAt": &schema{Type: "string", Format: "date-time"}})},
			fails:   []fail{notFoundAgent, fails(http.StatusInternalServerError, msgTokenGenFailed)},
		},
		"POST /v0/agents/{agentId}/scripts/retry": {
			id: "retryStartupScripts", tag: "agents", summary: "Re-run the agent's start-up scripts",
			description: "Runs startup.sh and .agentplane/startup/*.sh in the workspace, in order, stopping at the first failure; a failing script is a 200 with its exit code.",
			replies: []reply{answer(http.StatusOK, "The scripts ran.", props{
				"exitCode": docInteger(), "stdout": docString(), "stderr": docString(), "timestamp": &schema{Type: "string", Format: "date-time"},
			})},
			fails: []fail{notFoundAgent, fails(http.StatusInternalServerError, msgScriptLaunch)},
		},
		"GET /v0/agents/{agentId}/devices": {
			id: "listDevices", tag: "agents", summary: "The gateway's paired and pending devices",
			replies: []reply{answer(http.StatusOK, "The devices, as the engine reports them.", engine.Devices{})},
			fails:   []fail{notFoundAgent, fails(http.StatusInternalServerError, msgCLIError)},
		},
		"GET /v0/templates": {
			id: "listTemplates", tag: "agents", summary: "List the published agent templates",
			replies: []reply{answer(http.StatusOK, "The templates, by slug.", props{"templates": []templateView{}})},
		},
	}
}

// agentUploadBody is the body of POST /v0/agents/{agentId}/files/upload (parsed as it streams).
var agentUploadBody = &schema{
	Type: "object", Required: []string{"filename", "contentBase64"},
	Properties: map[string]*schema{
		"filename":      describe(docString(), "A relative path inside the workspace (no `..`, no leading `/`)."),
		"contentBase64": describe(&schema{Type: "string", Format: "byte"}, "The content, standard base64 without a data-URL prefix."),
	},
}

func engineOps() map[string]*op {
	configReply := props{"config": describe(anyObject(), "The engine config, secrets redacted.")}
	return map[string]*op{
		"POST /v0/agents/{agentId}/console/exec": {
			id: "consoleExec", tag: "engine", summary: "Run a shell command in the agent's workspace",
			description: "Bounded in time (the process tree is killed) and output; a non-zero exit is a 200 with its exit code.",
			body:        execRequest{}, required: []string{"command"},
			fields: map[string]*schema{"cwd": {Description: "A directory inside the workspace."}},
			replies: []reply{answer(http.StatusOK, "The command ran.", props{
				"stdout": docString(), "stderr": docString(), "exitCode": docInteger(), "command": docString(),
				"timestamp": &schema{Type: "string", Format: "date-time"}, "timedOut": docBool(), "truncated": docBool(),
			})},
			fails: []fail{fails(http.StatusBadRequest, msgInvalidCommand), notFoundAgent, fails(http.StatusInternalServerError, msgExecFailed)},
		},
		"GET /v0/agents/{agentId}/config": {
			id: "getConfig", tag: "engine", summary: "Read the agent's engine config",
			replies: []reply{answer(http.StatusOK, "The config.", configReply)},
			fails:   []fail{notFoundAgent, fails(http.StatusInternalServerError, msgReadConfigFailed)},
		},
		"PUT /v0/agents/{agentId}/config": {
			id: "putConfig", tag: "engine", summary: "Validate and replace the agent's engine config",
			description: "The config is stored as the agent's own (the Secret `<agent>-config`, named by the Agent's `spec.configRef`) and the Agent controller renders the engine's file from it and the agent's channels; the gateway hot-reloads it. Redacted values keep their current secrets; the gateway token and the channels stay the platform's.",
			body:        configRequest{}, required: []string{"config"},
			replies: []reply{answer(http.StatusOK, "The config as rendered.", configReply),
				answer(http.StatusAccepted, "Stored; the agent has not rendered it yet (its gateway does not run, or the wait ended).", configReply)},
			fails: []fail{
				{status: http.StatusBadRequest, msgs: []string{msgInvalidJSON, msgInvalidConfig}, extra: props{
					"issues": describe(docNullable(arrayOf(docString())), "With `"+msgInvalidConfig+"` from the engine's validator: what is wrong."),
				}},
				notFoundAgent,
				fails(http.StatusInternalServerError, msgWriteConfigFailed, msgValidationFailed, msgReadConfigFailed),
			},
		},
		"POST /v0/agents/{agentId}/config/validate": {
			id: "validateConfig", tag: "engine", summary: "Check a config with the engine's validator",
			body: configRequest{}, required: []string{"config"},
			replies: []reply{answer(http.StatusOK, "The verdict (an invalid config is a 200 with valid false).", props{"valid": docBool(), "output": docString()})},
			fails: []fail{
				fails(http.StatusBadRequest, msgInvalidJSON), notFoundAgent, fails(http.StatusInternalServerError, msgValidationFailed),
			},
		},
		"GET /v0/agents/{agentId}/tasks": {
			id: "listTasks", tag: "engine", summary: "List the agent's scheduled tasks",
			replies: []reply{answer(http.StatusOK, "The tasks.", props{"tasks": []engine.Task{}})},
			fails:   []fail{notFoundAgent, fails(http.StatusInternalServerError, msgListCronFailed)},
		},
		"POST /v0/agents/{agentId}/tasks": {
			id: "createTask", tag: "engine", summary: "Schedule a task",
			description: "`schedule.kind` is `cron` (`expr`, optional `tz`), `every` (`everyMs` ≥ 1000) or `at` (a future RFC 3339 time); " +
				"`payload.kind` is `agentTurn` (`message`) or `systemEvent` (`text`).",
			body: taskRequest{}, required: []string{"name", "schedule", "payload"},
			fields:  map[string]*schema{"name": {Description: "1 to 100 characters.", MaxLength: docPtr(100)}},
			replies: []reply{answer(http.StatusCreated, "The task.", props{"task": engine.Task{}})},
			fails: []fail{
				fails(http.StatusBadRequest, msgInvalidParameters), notFoundAgent, fails(http.StatusInternalServerError, msgCreateCronFailed),
			},
		},
		"POST /v0/agents/{agentId}/files/upload": {
			id: "uploadAgentFile", tag: "engine", summary: "Write a file into the agent's workspace",
			description: "The body is decoded as it streams; a file over the upload limit (25 MiB by default) is refused with 413, one that would take the workspace over its uploads quota (`spec.quotas.uploads`) with 403.",
			body:        agentUploadBody, tooLarge: msgFileTooLarge,
			replies: []reply{answer(http.StatusCreated, "Written.", props{"path": docString(), "filename": docString(), "size": &schema{Type: "integer", Format: "int64"}})},
			fails: []fail{
				fails(http.StatusBadRequest, msgInvalidFilename, msgInvalidContent, msgInvalidBody), notFoundAgent,
				fails(http.StatusForbidden, msgStorageQuota),
				fails(http.StatusInternalServerError, msgUploadFailed),
			},
		},
	}
}
