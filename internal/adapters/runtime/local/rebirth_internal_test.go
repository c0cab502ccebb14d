package local

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/adapters/engine/openclaw"
)

// fakeCopy is a thawed copy's gateway as OpenClaw behaves around its restart on the agent's
// config: the template's instance accepts the template's token at once and answers any other
// late (refusedHeld, as OpenClaw's loopback penalty of 5 s), counting the waiting request as
// active work; the restart, once signalled, begins only when a health check finds no work
// active (OpenClaw's restart waits until idle); while it runs the gateway answers 503, and the
// reborn instance accepts the agent's token. Its first health check outlives the client's
// timeout (a loaded machine), and its restart signal is handled late: after three more
// requests.
type fakeCopy struct {
	mu        sync.Mutex
	state     string // old, restarting, new
	slow      bool   // the next health check is slow
	after     int    // requests until the restart is signalled (-1: signalled)
	active    int    // refused requests waiting
	down      int    // health checks the restart still takes
	oldToken  string
	token     string
	refusedAt []string
}

const refusedHeld = healthTimeout + 2*time.Second

func (f *fakeCopy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	if r.URL.Path == "/healthz" && f.slow {
		f.slow = false
		f.mu.Unlock()
		<-r.Context().Done()
		return
	}
	if f.after > 0 {
		f.after--
	}
	if r.URL.Path == "/healthz" && f.state == "old" && f.after == 0 && f.active == 0 {
		f.state, f.down = "restarting", 3
	}
	state := f.state
	if state == "restarting" && r.URL.Path == "/healthz" {
		if f.down--; f.down == 0 {
			f.state = "new"
		}
	}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case state == "restarting":
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"ok":false,"ready":false}`))
	case r.URL.Path == "/healthz":
		_, _ = w.Write([]byte(`{"ok":true}`))
	case r.URL.Path == "/readyz":
		_, _ = w.Write([]byte(`{"ready":true}`))
	case r.URL.Path == "/tools/invoke":
		tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		if state == "old" && tok == f.oldToken || state == "new" && tok == f.token {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		f.mu.Lock()
		f.active++
		f.refusedAt = append(f.refusedAt, state)
		f.mu.Unlock()
		<-time.After(refusedHeld) // held even when the client gave up, as OpenClaw's penalty
		f.mu.Lock()
		f.active--
		f.mu.Unlock()
		w.WriteHeader(http.StatusUnauthorized)
	default:
		http.NotFound(w, r)
	}
}

// TestWaitRebornDoesNotHoldOffTheRestart: a copy whose first health check times out (a busy
// machine, not its restart) and whose restart signal is handled late is reborn: the copy's
// token is not tried on the template's instance, whose late refusals would keep work active
// and hold its restart off (as the last CI run saw: no restart within the start timeout).
// Planted: taking the timed-out health check for the restart (the old waitReborn) tries the
// agent's token on the template's instance and the copy never restarts.
func TestWaitRebornDoesNotHoldOffTheRestart(t *testing.T) {
	f := &fakeCopy{state: "old", slow: true, after: 3, oldToken: "template-token", token: "agent-token"}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(f)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	defer srv.Close()
	r := &Runtime{opts: Options{Engine: openclaw.New(), StartTimeout: 4 * refusedHeld}}
	p := &process{exited: make(chan struct{})}
	if err := r.waitReborn(context.Background(), p, ln.Addr().(*net.TCPAddr).Port, f.oldToken, f.token); err != nil {
		t.Fatalf("the copy was not reborn: %v (refused tokens while %v)", err, f.refusedAt)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.refusedAt {
		if s == "old" {
			t.Fatalf("a token was refused by the template's instance: %v", f.refusedAt)
		}
	}
}
