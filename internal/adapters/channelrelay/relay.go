// Package channelrelay puts the platform between its agents and their chat channels. For
// Telegram it is the Bot API origin of every agent's gateway (the engine's
// channels.telegram.apiRoot): a gateway calls it with a relay token of the bot token's shape
// (auth.NewTelegramRelayToken), the relay swaps it for the bot's real token and forwards the
// call to Telegram, so the real token never reaches the agent. And while an agent sleeps, the
// relay's watch (watch.go) long-polls its bot for it and wakes the agent when a message
// waits; the gateway then fetches it from Telegram itself, through the relay, from the offset
// it stored: nothing is taken off Telegram's queue for it, so nothing is lost or doubled.
//
// For Slack it is the router of the engine's relay mode (slack.go): the platform holds the
// Slack app's Socket Mode connection, keeps what arrives in the agent's inbox, wakes a sleeping
// agent and delivers the inbox over the gateway's relay websocket, where the gateway acks each
// event once it stored it. The gateway calls the Web API through the relay with a relay token
// (auth.NewSlackRelayToken), so neither of the app's tokens reaches the agent.
//
// For Discord it is the Discord of every relayed agent's gateway (the engine's DISCORD_API_URL,
// discord.go): the platform holds the bot's gateway connection (DiscordIngress), keeps each
// message in the agent's inbox, wakes a sleeping agent and serves the inbox on a Discord
// gateway of its own, where a message leaves the inbox once the agent's gateway has seen it
// (its heartbeat's or its resume's sequence number). REST calls carry a relay token of a
// Discord token's shape (auth.NewDiscordRelayToken), which the relay swaps for the bot's.
//
// Routes (under the facade's /relay/ and the model proxy's own listener):
//
//	/relay/telegram/bot<relay token>/<method>         any Bot API method but those below
//	/relay/telegram/file/bot<relay token>/<file path> file downloads
//	POST /relay/slack/api/<method>                    any Web API method but those below
//	GET /relay/slack/gateway                          the gateway's relay websocket
//	/relay/discord/api/v10/<path>                     any REST call (gateway discovery answered here)
//	GET /relay/discord/gateway                        the agents' Discord gateway
//	GET /relay/discord/media/<mac>/<host>/<path>      an attachment the relay handed out
//
// setWebhook, logOut and close answer 403: they would take the bot's updates away from the
// platform (a webhook elsewhere, another Bot API server). auth.revoke, apps.uninstall and
// apps.connections.open answer relay_forbidden: they would end the bot's token or the app for
// every agent, or open the app's socket, which is the platform's.
package channelrelay

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httputil"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
)

// DefaultTelegramAPI is Telegram's Bot API origin.
const DefaultTelegramAPI = "https://api.telegram.org"

// AgentKey names an agent.
type AgentKey = types.NamespacedName

// Grant is what a good relay token stands for.
type Grant struct {
	Agent    types.NamespacedName
	BotToken string // the bot's real token
}

type grantKey struct{}

func withGrant(ctx context.Context, g Grant) context.Context {
	return context.WithValue(ctx, grantKey{}, g)
}

func grantOf(ctx context.Context) (Grant, bool) {
	g, ok := ctx.Value(grantKey{}).(Grant)
	return g, ok
}

// ErrUnauthorized is what an Authorizer returns for a token it does not know, or that is no
// longer good (the agent, its channel or its gateway token changed): the relay answers 401,
// as Telegram does for a bad token. Any other error answers 503.
var ErrUnauthorized = errors.New("channelrelay: unauthorized relay token")

// Authorizer maps a relay token to its grant.
type Authorizer interface {
	AuthorizeTelegram(ctx context.Context, relayToken string) (Grant, error)
	AuthorizeSlack(ctx context.Context, relayToken string) (Grant, error)
	AuthorizeDiscord(ctx context.Context, relayToken string) (Grant, error)
}

// Options configure a Relay.
type Options struct {
	Authorizer Authorizer
	// TelegramAPI is the Bot API origin the relay forwards to (default DefaultTelegramAPI;
	// tests and self-hosted Bot API servers set another).
	TelegramAPI string
	// SlackAPI is the Web API origin the relay forwards to (default DefaultSlackAPI).
	SlackAPI string
	// Slack routes the relayed Slack channels' events to their gateways (nil: the gateway
	// websocket route answers 404).
	Slack *SlackRouter
	// DiscordAPI is the versioned REST base the relay forwards Discord calls to (default
	// DefaultDiscordAPI).
	DiscordAPI string
	// Discord is the agents' Discord gateway (nil: the relay answers no Discord gateway
	// discovery and serves no gateway websocket).
	Discord *DiscordRouter
	// DiscordCDN, when set, is where the relay fetches the attachments it serves instead of
	// Discord's CDN hosts (tests).
	DiscordCDN string
	Transport  http.RoundTripper // default: http.DefaultTransport
	Log        logr.Logger
	// Polled, when set, is told each time an agent's gateway asks for its updates (the watch
	// stops polling for an agent whose gateway does).
	Polled func(types.NamespacedName)
	// Sends, when set, counts the agents' calls in flight that may change something on the
	// chat network (Sends.Busy).
	Sends *Sends
}

