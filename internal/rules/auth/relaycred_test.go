package auth

import (
	"regexp"
	"strings"
	"testing"
)

func TestTelegramRelayToken(t *testing.T) {
	tok := NewTelegramRelayToken("123456789", "team-a", "bot-agent", "gateway-token")
	if !regexp.MustCompile(`^123456789:[A-Za-z0-9_-]+$`).MatchString(tok) {
		t.Fatalf("not a bot token's shape: %q", tok)
	}
	bot, ns, name, ok := ParseTelegramRelayToken(tok)
	if !ok || bot != "123456789" || ns != "team-a" || name != "bot-agent" {
		t.Fatalf("parse: %q %q %q %v", bot, ns, name, ok)
	}
	if !VerifyTelegramRelayToken(tok, "123456789", "team-a", "bot-agent", "gateway-token") {
		t.Fatal("its own token does not verify")
	}
	for name, c := range map[string]struct{ tok, bot, ns, agent, key string }{
		"another gateway token": {tok, "123456789", "team-a", "bot-agent", "rotated"},
		"another agent":         {tok, "123456789", "team-a", "other", "gateway-token"},
		"another bot":           {tok, "987654321", "team-a", "bot-agent", "gateway-token"},
		"no gateway token":      {tok, "123456789", "team-a", "bot-agent", ""},
		"a changed MAC":         {tok[:len(tok)-1] + flip(tok[len(tok)-1]), "123456789", "team-a", "bot-agent", "gateway-token"},
	} {
		if VerifyTelegramRelayToken(c.tok, c.bot, c.ns, c.agent, c.key) {
			t.Errorf("%s: verified", name)
		}
	}
	for _, bad := range []string{"", "123", ":abc", "12a:abc", "123:" + strings.Repeat("A", relayMACLen), "123:%%%" + strings.Repeat("A", relayMACLen)} {
		if _, _, _, ok := ParseTelegramRelayToken(bad); ok {
			t.Errorf("parsed %q", bad)
		}
	}
	if BotID("42:secret") != "42" || BotID("secret") != "" || BotID("x2:secret") != "" {
		t.Error("BotID")
	}
	if RelayBotID("42:secret") != "42" || RelayBotID("secret") != "0" {
		t.Error("RelayBotID")
	}
	if _, _, _, ok := ParseTelegramRelayToken(NewTelegramRelayToken(RelayBotID("secret"), "ns", "a", "gw")); !ok {
		t.Error("the relay token of a token without a bot id does not parse")
	}
}

func flip(c byte) string {
	if c == 'A' {
		return "B"
	}
	return "A"
}

func TestSlackRelayToken(t *testing.T) {
	tok := NewSlackRelayToken("team-a", "bot-agent", "gateway-token")
	ns, name, ok := ParseSlackRelayToken(tok)
	if !ok || ns != "team-a" || name != "bot-agent" {
		t.Fatalf("parse: %q %q %v", ns, name, ok)
	}
	if !VerifySlackRelayToken(tok, "team-a", "bot-agent", "gateway-token") {
		t.Fatal("its own token does not verify")
	}
	for name, c := range map[string]struct{ tok, ns, agent, key string }{
		"another gateway token": {tok, "team-a", "bot-agent", "rotated"},
		"another agent":         {tok, "team-a", "other", "gateway-token"},
		"no gateway token":      {tok, "team-a", "bot-agent", ""},
		"a changed MAC":         {tok[:len(tok)-1] + flip(tok[len(tok)-1]), "team-a", "bot-agent", "gateway-token"},
		// the Telegram relay token of the same agent is not its Slack one
		"a telegram relay token": {NewTelegramRelayToken("1", "team-a", "bot-agent", "gateway-token"), "team-a", "bot-agent", "gateway-token"},
	} {
		if VerifySlackRelayToken(c.tok, c.ns, c.agent, c.key) {
			t.Errorf("%s: verified", name)
		}
	}
	for _, bad := range []string{"", "xoxb-real-token", slackRelayPrefix, slackRelayPrefix + "dGVhbS1hL2E." + "short",
		slackRelayPrefix + "%%%." + strings.Repeat("A", relayMACLen), slackRelayPrefix + "bm9zbGFzaA." + strings.Repeat("A", relayMACLen)} {
		if _, _, ok := ParseSlackRelayToken(bad); ok {
			t.Errorf("parsed %q", bad)
		}
	}
}
