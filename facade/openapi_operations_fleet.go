package facade

import (
	"net/http"

	"github.com/agentplane/agentplane/facade/openapi"
	"github.com/agentplane/agentplane/internal/ops"
)

// fleetOperations: the workspace's fleet (the console's fleet view).
func fleetOperations() map[string]*openapi.Operation {
	const about = "Every agent of the workspace with its phase, whether it sleeps and its next wake, memory and CPU now " +
		"(from the runtime: the local runtime's cgroups, the kube runtime's metrics API where the cluster serves it; `memoryBytes` and `cpuPercent` are absent where the runtime " +
		"does not measure them, and `metrics` is `n/a`), model tokens and requests today (UTC) through the model proxy " +
		"with the daily token budget and what is left of it (`tokensLeft` absent: unlimited), the engine version, the " +
		"rendering (`Current`, `Outdated`, or absent on a runtime without renderings), the crash count and " +
		"`errorsLastHour` (the agent's Warning events of the last hour: gateway crashes, the agent not running, a failed " +
		"restore, skill or rollout; a series counts each time); the workspace's own usage and budget; and the warm gateway " +
		"pools that serve the workspace. Read from the manager's cache and one list of the workspace's Warning events: no " +
		"secret, no request to a gateway."
	return map[string]*openapi.Operation{
		"GET /v0/fleet": {
			ID: "getFleet", Tag: "agents", Summary: "The workspace's fleet (an addition beyond the contract)",
			Description: about,
			Replies:     []openapi.Reply{openapi.Answer(http.StatusOK, "The fleet.", fleetView{})},
		},
		"GET /v0/fleet/stream": {
			ID: "streamFleet", Tag: "agents", Summary: "Follow the workspace's fleet as server-sent events (an addition beyond the contract)",
			Description: about + "\n\nOne stream for the whole fleet: `event: snapshot` with the fleet as `GET /v0/fleet` " +
				"answers it, then, at most every second and only when something changed, `event: update` with `at`, " +
				"`workspace`, `pools`, `metrics`, the `agents` whose row changed (whole rows) and the ids of those " +
				"`removed`; a comment `: keep-alive` every 15 s; `event: error` before the stream closes on a failure.",
			Replies: []openapi.Reply{{
				Status: http.StatusOK, Desc: "The stream (`text/event-stream`).",
				Body: nil,
				Also: map[string]*openapi.Schema{"text/event-stream": openapi.Describe(openapi.String(),
					"Server-sent events: `event: snapshot`, then `event: update` (JSON data), `: keep-alive` comments.")},
			}},
		},
		"PUT /v0/agents/{agentId}/budget": {
			ID: "putAgentBudget", Tag: "agents", Summary: "Set the agent's model budget (an addition beyond the contract)",
			Description: "Requests per minute, tokens (input plus output) per UTC day and spend per UTC day (`costMicrosPerDay`, " +
				"millionths of the currency of the platform's model price table, by which the proxy prices each request) through " +
				"the model proxy; 0 or absent is unlimited. While a spend budget applies, a model the table has no price for is " +
				"refused (403); a platform without a table refuses a spend budget. The workspace's budget applies to all its agents " +
				"together as well. Admins and owners only. kube-apiserver validates the values: a negative one is refused with its " +
				"message (`Validation failed: ...`).",
			Body: budgetRequest{},
			Replies: []openapi.Reply{openapi.Answer(http.StatusOK, "The budget as set.",
				openapi.Props{"agentId": openapi.String(), "budget": budgetRequest{}})},
			Fails: []openapi.Fail{openapi.Fails(http.StatusBadRequest, ops.MsgInvalidBudget, ops.MsgNoPriceTable), notFoundAgent},
		},
		"PUT /v0/workspace/budget": {
			ID: "putWorkspaceBudget", Tag: "agents", Summary: "Set the workspace's model budget (an addition beyond the contract)",
			Description: "As an agent's budget, for all the workspace's agents together. Admins and owners only.",
			Body:        budgetRequest{},
			Replies: []openapi.Reply{openapi.Answer(http.StatusOK, "The budget as set.",
				openapi.Props{"workspace": openapi.String(), "budget": budgetRequest{}})},
			Fails: []openapi.Fail{openapi.Fails(http.StatusBadRequest, ops.MsgInvalidBudget, ops.MsgNoPriceTable)},
		},
		"PUT /v0/agents/{agentId}/resources": {
			ID: "putAgentResources", Tag: "agents", Summary: "Set the agent's memory limit (an addition beyond the contract)",
			Description: "`memoryLimit` is a quantity (`1Gi`, `512Mi`) of at least 256 MiB; an empty one returns the agent to the " +
				"platform's default. The gateway restarts with it (kube: its pod's limit; local: its cgroup's, and the Node heap " +
				"follows). Admins and owners only.",
			Body: resourcesRequest{},
			Replies: []openapi.Reply{openapi.Answer(http.StatusOK, "The limit as set (`\"\"`: the default).",
				openapi.Props{"agentId": openapi.String(), "memoryLimit": openapi.String()})},
			Fails: []openapi.Fail{openapi.Fails(http.StatusBadRequest, ops.MsgInvalidMemoryLimit), notFoundAgent},
		},
	}
}
