package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentplane/agentplane/internal/syskeys"
)

// SigningKeySecret is the core Secret (in the system namespace) that holds the JWT key.
const SigningKeySecret = "agentplane-jwt-signing-key"

// signingKeySize is the length of a generated signing key in bytes.
const signingKeySize = 32

// EnsureSigningKey returns the JWT signing key kept in the system namespace, creating it (32
// random bytes) when absent. Concurrent callers agree: the API server lets one create win and
// the others read what it wrote.
func EnsureSigningKey(ctx context.Context, c client.Client, systemNamespace string) ([]byte, error) {
	return syskeys.EnsureRandomKey(ctx, c, systemNamespace, SigningKeySecret, signingKeySize)
}

// KeyID is a short public fingerprint of a signing key (the JWT `kid` header).
func KeyID(key []byte) string {
	sum := sha256.Sum256(key)
	return hex.EncodeToString(sum[:4])
}
