package modelproxy

import (
	"fmt"
	"strings"
	"testing"

	"github.com/go-logr/logr"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

const testPrices = `
currency: USD
models:
- model: claude-*
  input: "3"
  output: "15"
- model: claude-haiku-*
  input: 0.8
  output: "4.00"
- provider: openrouter
  model: claude-haiku-*
  input: "1"
  output: "5"
- model: gpt-y
  input: "0.15"
  output: "0.6"
`

func TestPricesCost(t *testing.T) {
	p, err := ParsePrices([]byte(testPrices))
	if err != nil {
		t.Fatal(err)
	}
	if p.Currency() != "USD" {
		t.Fatalf("currency %q", p.Currency())
	}
	for _, tc := range []struct {
		provider, model string
		in, out         int64
		micros          int64 // -1: unpriced
	}{
		{"anthropic", "claude-sonnet-4", 1_000_000, 1_000_000, 18_000_000}, // $3 + $15
		{"anthropic", "claude-haiku-4", 1000, 100, 1200},                   // a longer prefix wins: 1000*0.8 + 100*4
		{"openrouter", "claude-haiku-4", 1000, 100, 1500},                  // the provider's own entry wins
		{"openai", "gpt-y", 7, 3, 3},                                       // 7*0.15 + 3*0.6 = 2.85 micros, rounded
		{"openai", "gpt-y-mini", 7, 3, -1},                                 // an exact entry is no prefix
		{"openai", "", 7, 3, -1},
		{"anthropic", "claude-", 2, 0, 6}, // a prefix matches the prefix itself
	} {
		got, ok := p.Cost(tc.provider, tc.model, tc.in, tc.out)
		if tc.micros < 0 && ok || tc.micros >= 0 && (!ok || got != tc.micros) {
			t.Errorf("%s %s %d/%d: %d (priced %v), want %d", tc.provider, tc.model, tc.in, tc.out, got, ok, tc.micros)
		}
	}
	var none *Prices
	if _, ok := none.Cost("openai", "gpt-y", 1, 1); ok || none.Currency() != "" {
		t.Error("no table priced a request")
	}
}

func TestParsePricesRefusesMistakes(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"no currency", "models: []", "ISO 4217"},
		{"lower-case currency", "currency: usd", "ISO 4217"},
		{"unknown field", "currency: USD\nmodel: []", "unknown field"},
		{"no model", "currency: USD\nmodels:\n- input: 1\n  output: 1", "names no model"},
		{"star inside", "currency: USD\nmodels:\n- model: a*b\n  input: 1\n  output: 1", "may only end"},
		{"twice", "currency: USD\nmodels:\n- model: a\n  input: 1\n  output: 1\n- model: a\n  input: 2\n  output: 2", "priced twice"},
		{"negative", "currency: USD\nmodels:\n- model: a\n  input: -1\n  output: 1", "out of range"},
		{"not a number", "currency: USD\nmodels:\n- model: a\n  input: cheap\n  output: 1", "input"},
		{"missing output", "currency: USD\nmodels:\n- model: a\n  input: 1", "output: missing"},
		{"a typo's zeros", "currency: USD\nmodels:\n- model: a\n  input: 30000000\n  output: 1", "out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParsePrices([]byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// The proxy prices each request by the model it names as it settles: the agent's reading,
// its drained usage and each model's share carry the cost, and a model without a price is
// counted as unpriced.
func TestRequestsPricedByTheirModel(t *testing.T) {
	h := newHarness(t, logr.Discard())
	var err error
	if h.proxy.prices, err = ParsePrices([]byte(testPrices)); err != nil {
		t.Fatal(err)
	}
	before := h.proxy.Meter("ns1/a")
	// The fake provider's answers: anthropic 30 in / 15 out, openai chat 11 in / 7 out.
	h.call(t, "/llm/anthropic/v1/messages", "X-Api-Key", agentCred, `{"model":"claude-sonnet-4","stream":true}`)
	h.call(t, "/llm/openai/v1/chat/completions", "Authorization", agentCred, `{"model":"gpt-y"}`)
	h.call(t, "/llm/openai/v1/chat/completions", "Authorization", agentCred, `{"model":"unlisted"}`)
	sonnet := int64(30*3 + 15*15) // micro-dollars: $3 and $15 per million tokens
	gpt := int64(6)               // 11*0.15 + 7*0.6 = 5.85, rounded to the nearest
	ds := h.proxy.Drain()
	if len(ds) != 1 {
		t.Fatalf("drained %+v", ds)
	}
	d := ds[0]
	if d.Usage.CostMicros != sonnet+gpt || d.Usage.Unpriced != 1 || d.Usage.Requests != 3 {
		t.Errorf("usage %+v, want cost %d micros and one unpriced request of three", d.Usage, sonnet+gpt)
	}
	want := map[string]Usage{
		"claude-sonnet-4": {Requests: 1, InputTokens: 30, OutputTokens: 15, CostMicros: sonnet},
		"gpt-y":           {Requests: 1, InputTokens: 11, OutputTokens: 7, CostMicros: gpt},
		"unlisted":        {Requests: 1, InputTokens: 11, OutputTokens: 7, Unpriced: 1},
	}
	if fmt.Sprint(d.Models) != fmt.Sprint(want) {
		t.Errorf("per model %+v, want %+v", d.Models, want)
	}
	after := h.proxy.Meter("ns1/a")
	if got := after.Spent.CostMicros - before.Spent.CostMicros; got != sonnet+gpt {
		t.Errorf("the agent's reading counted %d micros, want %d", got, sonnet+gpt)
	}
}

// An agent names its requests' models: past maxTallyModels of them, the rest add up under
// one entry, so its pending usage stays bounded whatever it sends.
func TestModelsPerAgentBounded(t *testing.T) {
	h := newHarness(t, logr.Discard())
	for i := range maxTallyModels + 5 {
		h.call(t, "/llm/openai/v1/chat/completions", "Authorization", agentCred, fmt.Sprintf(`{"model":"m%d"}`, i))
	}
	ds := h.proxy.Drain()
	if len(ds) != 1 {
		t.Fatalf("drained %+v", ds)
	}
	if n := len(ds[0].Models); n != maxTallyModels+1 {
		t.Fatalf("%d models kept, want %d and the rest under %q", n, maxTallyModels+1, agentsv1.OtherModels)
	}
	if got := ds[0].Models[agentsv1.OtherModels].Requests; got != 5 {
		t.Errorf("%q counts %d requests, want 5", agentsv1.OtherModels, got)
	}
}

// The example table the docs point to parses, and prices what it says it does.
func TestExamplePriceTable(t *testing.T) {
	p, err := LoadPrices("../../../config/model-prices/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// A longer prefix wins: gpt-4o-mini is not priced as gpt-4o.
	if c, ok := p.Cost("openai", "gpt-4o-mini-2024-07-18", 1_000_000, 1_000_000); !ok || c != 750_000 {
		t.Errorf("gpt-4o-mini: %d micros (priced %v), want 750000", c, ok)
	}
	if _, ok := p.Cost("openrouter", "gpt-4o", 1, 1); ok {
		t.Error("an entry naming its provider priced another provider's request")
	}
}

// A spend budget counts the priced cost: a call is admitted while the day's committed cost
// is under it, then refused as a token budget is, with the amount in the table's currency; a
// model without a price is refused while one applies; what the grant says is persisted
// counts.
func TestSpendBudget(t *testing.T) {
	h := newHarness(t, logr.Discard())
	var err error
	if h.proxy.prices, err = ParsePrices([]byte(testPrices)); err != nil {
		t.Fatal(err)
	}
	g := h.auth.grants[agentCred]
	g.AgentBudget.CostMicrosPerDay = 300
	h.auth.set(agentCred, g)
	sonnet := func() (int, string) {
		res, body := h.call(t, "/llm/anthropic/v1/messages", "X-Api-Key", agentCred, `{"model":"claude-sonnet-4","max_tokens":10}`)
		return res.StatusCode, body
	}
	if code, body := sonnet(); code != 200 { // 30*3 + 15*15 = 315 micros
		t.Fatalf("the first call: %d %s", code, body)
	}
	code, body := sonnet()
	if code != 429 || !strings.Contains(body, "agentplane: agent budget exceeded: 0.0003 USD per day") {
		t.Fatalf("over the spend budget: %d %s", code, body)
	}
	res, body := h.call(t, "/llm/openai/v1/chat/completions", "Authorization", agentCred, `{"model":"unlisted"}`)
	if res.StatusCode != 403 || !strings.Contains(body, `model \"unlisted\" has no price`) {
		t.Fatalf("an unpriced model under a spend budget: %d %s", res.StatusCode, body)
	}
	if r := h.proxy.Meter("ns1/a"); r.Refusals != 2 || !strings.Contains(r.LastRefusal, "has no price") {
		t.Fatalf("the agent's reading: %+v", r)
	}

	// The workspace's spend, as persisted by another replica, counts against its budget.
	g.AgentBudget = Budget{}
	g.WorkspaceBudget.CostMicrosPerDay = 1_000_000
	g.Day, g.WorkspaceCostMicros = "2026-03-10", 1_000_000
	h.auth.set(agentCred, g)
	if code, body := sonnet(); code != 429 || !strings.Contains(body, "agentplane: workspace budget exceeded: 1.00 USD per day") {
		t.Fatalf("over the workspace's persisted spend: %d %s", code, body)
	}
}

func TestFormatMoney(t *testing.T) {
	for micros, want := range map[int64]string{0: "0.00", 5_000_000: "5.00", 1_230_000: "1.23", 170: "0.00017", 12_345_678: "12.345678", -50_000: "-0.05"} {
		if got := FormatMoney(micros); got != want {
			t.Errorf("%d: %q, want %q", micros, got, want)
		}
	}
}
