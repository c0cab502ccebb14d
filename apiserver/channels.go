package apiserver

import (
	"context"
	"errors"
	"net/http"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/auth"
)

// Channel messages. `Unsupported channel`, `Configuration failed` and `Removal failed` are
// fixed by the contract.
const (
	msgUnsupportedChannel  = "Unsupported channel"
	msgChannelConfigFailed = "Configuration failed"
	msgChannelRemoveFailed = "Removal failed"
	msgChannelPlan         = "Channels require a paid plan"
	msgChannelNotFound     = "Channel not found"
	msgChannelRemoving     = "Channel is being removed"
	msgBotTokenRequired    = "botToken is required"
	msgAppTokenRequired    = "appToken is required for slack"
	msgInvalidBotToken     = "Invalid botToken"
	msgInvalidAppToken     = "Invalid appToken"
	msgInvalidDMPolicy     = "Invalid dmPolicy"
	msgInvalidAllowFrom    = "Invalid allowFrom"
)

// ChannelTypes are the chat networks a channel can connect, in the order GET lists them.
var ChannelTypes = agentsv1.ChannelTypes

// ChannelName is the Channel object of an agent's channel of type t.
func ChannelName(agent string, t agentsv1.ChannelType) string { return agent + "-" + string(t) }

// ChannelSecretName is the core Secret holding the tokens of an agent's channel of type t.
func ChannelSecretName(agent string, t agentsv1.ChannelType) string {
	return agent + "-channel-" + string(t)
}

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

// channelType checks the path's channel type and the plan.
func channelType(r *http.Request, c *Caller) (agentsv1.ChannelType, error) {
	t := agentsv1.ChannelType(r.PathValue("channel"))
	if !slices.Contains(ChannelTypes, t) {
		return "", errorf(http.StatusBadRequest, msgUnsupportedChannel)
	}
	if c.Workspace == nil || c.Workspace.Spec.Plan != agentsv1.PlanPro {
		return "", errorf(http.StatusForbidden, msgChannelPlan)
	}
	return t, nil
}

// channelTarget checks the path's channel type and the plan, then reads the agent.
func (s *Server) channelTarget(r *http.Request, c *Caller) (*agentsv1.Agent, agentsv1.ChannelType, error) {
	t, err := channelType(r, c)
	if err != nil {
		return nil, "", err
	}
	a, err := s.getAgent(r.Context(), c, r.PathValue("agentId"))
	if err != nil {
		return nil, "", err
	}
	return a, t, nil
}

func (s *Server) listChannels(r *http.Request, c *Caller) (*Response, error) {
	ctx := r.Context()
	a, err := s.getAgent(ctx, c, r.PathValue("agentId"))
	if err != nil {
		return nil, err
	}
	var list agentsv1.ChannelList
	if err := s.opts.APIReader.List(ctx, &list, client.InNamespace(a.Namespace), client.MatchingFields{agentsv1.IndexAgentRef: a.Name}); err != nil {
		return nil, err
	}
	out := make(map[string]channelView, len(ChannelTypes))
	for _, t := range ChannelTypes {
		ch := pickChannel(list.Items, a.Name, t)
		if ch == nil {
			out[string(t)] = unconfiguredView(t)
			continue
		}
		v, err := s.viewChannel(ctx, ch)
		if err != nil {
			return nil, err
		}
		out[string(t)] = v
	}
	return ok(map[string]any{"channels": out})
}

// setupChannel connects the agent to a chat network, or updates the connection. Tokens go to
// the core Secret `<agent>-channel-<type>`; the Channel references them. The handler then
// waits for the Channel controller's verdict on this request: Configured (200, 201 for a new
// channel), a failure (500 `Configuration failed`), or not yet (202: the agent is not
// reachable yet, the wait ended, or ?wait=false).
func (s *Server) setupChannel(r *http.Request, c *Caller) (*Response, error) {
	if _, err := channelType(r, c); err != nil {
		return nil, err
	}
	var req channelRequest
	if err := decodeJSON(r, &req, msgInvalidBody); err != nil {
		return nil, err
	}
	if err := req.validate(); err != nil {
		return nil, err
	}
	a, t, err := s.channelTarget(r, c)
	if err != nil {
		return nil, err
	}
	ctx := r.Context()
	cur := &agentsv1.Channel{}
	err = s.opts.APIReader.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: ChannelName(a.Name, t)}, cur)
	switch {
	case apierrors.IsNotFound(err):
		cur = nil
	case err != nil:
		return nil, err
	case cur.DeletionTimestamp != nil:
		return nil, errorf(http.StatusConflict, msgChannelRemoving)
	}
	if err := req.checkTokens(t, cur); err != nil {
		return nil, err
	}
	secretName, err := s.writeChannelTokens(ctx, a, t, &req)
	if err != nil {
		return nil, err
	}
	ch, isNew, err := s.applyChannel(ctx, a, t, &req, secretName)
	if err != nil {
		return nil, err
	}
	if r.URL.Query().Get("wait") == "false" {
		return s.channelAnswer(ctx, ch, http.StatusAccepted)
	}
	got, err := s.awaitChannel(ctx, ch)
	if err != nil {
		return nil, err
	}
	cond := meta.FindStatusCondition(got.Status.Conditions, agentsv1.ChannelConfigured)
	switch {
	case !channelVerdict(got, ch.Generation) || cond.Status == metav1.ConditionUnknown:
		return s.channelAnswer(ctx, got, http.StatusAccepted)
	case cond.Status == metav1.ConditionTrue && isNew:
		return s.channelAnswer(ctx, got, http.StatusCreated)
	case cond.Status == metav1.ConditionTrue:
		return s.channelAnswer(ctx, got, http.StatusOK)
	case cond.Reason == agentsv1.ReasonChannelAgentNotReady:
		return s.channelAnswer(ctx, got, http.StatusAccepted)
	}
	return nil, withCause(http.StatusInternalServerError, msgChannelConfigFailed, errors.New(cond.Reason+": "+cond.Message))
}

