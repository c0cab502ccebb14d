package auth

import (
	"encoding/base64"
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

func TestDiscordRelayToken(t *testing.T) {
	const bot = "123456789012345678"
	tok := NewDiscordRelayToken(bot, "team-a", "bot-agent", "gateway-token")
	if !regexp.MustCompile(`^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$`).MatchString(tok) {
		t.Fatalf("not a Discord token's shape: %q", tok)
	}
	// The engine reads the application id as Node does: Buffer.from(first segment, "base64").
	seg := strings.Split(tok, ".")[0]
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		if id, err := enc.DecodeString(seg); err != nil || string(id) != bot {
			t.Fatalf("the first segment decodes to %q (%v), want the bot id", id, err)
		}
	}
	if DiscordBotID(tok) != bot {
		t.Fatalf("DiscordBotID of the relay token: %q", DiscordBotID(tok))
	}
	gotBot, ns, name, ok := ParseDiscordRelayToken(tok)
	if !ok || gotBot != bot || ns != "team-a" || name != "bot-agent" {
		t.Fatalf("parse: %q %q %q %v", gotBot, ns, name, ok)
	}
	if !VerifyDiscordRelayToken(tok, bot, "team-a", "bot-agent", "gateway-token") {
		t.Fatal("its own token does not verify")
	}
	for name, c := range map[string]struct{ tok, bot, ns, agent, key string }{
		"another gateway token": {tok, bot, "team-a", "bot-agent", "rotated"},
		"another agent":         {tok, bot, "team-a", "other", "gateway-token"},
		"another namespace":     {tok, bot, "team-b", "bot-agent", "gateway-token"},
		"another bot":           {tok, "987654321", "team-a", "bot-agent", "gateway-token"},
		"no bot":                {tok, "", "team-a", "bot-agent", "gateway-token"},
		"no gateway token":      {tok, bot, "team-a", "bot-agent", ""},
		"a changed MAC":         {tok[:len(tok)-1] + flip(tok[len(tok)-1]), bot, "team-a", "bot-agent", "gateway-token"},
		// another bot's token for the same agent, and the agent's other relay tokens
		"another bot's token":    {NewDiscordRelayToken("987654321", "team-a", "bot-agent", "gateway-token"), bot, "team-a", "bot-agent", "gateway-token"},
		"a slack relay token":    {NewSlackRelayToken("team-a", "bot-agent", "gateway-token"), bot, "team-a", "bot-agent", "gateway-token"},
		"a model credential":     {NewModelCredential("team-a", "bot-agent", "gateway-token"), bot, "team-a", "bot-agent", "gateway-token"},
		"a telegram relay token": {NewTelegramRelayToken(bot, "team-a", "bot-agent", "gateway-token"), bot, "team-a", "bot-agent", "gateway-token"},
	} {
		if VerifyDiscordRelayToken(c.tok, c.bot, c.ns, c.agent, c.key) {
			t.Errorf("%s: verified", name)
		}
	}
	b64 := base64.RawURLEncoding.EncodeToString
	mac := strings.Repeat("A", relayMACLen)
	for _, bad := range []string{
		"", "MTIz", "MTIz.", ".dGVhbS1hL2E." + mac,
		b64([]byte("12a")) + "." + b64([]byte("team-a/a")) + "." + mac,       // a bot id not all digits
		"%%%." + b64([]byte("team-a/a")) + "." + mac,                         // not base64
		b64([]byte("123")) + "." + b64([]byte("team-a/a")),                   // no MAC
		b64([]byte("123")) + "." + b64([]byte("team-a/a")) + ".short",        // a short MAC
		b64([]byte("123")) + "." + b64([]byte("team-a/a")) + "." + mac + "A", // a long one
		b64([]byte("123")) + "." + b64([]byte("team-a/a")) + "." + mac[:40] + "%%%",
		b64([]byte("123")) + "." + b64([]byte("noslash")) + "." + mac,
		b64([]byte("123")) + "." + b64([]byte("/a")) + "." + mac,
		b64([]byte("123")) + ".%%%." + mac,
		"xoxb-agentplane." + b64([]byte("team-a/a")) + "." + mac,
	} {
		if _, _, _, ok := ParseDiscordRelayToken(bad); ok {
			t.Errorf("parsed %q", bad)
		}
	}
	// A real token's first segment: standard or URL base64, padded or not.
	for tok, want := range map[string]string{
		"MTIzNDU2Nzg5MDEyMzQ1Njc4.GhIjKl.abcdefghijklmnopqrstuvwxyz0123456789AB": bot,
		"MTIzNDU2Nzg5MDEyMzQ1Njc4OQ==.x.y":                                       "1234567890123456789",
		"MTIzNDU2Nzg5MDEyMzQ1Njc4OQ.x.y":                                         "1234567890123456789",
		"NDI.x.y":                                                                "42",
		"NDI=.x.y":                                                               "42",
		"NDI":                                                                    "42",
		"c2VjcmV0.x.y":                                                           "", // "secret"
		".x.y":                                                                   "",
		"%%%.x.y":                                                                "",
		"":                                                                       "",
	} {
		if got := DiscordBotID(tok); got != want {
			t.Errorf("DiscordBotID(%q) = %q, want %q", tok, got, want)
		}
	}
	if RelayDiscordBotID("NDI.x.y") != "42" || RelayDiscordBotID("secret") != "0" {
		t.Error("RelayDiscordBotID")
	}
	zero := NewDiscordRelayToken(RelayDiscordBotID("secret"), "ns", "a", "gw")
	if b, _, _, ok := ParseDiscordRelayToken(zero); !ok || b != "0" || !VerifyDiscordRelayToken(zero, "0", "ns", "a", "gw") {
		t.Error("the relay token of a token without a bot id does not parse or verify")
	}
}
