package fakediscord

import (
	"encoding/json"
	"io"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// serveAPI strips the /api/vN prefix and serves the route.
func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	r2 := r.Clone(r.Context())
	r2.URL.Path = apiVersion.ReplaceAllString(r.URL.Path, "")
	r2.URL.RawPath = ""
	if r.URL.RawPath != "" {
		r2.URL.RawPath = apiVersion.ReplaceAllString(r.URL.RawPath, "")
	}
	s.api.ServeHTTP(w, r2)
}

// handler answers an authorized request of a route.
type handler func(w http.ResponseWriter, r *http.Request)

// routeFunc registers a REST route behind the bot token check.
type routeFunc func(pattern string, h handler)

// routes registers the REST routes.
func (s *Server) routes() {
	s.api = http.NewServeMux()
	route := func(pattern string, h handler) {
		s.api.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			s.mu.Lock()
			s.calls[pattern]++
			tok := s.botToken
			s.notify()
			s.mu.Unlock()
			auth := r.Header.Get("Authorization")
			if auth == "" && pattern == "GET /gateway" { // the one route Discord serves anyone
				auth = "Bot " + tok
			}
			if auth != "Bot "+tok {
				reply(w, http.StatusUnauthorized, map[string]any{"message": "401: Unauthorized", "code": 0})
				return
			}
			h(w, r)
		})
	}
	s.api.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		what := r.Method + " " + r.URL.Path
		if r.URL.RawQuery != "" {
			what += "?" + r.URL.RawQuery
		}
		s.mu.Lock()
		s.unhandled = append(s.unhandled, what)
		s.notify()
		s.mu.Unlock()
		notFound(w)
	})
	s.userRoutes(route)
	s.guildRoutes(route)
	s.channelRoutes(route)
	for _, scope := range []string{"/applications/{app}/commands", "/applications/{app}/guilds/{guild}/commands"} {
		route("GET "+scope, s.app(s.listCommands))
		route("PUT "+scope, s.app(s.putCommands))
		route("POST "+scope, s.app(s.postCommand))
		route("GET "+scope+"/{command}", s.app(s.oneCommand))
		route("PATCH "+scope+"/{command}", s.app(s.oneCommand))
		route("DELETE "+scope+"/{command}", s.app(s.oneCommand))
	}
}

// userRoutes: the gateway's discovery, the bot, the user, the application, the bot's guilds and
// DM channels.
func (s *Server) userRoutes(route routeFunc) {
	gateway := func(bot bool) handler {
		return func(w http.ResponseWriter, r *http.Request) {
			body := map[string]any{"url": s.wsURL}
			if bot {
				body["shards"] = 1
				body["session_start_limit"] = map[string]any{"total": 1000, "remaining": 1000, "reset_after": 0, "max_concurrency": 1}
			}
			reply(w, 200, body)
		}
	}
	route("GET /gateway", gateway(false))
	route("GET /gateway/bot", gateway(true))
	route("GET /users/@me", func(w http.ResponseWriter, r *http.Request) {
		u := s.bot()
		u["verified"], u["mfa_enabled"], u["locale"], u["email"] = true, false, "en-US", nil
		reply(w, 200, u)
	})
	route("GET /users/{user}", func(w http.ResponseWriter, r *http.Request) {
		switch r.PathValue("user") {
		case s.opts.BotUserID:
			reply(w, 200, s.bot())
		case s.opts.UserID:
			reply(w, 200, s.user())
		default:
			unknown(w, "Unknown User", 10013)
		}
	})
	route("GET /oauth2/applications/@me", func(w http.ResponseWriter, r *http.Request) { reply(w, 200, s.application()) })
	route("GET /applications/@me", func(w http.ResponseWriter, r *http.Request) { reply(w, 200, s.application()) })
	route("GET /users/@me/guilds", func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, []any{map[string]any{"id": s.opts.GuildID, "name": s.opts.GuildName, "icon": nil, "banner": nil,
			"owner": false, "permissions": strconv.FormatInt(permissions, 10), "features": []any{}}})
	})
	route("POST /users/@me/channels", func(w http.ResponseWriter, r *http.Request) {
		var b struct {
			RecipientID string `json:"recipient_id"`
		}
		_ = json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&b)
		if b.RecipientID != s.opts.UserID {
			reply(w, http.StatusBadRequest, map[string]any{"message": "Invalid Recipient(s)", "code": 50033})
			return
		}
		reply(w, 200, s.dmChannel())
	})
}

