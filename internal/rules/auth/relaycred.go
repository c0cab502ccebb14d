package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strings"
)

// The Telegram relay token is what an agent's gateway uses in place of its bot token when the
// platform relays the channel: "<bot id>:" + base64url("<namespace>/<agent>") +
// base64url(HMAC-SHA256(gateway token, label || bot id || namespace/agent)), the MAC always
// 43 characters. It has a bot token's shape (digits, a colon, [A-Za-z0-9_-]), so the engine
// reads the bot's id from it as from the real one; Telegram refuses it, the relay swaps it
// for the real token. Like the model-proxy credential it names its agent, is derived from the
// gateway token (rotating the token rotates it) and is stored nowhere.
const relayCredLabel = "agentplane telegram relay v1\x00"

// relayMACLen is the length of the MAC's unpadded base64url form.
var relayMACLen = base64.RawURLEncoding.EncodedLen(sha256.Size)

// BotID is the bot's id, the digits before a Telegram bot token's colon ("" when the token has
// none).
func BotID(botToken string) string {
	id, _, ok := strings.Cut(botToken, ":")
	if !ok || id == "" || strings.Trim(id, "0123456789") != "" {
		return ""
	}
	return id
}

// RelayBotID is the bot id a relay token for botToken carries: BotID, or "0" for a token
// without one (Telegram's tokens all have one; the engine reads none from "0:").
func RelayBotID(botToken string) string {
	if id := BotID(botToken); id != "" {
		return id
	}
	return "0"
}

// NewTelegramRelayToken derives the relay token of agent namespace/name for the bot botID.
func NewTelegramRelayToken(botID, namespace, name, gatewayToken string) string {
	id := namespace + "/" + name
	return botID + ":" + base64.RawURLEncoding.EncodeToString([]byte(id)) +
		base64.RawURLEncoding.EncodeToString(relayMAC(botID, id, gatewayToken))
}

// ParseTelegramRelayToken returns the bot and the agent a relay token names (not yet
// verified).
func ParseTelegramRelayToken(tok string) (botID, namespace, name string, ok bool) {
	botID = BotID(tok)
	if botID == "" {
		return "", "", "", false
	}
	rest := tok[len(botID)+1:]
	if len(rest) <= relayMACLen {
		return "", "", "", false
	}
	id, err := base64.RawURLEncoding.DecodeString(rest[:len(rest)-relayMACLen])
	if err != nil {
		return "", "", "", false
	}
	namespace, name, found := strings.Cut(string(id), "/")
	if !found || namespace == "" || name == "" {
		return "", "", "", false
	}
	return botID, namespace, name, true
}

// VerifyTelegramRelayToken reports whether tok is the current relay token of namespace/name
// for botID under gatewayToken (constant time).
func VerifyTelegramRelayToken(tok, botID, namespace, name, gatewayToken string) bool {
	if gatewayToken == "" || botID == "" {
		return false
	}
	return hmac.Equal([]byte(tok), []byte(NewTelegramRelayToken(botID, namespace, name, gatewayToken)))
}

func relayMAC(botID, id, key string) []byte {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(relayCredLabel))
	m.Write([]byte(botID + "\x00" + id))
	return m.Sum(nil)
}

// The Slack relay token is what an agent's gateway uses, in place of its bot token and as its
// relay websocket's bearer token, when the platform relays its Slack channel:
// "xoxb-agentplane." + base64url("<namespace>/<agent>") + "." + base64url(HMAC-SHA256(gateway
// token, label || namespace/agent)). Slack refuses it; the relay swaps it for the bot token on
// the way to Slack's Web API and knows the agent by it on the relay websocket.
const (
	slackRelayLabel  = "agentplane slack relay v1\x00"
	slackRelayPrefix = "xoxb-agentplane."
)

// slackRelayCred is the Slack relay token's form.
var slackRelayCred = agentCredential{prefix: slackRelayPrefix, label: slackRelayLabel}

// NewSlackRelayToken derives the Slack relay token of agent namespace/name.
func NewSlackRelayToken(namespace, name, gatewayToken string) string {
	return slackRelayCred.derive(namespace, name, gatewayToken)
}

