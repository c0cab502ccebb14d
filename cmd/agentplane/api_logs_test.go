package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// logsStub serves GET /v0/agents/agt-1/logs as the interface describes it (tail: JSON lines,
// follow=true: Server-Sent Events); the facade's route is on another branch. It checks the
// bearer token and the query the command sends.
func logsStub(t *testing.T, streamEnd string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":"Invalid token"}`)
			return
		}
		if r.URL.Path != "/v0/agents/agt-1/logs" {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"error":"Agent not found"}`)
			return
		}
		if r.URL.Query().Get("follow") != "true" {
			if r.URL.Query().Get("tail") != "2" {
				t.Errorf("tail = %q", r.URL.Query().Get("tail"))
			}
			fmt.Fprint(w, `{"lines":["one","two"]}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, ": keep-alive\n\ndata: first line\n\ndata: second line\n\n"+streamEnd)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestLogsCommand(t *testing.T) {
	t.Setenv("AGENTPLANE_URL", "")
	t.Setenv("AGENTPLANE_TOKEN", "")
	srv := logsStub(t, "")
	conn := []string{"--url", srv.URL, "--token", "tok", "--state-dir", t.TempDir()}

	if out := ok(t, append([]string{"logs", "agt-1", "--tail", "2"}, conn...)...); out != "one\ntwo\n" {
		t.Fatalf("tail printed %q", out)
	}
	if out := ok(t, append([]string{"logs", "agt-1", "--follow"}, conn...)...); out != "first line\nsecond line\n" {
		t.Fatalf("follow printed %q", out)
	}
	fails(t, 1, "agentplane: 404 Agent not found", append([]string{"logs", "agt-2"}, conn...)...)

	// An error event ends the stream: its payload on stderr, exit 1, the lines before it printed.
	srv = logsStub(t, "event: error\ndata: Gateway unavailable\n\n")
	r := runCLI(t, "logs", "agt-1", "-f", "--url", srv.URL, "--token", "tok")
	if r.code != 1 || strings.TrimSpace(r.stderr) != "agentplane: Gateway unavailable" || r.stdout != "first line\nsecond line\n" {
		t.Fatalf("error event: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}