// Relay is the channel relay, an http.Handler mounted at "/relay/".
type Relay struct {
	opts         Options
	api          *url.URL
	proxy        *httputil.ReverseProxy
	slackAPI     *url.URL
	slackProxy   *httputil.ReverseProxy
	discordAPI   *url.URL
	discordProxy *httputil.ReverseProxy
	mux          *http.ServeMux
	polls        telegramPolls // the agents' getUpdates in flight (quiesce.go)
}

// New builds a Relay.
func New(o Options) (*Relay, error) {
	if o.Authorizer == nil {
		return nil, errors.New("channelrelay: no authorizer")
	}
	if o.TelegramAPI == "" {
		o.TelegramAPI = DefaultTelegramAPI
	}
	api, err := url.Parse(strings.TrimSuffix(o.TelegramAPI, "/"))
	if err != nil || api.Scheme == "" || api.Host == "" {
		return nil, errors.New("channelrelay: the Telegram API origin must be an absolute URL")
	}
	if o.SlackAPI == "" {
		o.SlackAPI = DefaultSlackAPI
	}
	slackAPI, err := url.Parse(strings.TrimSuffix(o.SlackAPI, "/") + "/")
	if err != nil || slackAPI.Scheme == "" || slackAPI.Host == "" {
		return nil, errors.New("channelrelay: the Slack API origin must be an absolute URL")
	}
	if o.DiscordAPI == "" {
		o.DiscordAPI = DefaultDiscordAPI
	}
	discordAPI, err := url.Parse(strings.TrimSuffix(o.DiscordAPI, "/"))
	if err != nil || discordAPI.Scheme == "" || discordAPI.Host == "" {
		return nil, errors.New("channelrelay: the Discord API base must be an absolute URL")
	}
	if o.Transport == nil {
		o.Transport = http.DefaultTransport
	}
	r := &Relay{opts: o, api: api, slackAPI: slackAPI, discordAPI: discordAPI, mux: http.NewServeMux()}
	r.proxy = &httputil.ReverseProxy{
		Rewrite:        func(*httputil.ProxyRequest) {}, // the handler sets the outbound URL
		Transport:      o.Transport,
		FlushInterval:  -1,
		ModifyResponse: r.telegramAnswer,
		ErrorHandler:   r.upstreamError,
	}
	r.slackProxy = &httputil.ReverseProxy{
		Rewrite:      func(*httputil.ProxyRequest) {},
		Transport:    o.Transport,
		ErrorHandler: r.slackUpstreamError,
	}
	r.discordProxy = &httputil.ReverseProxy{
		Rewrite:      func(*httputil.ProxyRequest) {},
		Transport:    o.Transport,
		ErrorHandler: r.discordUpstreamError,
	}
	r.mux.HandleFunc("/relay/telegram/{bot}/{method}", r.telegramMethod)
	r.mux.HandleFunc("GET /relay/telegram/file/{bot}/{path...}", r.telegramFile)
	r.mux.HandleFunc("POST /relay/slack/api/{method}", r.slackCall)
	if o.Slack != nil {
		r.mux.Handle("GET "+SlackGatewayPath, o.Slack)
	}
	r.mux.HandleFunc(DiscordAPIPath+"/{path...}", r.discordCall)
	if o.Discord != nil {
		r.mux.Handle("GET "+DiscordGatewayPath, o.Discord)
		r.mux.Handle("GET "+DiscordGatewayPath+"/{$}", o.Discord) // discordgo adds a slash
		r.mux.HandleFunc("GET "+DiscordMediaPath+"{mac}/{host}/{path...}", r.discordMedia)
	}
	return r, nil
}

func (r *Relay) ServeHTTP(w http.ResponseWriter, req *http.Request) { r.mux.ServeHTTP(w, req) }

// refused are the Bot API methods an agent may not call through the relay (lower case: the
// Bot API's method names are case-insensitive).
var refused = map[string]bool{"setwebhook": true, "logout": true, "close": true}

// methodName is a Bot API method's name; filePath a file's path on Telegram.
var (
	methodName = regexp.MustCompile(`^[A-Za-z]{1,64}$`)
	filePath   = regexp.MustCompile(`^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*$`)
)