// ParseSlackRelayToken returns the agent a Slack relay token names (not yet verified).
func ParseSlackRelayToken(tok string) (namespace, name string, ok bool) {
	namespace, name, mac, ok := slackRelayCred.parse(tok)
	if !ok || len(mac) != relayMACLen {
		return "", "", false
	}
	return namespace, name, true
}

// VerifySlackRelayToken reports whether tok is the current Slack relay token of
// namespace/name under gatewayToken (constant time).
func VerifySlackRelayToken(tok, namespace, name, gatewayToken string) bool {
	return slackRelayCred.verify(tok, namespace, name, gatewayToken)
}

// The Discord relay token is what an agent's gateway uses in place of its bot token when the
// platform relays its Discord channel, of a Discord token's shape (base64(bot user id) "."
// timestamp "." HMAC): base64url(bot id) + "." + base64url("<namespace>/<agent>") + "." +
// base64url(HMAC-SHA256(gateway token, label || bot id || "\x00" || namespace/agent)). The
// engine reads the application id from its first segment as from the real token's; Discord
// refuses it, the relay swaps it for the bot token.
const discordRelayLabel = "agentplane discord relay v1\x00"

// discordRelayCred is the Discord relay token's form for the bot botID: an agentCredential
// whose prefix is the bot id's segment and whose label binds the bot id.
func discordRelayCred(botID string) agentCredential {
	return agentCredential{
		prefix: base64.RawURLEncoding.EncodeToString([]byte(botID)) + ".",
		label:  discordRelayLabel + botID + "\x00",
	}
}

// DiscordBotID is the bot's id a Discord bot token's first dot-separated segment decodes to
// (base64, standard or URL alphabet, padded or not; "" unless it decodes to digits).
func DiscordBotID(botToken string) string {
	seg, _, _ := strings.Cut(botToken, ".")
	seg = strings.TrimRight(seg, "=")
	if seg == "" {
		return ""
	}
	id, err := base64.RawStdEncoding.DecodeString(seg)
	if err != nil {
		if id, err = base64.RawURLEncoding.DecodeString(seg); err != nil {
			return ""
		}
	}
	if len(id) == 0 || strings.Trim(string(id), "0123456789") != "" {
		return ""
	}
	return string(id)
}

// RelayDiscordBotID is the bot id a Discord relay token for botToken carries: DiscordBotID,
// or "0" for a token without one.
func RelayDiscordBotID(botToken string) string {
	if id := DiscordBotID(botToken); id != "" {
		return id
	}
	return "0"
}

// NewDiscordRelayToken derives the Discord relay token of agent namespace/name for the bot
// botID.
func NewDiscordRelayToken(botID, namespace, name, gatewayToken string) string {
	return discordRelayCred(botID).derive(namespace, name, gatewayToken)
}

// ParseDiscordRelayToken returns the bot and the agent a Discord relay token names (not yet
// verified).
func ParseDiscordRelayToken(tok string) (botID, namespace, name string, ok bool) {
	seg, _, found := strings.Cut(tok, ".")
	if !found {
		return "", "", "", false
	}
	botID = DiscordBotID(seg)
	if botID == "" {
		return "", "", "", false
	}
	c := discordRelayCred(botID)
	if !strings.HasPrefix(tok, c.prefix) { // the id's own encoding, as NewDiscordRelayToken writes it
		return "", "", "", false
	}
	namespace, name, mac, ok := c.parse(tok)
	if !ok || len(mac) != relayMACLen {
		return "", "", "", false
	}
	if _, err := base64.RawURLEncoding.DecodeString(mac); err != nil {
		return "", "", "", false
	}
	return botID, namespace, name, true
}

// VerifyDiscordRelayToken reports whether tok is the current Discord relay token of
// namespace/name for botID under gatewayToken (constant time).
func VerifyDiscordRelayToken(tok, botID, namespace, name, gatewayToken string) bool {
	if botID == "" {
		return false
	}
	return discordRelayCred(botID).verify(tok, namespace, name, gatewayToken)
}
