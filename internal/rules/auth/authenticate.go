package auth

import (
	"context"
	"errors"
	"fmt"
	"time"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// Why a credential is refused. Each door words them its own way (the REST facade: 401 with
// `Invalid token`, `Token revoked`, `Token expired` (ErrTokenExpired), `Missing userId`).
var (
	// ErrTokenInvalid: the credential names nothing that exists (a forged or unknown token, a
	// key of another user, a workspace that is gone).
	ErrTokenInvalid = errors.New("invalid token")
	// ErrTokenRevoked: the credential existed and was withdrawn (a revoked key; a platform
	// token whose agent is gone or whose gateway token was rotated).
	ErrTokenRevoked = errors.New("token revoked")
	// ErrMissingUser: the route needs a user and the token names none.
	ErrMissingUser = errors.New("missing user id")
)

// Refusals of a credential bound to one agent (CheckBound).
var (
	// ErrOtherAgent: the route names another agent (answered as if it did not exist).
	ErrOtherAgent = errors.New("the credential is bound to another agent")
	// ErrNeedsUser: the route does not take credentials bound to one agent.
	ErrNeedsUser = errors.New("the route needs a user's token")
)

// Identity is who a credential speaks for.
type Identity struct {
	// UserID is the token's `sub` ("" for gateway tokens and keys without a user).
	UserID string
	// Workspace is the credential's tenant.
	Workspace *agentsv1.Workspace
	// Role is the caller's role in the workspace.
	Role agentsv1.Role
	// Scopes granted to the credential.
	Scopes []string
	// KeyID is the token's `jti` (a user's token: its ApiKey's name); "" for gateway tokens.
	KeyID string
	// BoundAgent is set for a credential bound to one agent (its gateway token or a platform
	// token): it may only act on that agent.
	BoundAgent string
}

// Lookup reads what authentication needs. A missing object is nil (or "") with a nil error;
// an error is a failure to read, which refuses nothing by itself.
type Lookup interface {
	// ApiKey is the ApiKey name in namespace.
	ApiKey(ctx context.Context, namespace, name string) (*agentsv1.ApiKey, error)
	// Agent is the agent name in namespace.
	Agent(ctx context.Context, namespace, name string) (*agentsv1.Agent, error)
	// GatewayToken is a's current gateway token ("" when it has none).
	GatewayToken(ctx context.Context, a *agentsv1.Agent) (string, error)
	// GatewayTokenOwner is the agent whose gateway token tok is (its namespace and name; ""
	// when none is).
	GatewayTokenOwner(ctx context.Context, tok string) (namespace, agent string, err error)
	// Workspace is the workspace name.
	Workspace(ctx context.Context, name string) (*agentsv1.Workspace, error)
}

// GatewayScopes are what an agent's gateway token may do on that agent's own routes. Domains
// and channels are not among them: they widen an agent's reach (a public address, a chat
// account), so they need a user's token.
var GatewayScopes = []string{ScopeAgentsWrite, ScopeAgentsExec, ScopeSecretsRead, ScopeSkillsWrite}

// Authenticate resolves a bearer credential (JWT or gateway token) at now. needUser: a JWT
// must name a user (`sub`). A JWT's signature is verified (CPU only) before anything is read,
// so a forged or tampered token costs l nothing.
func Authenticate(ctx context.Context, l Lookup, s *Signer, now time.Time, tok string, needUser bool) (*Identity, error) {
	if !LooksLikeJWT(tok) {
		return gatewayIdentity(ctx, l, tok)
	}
	claims, err := s.Parse(tok)
	switch {
	case errors.Is(err, ErrTokenExpired):
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrTokenInvalid, err)
	}
	if needUser && claims.Subject == "" {
		return nil, ErrMissingUser
	}
	if claims.IsPlatform() {
		return platformIdentity(ctx, l, claims)
	}
	key, err := l.ApiKey(ctx, claims.Workspace, claims.ID)
	if err != nil {
		return nil, err
	}
	if err := CheckKey(key, claims.Subject, now); err != nil {
		return nil, err
	}
	ws, err := liveWorkspace(ctx, l, claims.Workspace)
	if err != nil {
		return nil, err
	}
	return &Identity{
		UserID: claims.Subject, Workspace: ws, Role: RoleOf(ws, claims.Subject, key.Spec.Role),
		Scopes: key.Spec.Scopes, KeyID: key.Name,
	}, nil
}

