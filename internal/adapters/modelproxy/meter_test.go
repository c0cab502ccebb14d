package modelproxy

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

// The meter is what a chat turn reads around its work: the agent's settled usage grows by
// what each answer cost, Settled waits for the agent's requests in flight, and a budget's
// refusal is counted with its message; the drains that write usage to status leave it alone.
func TestMeterCountsSettledUsageAndRefusals(t *testing.T) {
	h := newHarness(t, logr.Discard())
	before := h.proxy.Meter("ns1/a")
	h.call(t, "/llm/openai/v1/chat/completions", "Authorization", agentCred, `{}`)
	h.proxy.Drain()
	h.call(t, "/llm/openrouter/api/v1/chat/completions", "Authorization", agentCred, `{"stream":true}`)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	after, err := h.proxy.Settled(ctx, "ns1/a")
	if err != nil {
		t.Fatal(err)
	}
	if got := (Usage{Requests: after.Spent.Requests - before.Spent.Requests, InputTokens: after.Spent.InputTokens - before.Spent.InputTokens,
		OutputTokens: after.Spent.OutputTokens - before.Spent.OutputTokens}); got != (Usage{Requests: 2, InputTokens: 11 + 13, OutputTokens: 7 + 9}) || after.InFlight != 0 {
		t.Fatalf("metered %+v (in flight %d), want 2 requests, 24 in, 16 out", got, after.InFlight)
	}
	if other := h.proxy.Meter("ns1/b"); other != (Reading{}) {
		t.Fatalf("another agent's reading %+v", other)
	}

	h.auth.set(agentCred, Grant{Agent: "ns1/a", Workspace: "ns1", Key: []byte(realKey), AgentBudget: Budget{TokensPerDay: 1}})
	h.call(t, "/llm/openai/v1/chat/completions", "Authorization", agentCred, `{}`)
	r := h.proxy.Meter("ns1/a")
	if r.Refusals != after.Refusals+1 || !strings.Contains(r.LastRefusal, "agent budget exceeded: 1 tokens per day") ||
		r.Spent != after.Spent || r.InFlight != 0 {
		t.Fatalf("after a refusal: %+v", r)
	}
}

// Settled ends with its context while a request of the agent stays in flight.
func TestSettledEndsWithItsContext(t *testing.T) {
	p := &Proxy{}
	p.meter.update("ns/a", func(r *Reading) { r.InFlight++ })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if r, err := p.Settled(ctx, "ns/a"); err == nil || r.InFlight != 1 {
		t.Fatalf("Settled = %+v, %v", r, err)
	}
	p.meter.update("ns/a", func(r *Reading) { r.InFlight-- })
	if r, err := p.Settled(context.Background(), "ns/a"); err != nil || r.InFlight != 0 {
		t.Fatalf("Settled = %+v, %v", r, err)
	}
}
