package benchkit

import (
	"fmt"
	"strings"

	"github.com/agentplane/agentplane/internal/adapters/modelproxy/providertest"
	"github.com/agentplane/agentplane/internal/devtools/faketelegram"
)

// IsReply is whether a bot's message is the model's answer (the fake provider's reply). The
// engine's own messages that quote a model's output are not: its heartbeat (a periodic
// background turn, on by default) sends the user an alert with the fake provider's reply in it.
func IsReply(text string) bool { return strings.TrimSpace(text) == providertest.Reply }

// IsTelegramAnswer is whether a fake bot's Bot API call is a message to chat that is the
// model's answer (IsReply).
func IsTelegramAnswer(c faketelegram.Call, chat int64) bool {
	text, _ := c.Params["text"].(string)
	return c.Method == "sendMessage" && fmt.Sprint(c.Params["chat_id"]) == fmt.Sprint(chat) && IsReply(text)
}