// CheckKey decides a user's token by its ApiKey (nil: there is none), the token's user and
// the time: the key, not the token, is the truth about revocation and expiry.
func CheckKey(key *agentsv1.ApiKey, user string, now time.Time) error {
	switch {
	case key == nil:
		return fmt.Errorf("%w: no such key", ErrTokenInvalid)
	case key.Spec.Revoked:
		return ErrTokenRevoked
	case key.Spec.ExpiresAt != nil && !now.Before(key.Spec.ExpiresAt.Time):
		return ErrTokenExpired
	case key.Spec.UserID != user:
		return fmt.Errorf("%w: the key is another user's", ErrTokenInvalid)
	}
	return nil
}

// RoleOf is a user's role in ws: the workspace's member list, or, for a user it does not
// list, the role the key was minted with.
func RoleOf(ws *agentsv1.Workspace, user string, keyRole agentsv1.Role) agentsv1.Role {
	if role := ws.RoleOf(user); role != "" {
		return role
	}
	return keyRole
}

// CheckPlatformToken decides a platform token by its agent now (nil: there is none) and that
// agent's gateway token now: it holds while the agent lives (same UID, not being deleted)
// and the gateway token is the one it was minted under.
func CheckPlatformToken(claims *Claims, a *agentsv1.Agent, gatewayToken string) error {
	switch {
	case a == nil:
		return fmt.Errorf("%w: the token's agent does not exist", ErrTokenRevoked)
	case string(a.UID) != claims.AgentUID || a.DeletionTimestamp != nil:
		return fmt.Errorf("%w: the token's agent is gone", ErrTokenRevoked)
	case gatewayToken == "" || !TokensEqual(GatewayBinding(gatewayToken), claims.GatewayBinding):
		return fmt.Errorf("%w: the gateway token was rotated", ErrTokenRevoked)
	}
	return nil
}

// CheckBound applies the rule of credentials bound to one agent (bound; "" for others) to a
// route naming pathAgent ("" for none) that takes them or not: another agent's route answers
// ErrOtherAgent, a route that does not take them (workspace-wide routes, and routes that
// widen the agent's reach: domains, channels, secrets attachment) ErrNeedsUser.
func CheckBound(bound, pathAgent string, takesBound bool) error {
	switch {
	case bound == "":
		return nil
	case pathAgent != "" && pathAgent != bound:
		return ErrOtherAgent
	case !takesBound:
		return ErrNeedsUser
	}
	return nil
}

// platformIdentity accepts a stateless platform token (no ApiKey stands behind it) while its
// agent lives and its gateway token is the one it was minted under.
func platformIdentity(ctx context.Context, l Lookup, claims *Claims) (*Identity, error) {
	a, err := l.Agent(ctx, claims.Workspace, claims.Agent)
	if err != nil {
		return nil, err
	}
	gw := ""
	if a != nil {
		if gw, err = l.GatewayToken(ctx, a); err != nil {
			return nil, err
		}
	}
	if err := CheckPlatformToken(claims, a, gw); err != nil {
		return nil, err
	}
	ws, err := liveWorkspace(ctx, l, claims.Workspace)
	if err != nil {
		return nil, err
	}
	return &Identity{
		UserID: claims.Subject, Workspace: ws, Role: agentsv1.RoleMember,
		Scopes: PlatformTokenScopes, KeyID: claims.ID, BoundAgent: a.Name,
	}, nil
}

// gatewayIdentity resolves an agent's gateway token: it acts for that agent only, as a
// member, with GatewayScopes.
func gatewayIdentity(ctx context.Context, l Lookup, tok string) (*Identity, error) {
	ns, agent, err := l.GatewayTokenOwner(ctx, tok)
	if err != nil {
		return nil, err
	}
	if agent == "" {
		return nil, fmt.Errorf("%w: no agent has this gateway token", ErrTokenInvalid)
	}
	ws, err := liveWorkspace(ctx, l, ns)
	if err != nil {
		return nil, err
	}
	return &Identity{Workspace: ws, Role: agentsv1.RoleMember, Scopes: GatewayScopes, BoundAgent: agent}, nil
}

// liveWorkspace reads the credential's workspace; a missing or terminating one refuses it.
func liveWorkspace(ctx context.Context, l Lookup, name string) (*agentsv1.Workspace, error) {
	ws, err := l.Workspace(ctx, name)
	switch {
	case err != nil:
		return nil, err
	case ws == nil:
		return nil, fmt.Errorf("%w: workspace %s does not exist", ErrTokenInvalid, name)
	case ws.DeletionTimestamp != nil:
		return nil, fmt.Errorf("%w: workspace %s is being deleted", ErrTokenInvalid, name)
	}
	return ws, nil
}
