package v1alpha1

// Field indexes on the manager's cache (controllers.SetupIndexes registers them; the REST
// facade shares the cache). Look objects up with client.MatchingFields{Index...: value}.
const (
	// IndexAgentRef indexes Channels, Domains and Snapshots by spec.agentRef.name. It is also
	// a CRD selectable field of those kinds, so the same MatchingFields works on a live
	// reader (the API server filters).
	IndexAgentRef = "spec.agentRef.name"
	// IndexAgentSkillCID indexes Agents by the CIDs of spec.skills.
	IndexAgentSkillCID = "spec.skills.cid"
	// IndexAgentSecret indexes Agents by the AgentSecrets spec.secrets names.
	IndexAgentSecret = "spec.secrets.name"
	// IndexSkillCID indexes Skills by every CID they answer to (Skill.CIDs: spec.cid and the
	// earlier versions' CIDs that agents may still pin).
	IndexSkillCID = "agentplane.skillCIDs"
	// IndexSkillAttachedTo indexes Skills by status.attachedTo (the agents recorded on them).
	IndexSkillAttachedTo = "status.attachedTo"
	// IndexGatewayAgent indexes the platform's core Secrets by the agent whose gateway token
	// they hold (LabelGatewayTokenOf).
	IndexGatewayAgent = "agentplane.gatewayAgent"
	// IndexGatewayTokenHash indexes the agents' gateway-token Secrets (LabelGatewayTokenOf)
	// by the hex SHA-256 of the token they hold (auth.GatewayTokenHash): the REST facade
	// resolves a gateway token from the cache alone, so a forged one costs the API server
	// nothing.
	IndexGatewayTokenHash = "agentplane.gatewayTokenHash"
)
