package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strings"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// The model-proxy credential is what an agent's gateway sends to the platform's model proxy
// in place of a provider key: "apx1." + base64url("<namespace>/<agent>") + "." +
// base64url(HMAC-SHA256(gateway token, label || namespace/agent)). It is worthless outside
// the proxy (no provider accepts it), names its agent, and is derived from the agent's
// gateway token: rotating the token rotates it, and deleting the agent (with its token
// Secret) revokes it. Nothing is stored for it.
const modelCredLabel = "agentplane model proxy v1\x00"

// NewModelCredential derives the model-proxy credential of agent namespace/name.
func NewModelCredential(namespace, name, gatewayToken string) string {
	id := namespace + "/" + name
	return agentsv1.ModelCredentialPrefix + base64.RawURLEncoding.EncodeToString([]byte(id)) + "." +
		base64.RawURLEncoding.EncodeToString(modelCredMAC(id, gatewayToken))
}

// ParseModelCredential returns the agent a credential names (not yet verified).
func ParseModelCredential(cred string) (namespace, name string, ok bool) {
	rest, found := strings.CutPrefix(cred, agentsv1.ModelCredentialPrefix)
	if !found {
		return "", "", false
	}
	idPart, _, found := strings.Cut(rest, ".")
	if !found {
		return "", "", false
	}
	id, err := base64.RawURLEncoding.DecodeString(idPart)
	if err != nil {
		return "", "", false
	}
	namespace, name, found = strings.Cut(string(id), "/")
	if !found || namespace == "" || name == "" {
		return "", "", false
	}
	return namespace, name, true
}

// VerifyModelCredential reports whether cred is the current credential of namespace/name
// under gatewayToken (constant time).
func VerifyModelCredential(cred, namespace, name, gatewayToken string) bool {
	if gatewayToken == "" {
		return false
	}
	return hmac.Equal([]byte(cred), []byte(NewModelCredential(namespace, name, gatewayToken)))
}

func modelCredMAC(id, key string) []byte {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(modelCredLabel))
	m.Write([]byte(id))
	return m.Sum(nil)
}
