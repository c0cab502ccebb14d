package facade

import (
	"net/http"

	"github.com/agentplane/agentplane/internal/console"
	"github.com/agentplane/agentplane/internal/rules/auth"
)

// routes registers every route of the facade. The table is the API: scope and permission are
// declared next to each pattern.
func (s *Server) routes() {
	// Health of the facade itself (no token).
	s.handle("GET /healthz", access{public: true}, func(*http.Request, *Caller) (*Response, error) {
		return ok(map[string]string{"status": "ok"})
	})
	// This API's OpenAPI document (no token).
	s.handle("GET /openapi.json", access{public: true}, s.serveOpenAPI)
	// The web console (no token to load it; its calls carry the token the user pasted).
	webConsole := console.Handler()
	s.mux.Handle("GET "+console.Prefix, webConsole)
	s.mux.Handle("GET "+console.Prefix+"/", webConsole)

	// Who am I: the caller as the facade resolved it (agent-bound credentials too: it shows
	// nothing but the caller).
	s.handle("GET /v0/me", access{scope: auth.ScopeAgentsRead, gateway: true}, s.whoami)

	s.agentRoutes()
	s.fleetRoutes()
	s.secretRoutes()

	// Issues: closed beta, internal accounts only (404 for everyone else).
	s.handle("GET /v0/issues", access{scope: auth.ScopeAgentsRead, perm: auth.PermRead}, s.listIssues)
	s.handle("POST /v0/issues", access{scope: auth.ScopeAgentsWrite, perm: auth.PermWrite}, s.createIssue)

	// v3: the hosted API's auth check used by the pinata SDK.
	s.handle("GET /v3/data/testAuthentication", access{scope: auth.ScopeFilesRead}, s.testAuthentication)
	s.fileRoutes()
	s.domainRoutes()
	s.snapshotRoutes()
	s.skillRoutes()
	s.channelRoutes()
}

// agentRoutes: agents, and engine operations in their homes.
func (s *Server) agentRoutes() {
	read := access{scope: auth.ScopeAgentsRead, perm: auth.PermRead}
	write := access{scope: auth.ScopeAgentsWrite, perm: auth.PermWrite}
	own := func(a access) access { a.gateway = true; return a }
	// wake: the route needs the gateway or the home; a sleeping agent is woken first.
	wake := func(a access) access { a.wakes = true; return a }

	// Agents.
	s.handle("GET /v0/agents", read, s.listAgents)
	s.handle("POST /v0/agents", write, s.createAgent)
	s.handle("GET /v0/agents/{agentId}", own(read), s.getAgentRoute)
	s.handle("DELETE /v0/agents/{agentId}", write, s.deleteAgent)
	s.handle("POST /v0/agents/{agentId}/restart", own(write), s.restartAgent)
	s.handle("GET /v0/agents/{agentId}/versions", own(read), s.agentVersions)
	s.handle("GET /v0/agents/{agentId}/gateway-token", access{scope: auth.ScopeAgentsWrite, perm: auth.PermAdmin}, s.getGatewayToken)
	s.handle("POST /v0/agents/{agentId}/gateway-token/rotate", own(access{scope: auth.ScopeAgentsWrite, perm: auth.PermWrite}), s.rotateGatewayToken)
	s.handle("POST /v0/agents/{agentId}/platform/token", wake(own(write)), s.platformToken)
	s.handle("POST /v0/agents/{agentId}/scripts/retry", wake(own(access{scope: auth.ScopeAgentsExec, perm: auth.PermWrite})), s.retryScripts)
	s.handle("POST /v0/agents/{agentId}/suspend", own(write), s.suspendAgent)
	s.handle("POST /v0/agents/{agentId}/resume", own(write), s.resumeAgent)
	s.handle("GET /v0/agents/{agentId}/devices", wake(own(read)), s.listDevices)
	s.handle("GET /v0/templates", read, s.listTemplates)

	// Engine operations in the agent's home.
	exec := wake(own(access{scope: auth.ScopeAgentsExec, perm: auth.PermWrite}))
	s.handle("POST /v0/agents/{agentId}/console/exec", exec, s.consoleExec)
	s.handle("GET /v0/agents/{agentId}/config", wake(own(read)), s.getConfig)
	// Gateway logs: the same access as config, but a sleeping agent is not woken.
	s.handle("GET /v0/agents/{agentId}/logs", own(read), s.agentLogs)
	s.handle("PUT /v0/agents/{agentId}/config", wake(own(write)), s.putConfig)
	s.handle("POST /v0/agents/{agentId}/config/validate", wake(own(read)), s.validateConfig)
	s.handle("GET /v0/agents/{agentId}/tasks", wake(own(read)), s.listTasks)
	s.handle("POST /v0/agents/{agentId}/tasks", wake(own(write)), s.createTask)
	uploads := wake(own(write))
	uploads.maxBody = s.agentUploadLimit()*4/3 + uploadBodyOverheadBytes
	s.handle("POST /v0/agents/{agentId}/files/upload", uploads, s.uploadAgentFile)
	s.chatRoutes(read, access{scope: auth.ScopeAgentsExec, perm: auth.PermWrite})
}

