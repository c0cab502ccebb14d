package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// PlatformTokenTTL is how long a platform token lives.
const PlatformTokenTTL = time.Hour

// PlatformTokenScopes are what a platform token may do: read its own agent's routes.
var PlatformTokenScopes = []string{ScopeAgentsRead}

// PlatformToken describes the agent a platform token is bound to.
type PlatformToken struct {
	// Workspace and Agent name the agent; AgentUID is its UID (a token dies with its agent:
	// an agent deleted and created again under the same name has another UID).
	Workspace, Agent, AgentUID string
	// GatewayToken is the agent's current gateway token: the token carries a binding to it
	// (GatewayBinding), so rotating the gateway token revokes every platform token minted
	// before. The token itself is never in the claims.
	GatewayToken string
	// TTL is the token's lifetime (0: PlatformTokenTTL).
	TTL time.Duration
}

// MintPlatform signs a stateless platform token: no ApiKey object stands behind it. Its
// claims name the agent (`agent`, `auid`), bind it to the gateway token (`gwb`) and expire.
func (s *Signer) MintPlatform(p PlatformToken) (string, time.Time, error) {
	ttl := p.TTL
	if ttl <= 0 {
		ttl = PlatformTokenTTL
	}
	exp := s.now().Add(ttl).Truncate(time.Second)
	c := Claims{
		Workspace: p.Workspace, Scopes: PlatformTokenScopes,
		Agent: p.Agent, AgentUID: p.AgentUID, GatewayBinding: GatewayBinding(p.GatewayToken),
	}
	c.Subject = PlatformSubject(p.Agent)
	c.ID = "pt-" + NewKeyID()[len("key-"):]
	c.ExpiresAt = jwt.NewNumericDate(exp)
	tok, err := s.Mint(c)
	return tok, exp, err
}

// PlatformSubject is the `sub` of an agent's platform tokens.
func PlatformSubject(agent string) string { return "agent:" + agent }

// IsPlatform reports whether the claims are a platform token's (bound to one agent).
func (c *Claims) IsPlatform() bool { return c.Agent != "" }

// GatewayBinding is what a platform token records of the gateway token it was minted under:
// a domain-separated hash (not the index hash, GatewayTokenHash), so the claims, which anyone
// holding the token can read, reveal nothing usable about the gateway token.
func GatewayBinding(gatewayToken string) string {
	sum := sha256.Sum256([]byte("agentplane platform-token binding\x00" + gatewayToken))
	return hex.EncodeToString(sum[:16])
}

// GatewayTokenHash is the hex SHA-256 of a gateway token: the key of the cache index the
// REST facade resolves gateway tokens by (agentsv1.IndexGatewayTokenHash).
func GatewayTokenHash(tok string) string {
	sum := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(sum[:])
}
