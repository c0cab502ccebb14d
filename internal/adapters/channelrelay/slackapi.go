package channelrelay

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// DefaultSlackAPI is Slack's Web API origin.
const DefaultSlackAPI = "https://slack.com/api/"

// slackRefused are the Web API methods an agent may not call through the relay: they would
// revoke the bot's token or uninstall the app for every agent of the workspace, or open the
// app's Socket Mode connection, which is the platform's.
var slackRefused = map[string]bool{"auth.revoke": true, "apps.uninstall": true, "apps.connections.open": true}

// slackMethod is a Web API method's name.
var slackMethod = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]{0,40}(\.[A-Za-z][A-Za-z0-9]{0,40}){0,4}$`)

// maxSlackForm bounds a form body the relay reads to swap its token (uploads are multipart and
// streamed; Slack's form calls are small).
const maxSlackForm = 4 << 20

// slackCall relays one Web API call: the relay token in the Authorization header (and in a
// form body's token field, where the Slack SDK also puts it) becomes the bot's token.
func (r *Relay) slackCall(w http.ResponseWriter, req *http.Request) {
	method := req.PathValue("method")
	if !slackMethod.MatchString(method) {
		slackError(w, http.StatusOK, "unknown_method")
		return
	}
	tok, _ := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
	body, formTok, err := slackForm(req)
	switch {
	case errors.Is(err, errFormTooLarge):
		slackError(w, http.StatusRequestEntityTooLarge, "request_too_large")
		return
	case err != nil:
		slackError(w, http.StatusBadRequest, "invalid_form_data")
		return
	case tok == "":
		tok = formTok
	case formTok != "" && formTok != tok:
		slackError(w, http.StatusOK, "invalid_auth") // two tokens: both must be the agent's
		return
	}
	if tok == "" {
		slackError(w, http.StatusOK, "not_authed")
		return
	}
	g, err := r.opts.Authorizer.AuthorizeSlack(req.Context(), tok)
	switch {
	case errors.Is(err, ErrUnauthorized):
		slackError(w, http.StatusOK, "invalid_auth")
		return
	case err != nil:
		r.opts.Log.Error(err, "cannot authorize a relay token")
		slackError(w, http.StatusServiceUnavailable, "service_unavailable")
		return
	}
	if slackRefused[method] {
		slackError(w, http.StatusOK, "relay_forbidden")
		return
	}
	out := req.Clone(req.Context())
	if body != nil {
		if formTok != "" {
			body.Set("token", g.BotToken)
		}
		enc := body.Encode()
		out.Body, out.ContentLength = io.NopCloser(strings.NewReader(enc)), int64(len(enc))
		out.Header.Set("Content-Length", strconv.Itoa(len(enc)))
	}
	out.URL = &url.URL{Scheme: r.slackAPI.Scheme, Host: r.slackAPI.Host, Path: r.slackAPI.Path + method, RawQuery: req.URL.RawQuery}
	out.Host = r.slackAPI.Host
	out.RequestURI = ""
	for _, h := range []string{"Cookie", "Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"} {
		out.Header.Del(h)
	}
	out.Header.Set("Authorization", "Bearer "+g.BotToken)
	defer r.opts.Sends.begin(g.Agent)()
	start := time.Now()
	r.slackProxy.ServeHTTP(w, out.WithContext(withGrant(out.Context(), g)))
	r.opts.Log.V(1).Info("relayed", "channel", "slack", "agent", g.Agent.String(), "method", method, "duration", time.Since(start).Round(time.Millisecond))
}

var errFormTooLarge = errors.New("form too large")

// slackForm reads a form-encoded body (nil for another kind, left to stream) and its token
// field.
func slackForm(req *http.Request) (url.Values, string, error) {
	ct, _, _ := mime.ParseMediaType(req.Header.Get("Content-Type"))
	if req.Body == nil || ct != "application/x-www-form-urlencoded" {
		return nil, "", nil
	}
	b, err := io.ReadAll(io.LimitReader(req.Body, maxSlackForm+1))
	if err != nil {
		return nil, "", err
	}
	if len(b) > maxSlackForm {
		return nil, "", errFormTooLarge
	}
	v, err := url.ParseQuery(string(bytes.TrimSpace(b)))
	if err != nil {
		return nil, "", err
	}
	return v, v.Get("token"), nil
}

// slackUpstreamError answers a call Slack could not be asked (the Web API's shape; a non-200
// answer makes the SDK retry).
func (r *Relay) slackUpstreamError(w http.ResponseWriter, req *http.Request, err error) {
	if r.upstreamFailed(req, "Slack", err) {
		slackError(w, http.StatusBadGateway, "relay_upstream_unavailable")
	}
}

// slackError answers as the Web API does: {"ok":false,"error":code}.
func slackError(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": false, "error": code})
}