// chatRoutes: talking to an agent (facade/chat.go). A turn wakes a sleeping agent itself,
// reporting it in its stream; reading conversations wakes none. A turn may make the agent
// run its tools: it needs what console commands need.
func (s *Server) chatRoutes(read, talk access) {
	s.handle("POST /v0/agents/{agentId}/chat", talk, s.chat)
	s.handle("GET /v0/agents/{agentId}/chat/conversations", read, s.listConversations)
	s.handle("GET /v0/agents/{agentId}/chat/conversations/{conversationId}", read, s.getConversation)
}

// secretRoutes: workspace secrets and their attachment to agents.
func (s *Server) secretRoutes() {
	s.handle("POST /v0/secrets", access{scope: auth.ScopeSecretsWrite, perm: auth.PermWrite}, s.createSecret)
	s.handle("GET /v0/secrets", access{scope: auth.ScopeSecretsRead, perm: auth.PermRead}, s.listSecrets)
	s.handle("DELETE /v0/secrets/{secretId}", access{scope: auth.ScopeSecretsWrite, perm: auth.PermWrite}, s.deleteSecret)
	s.handle("GET /v0/agents/{agentId}/secrets", access{scope: auth.ScopeSecretsRead, perm: auth.PermRead, gateway: true}, s.listAgentSecrets)
	s.handle("POST /v0/agents/{agentId}/secrets", access{scope: auth.ScopeSecretsWrite, perm: auth.PermWrite}, s.attachSecrets)
	s.handle("DELETE /v0/agents/{agentId}/secrets/{secretId}", access{scope: auth.ScopeSecretsWrite, perm: auth.PermWrite}, s.detachSecret)
}

// fileRoutes: v3, files by CID and wallet signatures.
func (s *Server) fileRoutes() {
	filesRead := access{scope: auth.ScopeFilesRead, perm: auth.PermRead}
	filesWrite := access{scope: auth.ScopeFilesWrite, perm: auth.PermWrite}
	upload := filesWrite
	upload.maxBody = s.opts.MaxUploadBytes
	s.handle("POST /v3/files", upload, s.uploadFile)
	s.handle("GET /v3/files/{network}", filesRead, s.listFiles)
	s.handle("GET /v3/files/{network}/{id}", filesRead, s.getFile)
	s.handle("DELETE /v3/files/{network}/{id}", filesWrite, s.deleteFile)
	s.handle("POST /v3/files/{network}/signature/{cid}", filesWrite, s.addSignature)
	s.handle("GET /v3/files/{network}/signature/{cid}", filesRead, s.getSignature)
	s.handle("DELETE /v3/files/{network}/signature/{cid}", filesWrite, s.deleteSignature)
}

func (s *Server) testAuthentication(*http.Request, *Caller) (*Response, error) {
	return ok(map[string]string{"message": "Congratulations! You are communicating with the agentplane API!"})
}

func (s *Server) whoami(_ *http.Request, c *Caller) (*Response, error) {
	return ok(map[string]any{
		"userId": c.UserID, "workspace": c.Namespace, "role": c.Role, "scopes": c.Scopes,
		"plan": c.Workspace.Spec.Plan,
	})
}