// channelVerdict: the Channel's status holds the controller's verdict on generation, the one
// the request's write produced (the cache may still hold an older one).
func channelVerdict(ch *agentsv1.Channel, generation int64) bool {
	cond := meta.FindStatusCondition(ch.Status.Conditions, agentsv1.ChannelConfigured)
	return ch.Status.ObservedGeneration >= generation && cond != nil && cond.ObservedGeneration >= generation
}

// awaitChannel waits until the Channel holds a settled verdict on the request (Configured
// True or False; Unknown means the agent has not rendered it yet) or the wait ends, and
// returns the Channel as last seen.
func (s *Server) awaitChannel(ctx context.Context, ch *agentsv1.Channel) (*agentsv1.Channel, error) {
	wctx, cancel := context.WithTimeout(ctx, s.provisionWait())
	defer cancel()
	got := ch.DeepCopy()
	err := s.ops.WaitFor(wctx, got, func() (bool, error) {
		cond := meta.FindStatusCondition(got.Status.Conditions, agentsv1.ChannelConfigured)
		return channelVerdict(got, ch.Generation) && cond.Status != metav1.ConditionUnknown, nil
	})
	if err != nil && (ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded)) {
		return nil, err
	}
	if got.Generation < ch.Generation {
		return ch, nil // the cache never caught up: answer what was written
	}
	return got, nil
}

// deleteChannel disconnects the agent from a chat network: the Channel is deleted and its
// finalizer removes it from the engine config. The handler waits until the Channel is gone
// (200) or the controller reports that the removal failed (500 `Removal failed`; the
// controller keeps retrying); 202 when the wait ends first.
func (s *Server) deleteChannel(r *http.Request, c *Caller) (*Response, error) {
	a, t, err := s.channelTarget(r, c)
	if err != nil {
		return nil, err
	}
	ctx := r.Context()
	ch := &agentsv1.Channel{}
	if err := s.opts.APIReader.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: ChannelName(a.Name, t)}, ch); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, withCause(http.StatusNotFound, msgChannelNotFound, err)
		}
		return nil, err
	}
	done := map[string]any{"id": a.Name, "channel": string(t), "deleted": true}
	// A new spec.applyRequestedAt first: the verdict waited for is on that generation (a
	// removal that failed before is retried, not answered from its old verdict).
	patch := client.MergeFrom(ch.DeepCopy())
	ch.Spec.ApplyRequestedAt = &metav1.MicroTime{Time: s.opts.Now().UTC()}
	if err := s.opts.Client.Patch(ctx, ch, patch); apierrors.IsNotFound(err) {
		return ok(done)
	} else if err != nil {
		return nil, err
	}
	if ch.DeletionTimestamp == nil {
		if err := s.opts.Client.Delete(ctx, ch, client.Preconditions{UID: &ch.UID}); err != nil && !apierrors.IsNotFound(err) {
			return nil, withMessage(msgChannelRemoveFailed, err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, s.provisionWait())
	defer cancel()
	got := ch.DeepCopy()
	var failed *metav1.Condition
	err = s.ops.WaitForDeletion(wctx, got, func() (bool, error) {
		failed = meta.FindStatusCondition(got.Status.Conditions, agentsv1.ChannelConfigured)
		return got.DeletionTimestamp != nil && failed != nil && failed.Reason == agentsv1.ReasonChannelRemovalFailed &&
			failed.ObservedGeneration >= ch.Generation, nil
	})
	switch {
	case err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
		return &Response{Status: http.StatusAccepted, Body: map[string]any{"id": a.Name, "channel": string(t), "deleted": false}}, nil
	case err != nil:
		return nil, err
	case failed != nil && failed.Reason == agentsv1.ReasonChannelRemovalFailed && got.DeletionTimestamp != nil && failed.ObservedGeneration >= ch.Generation:
		return nil, withCause(http.StatusInternalServerError, msgChannelRemoveFailed, errors.New(failed.Reason+": "+failed.Message))
	}
	return ok(done)
}
