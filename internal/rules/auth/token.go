package auth

import (
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Issuer is the `iss` of every agentplane token.
const Issuer = "agentplane"

// Token errors; the REST facade answers 401 for each.
var (
	ErrTokenMalformed = errors.New("malformed token")
	ErrTokenSignature = errors.New("invalid token signature")
	ErrTokenExpired   = errors.New("token expired")
	ErrTokenClaims    = errors.New("invalid token claims")
)

// Claims are the JWT claims of an agentplane bearer token. On a user's token `jti` names the
// ApiKey object in the workspace's namespace; that object, not the token, is the truth about
// scopes, role, expiry and revocation. A platform token (Agent set) has no ApiKey: its
// agent's UID and gateway token decide (see MintPlatform).
type Claims struct {
	jwt.RegisteredClaims
	// Workspace the token belongs to.
	Workspace string `json:"ws"`
	// Scopes granted when the token was minted (informational; the ApiKey decides).
	Scopes []string `json:"scopes,omitempty"`
	// Agent is set on platform tokens minted for one agent (MintPlatform): such a token is
	// stateless (no ApiKey) and opens that agent only.
	Agent string `json:"agent,omitempty"`
	// AgentUID is the UID of that agent: the token dies with it.
	AgentUID string `json:"auid,omitempty"`
	// GatewayBinding binds a platform token to the agent's gateway token (GatewayBinding):
	// rotating the gateway token revokes it.
	GatewayBinding string `json:"gwb,omitempty"`
}

// Signer mints and verifies tokens with one HMAC-SHA256 key.
type Signer struct {
	key []byte
	kid string
	now func() time.Time
}

// NewSigner returns a Signer for key (at least 32 bytes).
func NewSigner(key []byte) (*Signer, error) {
	if len(key) < 32 {
		return nil, fmt.Errorf("signing key must be at least 32 bytes")
	}
	return &Signer{key: key, kid: KeyID(key), now: time.Now}, nil
}

// WithClock returns a copy of s that reads the time from now (for tests).
func (s *Signer) WithClock(now func() time.Time) *Signer {
	c := *s
	c.now = now
	return &c
}

// Mint signs claims. It fills `iss`, `iat` and, when empty, `jti`.
func (s *Signer) Mint(c Claims) (string, error) {
	c.Issuer = Issuer
	c.IssuedAt = jwt.NewNumericDate(s.now())
	if c.ID == "" {
		c.ID = NewKeyID()
	}
	t := jwt.NewWithClaims(jwt.SigningMethodHS256, c)
	t.Header["kid"] = s.kid
	return t.SignedString(s.key)
}

// Parse verifies a token's signature, algorithm, issuer and expiry and returns its claims.
// A token without `sub` parses; callers that need a user answer `Missing userId`.
func (s *Signer) Parse(raw string) (*Claims, error) {
	c := &Claims{}
	_, err := jwt.ParseWithClaims(raw, c, func(*jwt.Token) (any, error) { return s.key, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithIssuer(Issuer),
		jwt.WithTimeFunc(s.now),
		jwt.WithLeeway(5*time.Second),
	)
	switch {
	case err == nil:
	case errors.Is(err, jwt.ErrTokenExpired):
		return nil, ErrTokenExpired
	case errors.Is(err, jwt.ErrTokenMalformed):
		return nil, ErrTokenMalformed
	case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, jwt.ErrTokenUnverifiable):
		return nil, ErrTokenSignature
	default:
		return nil, fmt.Errorf("%w: %v", ErrTokenClaims, err)
	}
	if c.ID == "" || c.Workspace == "" {
		return nil, ErrTokenClaims
	}
	return c, nil
}

var keyIDEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// NewKeyID returns a random id usable as a `jti` and as a Kubernetes object name.
func NewKeyID() string {
	b := make([]byte, 15)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return "key-" + keyIDEncoding.EncodeToString(b)
}

// LooksLikeJWT reports whether a bearer credential has the three dot-separated parts of a
// JWT (everything else is treated as a gateway token).
func LooksLikeJWT(tok string) bool {
	return strings.Count(tok, ".") == 2
}
