package facade

import (
	"net/http"

	"github.com/agentplane/agentplane/internal/ops"
	"github.com/agentplane/agentplane/internal/rules/auth"
)

// channelRoutes registers the channel routes: setup and removal need channels:write, the list
// agents:read. The agent's gateway token is accepted on its own agent (with the scopes it
// carries).
func (s *Server) channelRoutes() {
	read := access{scope: auth.ScopeAgentsRead, perm: auth.PermRead, gateway: true}
	// Writes need a user's token: a channel widens the agent's reach (a chat account).
	write := access{scope: auth.ScopeChannelsWrite, perm: auth.PermWrite}
	s.handle("GET /v0/agents/{agentId}/channels", read, s.listChannels)
	s.handle("POST /v0/agents/{agentId}/channels/{channel}", write, s.setupChannel)
	s.handle("DELETE /v0/agents/{agentId}/channels/{channel}", write, s.deleteChannel)
}

func (s *Server) listChannels(r *http.Request, c *Caller) (*Response, error) {
	list, err := s.ops.Channels(r.Context(), c.scope(), r.PathValue("agentId"))
	if err != nil {
		return nil, err
	}
	out := make(map[string]channelView, len(list))
	for _, st := range list {
		out[string(st.Type)] = viewChannel(st)
	}
	return ok(map[string]any{"channels": out})
}

// channelStatus is the answer's status of each outcome of a setup.
var channelStatus = map[ops.ChannelOutcome]int{
	ops.ChannelPending: http.StatusAccepted,
	ops.ChannelUpdated: http.StatusOK,
	ops.ChannelCreated: http.StatusCreated,
}

// setupChannel connects the agent to a chat network, or updates the connection, and answers
// the Channel controller's verdict on this request: Configured (200, 201 for a new channel), a
// failure (500 `Configuration failed`), or not yet (202: the agent is not reachable yet, the
// wait ended, or ?wait=false).
func (s *Server) setupChannel(r *http.Request, c *Caller) (*Response, error) {
	// The path's channel type and the plan are judged before the body.
	if _, err := ops.ChannelTypeFor(r.PathValue("channel"), planOf(c)); err != nil {
		return nil, err
	}
	var req channelRequest
	if err := decodeJSON(r, &req, msgInvalidBody); err != nil {
		return nil, err
	}
	setup := ops.ChannelSetup{BotToken: req.BotToken, AppToken: req.AppToken, DMPolicy: req.DMPolicy,
		AllowFrom: req.AllowFrom, Enabled: req.Enabled, NoWait: r.URL.Query().Get("wait") == "false"}
	st, outcome, err := s.ops.SetupChannel(r.Context(), c.scope(), planOf(c), r.PathValue("agentId"), r.PathValue("channel"), setup)
	if err != nil {
		return nil, err
	}
	return &Response{Status: channelStatus[outcome], Body: map[string]any{"channel": viewChannel(st)}}, nil
}

// deleteChannel disconnects the agent from a chat network: 200 once the Channel is gone, 500
// `Removal failed` when the controller reports that the removal failed (it keeps retrying),
// 202 when the wait ends first.
func (s *Server) deleteChannel(r *http.Request, c *Caller) (*Response, error) {
	agentID, channel := r.PathValue("agentId"), r.PathValue("channel")
	deleted, err := s.ops.DeleteChannel(r.Context(), c.scope(), planOf(c), agentID, channel)
	if err != nil {
		return nil, err
	}
	body := map[string]any{"id": agentID, "channel": channel, "deleted": deleted}
	if !deleted {
		return &Response{Status: http.StatusAccepted, Body: body}, nil
	}
	return ok(body)
}
