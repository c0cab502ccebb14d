package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/agentplane/agentplane/hack/bench/internal/benchkit"
	"github.com/agentplane/agentplane/internal/devtools/faketelegram"
)

// bots is one Bot API origin for many fake bots (faketelegram serves one each): a request
// goes to the bot its URL's token names, as api.telegram.org routes it.
type bots struct {
	srv *httptest.Server
	mu  sync.Mutex
	by  map[string]*httputil.ReverseProxy // token -> its bot's server
	all []*faketelegram.Server
}

func newBots() *bots {
	b := &bots{by: map[string]*httputil.ReverseProxy{}}
	b.srv = httptest.NewServer(http.HandlerFunc(b.serve))
	return b
}

// add starts bot number i's server.
func (b *bots) add(i int) *faketelegram.Server {
	s := faketelegram.New(fmt.Sprintf("%d:AAdensity-bench-bot-%d", 700000000+i, i))
	u, _ := url.Parse(s.URL)
	rp := httputil.NewSingleHostReverseProxy(u)
	// A long poll the engine gives up (a gateway suspended mid-poll) is no error to print.
	rp.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) }
	b.mu.Lock()
	b.by[s.Token], b.all = rp, append(b.all, s)
	b.mu.Unlock()
	return s
}

func (b *bots) serve(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/bot")
	if !ok {
		rest, ok = strings.CutPrefix(r.URL.Path, "/file/bot")
	}
	tok, _, _ := strings.Cut(rest, "/")
	b.mu.Lock()
	rp := b.by[tok]
	b.mu.Unlock()
	if !ok || rp == nil {
		http.Error(w, `{"ok":false,"error_code":401,"description":"Unauthorized"}`, http.StatusUnauthorized)
		return
	}
	rp.ServeHTTP(w, r)
}

func (b *bots) close() {
	b.srv.Close()
	for _, s := range b.all {
		s.Close()
	}
}

// answers counts the bot's messages to chat that are the model's answer.
func answers(s *faketelegram.Server, chat int64) int {
	n := 0
	for _, c := range s.Calls() {
		if benchkit.IsTelegramAnswer(c, chat) {
			n++
		}
	}
	return n
}

// lastAnswer is when the bot last sent chat the model's answer (zero when never).
func lastAnswer(s *faketelegram.Server, chat int64) time.Time {
	var at time.Time
	for _, c := range s.Calls() {
		if benchkit.IsTelegramAnswer(c, chat) && c.At.After(at) {
			at = c.At
		}
	}
	return at
}
