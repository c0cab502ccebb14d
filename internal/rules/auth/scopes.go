// Package auth holds agentplane's credentials: the JWT signing key, bearer tokens and their
// ApiKey objects, scopes and roles, and per-agent gateway tokens; and the decision of who a
// credential speaks for (Authenticate, over what a Lookup reads).
package auth

import (
	"fmt"
	"slices"
	"strings"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// Scopes a token can carry. The `org:files:*` scopes are the hosted v3 API's; the others
// guard the /v0 agent-management routes.
const (
	ScopeFilesWrite    = "org:files:write"
	ScopeFilesRead     = "org:files:read"
	ScopeAgentsRead    = "agents:read"
	ScopeAgentsWrite   = "agents:write"
	ScopeAgentsExec    = "agents:exec"
	ScopeSecretsRead   = "secrets:read"
	ScopeSecretsWrite  = "secrets:write"
	ScopeSkillsWrite   = "skills:write"
	ScopeDomainsWrite  = "domains:write"
	ScopeChannelsWrite = "channels:write"
	ScopeAll           = "*"
)

// AllScopes lists every scope (what `--scopes '*'` expands to for display).
var AllScopes = []string{
	ScopeFilesWrite, ScopeFilesRead, ScopeAgentsRead, ScopeAgentsWrite, ScopeAgentsExec,
	ScopeSecretsRead, ScopeSecretsWrite, ScopeSkillsWrite, ScopeDomainsWrite, ScopeChannelsWrite,
}

// ValidateScopes rejects unknown scope names.
func ValidateScopes(scopes []string) error {
	for _, s := range scopes {
		if s != ScopeAll && !slices.Contains(AllScopes, s) {
			return fmt.Errorf("unknown scope %q (known: %s, or * for all)", s, strings.Join(AllScopes, ", "))
		}
	}
	return nil
}

// HasScope reports whether granted covers want. A write scope implies its read scope.
func HasScope(granted []string, want string) bool {
	if want == "" {
		return true
	}
	for _, g := range granted {
		if g == ScopeAll || g == want {
			return true
		}
		if strings.HasSuffix(want, ":read") && g == strings.TrimSuffix(want, ":read")+":write" {
			return true
		}
	}
	return false
}

// Permission is what a route needs from the caller's role.
type Permission int

const (
	// PermRead reads workspace state.
	PermRead Permission = iota
	// PermWrite changes agents and their parts.
	PermWrite
	// PermAdmin manages workspace-wide settings (secrets, members).
	PermAdmin
)

// Allows reports whether role grants p.
func Allows(role agentsv1.Role, p Permission) bool {
	switch role {
	case agentsv1.RoleOwner, agentsv1.RoleAdmin:
		return true
	case agentsv1.RoleMember:
		return p <= PermWrite
	case agentsv1.RoleViewer:
		return p == PermRead
	default:
		return false
	}
}
