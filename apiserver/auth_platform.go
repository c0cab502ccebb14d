package apiserver

import (
	"net/http"
	"time"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/ops"
	"github.com/agentplane/agentplane/internal/rules/auth"
)

// gatewaySecretName is the core Secret that holds a's gateway token.
func gatewaySecretName(a *agentsv1.Agent) string { return ops.GatewaySecretName(a) }

// platformToken mints a short-lived JWT the agent uses to call the platform on its own behalf.
// It is stateless (no object per mint): it names the agent and its UID, is bound to the
// agent's current gateway token and expires after auth.PlatformTokenTTL. It dies with the
// agent and with the rotation of the gateway token, and opens the agent's own routes with
// auth.PlatformTokenScopes (read) only.
func (s *Server) platformToken(r *http.Request, c *Caller) (*Response, error) {
	a, err := s.getAgent(r.Context(), c, r.PathValue("agentId"))
	if err != nil {
		return nil, err
	}
	sec, err := s.gatewaySecret(r.Context(), a)
	if err != nil {
		return nil, withMessage(ops.MsgTokenGenFailed, err)
	}
	gw := string(sec.Data[agentsv1.GatewayTokenDataKey])
	if gw == "" {
		return nil, errorf(http.StatusInternalServerError, ops.MsgTokenGenFailed)
	}
	tok, exp, err := s.opts.Signer.MintPlatform(auth.PlatformToken{
		Workspace: a.Namespace, Agent: a.Name, AgentUID: string(a.UID), GatewayToken: gw,
	})
	if err != nil {
		return nil, withMessage(ops.MsgTokenGenFailed, err)
	}
	return created(map[string]any{"token": tok, "expiresAt": exp.UTC().Format(time.RFC3339)})
}
