// Package faketelegram is a Telegram Bot API server for tests, on loopback: one bot, updates
// that the test sends, getUpdates with Telegram's offset rules (an update is confirmed by a
// later call with a greater offset; a call without one returns the oldest unconfirmed) and its
// long poll (a newer poll ends an older one with 409 Conflict), and a record of every call.
package faketelegram

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Call is one Bot API call the server answered.
type Call struct {
	Method string
	Token  string         // the token of the request's URL
	Params map[string]any // the JSON body (or the query)
	At     time.Time      // when the call came
}

// Server is a fake Bot API server for one bot.
type Server struct {
	URL   string
	Token string // the bot's token; other tokens answer 401
	BotID int64

	srv     *httptest.Server
	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every change
	pending []map[string]any
	nextID  int64
	calls   []Call
	poll    chan struct{} // closed to end the current long poll with a Conflict
	msgID   int64
}

// New starts a server for the bot with token ("<id>:<secret>").
func New(token string) *Server {
	id, _ := strconv.ParseInt(strings.SplitN(token, ":", 2)[0], 10, 64)
	s := &Server{Token: token, BotID: id, changed: make(chan struct{}), nextID: 1, msgID: 1000}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	return s
}

// SetToken changes the bot's token (BotFather's /revoke): the old one answers 401 from now on.
func (s *Server) SetToken(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Token = token
}

// LastCall is the latest call answered (false: none yet).
func (s *Server) LastCall() (Call, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.calls) == 0 {
		return Call{}, false
	}
	return s.calls[len(s.calls)-1], true
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// SendText queues a private text message from user to the bot and returns its update_id.
func (s *Server) SendText(user int64, text string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.nextID
	s.nextID++
	s.msgID++
	s.pending = append(s.pending, map[string]any{"update_id": id, "message": map[string]any{
		"message_id": s.msgID, "date": time.Now().Unix(), "text": text,
		"chat": map[string]any{"id": user, "type": "private", "first_name": "Tester"},
		"from": map[string]any{"id": user, "is_bot": false, "first_name": "Tester"},
	}})
	s.notify()
	return id
}

// Calls returns the calls answered so far.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// Pending is how many updates are not confirmed yet.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}

// notify wakes whatever waits for a change (s.mu held).
func (s *Server) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if rest, ok := strings.CutPrefix(r.URL.Path, "/file/bot"); ok {
		tok, path, _ := strings.Cut(rest, "/")
		s.mu.Lock()
		s.calls = append(s.calls, Call{Method: "file", Token: tok, Params: map[string]any{"path": path}, At: time.Now()})
		s.notify()
		good := tok == s.Token
		s.mu.Unlock()
		if !good {
			answer(w, http.StatusUnauthorized, nil, "Unauthorized")
			return
		}
		_, _ = io.WriteString(w, "file:"+path) // a download: the file's bytes
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/bot")
	tok, method, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 {
		answer(w, http.StatusNotFound, nil, "Not Found")
		return
	}
	params := map[string]any{}
	if b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20)); len(b) > 0 {
		_ = json.Unmarshal(b, &params)
	}
	for k, v := range r.URL.Query() {
		params[k] = v[0]
	}
	s.mu.Lock()
	s.calls = append(s.calls, Call{Method: method, Token: tok, Params: params, At: time.Now()})
	s.notify()
	good := tok == s.Token
	var mine chan struct{}
	if good && method == "getUpdates" { // this poll is the bot's current one once recorded
		if s.poll != nil {
			close(s.poll) // the older poll ends with a Conflict
		}
		mine = make(chan struct{})
		s.poll = mine
	}
	s.mu.Unlock()
	if !good {
		answer(w, http.StatusUnauthorized, nil, "Unauthorized")
		return
	}
	switch method {
	case "getMe":
		answer(w, 200, map[string]any{"id": s.BotID, "is_bot": true, "first_name": "Fake", "username": "fake_agentplane_bot"}, "")
	case "getUpdates":
		s.getUpdates(w, r, params, mine)
	case "sendMessage":
		s.mu.Lock()
		s.msgID++
		id := s.msgID
		s.mu.Unlock()
		answer(w, 200, map[string]any{
			"message_id": id, "date": time.Now().Unix(), "text": params["text"],
			"chat": map[string]any{"id": params["chat_id"], "type": "private"},
			"from": map[string]any{"id": s.BotID, "is_bot": true, "first_name": "Fake"},
		}, "")
	default:
		answer(w, 200, true, "")
	}
}

// getUpdates: confirm below offset, answer what waits (up to limit), else wait up to timeout;
// a newer call ends this one with 409.
func (s *Server) getUpdates(w http.ResponseWriter, r *http.Request, p map[string]any, mine chan struct{}) {
	offset, hasOffset := number(p["offset"])
	limit, ok := number(p["limit"])
	if !ok || limit <= 0 || limit > 100 {
		limit = 100
	}
	timeout, _ := number(p["timeout"])
	deadline := time.After(time.Duration(timeout) * time.Second)
	defer func() {
		s.mu.Lock()
		if s.poll == mine {
			s.poll = nil
		}
		s.mu.Unlock()
	}()
	for {
		s.mu.Lock()
		if hasOffset {
			kept := s.pending[:0]
			for _, u := range s.pending {
				if id, _ := number(u["update_id"]); id >= offset {
					kept = append(kept, u)
				}
			}
			s.pending = kept
		}
		out := append([]map[string]any{}, s.pending[:min(int(limit), len(s.pending))]...)
		changed := s.changed
		s.mu.Unlock()
		if len(out) > 0 {
			answer(w, 200, out, "")
			return
		}
		select {
		case <-mine:
			answer(w, http.StatusConflict, nil, "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running")
			return
		case <-deadline:
			answer(w, 200, []any{}, "")
			return
		case <-r.Context().Done():
			return
		case <-changed:
		}
	}
}

func number(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case float64:
		return int64(n), true
	case string:
		i, err := strconv.ParseInt(n, 10, 64)
		return i, err == nil
	}
	return 0, false
}

func answer(w http.ResponseWriter, code int, result any, description string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	if code != 200 {
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": false, "error_code": code, "description": description})
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "result": result})
}
