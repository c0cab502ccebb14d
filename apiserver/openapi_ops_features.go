package apiserver

import (
	"net/http"
	"slices"
)

// Descriptions of the domain, snapshot, skill and channel routes (see openapi.go).

func domainOps() map[string]*op {
	domainReply := props{"domain": domainView{}}
	notFound := fails(http.StatusNotFound, msgAgentNotFound, msgDomainNotFound)
	fields := map[string]*schema{
		"subdomain":    {Description: "A label under the apps domain; names containing the brand are refused."},
		"customDomain": {Description: "A host name you own (paid plans); it is `pending_ownership` until its TXT record is seen."},
		"targetPort":   {Description: "The agent's port the domain routes to (default 18789, the gateway).", Minimum: docPtr[int64](1), Maximum: docPtr[int64](65535)},
	}
	return map[string]*op{
		"GET /v0/agents/{agentId}/domains": {
			id: "listDomains", tag: "domains", summary: "List an agent's domains",
			replies: []reply{answer(http.StatusOK, "The domains, oldest first.", props{"domains": []domainView{}})},
			fails:   []fail{notFoundAgent},
		},
		"POST /v0/agents/{agentId}/domains": {
			id: "createDomain", tag: "domains", summary: "Add a subdomain or a custom domain",
			description: "Exactly one of `subdomain` and `customDomain`; at most 5 domains per agent. A custom domain answers " +
				"the TXT record (`verification`) that proves ownership.",
			body: domainRequest{}, fields: fields,
			replies: []reply{answer(http.StatusCreated, "The domain.", domainReply)},
			fails: []fail{
				fails(http.StatusBadRequest, msgInvalidBody, msgDomainExactlyOne, msgInvalidTargetPort, msgDomainBanned, msgInvalidSubdomain,
					msgInvalidDomain, msgDomainLimit),
				fails(http.StatusForbidden, msgCustomDomainPlan), notFoundAgent,
				fails(http.StatusConflict, msgSubdomainTaken, msgDomainRegistered),
			},
		},
		"GET /v0/agents/{agentId}/domains/{domainId}": {
			id: "getDomain", tag: "domains", summary: "Read a domain",
			replies: []reply{answer(http.StatusOK, "The domain.", domainReply)},
			fails:   []fail{notFound},
		},
		"PATCH /v0/agents/{agentId}/domains/{domainId}": {
			id: "patchDomain", tag: "domains", summary: "Change a domain's target port",
			description: "The host name is immutable: `subdomain`/`customDomain`, when given, must name the current one.",
			body:        domainRequest{}, fields: fields,
			replies: []reply{answer(http.StatusOK, "The domain.", domainReply)},
			fails:   []fail{fails(http.StatusBadRequest, msgInvalidBody, msgHostImmutable, msgInvalidTargetPort), notFound},
		},
		"DELETE /v0/agents/{agentId}/domains/{domainId}": {
			id: "deleteDomain", tag: "domains", summary: "Remove a domain",
			replies: []reply{answer(http.StatusOK, "Deleted: the route is gone and the name is free to claim again.", deletedReply),
				answer(http.StatusAccepted, "Deletion under way; the controller has not finished it within the wait.", deletedReply)},
			fails: []fail{notFound},
		},
		"POST /v0/agents/{agentId}/domains/{domainId}/verify": {
			id: "verifyDomain", tag: "domains", summary: "Look a custom domain's TXT record up now",
			description: "Subdomains and verified domains answer 200 at once; otherwise the controller checks the record and the facade waits for it (10 s).",
			replies: []reply{
				answer(http.StatusOK, "The domain as checked.", domainReply),
				answer(http.StatusAccepted, "The check has not happened yet: the domain as it stands.", domainReply),
			},
			fails: []fail{notFound},
		},
	}
}

