package channel

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

func TestComputeChannelReadyCondition(t *testing.T) {
	cond := func(typ string, ok bool, reason string) metav1.Condition {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		return metav1.Condition{Type: typ, Status: s, Reason: reason, Message: typ + " " + reason}
	}
	for _, tc := range []struct {
		name       string
		typ        agentsv1.ChannelType
		conds      []metav1.Condition
		wantStatus metav1.ConditionStatus
		wantReason string
	}{
		{"not checked yet", agentsv1.ChannelTelegram, nil, metav1.ConditionFalse, agentsv1.ReasonNotChecked},
		{"configured, bundled plugin", agentsv1.ChannelTelegram,
			[]metav1.Condition{cond(agentsv1.ChannelConfigured, true, agentsv1.ReasonChannelConfigured)},
			metav1.ConditionTrue, agentsv1.ReasonChannelConfigured},
		{"configured, external plugin installed", agentsv1.ChannelSlack,
			[]metav1.Condition{cond(agentsv1.ChannelConfigured, true, agentsv1.ReasonChannelConfigured), cond(agentsv1.ChannelPluginInstalled, true, agentsv1.ReasonPluginInstalled)},
			metav1.ConditionTrue, agentsv1.ReasonChannelConfigured},
		{"configured, external plugin not recorded", agentsv1.ChannelSlack,
			[]metav1.Condition{cond(agentsv1.ChannelConfigured, true, agentsv1.ReasonChannelConfigured)},
			metav1.ConditionFalse, agentsv1.ReasonNotChecked},
		{"plugin install failed", agentsv1.ChannelDiscord,
			[]metav1.Condition{cond(agentsv1.ChannelConfigured, false, agentsv1.ReasonChannelPluginFailed), cond(agentsv1.ChannelPluginInstalled, false, agentsv1.ReasonPluginInstallFailed)},
			metav1.ConditionFalse, agentsv1.ReasonChannelPluginFailed},
		{"agent not ready", agentsv1.ChannelTelegram,
			[]metav1.Condition{cond(agentsv1.ChannelConfigured, false, agentsv1.ReasonChannelAgentNotReady)},
			metav1.ConditionFalse, agentsv1.ReasonChannelAgentNotReady},
		{"removal failed", agentsv1.ChannelTelegram,
			[]metav1.Condition{cond(agentsv1.ChannelConfigured, false, agentsv1.ReasonChannelRemovalFailed)},
			metav1.ConditionFalse, agentsv1.ReasonChannelRemovalFailed},
		{"duplicate", agentsv1.ChannelTelegram,
			[]metav1.Condition{cond(agentsv1.ChannelConfigured, false, agentsv1.ReasonChannelDuplicate)},
			metav1.ConditionFalse, agentsv1.ReasonChannelDuplicate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch := &agentsv1.Channel{}
			ch.Generation = 3
			ch.Spec.Type = tc.typ
			ch.Status.Conditions = tc.conds
			c := computeChannelReadyCondition(ch)
			if c.Type != agentsv1.ConditionReady || c.Status != tc.wantStatus || c.Reason != tc.wantReason || c.ObservedGeneration != 3 {
				t.Fatalf("got %s=%s reason %s gen %d, want %s reason %s gen 3", c.Type, c.Status, c.Reason, c.ObservedGeneration, tc.wantStatus, tc.wantReason)
			}
			if tc.wantStatus == metav1.ConditionFalse && len(tc.conds) > 0 && tc.wantReason != agentsv1.ReasonNotChecked && c.Message == "" {
				t.Fatalf("a failure's message is not repeated")
			}
		})
	}
}
