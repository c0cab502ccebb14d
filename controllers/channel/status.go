package channel

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/controllers"
)

// computeChannelReadyCondition is the channel's summary: True once the channel is in its
// agent's engine config and, for a type whose engine plugin is not bundled, the plugin is
// installed; otherwise False with the reason and message of the first of those conditions
// that is not True (NotChecked before the controller's first verdict).
func computeChannelReadyCondition(ch *agentsv1.Channel) metav1.Condition {
	types := []string{agentsv1.ChannelConfigured}
	if controllers.ChannelPlugin(ch.Spec.Type) != "" {
		types = append(types, agentsv1.ChannelPluginInstalled)
	}
	c := controllers.SummarizeReady(ch.Status.Conditions, ch.Generation, "the channel has not been checked yet", types...)
	if c.Status == metav1.ConditionTrue {
		c.Reason, c.Message = agentsv1.ReasonChannelConfigured, "the channel is in the engine config"
	}
	return c
}
