package channels

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/scheme"
)

func TestEnabledTokens(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	channel := func(name string, typ agentsv1.ChannelType, created metav1.Time, mut func(*agentsv1.Channel)) *agentsv1.Channel {
		ch := &agentsv1.Channel{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: name, CreationTimestamp: created},
			Spec: agentsv1.ChannelSpec{AgentRef: agentsv1.LocalObjectReference{Name: "a1"}, Type: typ,
				BotTokenRef: &agentsv1.SecretKeyReference{Name: name + "-tokens", Key: "bot"}},
		}
		if mut != nil {
			mut(ch)
		}
		return ch
	}
	secret := func(name string, data map[string]string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: name}, Data: map[string][]byte{}}
		for k, v := range data {
			s.Data[k] = []byte(v)
		}
		return s
	}
	off := false
	objs := []client.Object{
		// two slack channels: the older counts, the younger is a duplicate
		channel("sl-old", agentsv1.ChannelSlack, t0, func(c *agentsv1.Channel) {
			c.Spec.AppTokenRef = &agentsv1.SecretKeyReference{Name: "sl-old-tokens", Key: "app"}
		}),
		secret("sl-old-tokens", map[string]string{"bot": "xoxb-old", "app": "xapp-old"}),
		channel("sl-new", agentsv1.ChannelSlack, metav1.NewTime(t0.Add(time.Minute)), nil),
		secret("sl-new-tokens", map[string]string{"bot": "xoxb-new"}),
		// a disabled discord channel gives nothing
		channel("dc", agentsv1.ChannelDiscord, t0, func(c *agentsv1.Channel) { c.Spec.Enabled = &off }),
		secret("dc-tokens", map[string]string{"bot": "discord-token"}),
		// a telegram channel whose Secret is missing gives the channel and no token
		channel("tg", agentsv1.ChannelTelegram, t0, nil),
		// another agent's channel is not a1's
		channel("other", agentsv1.ChannelWhatsApp, t0, func(c *agentsv1.Channel) { c.Spec.AgentRef.Name = "a2" }),
	}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).
		WithIndex(&agentsv1.Channel{}, agentsv1.IndexAgentRef, func(o client.Object) []string {
			return []string{o.(*agentsv1.Channel).Spec.AgentRef.Name}
		}).Build()
	agent := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "a1"}}
	for _, tc := range []struct {
		typ     agentsv1.ChannelType
		channel string
		want    Tokens
	}{
		{agentsv1.ChannelSlack, "sl-old", Tokens{Bot: "xoxb-old", App: "xapp-old"}},
		{agentsv1.ChannelDiscord, "", Tokens{}},
		{agentsv1.ChannelTelegram, "tg", Tokens{}},
		{agentsv1.ChannelWhatsApp, "", Tokens{}},
	} {
		ch, got, err := EnabledTokens(context.Background(), c, c, agent, tc.typ)
		if err != nil {
			t.Fatalf("%s: %v", tc.typ, err)
		}
		name := ""
		if ch != nil {
			name = ch.Name
		}
		if name != tc.channel || got != tc.want {
			t.Errorf("%s: got channel %q tokens %+v, want %q %+v", tc.typ, name, got, tc.channel, tc.want)
		}
	}
}
