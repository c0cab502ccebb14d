package ops

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

func TestChannelTypeFor(t *testing.T) {
	for _, tc := range []struct {
		name string
		plan agentsv1.Plan
		code Code
		msg  string
	}{
		{"irc", agentsv1.PlanPro, Invalid, MsgUnsupportedChannel},
		{"TELEGRAM", agentsv1.PlanPro, Invalid, MsgUnsupportedChannel},
		{"irc", agentsv1.PlanFree, Invalid, MsgUnsupportedChannel},
		{"telegram", agentsv1.PlanFree, Forbidden, MsgChannelPlan},
		{"slack", "", Forbidden, MsgChannelPlan},
	} {
		_, err := ChannelTypeFor(tc.name, tc.plan)
		wantFail(t, "", err, tc.code, tc.msg)
	}
	for _, typ := range agentsv1.ChannelTypes {
		if got, err := ChannelTypeFor(string(typ), agentsv1.PlanPro); err != nil || got != typ {
			t.Errorf("%s: %q, %v", typ, got, err)
		}
	}
}

// TestChannelSetupValidate: the shape of a setup's fields, and their normalization.
func TestChannelSetupValidate(t *testing.T) {
	many := make([]string, MaxAllowFrom+1)
	for i := range many {
		many[i] = fmt.Sprintf("user%d", i)
	}
	for _, tc := range []struct {
		name string
		q    ChannelSetup
		msg  string
	}{
		{"a bot token with a newline", ChannelSetup{BotToken: ptr("1:abc\ndef")}, MsgInvalidBotToken},
		{"a bot token with a space", ChannelSetup{BotToken: ptr("1:abc def")}, MsgInvalidBotToken},
		{"a bot token too long", ChannelSetup{BotToken: ptr(strings.Repeat("x", maxChannelTokenBytes+1))}, MsgInvalidBotToken},
		{"an app token not UTF-8", ChannelSetup{AppToken: ptr("xapp-\xff")}, MsgInvalidAppToken},
		{"an unknown dmPolicy", ChannelSetup{DMPolicy: ptr("everyone")}, MsgInvalidDMPolicy},
		{"an empty allowFrom entry", ChannelSetup{AllowFrom: &[]string{"ok", " "}}, MsgInvalidAllowFrom},
		{"a control character in allowFrom", ChannelSetup{AllowFrom: &[]string{"a\x00b"}}, MsgInvalidAllowFrom},
		{"an allowFrom entry too long", ChannelSetup{AllowFrom: &[]string{strings.Repeat("é", maxAllowFromEntry+1)}}, MsgInvalidAllowFrom},
		{"too many senders", ChannelSetup{AllowFrom: &many}, MsgInvalidAllowFrom},
	} {
		t.Run(tc.name, func(t *testing.T) { wantFail(t, "", tc.q.validate(), Invalid, tc.msg) })
	}

	q := ChannelSetup{BotToken: ptr(""), AppToken: ptr("xapp-1"), DMPolicy: ptr(""), AllowFrom: &[]string{" @a ", "@b", "@a"}}
	if err := q.validate(); err != nil {
		t.Fatal(err)
	}
	if q.BotToken != nil || q.DMPolicy != nil || *q.AppToken != "xapp-1" || !slices.Equal(*q.AllowFrom, []string{"@a", "@b"}) {
		t.Fatalf("normalized to %+v", q)
	}
}

