package apiserver

import (
	"context"
	"errors"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/ops"
	"github.com/agentplane/agentplane/internal/rules/auth"
)

// Caller is who is calling, resolved from the bearer token.
type Caller struct {
	// UserID is the token's `sub` ("" for gateway tokens and keys without a user).
	UserID string
	// Workspace is the caller's tenant (from the informer cache).
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

// tenant is whose objects the caller's operations act on.
func (c *Caller) tenant() ops.Tenant {
	return ops.Tenant{Namespace: c.Namespace, OnlyAgent: c.GatewayAgent}
}

// HeaderWorkspace lets a client pin the workspace it expects its token to belong to; a token
// of another workspace is then refused with 401.
const HeaderWorkspace = "X-Agentplane-Workspace"

// IndexGatewayTokenHash is the field index on core Secrets by the hash of the gateway token
// they hold (auth.GatewayTokenHash).
const IndexGatewayTokenHash = agentsv1.IndexGatewayTokenHash

func unauthorized(msg string, cause error) *Error {
	return withCause(http.StatusUnauthorized, msg, cause)
}

// authenticate resolves the caller of r and checks what route a needs. Every failure here is
// a 401 (who are you?), a 403 (you may not) or, for a credential bound to one agent that
// addresses another, the 404 of a missing agent (existence is not revealed).
func (s *Server) authenticate(r *http.Request, a access) (*Caller, error) {
	if a.public {
		return &Caller{}, nil
	}
	tok, err := auth.ParseBearer(r.Header.Get("Authorization"))
	if err != nil {
		return nil, unauthorized(msgUnauthorized, err)
	}
	var c *Caller
	if auth.LooksLikeJWT(tok) {
		c, err = s.callerFromJWT(r.Context(), tok, !isV3(r.URL.Path))
	} else {
		c, err = s.callerFromGatewayToken(r.Context(), tok)
	}
	if err != nil {
		return nil, err
	}
	if want := r.Header.Get(HeaderWorkspace); want != "" && want != c.Namespace {
		return nil, unauthorized("Token does not belong to this workspace", nil)
	}
	if err := checkBound(r, a, c); err != nil {
		return nil, err
	}
	if !auth.HasScope(c.Scopes, a.scope) {
		return nil, withCause(http.StatusForbidden, "Missing scope "+a.scope, nil)
	}
	if !auth.Allows(c.Role, a.perm) {
		return nil, errorf(http.StatusForbidden, msgForbidden)
	}
	return c, nil
}

// checkBound applies the rule of credentials bound to one agent (gateway and platform tokens):
// another agent's route answers as if that agent did not exist (404), and a route that does
// not take agent-bound credentials (workspace-wide routes, and routes that widen the agent's
// reach: domains, channels, secrets attachment) is refused (403).
func checkBound(r *http.Request, a access, c *Caller) error {
	if c.GatewayAgent == "" {
		return nil
	}
	if id := r.PathValue("agentId"); id != "" && id != c.GatewayAgent {
		return errorf(http.StatusNotFound, ops.MsgAgentNotFound)
	}
	if !a.gateway {
		return withCause(http.StatusForbidden, msgForbidden, errors.New("the route needs a user's token"))
	}
	return nil
}

// callerFromJWT verifies the token's signature (CPU only) before it reads anything: a forged
// or tampered token costs kube-apiserver nothing.
func (s *Server) callerFromJWT(ctx context.Context, tok string, needUser bool) (*Caller, error) {
	claims, err := s.opts.Signer.Parse(tok)
	switch {
	case errors.Is(err, auth.ErrTokenExpired):
		return nil, unauthorized("Token expired", err)
	case err != nil:
		return nil, unauthorized("Invalid token", err)
	}
	if needUser && claims.Subject == "" {
		return nil, unauthorized(msgMissingUserID, nil)
	}
	if claims.IsPlatform() {
		return s.callerFromPlatformToken(ctx, claims)
	}
	key := &agentsv1.ApiKey{}
	if err := s.lookups.get(ctx, s.opts, client.ObjectKey{Namespace: claims.Workspace, Name: claims.ID}, key); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, unauthorized("Invalid token", err)
		}
		return nil, err
	}
	switch {
	case key.Spec.Revoked:
		return nil, unauthorized("Token revoked", nil)
	case key.Spec.ExpiresAt != nil && !s.opts.Now().Before(key.Spec.ExpiresAt.Time):
		return nil, unauthorized("Token expired", nil)
	case key.Spec.UserID != claims.Subject:
		return nil, unauthorized("Invalid token", nil)
	}
	ws, err := s.workspace(ctx, claims.Workspace)
	if err != nil {
		return nil, err
	}
	role := ws.RoleOf(claims.Subject)
	if role == "" {
		role = key.Spec.Role
	}
	return &Caller{
		UserID: claims.Subject, Workspace: ws, Namespace: ws.Name, Role: role,
		Scopes: key.Spec.Scopes, KeyID: key.Name,
	}, nil
}