// guildRoutes: the guild, its channels, roles and members.
func (s *Server) guildRoutes(route routeFunc) {
	guild := func(h handler) handler {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.PathValue("guild") != s.opts.GuildID {
				unknown(w, "Unknown Guild", 10004)
				return
			}
			h(w, r)
		}
	}
	route("GET /guilds/{guild}", guild(func(w http.ResponseWriter, r *http.Request) {
		g := s.guild(false)
		if r.URL.Query().Get("with_counts") == "true" {
			g["approximate_member_count"], g["approximate_presence_count"] = 2, 1
		}
		reply(w, 200, g)
	}))
	route("GET /guilds/{guild}/channels", guild(func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, []any{s.textChannel()})
	}))
	route("GET /guilds/{guild}/roles", guild(func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, []any{s.everyone()})
	}))
	route("GET /guilds/{guild}/members/{user}", guild(func(w http.ResponseWriter, r *http.Request) {
		switch r.PathValue("user") {
		case s.opts.BotUserID, "@me":
			reply(w, 200, s.memberWithUser(true))
		case s.opts.UserID:
			reply(w, 200, s.memberWithUser(false))
		default:
			unknown(w, "Unknown Member", 10007)
		}
	}))
	route("GET /guilds/{guild}/members", guild(func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, []any{s.memberWithUser(true), s.memberWithUser(false)})
	}))
	route("GET /guilds/{guild}/members/search", guild(func(w http.ResponseWriter, r *http.Request) {
		q := strings.ToLower(r.URL.Query().Get("query"))
		var out []any
		for _, bot := range []bool{true, false} {
			m := s.memberWithUser(bot)
			if name, _ := m["user"].(map[string]any)["username"].(string); strings.HasPrefix(strings.ToLower(name), q) {
				out = append(out, m)
			}
		}
		reply(w, 200, append([]any{}, out...))
	}))
}

// channelRoutes: the guild's text channel and the DM, their messages, typing and reactions.
func (s *Server) channelRoutes(route routeFunc) {
	channel := func(h handler) handler {
		return func(w http.ResponseWriter, r *http.Request) {
			if id := r.PathValue("channel"); id != s.opts.ChannelID && id != s.opts.DMChannelID {
				unknown(w, "Unknown Channel", 10003)
				return
			}
			h(w, r)
		}
	}
	route("GET /channels/{channel}", channel(func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("channel") == s.opts.DMChannelID {
			reply(w, 200, s.dmChannel())
			return
		}
		reply(w, 200, s.textChannel())
	}))
	route("POST /channels/{channel}/typing", channel(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	route("GET /channels/{channel}/messages", channel(s.history))
	route("POST /channels/{channel}/messages", channel(s.post))
	route("GET /channels/{channel}/messages/{message}", channel(s.onMessage))
	route("PATCH /channels/{channel}/messages/{message}", channel(s.onMessage))
	route("DELETE /channels/{channel}/messages/{message}", channel(s.onMessage))
	route("PUT /channels/{channel}/messages/{message}/reactions/{emoji}/@me", channel(s.react))
	route("DELETE /channels/{channel}/messages/{message}/reactions/{emoji}/@me", channel(s.react))
}

// history answers GET /channels/{channel}/messages: the channel's messages newest first,
// before/after/limit honoured.
func (s *Server) history(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, err := strconv.Atoi(q.Get("limit"))
	if err != nil || limit <= 0 || limit > 100 {
		limit = 50
	}
	before, after := q.Get("before"), q.Get("after")
	ch := r.PathValue("channel")
	s.mu.Lock()
	defer s.mu.Unlock() // the messages are marshaled under the lock: an edit changes them
	var ms []map[string]any
	for _, m := range s.messages {
		id := m["id"].(string)
		if m["channel_id"] != ch || (before != "" && !idLess(id, before)) || (after != "" && !idLess(after, id)) {
			continue
		}
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b map[string]any) int {
		if idLess(a["id"].(string), b["id"].(string)) {
			return 1
		}
		return -1
	})
	if len(ms) > limit {
		if after != "" {
			ms = ms[len(ms)-limit:]
		} else {
			ms = ms[:limit]
		}
	}
	reply(w, 200, append([]map[string]any{}, ms...))
}