// TestChannelSetupCheckTokens: the tokens each type requires on a first setup, kept on an
// update, and dropped where the type takes none.
func TestChannelSetupCheckTokens(t *testing.T) {
	existing := &agentsv1.Channel{Spec: agentsv1.ChannelSpec{
		BotTokenRef: &agentsv1.SecretKeyReference{Name: "s", Key: agentsv1.ChannelBotTokenKey},
		AppTokenRef: &agentsv1.SecretKeyReference{Name: "s", Key: agentsv1.ChannelAppTokenKey},
	}}
	for _, tc := range []struct {
		name string
		typ  agentsv1.ChannelType
		q    ChannelSetup
		cur  *agentsv1.Channel
		msg  string
	}{
		{"telegram without botToken", agentsv1.ChannelTelegram, ChannelSetup{}, nil, MsgBotTokenRequired},
		{"discord without botToken", agentsv1.ChannelDiscord, ChannelSetup{AppToken: ptr("x")}, nil, MsgBotTokenRequired},
		{"slack without appToken", agentsv1.ChannelSlack, ChannelSetup{BotToken: ptr("x")}, nil, MsgAppTokenRequired},
		{"slack without botToken", agentsv1.ChannelSlack, ChannelSetup{AppToken: ptr("x")}, nil, MsgBotTokenRequired},
		{"telegram update", agentsv1.ChannelTelegram, ChannelSetup{}, existing, ""},
		{"slack update", agentsv1.ChannelSlack, ChannelSetup{}, existing, ""},
		{"whatsapp", agentsv1.ChannelWhatsApp, ChannelSetup{BotToken: ptr("x"), AppToken: ptr("y")}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := tc.q
			err := q.checkTokens(tc.typ, tc.cur)
			if tc.msg != "" {
				wantFail(t, "", err, Invalid, tc.msg)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.typ == agentsv1.ChannelWhatsApp && (q.BotToken != nil || q.AppToken != nil) {
				t.Fatalf("whatsapp keeps tokens: %+v", q)
			}
		})
	}
}

// TestSetupChannelNoWait: a setup stores the token in the channel's Secret (owned by the
// agent), writes the Channel with the defaults, and shows only the token's hint.
func TestSetupChannelNoWait(t *testing.T) {
	ctx, ws := context.Background(), Scope{Namespace: testNS}
	o, c := newTestOps(t, testAgent("a1"))
	token := "123456:telegram-bot-token"
	st, outcome, err := o.SetupChannel(ctx, ws, agentsv1.PlanPro, "a1", "telegram", ChannelSetup{BotToken: &token, NoWait: true})
	if err != nil || outcome != ChannelPending {
		t.Fatalf("setup: %v, %v", outcome, err)
	}
	if st.Type != agentsv1.ChannelTelegram || st.BotTokenHint != "****oken" || st.AppTokenHint != "" {
		t.Fatalf("state %+v", st)
	}
	ch := &agentsv1.Channel{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: testNS, Name: ChannelName("a1", agentsv1.ChannelTelegram)}, ch); err != nil {
		t.Fatal(err)
	}
	if ch.Spec.DMPolicy != "pairing" || ch.Spec.Enabled == nil || !*ch.Spec.Enabled || ch.Spec.ApplyRequestedAt == nil ||
		ch.Spec.BotTokenRef == nil || ch.Spec.BotTokenRef.Name != ChannelSecretName("a1", agentsv1.ChannelTelegram) {
		t.Fatalf("channel spec %+v", ch.Spec)
	}
	sec := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: testNS, Name: ch.Spec.BotTokenRef.Name}, sec); err != nil {
		t.Fatal(err)
	}
	if string(sec.Data[agentsv1.ChannelBotTokenKey]) != token || len(sec.OwnerReferences) != 1 || sec.OwnerReferences[0].Name != "a1" {
		t.Fatalf("token secret %+v", sec)
	}

	// An update without a token keeps it; other types list as not configured.
	if _, _, err := o.SetupChannel(ctx, ws, agentsv1.PlanPro, "a1", "telegram", ChannelSetup{DMPolicy: ptr("open"), NoWait: true}); err != nil {
		t.Fatal(err)
	}
	list, err := o.Channels(ctx, ws, "a1")
	if err != nil || len(list) != len(agentsv1.ChannelTypes) {
		t.Fatalf("list %+v, %v", list, err)
	}
	for i, s := range list {
		switch {
		case s.Type != agentsv1.ChannelTypes[i]:
			t.Errorf("listed %s at %d", s.Type, i)
		case s.Type == agentsv1.ChannelTelegram && (s.Channel == nil || s.Channel.Spec.DMPolicy != "open" || s.BotTokenHint != "****oken"):
			t.Errorf("telegram %+v", s)
		case s.Type != agentsv1.ChannelTelegram && s.Channel != nil:
			t.Errorf("%s is configured", s.Type)
		}
	}
}