func snapshotOps() map[string]*op {
	return map[string]*op{
		"GET /v0/agents/{agentId}/snapshots": {
			id: "listSnapshots", tag: "snapshots", summary: "An agent's snapshot history",
			replies: []reply{answer(http.StatusOK, "The completed snapshots, newest first.", props{"snapshots": []snapshotView{}})},
			fails:   []fail{notFoundAgent},
		},
		"POST /v0/agents/{agentId}/snapshots/sync": {
			id: "syncSnapshot", tag: "snapshots", summary: "Archive the agent's workspace now",
			description: "Creates a Snapshot and waits for the controller to store it; 503 when storage or the workspace cannot be reached; 403 when the archive does not fit in the workspace's snapshot quota (`spec.quotas.snapshots`).",
			replies:     []reply{answer(http.StatusCreated, "The stored snapshot.", props{"snapshot": snapshotView{}})},
			fails: []fail{
				fails(http.StatusBadRequest, msgStorageMissing), notFoundAgent, fails(http.StatusForbidden, msgStorageQuota),
				fails(http.StatusInternalServerError, msgSyncFailed),
			},
		},
		"POST /v0/agents/{agentId}/snapshots/reset": {
			id: "resetSnapshot", tag: "snapshots", summary: "Restore the agent's workspace from a snapshot",
			description: "The snapshot must be in the agent's history. The workspace is restored and the gateway restarted.",
			body:        resetRequest{}, required: []string{"snapshotCid"},
			replies: []reply{answer(http.StatusOK, "Restored.", props{"snapshot": snapshotView{}, "agent": agentView{}})},
			fails: []fail{
				fails(http.StatusBadRequest, msgInvalidSnapshotCID, msgStorageMissing),
				fails(http.StatusNotFound, msgAgentNotFound, msgSnapshotNotFound),
				fails(http.StatusInternalServerError, msgResetFailed),
			},
		},
	}
}

func skillOps() map[string]*op {
	registry := []fail{
		fails(http.StatusUnprocessableEntity, msgInvalidBundle+": <reason>", msgBundleTooLarge),
		fails(http.StatusBadGateway, msgRegistryError),
		fails(http.StatusServiceUnavailable, msgRegistryUnavailable, msgStorageMissing),
	}
	syncNote := "Waits (30 s) for the agent's workspace to reflect the change: 200 once it does, 202 while it is pending."
	return map[string]*op{
		"POST /v0/clawhub/{slug}/install": {
			id: "installSkill", tag: "skills", summary: "Install a skill from ClawHub into the workspace",
			description: "Downloads and checks the bundle, stores it by CID. 201 when new; 200 when that version was installed already or another version was replaced.",
			body:        installSkillRequest{}, optionalBody: true,
			fields: map[string]*schema{"version": {Description: "A version (default: the registry's latest)."}},
			replies: []reply{
				answer(http.StatusCreated, "Installed.", props{"skill": skillView{}}),
				answer(http.StatusOK, "Already installed, or updated to this version.", props{"skill": skillView{}}),
			},
			fails: slices.Concat([]fail{
				fails(http.StatusBadRequest, msgInvalidSlug, msgInvalidBody, msgInvalidVersion),
				fails(http.StatusNotFound, msgSkillNotFound), fails(http.StatusConflict, msgSkillConflict),
			}, registry),
		},
		"GET /v0/skills": {
			id: "listSkills", tag: "skills", summary: "List the workspace's installed skills",
			replies: []reply{answer(http.StatusOK, "The skills, by slug.", props{"skills": []skillView{}})},
		},
		"GET /v0/agents/{agentId}/skills": {
			id: "listAgentSkills", tag: "skills", summary: "List the skills an agent attaches",
			replies: []reply{answer(http.StatusOK, "The attached skills and whether each is unpacked in the workspace.", props{"skills": []attachedSkillView{}})},
			fails:   []fail{notFoundAgent},
		},
		"POST /v0/agents/{agentId}/skills": {
			id: "attachSkills", tag: "skills", summary: "Attach installed skills to an agent",
			description: "At most 10 skills per agent. " + syncNote,
			body:        attachSkillsRequest{}, required: []string{"skillCids"},
			fields: map[string]*schema{"skillCids": {Description: "Bundle CIDs of installed skills."}},
			replies: []reply{
				answer(http.StatusOK, "Attached and unpacked.", agentReply),
				answer(http.StatusAccepted, "Attached; the workspace is not updated yet.", agentReply),
			},
			fails: []fail{
				fails(http.StatusBadRequest, msgInvalidBody, msgSkillCIDsRequired, msgSkillsMax),
				fails(http.StatusNotFound, msgAgentNotFound, msgSkillNotFound),
			},
		},
		"DELETE /v0/agents/{agentId}/skills/{skillId}": {
			id: "detachSkill", tag: "skills", summary: "Detach a skill from an agent",
			description: syncNote,
			replies: []reply{
				answer(http.StatusOK, "Detached and removed.", agentReply),
				answer(http.StatusAccepted, "Detached; the workspace is not updated yet.", agentReply),
			},
			fails: []fail{fails(http.StatusNotFound, msgAgentNotFound, msgSkillNotFound)},
		},
		"POST /v0/agents/{agentId}/skills/{skillId}/update": {
			id: "updateAgentSkill", tag: "skills", summary: "Move an attached skill to another version",
			description: "409 when `expectedVersion` is not the installed version or the Skill changed meanwhile. " + syncNote,
			body:        updateSkillRequest{}, optionalBody: true,
			fields: map[string]*schema{
				"version":         {Description: "The version to move to (default: the registry's latest)."},
				"expectedVersion": {Description: "The version the caller believes is installed."},
			},
			replies: []reply{
				answer(http.StatusOK, "Updated and unpacked.", props{"skill": skillView{}}),
				answer(http.StatusAccepted, "Updated; the workspace is not updated yet.", props{"skill": skillView{}}),
			},
			fails: slices.Concat([]fail{
				fails(http.StatusBadRequest, msgInvalidBody, msgInvalidVersion),
				fails(http.StatusNotFound, msgAgentNotFound, msgSkillNotFound), fails(http.StatusConflict, msgSkillConflict),
			}, registry),
		},
	}
}

