package secrets

import (
	"strings"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// EnvNameOf is the environment variable an agent sees a secret as: spec.envName, else the
// secret's name upper-cased with every other character turned into '_'.
func EnvNameOf(s *agentsv1.AgentSecret) string {
	if s.Spec.EnvName != "" {
		return s.Spec.EnvName
	}
	var b strings.Builder
	for i, r := range strings.ToUpper(s.Spec.Name) {
		switch {
		case r >= 'A' && r <= 'Z', r == '_', r >= '0' && r <= '9' && i > 0:
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}
