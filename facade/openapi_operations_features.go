package facade

import (
	"net/http"
	"slices"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/facade/openapi"
	"github.com/agentplane/agentplane/internal/ops"
)

// Descriptions of the domain, snapshot, skill and channel routes (see openapi.go).

func domainOperations() map[string]*openapi.Operation {
	domainReply := openapi.Props{"domain": domainView{}}
	notFound := openapi.Fails(http.StatusNotFound, ops.MsgAgentNotFound, ops.MsgDomainNotFound)
	fields := map[string]*openapi.Schema{
		"subdomain":    {Description: "A label under the apps domain; names containing the brand are refused."},
		"customDomain": {Description: "A host name you own (paid plans); it is `pending_ownership` until its TXT record is seen."},
		"targetPort":   {Description: "The agent's port the domain routes to (default 18789, the gateway).", Minimum: openapi.Ptr[int64](1), Maximum: openapi.Ptr[int64](65535)},
	}
	return map[string]*openapi.Operation{
		"GET /v0/agents/{agentId}/domains": {
			ID: "listDomains", Tag: "domains", Summary: "List an agent's domains",
			Replies: []openapi.Reply{openapi.Answer(http.StatusOK, "The domains, oldest first.", openapi.Props{"domains": []domainView{}})},
			Fails:   []openapi.Fail{notFoundAgent},
		},
		"POST /v0/agents/{agentId}/domains": {
			ID: "createDomain", Tag: "domains", Summary: "Add a subdomain or a custom domain",
			Description: "Exactly one of `subdomain` and `customDomain`; at most 5 domains per agent. A custom domain answers " +
				"the TXT record (`verification`) that proves ownership.",
			Body: domainRequest{}, Fields: fields,
			Replies: []openapi.Reply{openapi.Answer(http.StatusCreated, "The domain.", domainReply)},
			Fails: []openapi.Fail{
				openapi.Fails(http.StatusBadRequest, msgInvalidBody, ops.MsgDomainExactlyOne, ops.MsgInvalidTargetPort, ops.MsgDomainBanned, ops.MsgInvalidSubdomain,
					ops.MsgInvalidDomain, ops.MsgDomainLimit),
				openapi.Fails(http.StatusForbidden, ops.MsgCustomDomainPlan), notFoundAgent,
				openapi.Fails(http.StatusConflict, ops.MsgSubdomainTaken, ops.MsgDomainRegistered),
			},
		},
		"GET /v0/agents/{agentId}/domains/{domainId}": {
			ID: "getDomain", Tag: "domains", Summary: "Read a domain",
			Replies: []openapi.Reply{openapi.Answer(http.StatusOK, "The domain.", domainReply)},
			Fails:   []openapi.Fail{notFound},
		},
		"PATCH /v0/agents/{agentId}/domains/{domainId}": {
			ID: "patchDomain", Tag: "domains", Summary: "Change a domain's target port",
			Description: "The host name is immutable: `subdomain`/`customDomain`, when given, must name the current one.",
			Body:        domainRequest{}, Fields: fields,
			Replies: []openapi.Reply{openapi.Answer(http.StatusOK, "The domain.", domainReply)},
			Fails:   []openapi.Fail{openapi.Fails(http.StatusBadRequest, msgInvalidBody, ops.MsgHostImmutable, ops.MsgInvalidTargetPort), notFound},
		},
		"DELETE /v0/agents/{agentId}/domains/{domainId}": {
			ID: "deleteDomain", Tag: "domains", Summary: "Remove a domain",
			Replies: []openapi.Reply{openapi.Answer(http.StatusOK, "Deleted: the route is gone and the name is free to claim again.", deletedReply),
				openapi.Answer(http.StatusAccepted, "Deletion under way; the controller has not finished it within the wait.", deletedReply)},
			Fails: []openapi.Fail{notFound},
		},
		"POST /v0/agents/{agentId}/domains/{domainId}/verify": {
			ID: "verifyDomain", Tag: "domains", Summary: "Look a custom domain's TXT record up now",
			Description: "Subdomains and verified domains answer 200 at once; otherwise the controller checks the record and the facade waits for it (10 s).",
			Replies: []openapi.Reply{
				openapi.Answer(http.StatusOK, "The domain as checked.", domainReply),
				openapi.Answer(http.StatusAccepted, "The check has not happened yet: the domain as it stands.", domainReply),
			},
			Fails: []openapi.Fail{notFound},
		},
	}
}

