package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
)

// ConfigSourceHash identifies a user's engine config (status.config.sourceHash): whoever
// stores a config compares it with the Agent's status to know that a render is of that
// config. "" for none.
func ConfigSourceHash(user []byte) string {
	if user == nil {
		return ""
	}
	sum := sha256.Sum256(user)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// ConfigSecretName is the core Secret `PUT /config` stores an agent's config in.
func ConfigSecretName(agent string) string { return agent + "-config" }