// idLess orders snowflakes.
func idLess(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

// post answers POST /channels/{channel}/messages, a JSON or multipart (payload_json) body. A
// repeated nonce with enforce_nonce gets the first message again, not a new post; content over
// 2,000 characters is refused, as Discord does.
func (s *Server) post(w http.ResponseWriter, r *http.Request) {
	body, files, err := payload(r)
	if err != nil {
		reply(w, http.StatusBadRequest, map[string]any{"message": "400: Bad Request", "code": 0})
		return
	}
	var p struct {
		Content          string `json:"content"`
		MessageReference *struct {
			MessageID string `json:"message_id"`
		} `json:"message_reference"`
		Embeds       []any           `json:"embeds"`
		Components   []any           `json:"components"`
		Nonce        json.RawMessage `json:"nonce"`
		EnforceNonce bool            `json:"enforce_nonce"`
	}
	if json.Unmarshal(body, &p) != nil {
		reply(w, http.StatusBadRequest, map[string]any{"message": "400: Bad Request", "code": 50109})
		return
	}
	if p.Content == "" && len(files) == 0 && len(p.Embeds) == 0 && len(p.Components) == 0 {
		reply(w, http.StatusBadRequest, map[string]any{"message": "Cannot send an empty message", "code": 50006})
		return
	}
	if n := len([]rune(p.Content)); n > 2000 {
		reply(w, http.StatusBadRequest, map[string]any{"message": "Invalid Form Body", "code": 50035, "errors": map[string]any{
			"content": map[string]any{"_errors": []any{map[string]any{"code": "BASE_TYPE_MAX_LENGTH", "message": "Must be 2000 or fewer in length."}}}}})
		return
	}
	ch := r.PathValue("channel")
	s.mu.Lock()
	defer s.mu.Unlock()
	nonce := ch + "/" + string(p.Nonce)
	if id, ok := s.nonces[nonce]; ok && p.EnforceNonce && len(p.Nonce) > 0 {
		if m, ok := s.messages[id]; ok { // Discord answers a repeated nonce with the first message
			reply(w, 200, m)
			return
		}
	}
	m := s.message(ch, s.bot(), p.Content)
	if len(p.Nonce) > 0 {
		m["nonce"] = p.Nonce
		s.nonces[nonce] = m["id"].(string)
	}
	if p.Embeds != nil {
		m["embeds"] = p.Embeds
	}
	if p.Components != nil {
		m["components"] = p.Components
	}
	post := Post{ChannelID: ch, Content: p.Content, Files: files, Body: body, ID: m["id"].(string)}
	if ref := p.MessageReference; ref != nil && ref.MessageID != "" {
		post.ReplyTo = ref.MessageID
		m["type"] = 19
		m["message_reference"] = map[string]any{"type": 0, "message_id": ref.MessageID, "channel_id": ch}
		if ch == s.opts.ChannelID {
			m["message_reference"].(map[string]any)["guild_id"] = s.opts.GuildID
		}
		if orig, ok := s.messages[ref.MessageID]; ok {
			m["referenced_message"] = orig
		}
	}
	atts := []any{}
	for i, f := range files {
		atts = append(atts, map[string]any{"id": s.snowflake(), "filename": f, "size": 0,
			"url": s.srv.URL + "/attachments/" + ch + "/" + strconv.Itoa(i) + "/" + f, "proxy_url": s.srv.URL + "/attachments/" + f})
	}
	m["attachments"] = atts
	if ch == s.opts.ChannelID {
		m["member"] = s.member()
	}
	s.posts = append(s.posts, post)
	s.created(m)
	reply(w, 200, m)
}

// onMessage answers GET, PATCH and DELETE /channels/{channel}/messages/{message}; only the
// bot's own messages can be edited or deleted.
func (s *Server) onMessage(w http.ResponseWriter, r *http.Request) {
	var edit struct {
		Content *string `json:"content"`
	}
	if r.Method == http.MethodPatch {
		body, _, err := payload(r)
		if err != nil || json.Unmarshal(body, &edit) != nil {
			reply(w, http.StatusBadRequest, map[string]any{"message": "400: Bad Request", "code": 0})
			return
		}
	}
	ch, id := r.PathValue("channel"), r.PathValue("message")
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.messages[id]
	if !ok || m["channel_id"] != ch {
		unknown(w, "Unknown Message", 10008)
		return
	}
	if r.Method == http.MethodGet {
		reply(w, 200, m)
		return
	}
	i := slices.IndexFunc(s.posts, func(p Post) bool { return p.ID == id })
	if i < 0 {
		reply(w, http.StatusForbidden, map[string]any{"message": "Cannot edit a message authored by another user", "code": 50005})
		return
	}
	if r.Method == http.MethodDelete {
		s.posts[i].Deleted = true
		delete(s.messages, id)
		s.dispatchAll(IntentGuildMessages|IntentDirectMessages, "MESSAGE_DELETE", map[string]any{"id": id, "channel_id": ch, "guild_id": m["guild_id"]})
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if edit.Content != nil {
		m["content"] = *edit.Content
		m["edited_timestamp"] = timestamp(time.Now())
		s.posts[i].Content = *edit.Content
		s.posts[i].Edited = true
		s.dispatchMessage("MESSAGE_UPDATE", m)
	}
	reply(w, 200, m)
}

// react answers PUT and DELETE .../reactions/{emoji}/@me.
func (s *Server) react(w http.ResponseWriter, r *http.Request) {
	ch, id := r.PathValue("channel"), r.PathValue("message")
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok := s.messages[id]; !ok || m["channel_id"] != ch {
		unknown(w, "Unknown Message", 10008)
		return
	}
	s.reactions = append(s.reactions, Reaction{ChannelID: ch, MessageID: id, Emoji: r.PathValue("emoji"), Removed: r.Method == http.MethodDelete})
	s.notify()
	w.WriteHeader(http.StatusNoContent)
}

// app checks the {app} of an application route.
func (s *Server) app(h handler) handler {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("app") != s.opts.BotUserID {
			unknown(w, "Unknown Application", 10002)
			return
		}
		if g := r.PathValue("guild"); g != "" && g != s.opts.GuildID {
			unknown(w, "Unknown Guild", 10004)
			return
		}
		h(w, r)
	}
}

// scope is a command route's store key: "" for global commands, else the guild id.
func scope(r *http.Request) string { return r.PathValue("guild") }

func (s *Server) listCommands(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	reply(w, 200, append([]map[string]any{}, s.commands[scope(r)]...))
}

// command completes a command the client sent into the object Discord stores, keeping the id
// of a stored one of the same name (s.mu held).
func (s *Server) command(r *http.Request, c map[string]any) map[string]any {
	id := s.snowflake()
	for _, old := range s.commands[scope(r)] {
		if old["name"] == c["name"] && sameType(old, c) {
			id = old["id"].(string)
		}
	}
	out := maps.Clone(c)
	out["id"], out["application_id"], out["version"] = id, s.opts.BotUserID, s.snowflake()
	if _, ok := out["type"]; !ok {
		out["type"] = 1
	}
	if g := scope(r); g != "" {
		out["guild_id"] = g
	}
	for k, v := range map[string]any{"description": "", "default_member_permissions": nil, "nsfw": false} {
		if _, ok := out[k]; !ok {
			out[k] = v
		}
	}
	return out
}

func sameType(a, b map[string]any) bool {
	ta, tb := a["type"], b["type"]
	if tb == nil {
		tb = 1
	}
	return jsonEq(ta, tb)
}

func jsonEq(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

func (s *Server) putCommands(w http.ResponseWriter, r *http.Request) {
	var in []map[string]any
	if err := json.NewDecoder(io.LimitReader(r.Body, 8<<20)).Decode(&in); err != nil {
		reply(w, http.StatusBadRequest, map[string]any{"message": "400: Bad Request", "code": 50109})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]map[string]any, 0, len(in))
	for _, c := range in {
		out = append(out, s.command(r, c))
	}
	s.commands[scope(r)] = out
	s.notify()
	reply(w, 200, out)
}

func (s *Server) postCommand(w http.ResponseWriter, r *http.Request) {
	var in map[string]any
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&in); err != nil || in == nil {
		reply(w, http.StatusBadRequest, map[string]any{"message": "400: Bad Request", "code": 50109})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.command(r, in)
	list := s.commands[scope(r)]
	status := http.StatusCreated
	if i := slices.IndexFunc(list, func(x map[string]any) bool { return x["id"] == c["id"] }); i >= 0 {
		list[i] = c
		status = http.StatusOK
	} else {
		list = append(list, c)
	}
	s.commands[scope(r)] = list
	s.notify()
	reply(w, status, c)
}

func (s *Server) oneCommand(w http.ResponseWriter, r *http.Request) {
	var patch map[string]any
	if r.Method == http.MethodPatch {
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&patch); err != nil {
			reply(w, http.StatusBadRequest, map[string]any{"message": "400: Bad Request", "code": 50109})
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	list := s.commands[scope(r)]
	i := slices.IndexFunc(list, func(x map[string]any) bool { return x["id"] == r.PathValue("command") })
	if i < 0 {
		unknown(w, "Unknown application command", 10063)
		return
	}
	switch r.Method {
	case http.MethodDelete:
		s.commands[scope(r)] = slices.Delete(list, i, i+1)
		s.notify()
		w.WriteHeader(http.StatusNoContent)
	case http.MethodPatch:
		maps.Copy(list[i], patch)
		list[i]["version"] = s.snowflake()
		s.notify()
		reply(w, 200, list[i])
	default:
		reply(w, 200, list[i])
	}
}

// payload reads a message body: the JSON body, or a multipart body's payload_json (or its
// content field) and the names of its files.
func payload(r *http.Request) (json.RawMessage, []string, error) {
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct != "multipart/form-data" {
		b, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
		return b, nil, err
	}
	if err := r.ParseMultipartForm(32 << 20); err != nil {
		return nil, nil, err
	}
	var files []string
	var keys []string
	for k := range r.MultipartForm.File {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		for _, f := range r.MultipartForm.File[k] {
			files = append(files, f.Filename)
		}
	}
	if pj := r.FormValue("payload_json"); pj != "" {
		return json.RawMessage(pj), files, nil
	}
	b, err := json.Marshal(map[string]any{"content": r.FormValue("content")})
	return b, files, err
}

func reply(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func notFound(w http.ResponseWriter) {
	reply(w, http.StatusNotFound, map[string]any{"message": "404: Not Found", "code": 0})
}

func unknown(w http.ResponseWriter, what string, code int) {
	reply(w, http.StatusNotFound, map[string]any{"message": what, "code": code})
}