func snapshotOperations() map[string]*openapi.Operation {
	return map[string]*openapi.Operation{
		"GET /v0/agents/{agentId}/snapshots": {
			ID: "listSnapshots", Tag: "snapshots", Summary: "An agent's snapshot history",
			Replies: []openapi.Reply{openapi.Answer(http.StatusOK, "The completed snapshots, newest first.", openapi.Props{"snapshots": []snapshotView{}})},
			Fails:   []openapi.Fail{notFoundAgent},
		},
		"POST /v0/agents/{agentId}/snapshots/sync": {
			ID: "syncSnapshot", Tag: "snapshots", Summary: "Archive the agent's home now",
			Description: "Creates a Snapshot and waits for the controller to store it; 503 when storage or the agent's home cannot be reached; 403 when the archive does not fit in the workspace's snapshot quota (`spec.quotas.snapshots`).",
			Replies:     []openapi.Reply{openapi.Answer(http.StatusCreated, "The stored snapshot.", openapi.Props{"snapshot": snapshotView{}})},
			Fails: []openapi.Fail{
				openapi.Fails(http.StatusBadRequest, ops.MsgStorageMissing), notFoundAgent, openapi.Fails(http.StatusForbidden, ops.MsgStorageQuota),
				openapi.Fails(http.StatusInternalServerError, ops.MsgSyncFailed),
			},
		},
		"POST /v0/agents/{agentId}/snapshots/reset": {
			ID: "resetSnapshot", Tag: "snapshots", Summary: "Restore the agent's home from a snapshot",
			Description: "The snapshot must be in the agent's history. The workspace is restored and the gateway restarted.",
			Body:        resetRequest{}, Required: []string{"snapshotCid"},
			Replies: []openapi.Reply{openapi.Answer(http.StatusOK, "Restored.", openapi.Props{"snapshot": snapshotView{}, "agent": agentView{}})},
			Fails: []openapi.Fail{
				openapi.Fails(http.StatusBadRequest, ops.MsgInvalidSnapshotCID, ops.MsgStorageMissing),
				openapi.Fails(http.StatusNotFound, ops.MsgAgentNotFound, ops.MsgSnapshotNotFound),
				openapi.Fails(http.StatusInternalServerError, ops.MsgResetFailed),
			},
		},
	}
}