// TestSetupChannelRefuses: the answers a setup gets before it writes anything.
func TestSetupChannelRefuses(t *testing.T) {
	ctx, ws := context.Background(), Scope{Namespace: testNS}
	now := metav1.NewTime(time.Now())
	removing := &agentsv1.Channel{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: ChannelName("a1", agentsv1.ChannelDiscord),
			DeletionTimestamp: &now, Finalizers: []string{"agentplane.io/test"}},
		Spec: agentsv1.ChannelSpec{AgentRef: agentsv1.LocalObjectReference{Name: "a1"}, Type: agentsv1.ChannelDiscord},
	}
	o, c := newTestOps(t, testAgent("a1"), removing)
	tok := ptr("1:abcdefghij")
	for _, tc := range []struct {
		name, agent, channel string
		plan                 agentsv1.Plan
		q                    ChannelSetup
		code                 Code
		msg                  string
	}{
		{"unsupported before the body", "a1", "irc", agentsv1.PlanPro, ChannelSetup{DMPolicy: ptr("x")}, Invalid, MsgUnsupportedChannel},
		{"the plan before the body", "a1", "telegram", agentsv1.PlanFree, ChannelSetup{DMPolicy: ptr("x")}, Forbidden, MsgChannelPlan},
		{"the body before the agent", "nobody", "telegram", agentsv1.PlanPro, ChannelSetup{DMPolicy: ptr("x")}, Invalid, MsgInvalidDMPolicy},
		{"unknown agent", "nobody", "telegram", agentsv1.PlanPro, ChannelSetup{BotToken: tok}, NotFound, MsgAgentNotFound},
		{"the agent before the tokens", "nobody", "telegram", agentsv1.PlanPro, ChannelSetup{}, NotFound, MsgAgentNotFound},
		{"missing token", "a1", "telegram", agentsv1.PlanPro, ChannelSetup{}, Invalid, MsgBotTokenRequired},
		{"being removed", "a1", "discord", agentsv1.PlanPro, ChannelSetup{BotToken: tok}, Conflict, MsgChannelRemoving},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := o.SetupChannel(ctx, ws, tc.plan, tc.agent, tc.channel, tc.q)
			wantFail(t, "", err, tc.code, tc.msg)
		})
	}
	var secrets corev1.SecretList
	if err := c.List(ctx, &secrets, client.InNamespace(testNS)); err != nil || len(secrets.Items) != 0 {
		t.Fatalf("refused setups wrote %d secrets (%v)", len(secrets.Items), err)
	}
}

func TestDeleteChannelNotFound(t *testing.T) {
	o, _ := newTestOps(t, testAgent("a1"))
	_, err := o.DeleteChannel(context.Background(), Scope{Namespace: testNS}, agentsv1.PlanPro, "a1", "telegram")
	wantFail(t, "", err, NotFound, MsgChannelNotFound)
	_, err = o.DeleteChannel(context.Background(), Scope{Namespace: testNS}, agentsv1.PlanFree, "a1", "telegram")
	wantFail(t, "", err, Forbidden, MsgChannelPlan)
}

func TestPickChannel(t *testing.T) {
	at := func(sec int64) metav1.Time { return metav1.NewTime(time.Unix(sec, 0)) }
	mk := func(name, agent string, typ agentsv1.ChannelType, created metav1.Time) agentsv1.Channel {
		return agentsv1.Channel{
			ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: created},
			Spec:       agentsv1.ChannelSpec{AgentRef: agentsv1.LocalObjectReference{Name: agent}, Type: typ},
		}
	}
	items := []agentsv1.Channel{
		mk("b", "a1", agentsv1.ChannelSlack, at(1)),
		mk("a", "a1", agentsv1.ChannelSlack, at(1)),
		mk("old", "a2", agentsv1.ChannelSlack, at(0)),
		mk("a1-telegram", "a1", agentsv1.ChannelTelegram, at(9)),
		mk("x", "a1", agentsv1.ChannelTelegram, at(0)),
	}
	if got := pickChannel(items, "a1", agentsv1.ChannelSlack); got == nil || got.Name != "a" {
		t.Errorf("slack: the oldest, then by name; got %v", got)
	}
	if got := pickChannel(items, "a1", agentsv1.ChannelTelegram); got == nil || got.Name != "a1-telegram" {
		t.Errorf("telegram: the facade's own first; got %v", got)
	}
	if got := pickChannel(items, "a1", agentsv1.ChannelDiscord); got != nil {
		t.Errorf("discord: none; got %v", got.Name)
	}
}
