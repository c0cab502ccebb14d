package channelrelay

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
)

// DefaultDiscordAPI is Discord's versioned REST base (what the engine's Discord plugin calls
// without DISCORD_API_URL).
const DefaultDiscordAPI = "https://discord.com/api/v10"

// Discord routes of the relay (under the model proxy's listener, like Telegram's and Slack's).
const (
	// DiscordAPIPath is the versioned REST base agents' gateways call (their DISCORD_API_URL is
	// the relay's base + DiscordAPIPath).
	DiscordAPIPath = "/relay/discord/api/v10"
	// DiscordGatewayPath is the relay's Discord gateway websocket, the URL its /gateway/bot
	// answers (same origin as the REST base, as the engine requires).
	DiscordGatewayPath = "/relay/discord/gateway"
)

// discordCall relays one REST call of an agent's gateway: its relay token (Authorization:
// Bot <relay token>) becomes the bot's token on the way to Discord. The gateway's discovery
// (/gateway, /gateway/bot) is answered by the relay: the gateway connects to the relay's
// Discord gateway (DiscordRouter), on the relay's origin as the engine requires.
func (r *Relay) discordCall(w http.ResponseWriter, req *http.Request) {
	p := req.PathValue("path")
	if !discordPath.MatchString(p) || slices.Contains(strings.Split(p, "/"), "..") {
		discordError(w, http.StatusNotFound, "404: Not Found")
		return
	}
	tok, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bot ")
	if !ok || tok == "" {
		discordError(w, http.StatusUnauthorized, "401: Unauthorized")
		return
	}
	g, err := r.opts.Authorizer.AuthorizeDiscord(req.Context(), tok)
	switch {
	case errors.Is(err, ErrUnauthorized):
		discordError(w, http.StatusUnauthorized, "401: Unauthorized")
		return
	case err != nil:
		r.opts.Log.Error(err, "cannot authorize a relay token")
		discordError(w, http.StatusServiceUnavailable, "the platform cannot read the channel now")
		return
	}
	if p == "gateway" || p == "gateway/bot" {
		if req.Method != http.MethodGet {
			discordError(w, http.StatusMethodNotAllowed, "405: Method Not Allowed")
			return
		}
		if r.opts.Discord == nil {
			discordError(w, http.StatusServiceUnavailable, "the platform does not relay Discord's gateway")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"url": "ws://" + req.Host + DiscordGatewayPath, "shards": 1,
			"session_start_limit": map[string]int{"total": 1000, "remaining": 1000, "reset_after": 0, "max_concurrency": 1},
		})
		return
	}
	out := req.Clone(withGrant(req.Context(), g))
	out.URL = &url.URL{Scheme: r.discordAPI.Scheme, Host: r.discordAPI.Host, Path: r.discordAPI.Path + "/" + p, RawQuery: req.URL.RawQuery}
	out.Host = r.discordAPI.Host
	out.RequestURI = ""
	for _, h := range []string{"Cookie", "Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"} {
		out.Header.Del(h)
	}
	out.Header.Set("Authorization", "Bot "+g.BotToken)
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		defer r.opts.Sends.begin(g.Agent)()
	}
	start := time.Now()
	r.discordProxy.ServeHTTP(w, out)
	r.opts.Log.V(1).Info("relayed", "channel", "discord", "agent", g.Agent.String(), "method", req.Method, "path", p, "duration", time.Since(start).Round(time.Millisecond))
}

// discordPath is a REST route under the versioned base: path segments of ids, names and
// Discord's route words (a reaction's emoji is percent-encoded).
var discordPath = regexp.MustCompile(`^[A-Za-z0-9@%_.:~-]+(/[A-Za-z0-9@%_.:~-]+)*$`)

// discordUpstreamError answers a call Discord could not be asked.
func (r *Relay) discordUpstreamError(w http.ResponseWriter, req *http.Request, err error) {
	if r.upstreamFailed(req, "Discord", err) {
		discordError(w, http.StatusBadGateway, "Discord did not answer the platform's relay")
	}
}

// discordError answers as Discord's REST API does: {"message": ..., "code": 0}.
func discordError(w http.ResponseWriter, status int, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"message": message, "code": 0})
}
