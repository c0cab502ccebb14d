package modelproxy

import (
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

func TestBudgets(t *testing.T) {
	for _, tc := range []struct {
		name       string
		grant      func(*Grant)
		path, hdr  string
		body       string
		allowed    int           // requests answered before the refusal
		msg, shape string        // refusal message and a fragment of the provider's shape
		retry      string        // Retry-After
		advance    time.Duration // from t0: the budget opens again
	}{
		{"agent requests", func(g *Grant) { g.AgentBudget.RequestsPerMinute = 3 }, "/llm/anthropic/v1/messages", "X-Api-Key", `{}`, 3,
			"agentplane: agent budget exceeded: 3 requests per minute", `{"type":"error","error":{"type":"rate_limit_error"`, "50", 50 * time.Second},
		{"workspace requests", func(g *Grant) { g.WorkspaceBudget.RequestsPerMinute = 2 }, "/llm/openai/v1/chat/completions", "Authorization", `{}`, 2,
			"agentplane: workspace budget exceeded: 2 requests per minute", `"type":"rate_limit_error","param":null,"code":"rate_limit_exceeded"`, "50", 50 * time.Second},
		{"agent tokens", func(g *Grant) { g.AgentBudget.TokensPerDay = 40; g.Day = "2026-03-10"; g.AgentTokens = 10 }, "/llm/openai/v1/chat/completions", "Authorization", `{}`, 2,
			"agentplane: agent budget exceeded: 40 tokens per day", `"code":"rate_limit_exceeded"`, "43190", 11*time.Hour + 59*time.Minute + 50*time.Second},
		{"workspace tokens", func(g *Grant) {
			g.WorkspaceBudget.TokensPerDay = 100000
			g.Day = "2026-03-10"
			g.WorkspaceTokens = 99990
		}, "/llm/anthropic/v1/messages", "X-Api-Key", `{}`, 1,
			"agentplane: workspace budget exceeded: 100000 tokens per day", `"rate_limit_error"`, "43190", 11*time.Hour + 59*time.Minute + 50*time.Second},
		{"google shape", func(g *Grant) { g.AgentBudget.RequestsPerMinute = 1 }, "/llm/google/v1beta/models/g:generateContent", "X-Goog-Api-Key", `{}`, 1,
			"agentplane: agent budget exceeded: 1 requests per minute", `"code":429,"message":"agentplane: agent budget exceeded: 1 requests per minute","status":"RESOURCE_EXHAUSTED"`, "50", 50 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, logr.Discard())
			g := h.auth.grants[agentCred]
			tc.grant(&g)
			h.auth.set(agentCred, g)
			for i := range tc.allowed {
				if res, body := h.call(t, tc.path, tc.hdr, agentCred, tc.body); res.StatusCode != 200 {
					t.Fatalf("request %d: %d %s", i, res.StatusCode, body)
				}
			}
			res, body := h.call(t, tc.path, tc.hdr, agentCred, tc.body)
			if res.StatusCode != 429 || !strings.Contains(body, tc.msg) || !strings.Contains(body, tc.shape) {
				t.Fatalf("got %d %s, want 429 %q in shape %s", res.StatusCode, body, tc.msg, tc.shape)
			}
			if ra := res.Header.Get("Retry-After"); ra != tc.retry {
				t.Errorf("Retry-After %q, want %s", ra, tc.retry)
			}
			h.clock.SetTime(t0.Add(tc.advance - time.Second))
			if res, _ := h.call(t, tc.path, tc.hdr, agentCred, tc.body); res.StatusCode != 429 {
				t.Errorf("a second before the window ends: %d", res.StatusCode)
			}
			h.clock.SetTime(t0.Add(tc.advance))
			if res, body := h.call(t, tc.path, tc.hdr, agentCred, tc.body); res.StatusCode != 200 {
				t.Errorf("once the window passed: %d %s", res.StatusCode, body)
			}
		})
	}
}

