package facade

import (
	"net/http"

	"github.com/agentplane/agentplane/facade/openapi"
	"github.com/agentplane/agentplane/internal/ops"
)

// Descriptions of the secret and issue routes (see openapi.go).

func secretOperations() map[string]*openapi.Operation {
	secretReply := openapi.Props{"secret": secretView{}}
	secretsReply := openapi.Props{"secrets": []secretView{}}
	notFoundSecret := openapi.Fails(http.StatusNotFound, ops.MsgAgentNotFound, ops.MsgSecretNotFound)
	return map[string]*openapi.Operation{
		"POST /v0/secrets": {
			ID: "createSecret", Tag: "secrets", Summary: "Create a workspace secret",
			Description: "The value is sealed (AES-256-GCM) and never answered. Its agents see it as the environment variable `envName` " +
				"(default: the name, upper-cased, other characters as `_`). Names that change how the agent's processes load code or find files, " +
				"or that the platform sets (PATH, HOME, TMPDIR, LD_*, NODE_*, NPM_CONFIG_*, OPENSSL_*, PYTHON*, OPENCLAW_*, AGENTPLANE_*, ...), are refused.",
			Body: createSecretRequest{}, Required: []string{"name", "value"},
			Fields: map[string]*openapi.Schema{
				"name":     {Description: "Unique in the workspace; at most 128 characters.", MaxLength: openapi.Ptr(128)},
				"value":    {Description: "At most 32 KiB."},
				"provider": {Description: "Groups credentials: an agent attaches at most one secret per provider."},
			},
			Replies: []openapi.Reply{openapi.Answer(http.StatusCreated, "The secret (without its value).", secretReply)},
			Fails: []openapi.Fail{
				openapi.Fails(http.StatusBadRequest, msgInvalidBody, ops.MsgSecretNameRequired, ops.MsgSecretValueRequired, ops.MsgSecretNameTooLong,
					ops.MsgSecretValueTooLong, ops.MsgInvalidProvider, ops.MsgInvalidEnvName, ops.MsgReservedEnvName),
				openapi.Fails(http.StatusConflict, ops.MsgDuplicateSecret),
				openapi.Fails(http.StatusServiceUnavailable, ops.MsgSecretsNotConfigured),
			},
		},
		"GET /v0/secrets": {
			ID: "listSecrets", Tag: "secrets", Summary: "List the workspace's secrets",
			Replies: []openapi.Reply{openapi.Answer(http.StatusOK, "The secrets (never their values), by name.", secretsReply)},
		},
		"DELETE /v0/secrets/{secretId}": {
			ID: "deleteSecret", Tag: "secrets", Summary: "Delete a secret no agent attaches",
			Replies: []openapi.Reply{openapi.Answer(http.StatusOK, "Deleted.", deletedReply)},
			Fails:   []openapi.Fail{openapi.Fails(http.StatusNotFound, ops.MsgSecretNotFound), openapi.Fails(http.StatusConflict, ops.MsgSecretAttached)},
		},
		"GET /v0/agents/{agentId}/secrets": {
			ID: "listAgentSecrets", Tag: "secrets", Summary: "List the secrets an agent attaches",
			Replies: []openapi.Reply{openapi.Answer(http.StatusOK, "The agent's secrets.", secretsReply)},
			Fails:   []openapi.Fail{notFoundAgent},
		},
		"POST /v0/agents/{agentId}/secrets": {
			ID: "attachSecrets", Tag: "secrets", Summary: "Attach workspace secrets to an agent",
			Body: attachSecretsRequest{}, Required: []string{"secretIds"},
			Replies: []openapi.Reply{openapi.Answer(http.StatusOK, "The agent.", agentReply)},
			Fails: []openapi.Fail{
				openapi.Fails(http.StatusBadRequest, msgInvalidBody, ops.MsgSecretIDsRequired, ops.MsgReservedEnvName), notFoundSecret,
				openapi.Fails(http.StatusConflict, ops.MsgConflictingSecrets),
			},
		},
		"DELETE /v0/agents/{agentId}/secrets/{secretId}": {
			ID: "detachSecret", Tag: "secrets", Summary: "Detach a secret from an agent",
			Replies: []openapi.Reply{openapi.Answer(http.StatusOK, "The agent.", agentReply)},
			Fails:   []openapi.Fail{notFoundSecret},
		},
		"GET /v0/issues": {
			ID: "listIssues", Tag: "issues", Summary: "List reported issues (internal accounts)",
			Replies: []openapi.Reply{openapi.Answer(http.StatusOK, "The issues, newest first.", openapi.Props{"issues": []issueView{}})},
			Fails:   []openapi.Fail{openapi.Fails(http.StatusNotFound, msgNotFound)},
		},
		"POST /v0/issues": {
			ID: "createIssue", Tag: "issues", Summary: "Report an issue (internal accounts)",
			Body: issueRequest{}, Required: []string{"title"},
			Fields: map[string]*openapi.Schema{
				"title": {Description: "At most 200 characters.", MaxLength: openapi.Ptr(200)}, "body": {Description: "At most 16 KiB."},
				"agentId": {Description: "An agent of the workspace the issue is about."},
			},
			Replies: []openapi.Reply{openapi.Answer(http.StatusCreated, "The issue.", openapi.Props{"issue": issueView{}})},
			Fails: []openapi.Fail{
				openapi.Fails(http.StatusBadRequest, msgInvalidBody, ops.MsgIssueTitle), openapi.Fails(http.StatusNotFound, msgNotFound, ops.MsgAgentNotFound),
			},
		},
	}
}
