package apiserver

import (
	"context"
	"errors"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/auth"
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
	// KeyID is the ApiKey's name (the token's `jti`); "" for gateway tokens.
	KeyID string
	// GatewayAgent is set when the caller used an agent's gateway token: it may only act on
	// that agent.
	GatewayAgent string
}

// HeaderWorkspace lets a client pin the workspace it expects its token to belong to; a token
// of another workspace is then refused with 401.
const HeaderWorkspace = "X-Agentplane-Workspace"

// IndexGatewayAgent is the field index on core Secrets: the agent whose gateway token a
// Secret holds (agentsv1.LabelGatewayTokenOf).
const IndexGatewayAgent = agentsv1.IndexGatewayAgent

func unauthorized(msg string, cause error) *Error {
	return withCause(http.StatusUnauthorized, msg, cause)
}

// authenticate resolves the caller of r and checks what route a needs. Every failure here is
// a 401 (who are you?) or a 403 (you may not).
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
		c, err = s.callerFromGatewayToken(r, tok, a)
	}
	if err != nil {
		return nil, err
	}
	if want := r.Header.Get(HeaderWorkspace); want != "" && want != c.Namespace {
		return nil, unauthorized("Token does not belong to this workspace", nil)
	}
	if !auth.HasScope(c.Scopes, a.scope) {
		return nil, withCause(http.StatusForbidden, "Missing scope "+a.scope, nil)
	}
	if !auth.Allows(c.Role, a.perm) {
		return nil, errorf(http.StatusForbidden, msgForbidden)
	}
	return c, nil
}

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
	key := &agentsv1.ApiKey{}
	if err := s.getCachedOrLive(ctx, client.ObjectKey{Namespace: claims.Workspace, Name: claims.ID}, key); err != nil {
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

// gatewayScopes are what an agent's gateway token may do on that agent's own routes.
var gatewayScopes = []string{
	auth.ScopeAgentsWrite, auth.ScopeAgentsExec, auth.ScopeSecretsRead,
	auth.ScopeDomainsWrite, auth.ScopeSkillsWrite, auth.ScopeChannelsWrite,
}

// callerFromGatewayToken accepts an agent's gateway token on that agent's own routes.
func (s *Server) callerFromGatewayToken(r *http.Request, tok string, a access) (*Caller, error) {
	agentID := r.PathValue("agentId")
	if !a.gateway || agentID == "" {
		return nil, unauthorized("Invalid token", nil)
	}
	sec, err := s.gatewaySecretFor(r.Context(), agentID, tok)
	if err != nil {
		return nil, err
	}
	if sec == nil {
		return nil, unauthorized("Invalid token", nil)
	}
	ws, err := s.workspace(r.Context(), sec.Namespace)
	if err != nil {
		return nil, err
	}
	return &Caller{
		Workspace: ws, Namespace: ws.Name, Role: agentsv1.RoleMember,
		Scopes: gatewayScopes, GatewayAgent: agentID,
	}, nil
}

// gatewaySecretFor finds the agent's gateway-token Secret holding tok: in the informer cache
// first and, only when the cache holds no match, on the API server (a token rotated a moment
// ago through another replica is accepted while this replica's cache catches up). It answers
// nil when neither holds the token.
func (s *Server) gatewaySecretFor(ctx context.Context, agentID, tok string) (*corev1.Secret, error) {
	match := func(list *corev1.SecretList) *corev1.Secret {
		for i := range list.Items {
			if stored := string(list.Items[i].Data[agentsv1.GatewayTokenDataKey]); stored != "" && auth.TokensEqual(stored, tok) {
				return &list.Items[i]
			}
		}
		return nil
	}
	var cached corev1.SecretList
	if err := s.opts.Client.List(ctx, &cached, client.MatchingFields{IndexGatewayAgent: agentID}); err != nil {
		return nil, err
	}
	if sec := match(&cached); sec != nil || s.opts.APIReader == nil {
		return sec, nil
	}
	var live corev1.SecretList
	if err := s.opts.APIReader.List(ctx, &live, client.MatchingLabels{agentsv1.LabelGatewayTokenOf: agentID}); err != nil {
		return nil, err
	}
	return match(&live), nil
}

// workspace reads the caller's workspace; a missing or terminating one refuses the token.
func (s *Server) workspace(ctx context.Context, name string) (*agentsv1.Workspace, error) {
	ws := &agentsv1.Workspace{}
	if err := s.getCachedOrLive(ctx, client.ObjectKey{Name: name}, ws); err != nil {
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

// getCachedOrLive (auth lookups) reads from the informer cache and, only on a miss, from the
// API server: a
// key created a moment ago by another replica is not refused while the cache catches up.
func (s *Server) getCachedOrLive(ctx context.Context, key client.ObjectKey, obj client.Object) error {
	err := s.opts.Client.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) && s.opts.APIReader != nil {
		return s.opts.APIReader.Get(ctx, key, obj)
	}
	return err
}