func skillOperations() map[string]*openapi.Operation {
	registry := []openapi.Fail{
		openapi.Fails(http.StatusUnprocessableEntity, ops.MsgInvalidBundle+": <reason>", ops.MsgBundleTooLarge),
		openapi.Fails(http.StatusBadGateway, ops.MsgRegistryError),
		openapi.Fails(http.StatusServiceUnavailable, ops.MsgRegistryUnavailable, ops.MsgStorageMissing),
	}
	syncNote := "Waits (30 s) for the agent's home to reflect the change: 200 once it does, 202 while it is pending."
	return map[string]*openapi.Operation{
		"POST /v0/clawhub/{slug}/install": {
			ID: "installSkill", Tag: "skills", Summary: "Install a skill from ClawHub into the workspace",
			Description: "Downloads and checks the bundle, stores it by CID. 201 when new; 200 when that version was installed already or another version was replaced.",
			Body:        installSkillRequest{}, OptionalBody: true,
			Fields: map[string]*openapi.Schema{"version": {Description: "A version (default: the registry's latest)."}},
			Replies: []openapi.Reply{
				openapi.Answer(http.StatusCreated, "Installed.", openapi.Props{"skill": skillView{}}),
				openapi.Answer(http.StatusOK, "Already installed, or updated to this version.", openapi.Props{"skill": skillView{}}),
			},
			Fails: slices.Concat([]openapi.Fail{
				openapi.Fails(http.StatusBadRequest, ops.MsgInvalidSlug, msgInvalidBody, ops.MsgInvalidVersion),
				openapi.Fails(http.StatusNotFound, ops.MsgSkillNotFound), openapi.Fails(http.StatusConflict, ops.MsgSkillConflict),
			}, registry),
		},
		"GET /v0/skills": {
			ID: "listSkills", Tag: "skills", Summary: "List the workspace's installed skills",
			Replies: []openapi.Reply{openapi.Answer(http.StatusOK, "The skills, by slug.", openapi.Props{"skills": []skillView{}})},
		},
		"GET /v0/agents/{agentId}/skills": {
			ID: "listAgentSkills", Tag: "skills", Summary: "List the skills an agent attaches",
			Replies: []openapi.Reply{openapi.Answer(http.StatusOK, "The attached skills and whether each is unpacked in the agent's home.", openapi.Props{"skills": []attachedSkillView{}})},
			Fails:   []openapi.Fail{notFoundAgent},
		},
		"POST /v0/agents/{agentId}/skills": {
			ID: "attachSkills", Tag: "skills", Summary: "Attach installed skills to an agent",
			Description: "At most 10 skills per agent. " + syncNote,
			Body:        attachSkillsRequest{}, Required: []string{"skillCids"},
			Fields: map[string]*openapi.Schema{"skillCids": {Description: "Bundle CIDs of installed skills."}},
			Replies: []openapi.Reply{
				openapi.Answer(http.StatusOK, "Attached and unpacked.", agentReply),
				openapi.Answer(http.StatusAccepted, "Attached; the workspace is not updated yet.", agentReply),
			},
			Fails: []openapi.Fail{
				openapi.Fails(http.StatusBadRequest, msgInvalidBody, ops.MsgSkillCIDsRequired, ops.MsgSkillsMax),
				openapi.Fails(http.StatusNotFound, ops.MsgAgentNotFound, ops.MsgSkillNotFound),
			},
		},
		"DELETE /v0/agents/{agentId}/skills/{skillId}": {
			ID: "detachSkill", Tag: "skills", Summary: "Detach a skill from an agent",
			Description: syncNote,
			Replies: []openapi.Reply{
				openapi.Answer(http.StatusOK, "Detached and removed.", agentReply),
				openapi.Answer(http.StatusAccepted, "Detached; the workspace is not updated yet.", agentReply),
			},
			Fails: []openapi.Fail{openapi.Fails(http.StatusNotFound, ops.MsgAgentNotFound, ops.MsgSkillNotFound)},
		},
		"POST /v0/agents/{agentId}/skills/{skillId}/update": {
			ID: "updateAgentSkill", Tag: "skills", Summary: "Move an attached skill to another version",
			Description: "409 when `expectedVersion` is not the installed version or the Skill changed meanwhile. " + syncNote,
			Body:        updateSkillRequest{}, OptionalBody: true,
			Fields: map[string]*openapi.Schema{
				"version":         {Description: "The version to move to (default: the registry's latest)."},
				"expectedVersion": {Description: "The version the caller believes is installed."},
			},
			Replies: []openapi.Reply{
				openapi.Answer(http.StatusOK, "Updated and unpacked.", openapi.Props{"skill": skillView{}}),
				openapi.Answer(http.StatusAccepted, "Updated; the workspace is not updated yet.", openapi.Props{"skill": skillView{}}),
			},
			Fails: slices.Concat([]openapi.Fail{
				openapi.Fails(http.StatusBadRequest, msgInvalidBody, ops.MsgInvalidVersion),
				openapi.Fails(http.StatusNotFound, ops.MsgAgentNotFound, ops.MsgSkillNotFound), openapi.Fails(http.StatusConflict, ops.MsgSkillConflict),
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

func channelOperations() map[string]*openapi.Operation {
	channelReply := openapi.Props{"channel": channelView{}}
	byType := openapi.Props{}
	for _, t := range agentsv1.ChannelTypes {
		byType[string(t)] = channelView{}
	}
	target := []openapi.Fail{
		openapi.Fails(http.StatusBadRequest, ops.MsgUnsupportedChannel), openapi.Fails(http.StatusForbidden, ops.MsgChannelPlan), notFoundAgent,
	}
	return map[string]*openapi.Operation{
		"GET /v0/agents/{agentId}/channels": {
			ID: "listChannels", Tag: "channels", Summary: "An agent's channels, one per chat network",
			Replies: []openapi.Reply{openapi.Answer(http.StatusOK, "Every channel type, configured or not (tokens as hints only).", openapi.Props{"channels": byType})},
			Fails:   []openapi.Fail{notFoundAgent},
		},
		"POST /v0/agents/{agentId}/channels/{channel}": {
			ID: "setupChannel", Tag: "channels", Summary: "Connect the agent to a chat network, or update the connection",
			Description: "`botToken` is required on initial setup (not for whatsapp, which pairs by QR code), `appToken` as well for slack; " +
				"absent fields keep their value on an update. Waits for the controller to apply the channel.",
			Query: []*openapi.Parameter{waitParam},
			Body:  channelRequest{},
			Fields: map[string]*openapi.Schema{
				"dmPolicy":  {Enum: ops.DMPolicies, Description: "Who may message the agent directly (new channels: `pairing`)."},
				"allowFrom": {Description: "Senders allowed by the `allowlist` policy.", MaxItems: openapi.Ptr(ops.MaxAllowFrom)},
			},
			Replies: []openapi.Reply{
				openapi.Answer(http.StatusCreated, "A new channel, configured.", channelReply),
				openapi.Answer(http.StatusOK, "The channel, updated and configured.", channelReply),
				openapi.Answer(http.StatusAccepted, "Recorded, not applied yet (the agent is not reachable, the wait ended, or `wait=false`).", channelReply),
			},
			Fails: slices.Concat(target, []openapi.Fail{
				openapi.Fails(http.StatusBadRequest, msgInvalidBody, ops.MsgInvalidBotToken, ops.MsgInvalidAppToken, ops.MsgInvalidDMPolicy, ops.MsgInvalidAllowFrom,
					ops.MsgBotTokenRequired, ops.MsgAppTokenRequired),
				openapi.Fails(http.StatusConflict, ops.MsgChannelRemoving), openapi.Fails(http.StatusInternalServerError, ops.MsgChannelConfigFailed)}),
		},
		"DELETE /v0/agents/{agentId}/channels/{channel}": {
			ID: "deleteChannel", Tag: "channels", Summary: "Disconnect the agent from a chat network",
			Replies: []openapi.Reply{
				openapi.Answer(http.StatusOK, "Removed.", openapi.Props{"id": openapi.String(), "channel": openapi.String(), "deleted": openapi.Bool()}),
				openapi.Answer(http.StatusAccepted, "Removal requested, not done yet (`deleted` false).", openapi.Props{"id": openapi.String(), "channel": openapi.String(), "deleted": openapi.Bool()}),
			},
			Fails: slices.Concat(target, []openapi.Fail{openapi.Fails(http.StatusNotFound, ops.MsgChannelNotFound), openapi.Fails(http.StatusInternalServerError, ops.MsgChannelRemoveFailed)}),
		},
	}
}