func (r *Relay) telegramMethod(w http.ResponseWriter, req *http.Request) {
	method := req.PathValue("method")
	if !methodName.MatchString(method) {
		telegramError(w, http.StatusNotFound, "Not Found: method not found")
		return
	}
	g, ok := r.authorize(w, req)
	if !ok {
		return
	}
	if refused[strings.ToLower(method)] {
		telegramError(w, http.StatusForbidden, "Forbidden: "+method+" is the platform's (agentplane relays this bot)")
		return
	}
	if strings.EqualFold(method, "getUpdates") {
		if r.opts.Polled != nil {
			r.opts.Polled(g.Agent)
		}
		ctx, p := r.polls.start(req.Context(), g.Agent)
		if p == nil {
			asleepAnswer(w) // the agent is going to sleep (quiesce.go)
			return
		}
		defer r.polls.end(g.Agent, p)
		req = req.WithContext(ctx)
	} else {
		defer r.opts.Sends.begin(g.Agent)()
	}
	r.forward(w, req, g, "/bot"+g.BotToken+"/"+method)
}

// errCut is how telegramAnswer drops Telegram's answer to a poll a quiesce has cut.
var errCut = errors.New("channelrelay: the poll was cut by a quiesce")

// telegramAnswer lets Telegram's answer through, unless it answers a poll that a quiesce has
// cut meanwhile (upstreamError then answers it).
func (r *Relay) telegramAnswer(resp *http.Response) error {
	if p := pollOf(resp.Request.Context()); p != nil && !r.polls.answer(p) {
		return errCut
	}
	return nil
}

func (r *Relay) telegramFile(w http.ResponseWriter, req *http.Request) {
	p := req.PathValue("path")
	if !filePath.MatchString(p) || slices.Contains(strings.Split(p, "/"), "..") {
		telegramError(w, http.StatusNotFound, "Not Found: file not found")
		return
	}
	g, ok := r.authorize(w, req)
	if !ok {
		return
	}
	r.forward(w, req, g, "/file/bot"+g.BotToken+"/"+p)
}

// authorize answers for a request whose relay token is not good.
func (r *Relay) authorize(w http.ResponseWriter, req *http.Request) (Grant, bool) {
	tok, ok := strings.CutPrefix(req.PathValue("bot"), "bot")
	if !ok {
		telegramError(w, http.StatusNotFound, "Not Found")
		return Grant{}, false
	}
	g, err := r.opts.Authorizer.AuthorizeTelegram(req.Context(), tok)
	switch {
	case errors.Is(err, ErrUnauthorized):
		telegramError(w, http.StatusUnauthorized, "Unauthorized")
		return Grant{}, false
	case err != nil:
		r.opts.Log.Error(err, "cannot authorize a relay token")
		telegramError(w, http.StatusServiceUnavailable, "Service Unavailable: the platform cannot read the channel now")
		return Grant{}, false
	}
	return g, true
}

// forward sends req to Telegram at path (which holds the real token), streaming both ways.
func (r *Relay) forward(w http.ResponseWriter, req *http.Request, g Grant, path string) {
	out := req.Clone(withGrant(req.Context(), g))
	out.URL = &url.URL{Scheme: r.api.Scheme, Host: r.api.Host, Path: r.api.Path + path, RawQuery: req.URL.RawQuery}
	out.Host = r.api.Host
	out.RequestURI = ""
	for _, h := range []string{"Authorization", "Cookie", "Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"} {
		out.Header.Del(h)
	}
	start := time.Now()
	r.proxy.ServeHTTP(w, out)
	r.opts.Log.V(1).Info("relayed", "channel", "telegram", "agent", g.Agent.String(), "method", req.PathValue("method"), "duration", time.Since(start).Round(time.Millisecond))
}

// upstreamError answers a request Telegram could not be asked.
func (r *Relay) upstreamError(w http.ResponseWriter, req *http.Request, err error) {
	if p := pollOf(req.Context()); p != nil && r.polls.cut(p) {
		asleepAnswer(w)
		return
	}
	if r.upstreamFailed(req, "Telegram", err) {
		telegramError(w, http.StatusBadGateway, "Bad Gateway: Telegram did not answer the platform's relay")
	}
}

// upstreamFailed logs why channel could not be asked, and reports whether the caller is still
// there to be answered. The transport's error names the URL, which may hold the real token
// (Telegram's): only its cause is logged.
func (r *Relay) upstreamFailed(req *http.Request, channel string, err error) bool {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	if req.Context().Err() != nil {
		return false // the gateway went away (a long poll cancelled)
	}
	g, _ := grantOf(req.Context())
	r.opts.Log.Info(channel+" did not answer", "agent", g.Agent.String(), "error", err.Error())
	return true
}

// telegramError answers as the Bot API does.
func telegramError(w http.ResponseWriter, code int, description string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": false, "error_code": code, "description": description})
}