// callerFromPlatformToken accepts a stateless platform token (no ApiKey stands behind it)
// while its agent lives (same UID) and its gateway token is the one it was minted under.
func (s *Server) callerFromPlatformToken(ctx context.Context, claims *auth.Claims) (*Caller, error) {
	a := &agentsv1.Agent{}
	if err := s.lookups.get(ctx, s.opts, client.ObjectKey{Namespace: claims.Workspace, Name: claims.Agent}, a); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, unauthorized("Token revoked", err)
		}
		return nil, err
	}
	if string(a.UID) != claims.AgentUID || a.DeletionTimestamp != nil {
		return nil, unauthorized("Token revoked", errors.New("the token's agent is gone"))
	}
	sec := &corev1.Secret{}
	if err := s.lookups.get(ctx, s.opts, client.ObjectKey{Namespace: a.Namespace, Name: gatewaySecretName(a)}, sec); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, unauthorized("Token revoked", err)
		}
		return nil, err
	}
	stored := string(sec.Data[agentsv1.GatewayTokenDataKey])
	if stored == "" || !auth.TokensEqual(auth.GatewayBinding(stored), claims.GatewayBinding) {
		return nil, unauthorized("Token revoked", errors.New("the gateway token was rotated"))
	}
	ws, err := s.workspace(ctx, claims.Workspace)
	if err != nil {
		return nil, err
	}
	return &Caller{
		UserID: claims.Subject, Workspace: ws, Namespace: ws.Name, Role: agentsv1.RoleMember,
		Scopes: auth.PlatformTokenScopes, KeyID: claims.ID, GatewayAgent: a.Name,
	}, nil
}

// gatewayScopes are what an agent's gateway token may do on that agent's own routes. Domains
// and channels are not among them: they widen an agent's reach (a public address, a chat
// account), so they need a user's token.
var gatewayScopes = []string{
	auth.ScopeAgentsWrite, auth.ScopeAgentsExec, auth.ScopeSecretsRead, auth.ScopeSkillsWrite,
}

// callerFromGatewayToken resolves an agent's gateway token from the informer cache alone,
// through the index on the token's hash: a token the cache does not hold is refused without
// a request to kube-apiserver. The replica that rotates a token waits until its own cache
// holds the new one (rotateGatewayToken); another replica accepts it once its watch delivers
// the change, typically within milliseconds.
func (s *Server) callerFromGatewayToken(ctx context.Context, tok string) (*Caller, error) {
	sec, err := s.gatewaySecretFor(ctx, tok)
	if err != nil {
		return nil, err
	}
	if sec == nil {
		return nil, unauthorized("Invalid token", nil)
	}
	ws, err := s.workspace(ctx, sec.Namespace)
	if err != nil {
		return nil, err
	}
	return &Caller{
		Workspace: ws, Namespace: ws.Name, Role: agentsv1.RoleMember,
		Scopes: gatewayScopes, GatewayAgent: sec.Labels[agentsv1.LabelGatewayTokenOf],
	}, nil
}

// workspace reads the caller's workspace; a missing or terminating one refuses the token.
func (s *Server) workspace(ctx context.Context, name string) (*agentsv1.Workspace, error) {
	ws := &agentsv1.Workspace{}
	if err := s.lookups.get(ctx, s.opts, client.ObjectKey{Name: name}, ws); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, unauthorized("Invalid token", err)
		}
		return nil, err
	}
	if ws.DeletionTimestamp != nil {
		return nil, unauthorized("Invalid token", nil)
	}
	return ws, nil
}
