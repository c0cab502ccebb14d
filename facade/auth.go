package facade

import (
	"errors"
	"net/http"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/ops"
	"github.com/agentplane/agentplane/internal/rules/auth"
)

// Caller is who is calling, resolved from the bearer token.
type Caller struct {
	// UserID is the token's `sub` ("" for gateway tokens and keys without a user).
	UserID string
	// Workspace is the caller's workspace (from the informer cache).
	Workspace *agentsv1.Workspace
	// Namespace holds the workspace's objects.
	Namespace string
	// Role is the caller's role in the workspace.
	Role agentsv1.Role
	// Scopes granted to the credential.
	Scopes []string
	// KeyID is the token's `jti` (a user's token: its ApiKey's name); "" for gateway tokens.
	KeyID string
	// GatewayAgent is set when the caller used a credential bound to one agent (its gateway
	// token or a platform token): it may only act on that agent.
	GatewayAgent string
}

// scope is whose objects the caller's operations act on.
func (c *Caller) scope() ops.Scope {
	return ops.Scope{Namespace: c.Namespace, OnlyAgent: c.GatewayAgent}
}

// HeaderWorkspace lets a client pin the workspace it expects its token to belong to; a token
// of another workspace is then refused with 401.
const HeaderWorkspace = "X-Agentplane-Workspace"

func unauthorized(msg string, cause error) *Error {
	return withCause(http.StatusUnauthorized, msg, cause)
}

// authenticate resolves the caller of r (auth.Authenticate decides) and checks what route a
// needs. Every failure here is a 401 (who are you?), a 403 (you may not) or, for a credential
// bound to one agent that addresses another, the 404 of a missing agent (existence is not
// revealed).
func (s *Server) authenticate(r *http.Request, a access) (*Caller, error) {
	if a.public {
		return &Caller{}, nil
	}
	tok, err := auth.ParseBearer(r.Header.Get("Authorization"))
	if err != nil {
		return nil, unauthorized(msgUnauthorized, err)
	}
	id, err := auth.Authenticate(r.Context(), s.ops.AuthLookup(), s.opts.Signer, s.opts.Now(), tok, !isV3(r.URL.Path))
	if err != nil {
		return nil, authError(err)
	}
	c := &Caller{
		UserID: id.UserID, Workspace: id.Workspace, Namespace: id.Workspace.Name, Role: id.Role,
		Scopes: id.Scopes, KeyID: id.KeyID, GatewayAgent: id.BoundAgent,
	}
	if want := r.Header.Get(HeaderWorkspace); want != "" && want != c.Namespace {
		return nil, unauthorized("Token does not belong to this workspace", nil)
	}
	switch err := auth.CheckBound(c.GatewayAgent, r.PathValue("agentId"), a.gateway); {
	case errors.Is(err, auth.ErrOtherAgent):
		return nil, errorf(http.StatusNotFound, ops.MsgAgentNotFound)
	case err != nil:
		return nil, withCause(http.StatusForbidden, msgForbidden, err)
	}
	if !auth.HasScope(c.Scopes, a.scope) {
		return nil, withCause(http.StatusForbidden, "Missing scope "+a.scope, nil)
	}
	if !auth.Allows(c.Role, a.perm) {
		return nil, errorf(http.StatusForbidden, msgForbidden)
	}
	return c, nil
}

// authError words authentication's refusals as the contract does (401); a failure to read
// what it needs maps as any other error.
func authError(err error) error {
	switch {
	case errors.Is(err, auth.ErrTokenExpired):
		return unauthorized("Token expired", err)
	case errors.Is(err, auth.ErrTokenRevoked):
		return unauthorized("Token revoked", err)
	case errors.Is(err, auth.ErrMissingUser):
		return unauthorized(msgMissingUserID, nil)
	case errors.Is(err, auth.ErrTokenInvalid):
		return unauthorized("Invalid token", err)
	}
	return err
}
