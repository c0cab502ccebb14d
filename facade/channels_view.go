package facade

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/ops"
)

// channelRequest is the body of POST /v0/agents/{agentId}/channels/{channel} (see
// ops.ChannelSetup).
type channelRequest struct {
	BotToken  *string   `json:"botToken"`
	AppToken  *string   `json:"appToken"`
	DMPolicy  *string   `json:"dmPolicy"`
	AllowFrom *[]string `json:"allowFrom"`
	Enabled   *bool     `json:"enabled"`
}

// channelView is a channel as the REST API shows it: token hints only, never tokens.
type channelView struct {
	Type          string   `json:"type"`
	Configured    bool     `json:"configured"`
	Enabled       bool     `json:"enabled"`
	DMPolicy      string   `json:"dmPolicy,omitempty"`
	AllowFrom     []string `json:"allowFrom"`
	BotTokenHint  string   `json:"botTokenHint,omitempty"`
	AppTokenHint  string   `json:"appTokenHint,omitempty"`
	StatusReason  string   `json:"statusReason,omitempty"`
	StatusMessage string   `json:"statusMessage,omitempty"`
}

// viewChannel shows st; a type the agent has no Channel for is not configured.
func viewChannel(st ops.ChannelState) channelView {
	ch := st.Channel
	if ch == nil {
		return channelView{Type: string(st.Type), AllowFrom: []string{}}
	}
	v := channelView{
		Type: string(ch.Spec.Type), Configured: ch.Status.Configured && ch.DeletionTimestamp == nil,
		Enabled: ch.Spec.Enabled == nil || *ch.Spec.Enabled, DMPolicy: string(ch.Spec.DMPolicy),
		AllowFrom:    append([]string{}, ch.Spec.AllowFrom...),
		BotTokenHint: st.BotTokenHint, AppTokenHint: st.AppTokenHint,
	}
	if c := meta.FindStatusCondition(ch.Status.Conditions, agentsv1.ChannelConfigured); c != nil && c.Status != metav1.ConditionTrue {
		v.StatusReason, v.StatusMessage = c.Reason, c.Message
	}
	return v
}
