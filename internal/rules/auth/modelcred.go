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

// modelCred is the model-proxy credential's form.
var modelCred = agentCredential{prefix: agentsv1.ModelCredentialPrefix, label: modelCredLabel}

// NewModelCredential derives the model-proxy credential of agent namespace/name.
func NewModelCredential(namespace, name, gatewayToken string) string {
	return modelCred.derive(namespace, name, gatewayToken)
}

// ParseModelCredential returns the agent a credential names (not yet verified).
func ParseModelCredential(cred string) (namespace, name string, ok bool) {
	namespace, name, _, ok = modelCred.parse(cred)
	return namespace, name, ok
}

// VerifyModelCredential reports whether cred is the current credential of namespace/name
// under gatewayToken (constant time).
func VerifyModelCredential(cred, namespace, name, gatewayToken string) bool {
	return modelCred.verify(cred, namespace, name, gatewayToken)
}

// agentCredential is the form of a credential that names its agent and is derived from its
// gateway token: prefix + base64url("<namespace>/<agent>") + "." + base64url(HMAC-SHA256(gateway
// token, label || namespace/agent)). The label keeps one kind's credential from being another's.
type agentCredential struct{ prefix, label string }

func (c agentCredential) derive(namespace, name, gatewayToken string) string {
	id := namespace + "/" + name
	m := hmac.New(sha256.New, []byte(gatewayToken))
	m.Write([]byte(c.label))
	m.Write([]byte(id))
	return c.prefix + base64.RawURLEncoding.EncodeToString([]byte(id)) + "." +
		base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// parse returns the agent cred names and its MAC part (not yet verified).
func (c agentCredential) parse(cred string) (namespace, name, mac string, ok bool) {
	rest, found := strings.CutPrefix(cred, c.prefix)
	if !found {
		return "", "", "", false
	}
	idPart, mac, found := strings.Cut(rest, ".")
	if !found {
		return "", "", "", false
	}
	id, err := base64.RawURLEncoding.DecodeString(idPart)
	if err != nil {
		return "", "", "", false
	}
	namespace, name, found = strings.Cut(string(id), "/")
	if !found || namespace == "" || name == "" {
		return "", "", "", false
	}
	return namespace, name, mac, true
}

// verify reports whether cred is the current credential of namespace/name under gatewayToken
// (constant time).
func (c agentCredential) verify(cred, namespace, name, gatewayToken string) bool {
	if gatewayToken == "" {
		return false
	}
	return hmac.Equal([]byte(cred), []byte(c.derive(namespace, name, gatewayToken)))
}