// attachedSkillView is an entry of GET /v0/agents/{agentId}/skills (listAgentSkills builds
// it from a local type of the same shape).
type attachedSkillView struct {
	skillView
	Installed bool `json:"installed"`
}

func channelOps() map[string]*op {
	channelReply := props{"channel": channelView{}}
	byType := props{}
	for _, t := range ChannelTypes {
		byType[string(t)] = channelView{}
	}
	target := []fail{
		fails(http.StatusBadRequest, msgUnsupportedChannel), fails(http.StatusForbidden, msgChannelPlan), notFoundAgent,
	}
	return map[string]*op{
		"GET /v0/agents/{agentId}/channels": {
			id: "listChannels", tag: "channels", summary: "An agent's channels, one per chat network",
			replies: []reply{answer(http.StatusOK, "Every channel type, configured or not (tokens as hints only).", props{"channels": byType})},
			fails:   []fail{notFoundAgent},
		},
		"POST /v0/agents/{agentId}/channels/{channel}": {
			id: "setupChannel", tag: "channels", summary: "Connect the agent to a chat network, or update the connection",
			description: "`botToken` is required on initial setup (not for whatsapp, which pairs by QR code), `appToken` as well for slack; " +
				"absent fields keep their value on an update. Waits for the controller to apply the channel.",
			query: []*parameter{waitParam},
			body:  channelRequest{},
			fields: map[string]*schema{
				"dmPolicy":  {Enum: dmPolicies, Description: "Who may message the agent directly (new channels: `pairing`)."},
				"allowFrom": {Description: "Senders allowed by the `allowlist` policy.", MaxItems: docPtr(maxAllowFrom)},
			},
			replies: []reply{
				answer(http.StatusCreated, "A new channel, configured.", channelReply),
				answer(http.StatusOK, "The channel, updated and configured.", channelReply),
				answer(http.StatusAccepted, "Recorded, not applied yet (the agent is not reachable, the wait ended, or `wait=false`).", channelReply),
			},
			fails: slices.Concat(target, []fail{
				fails(http.StatusBadRequest, msgInvalidBody, msgInvalidBotToken, msgInvalidAppToken, msgInvalidDMPolicy, msgInvalidAllowFrom,
					msgBotTokenRequired, msgAppTokenRequired),
				fails(http.StatusConflict, msgChannelRemoving), fails(http.StatusInternalServerError, msgChannelConfigFailed)}),
		},
		"DELETE /v0/agents/{agentId}/channels/{channel}": {
			id: "deleteChannel", tag: "channels", summary: "Disconnect the agent from a chat network",
			replies: []reply{
				answer(http.StatusOK, "Removed.", props{"id": docString(), "channel": docString(), "deleted": docBool()}),
				answer(http.StatusAccepted, "Removal requested, not done yet (`deleted` false).", props{"id": docString(), "channel": docString(), "deleted": docBool()}),
			},
			fails: slices.Concat(target, []fail{fails(http.StatusNotFound, msgChannelNotFound), fails(http.StatusInternalServerError, msgChannelRemoveFailed)}),
		},
	}
}
