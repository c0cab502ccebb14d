package realnode

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/test/e2e"
)

// checkLogs reads the gateway's logs through the facade (pods/log through the API server):
// the output holds what the gateway printed when it started, and a follow of 2 s gets at least
// the tail.
func (a agentOnNode) checkLogs(t *testing.T) {
	lines := func(query string) []string {
		t.Helper()
		r := e2e.Must(t, a.p.Call("GET", a.base+"/logs?"+query, nil), 200, "logs "+query)
		raw, _ := r.Body["lines"].([]any)
		out := make([]string, 0, len(raw))
		for _, l := range raw {
			s, _ := l.(string)
			out = append(out, s)
		}
		return out
	}
	tail := lines("tail=20")
	if len(tail) == 0 || len(tail) > 20 {
		t.Fatalf("tail=20: %d lines: %q", len(tail), tail)
	}
	// The gateway prints "[gateway] ready" once its start-up is done (openclaw 2026.9.6).
	if all := strings.Join(lines("tail=5000"), "\n"); !strings.Contains(all, "[gateway] ready") {
		t.Errorf("the gateway's start (\"[gateway] ready\") is not in its logs: %q", tail)
	}
	if all := strings.Join(tail, "\n"); strings.Contains(all, a.p.Token) {
		t.Errorf("a token in the logs")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", a.p.URL+a.base+"/logs?follow=true&tail=20", nil)
	req.Header.Set("Authorization", "Bearer "+a.p.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("follow: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("follow: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var data []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() { // until the 2 s are up
		if l, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			data = append(data, l)
		}
	}
	if len(data) < len(tail) {
		t.Fatalf("follow for 2 s: %d lines, want at least the %d of the tail: %q", len(data), len(tail), data)
	}
}
