package apiserver

import "net/http"

// Descriptions of the secret and issue routes (see openapi.go).

func secretOps() map[string]*op {
	secretReply := props{"secret": secretView{}}
	secretsReply := props{"secrets": []secretView{}}
	notFoundSecret := fails(http.StatusNotFound, msgAgentNotFound, msgSecretNotFound)
	return map[string]*op{
		"POST /v0/secrets": {
			id: "createSecret", tag: "secrets", summary: "Create a workspace secret",
			description: "The value is sealed (AES-256-GCM) and never answered. Its agents see it as the environment variable `envName` " +
				"(default: the name, upper-cased, other characters as `_`). Names that change how the agent's processes load code or find files, " +
				"or that the platform sets (PATH, HOME, TMPDIR, LD_*, NODE_*, NPM_CONFIG_*, PYTHON*, OPENCLAW_*, AGENTPLANE_*, ...), are refused.",
			body: createSecretRequest{}, required: []string{"name", "value"},
			fields: map[string]*schema{
				"name":     {Description: "Unique in the workspace; at most 128 characters.", MaxLength: docPtr(128)},
				"value":    {Description: "At most 32 KiB."},
				"provider": {Description: "Groups credentials: an agent attaches at most one secret per provider."},
			},
			replies: []reply{answer(http.StatusCreated, "The secret (without its value).", secretReply)},
			fails: []fail{
				fails(http.StatusBadRequest, msgInvalidBody, msgSecretNameRequired, msgSecretValueRequired, msgSecretNameTooLong,
					"Secret value must be at most 32 KiB", msgInvalidProvider, msgInvalidEnvName, msgReservedEnvName),
				fails(http.StatusConflict, msgDuplicateSecret),
				fails(http.StatusServiceUnavailable, msgSecretsNotConfigured),
			},
		},
		"GET /v0/secrets": {
			id: "listSecrets", tag: "secrets", summary: "List the workspace's secrets",
			replies: []reply{answer(http.StatusOK, "The secrets (never their values), by name.", secretsReply)},
		},
		"DELETE /v0/secrets/{secretId}": {
			id: "deleteSecret", tag: "secrets", summary: "Delete a secret no agent attaches",
			replies: []reply{answer(http.StatusOK, "Deleted.", deletedReply)},
			fails:   []fail{fails(http.StatusNotFound, msgSecretNotFound), fails(http.StatusConflict, msgSecretAttached)},
		},
		"GET /v0/agents/{agentId}/secrets": {
			id: "listAgentSecrets", tag: "secrets", summary: "List the secrets an agent attaches",
			replies: []reply{answer(http.StatusOK, "The agent's secrets.", secretsReply)},
			fails:   []fail{notFoundAgent},
		},
		"POST /v0/agents/{agentId}/secrets": {
			id: "attachSecrets", tag: "secrets", summary: "Attach workspace secrets to an agent",
			body: attachSecretsRequest{}, required: []string{"secretIds"},
			replies: []reply{answer(http.StatusOK, "The agent.", agentReply)},
			fails: []fail{
				fails(http.StatusBadRequest, msgInvalidBody, msgSecretIDsRequired, msgReservedEnvName), notFoundSecret,
				fails(http.StatusConflict, msgConflictingSecrets),
			},
		},
		"DELETE /v0/agents/{agentId}/secrets/{secretId}": {
			id: "detachSecret", tag: "secrets", summary: "Detach a secret from an agent",
			replies: []reply{answer(http.StatusOK, "The agent.", agentReply)},
			fails:   []fail{notFoundSecret},
		},
		"GET /v0/issues": {
			id: "listIssues", tag: "issues", summary: "List reported issues (internal accounts)",
			replies: []reply{answer(http.StatusOK, "The issues, newest first.", props{"issues": []issueView{}})},
			fails:   []fail{fails(http.StatusNotFound, msgNotFound)},
		},
		"POST /v0/issues": {
			id: "createIssue", tag: "issues", summary: "Report an issue (internal accounts)",
			body: issueRequest{}, required: []string{"title"},
			fields: map[string]*schema{
				"title": {Description: "At most 200 characters.", MaxLength: docPtr(200)}, "body": {Description: "At most 16 KiB."},
				"agentId": {Description: "An agent of the workspace the issue is about."},
			},
			replies: []reply{answer(http.StatusCreated, "The issue.", props{"issue": issueView{}})},
			fails: []fail{
				fails(http.StatusBadRequest, msgInvalidBody, msgIssueTitle), fails(http.StatusNotFound, msgNotFound, msgAgentNotFound),
			},
		},
	}
}
