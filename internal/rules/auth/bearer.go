package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"strings"
)

// Bearer header errors.
var (
	ErrNoAuthorization = errors.New("missing Authorization header")
	ErrNotBearer       = errors.New("authorization scheme must be Bearer")
)

// maxTokenLen bounds what is parsed at all; real tokens are far shorter.
const maxTokenLen = 8192

// ParseBearer extracts the credential of an `Authorization: Bearer <token>` header. The
// scheme is case-insensitive; the token must be non-empty, printable ASCII without spaces.
func ParseBearer(header string) (string, error) {
	header = strings.TrimSpace(header)
	if header == "" {
		return "", ErrNoAuthorization
	}
	scheme, tok, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", ErrNotBearer
	}
	tok = strings.TrimSpace(tok)
	if tok == "" || len(tok) > maxTokenLen {
		return "", ErrNotBearer
	}
	for i := 0; i < len(tok); i++ {
		if c := tok[i]; c <= ' ' || c > '~' {
			return "", ErrNotBearer
		}
	}
	return tok, nil
}

// GatewayTokenPrefix marks per-agent gateway tokens.
const GatewayTokenPrefix = "gw_"

// NewGatewayToken returns a random per-agent gateway token (256 bits).
func NewGatewayToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return GatewayTokenPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// TokensEqual compares two tokens in constant time (over their hashes, so the length of the
// stored token does not leak either).
func TokensEqual(a, b string) bool {
	ha := sha256.Sum256([]byte(a))
	hb := sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

// Hint shows the last four characters of a secret, for lists that must never show it whole.
func Hint(secret string) string {
	if len(secret) <= 8 {
		return "****"
	}
	return "****" + secret[len(secret)-4:]
}