// TestRequestSlotsUnderConcurrency: 40 requests at once against 10 per minute.
func TestRequestSlotsUnderConcurrency(t *testing.T) {
	h := newHarness(t, logr.Discard())
	g := h.auth.grants[agentCred]
	g.AgentBudget.RequestsPerMinute = 10
	h.auth.set(agentCred, g)
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for range 40 {
		wg.Go(func() {
			req, _ := http.NewRequest("POST", h.srv.URL+"/llm/openai/v1/chat/completions", strings.NewReader(`{}`))
			req.Header.Set("Authorization", "Bearer "+agentCred)
			res, err := h.srv.Client().Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			res.Body.Close()
			mu.Lock()
			codes[res.StatusCode]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if codes[200] != 10 || codes[429] != 30 {
		t.Errorf("answers %v, want 10 x 200 and 30 x 429", codes)
	}
}

// TestDrainRestoreAcknowledge: drained usage stays counted until acknowledged; a restored
// delta comes back with the next Drain; an acknowledged total holds while the grant lags.
func TestDrainRestoreAcknowledge(t *testing.T) {
	h := newHarness(t, logr.Discard())
	g := h.auth.grants[agentCred]
	g.AgentBudget.TokensPerDay = 36 // two chat answers (18 each)
	h.auth.set(agentCred, g)
	chat := func() int {
		res, _ := h.call(t, "/llm/openai/v1/chat/completions", "Authorization", agentCred, `{}`)
		return res.StatusCode
	}
	chat()
	d1 := h.proxy.Drain()
	want := Delta{Agent: "ns1/a", Workspace: "ns1", Day: "2026-03-10", Usage: Usage{Requests: 1, InputTokens: 11, OutputTokens: 7},
		Models: map[string]Usage{agentsv1.UnnamedModel: {Requests: 1, InputTokens: 11, OutputTokens: 7}}}
	if len(d1) != 1 || !reflect.DeepEqual(d1[0], want) {
		t.Fatalf("drain %+v", d1)
	}
	if d := h.proxy.Drain(); len(d) != 0 {
		t.Fatalf("a second drain %+v", d)
	}
	chat() // 18 drained + 18 pending = 36: the next is refused
	if c := chat(); c != 429 {
		t.Fatalf("drained tokens not counted: %d", c)
	}
	h.proxy.Restore(d1) // the flush failed
	d2 := h.proxy.Drain()
	two := Usage{Requests: 2, InputTokens: 22, OutputTokens: 14}
	if len(d2) != 1 || d2[0].Usage != two || d2[0].Models[agentsv1.UnnamedModel] != two {
		t.Fatalf("after restore %+v", d2)
	}
	if c := chat(); c != 429 {
		t.Fatalf("after restore and drain: %d", c)
	}
	// The flush writes 36 to status; the grant the authorizer reads still says 0.
	h.proxy.Acknowledge(d2[0], Totals{Tokens: 36}, Totals{Tokens: 36})
	if c := chat(); c != 429 {
		t.Fatalf("acknowledged total not counted: %d", c)
	}
	// Next UTC day: the budget opens again although the grant still names yesterday.
	g.Day, g.AgentTokens = "2026-03-10", 36
	h.auth.set(agentCred, g)
	h.clock.SetTime(time.Date(2026, 3, 11, 0, 0, 0, 0, time.UTC))
	if c := chat(); c != 200 {
		t.Fatalf("next day: %d", c)
	}
	d3 := h.proxy.Drain()
	if len(d3) != 1 || d3[0].Day != "2026-03-11" || d3[0].Usage != (Usage{Requests: 1, InputTokens: 11, OutputTokens: 7}) {
		t.Fatalf("next day drain %+v", d3)
	}
	if n := len(h.proxy.ledger.agents); n != 1 {
		t.Errorf("past days' tallies kept: %d", n)
	}
}
