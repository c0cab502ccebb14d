package modelproxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/agentplane/agentplane/internal/devtools/testenv"
)

// streamsToTheCap is a provider whose chat streams send one chunk, wait for release, then
// report usage: a prompt of 10 tokens and an answer as long as the request's output limit
// allows (max_completion_tokens or max_tokens), or providerDefault tokens when it names none.
func streamsToTheCap(t *testing.T, release <-chan struct{}, providerDefault int64) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			MaxTokens           *int64 `json:"max_tokens"`
			MaxCompletionTokens *int64 `json:"max_completion_tokens"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		out := providerDefault
		switch {
		case req.MaxCompletionTokens != nil:
			out = *req.MaxCompletionTokens
		case req.MaxTokens != nil:
			out = *req.MaxTokens
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}],\"usage\":null}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":%d}}\n\ndata: [DONE]\n\n", out)
	}))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	return srv
}

// TestBudgetReservedUnderConcurrency: 256 streams at once against a small daily budget, each
// answered as long as its output limit allows: those admitted overshoot the budget by at most
// one reservation, with the client's max_tokens and without one (the proxy then writes the
// limit it reserved, DefaultMaxOutputTokens, into the request; without that, the provider's
// own default of 32,000 tokens an answer would overshoot by far more). Before reservations,
// admission saw only the spend already recorded (none while the streams were open): all 256
// passed, 28,160 tokens against a budget of 1,000.
func TestBudgetReservedUnderConcurrency(t *testing.T) {
	const streams, providerDefault = 256, 32000
	for _, tc := range []struct {
		name, body  string
		limit, cost int64 // the budget; what each admitted stream costs
	}{
		{name: "max_tokens 100", limit: 1000, cost: 110,
			body: `{"model":"m","stream":true,"max_tokens":100,"stream_options":{"include_usage":true},"messages":[]}`},
		{name: "no output limit", limit: 20000, cost: 10 + DefaultMaxOutputTokens,
			body: `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[]}`},
	} {
		for _, scope := range []string{"agent", "workspace"} {
			for _, spend := range []bool{false, true} {
				name := tc.name + "/" + scope
				if spend { // a spend budget, priced a micro-unit per token: the same bound
					name += "/spend"
				}
				t.Run(name, func(t *testing.T) {
					budgetUnderConcurrency(t, streams, tc.limit, tc.cost, tc.body, scope, spend, providerDefault)
				})
			}
		}
	}
}

func budgetUnderConcurrency(t *testing.T, streams int, limit, cost int64, body, scope string, spend bool, providerDefault int64) {
	release := make(chan struct{})
	up := streamsToTheCap(t, release, providerDefault)
	auth := &fakeAuth{grants: map[string]Grant{}}
	for i := range streams {
		g := Grant{Agent: "ns/a", Workspace: "ns", Key: []byte(realKey)}
		b := &g.AgentBudget
		if scope != "agent" {
			g.Agent = fmt.Sprint("ns/a", i) // 256 agents sharing their workspace's budget
			b = &g.WorkspaceBudget
		}
		if spend {
			b.CostMicrosPerDay = limit
		} else {
			b.TokensPerDay = limit
		}
		auth.grants[fmt.Sprint("cred-", i)] = g
	}
	prices, err := ParsePrices([]byte("currency: USD\nmodels:\n- model: m\n  input: 1\n  output: 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(Options{Authorizer: auth, Upstreams: map[string]string{"openai": up.URL}, Log: logr.Discard(), Prices: prices})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: streams}}
	t.Cleanup(func() {
		client.CloseIdleConnections()
		srv.CloseClientConnections()
		srv.Close()
		p.CloseIdleConnections()
	})

	var answered, finished sync.WaitGroup
	answered.Add(streams)
	var mu sync.Mutex
	codes := map[int]int{}
	for i := range streams {
		finished.Go(func() {
			req, _ := http.NewRequest("POST", srv.URL+"/llm/openai/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("Authorization", fmt.Sprint("Bearer cred-", i))
			res, err := client.Do(req)
			answered.Done()
			if err != nil {
				t.Error(err)
				return
			}
			defer res.Body.Close()
			mu.Lock()
			codes[res.StatusCode]++
			mu.Unlock()
			_, _ = io.Copy(io.Discard, res.Body)
		})
	}
	answered.Wait() // every stream open or refused: only now may any finish
	close(release)
	finished.Wait()

	var spent int64
	for _, d := range p.Drain() {
		if d.Usage.CostMicros != d.Usage.Tokens() {
			t.Fatalf("a token priced at a micro-unit: %+v", d.Usage)
		}
		spent += d.Usage.Tokens()
	}
	// What one request reserves: its input estimate plus its output limit.
	reservation := estimateTokens(int64(len(body))) + cost - 10
	t.Logf("%d streams: %v; spent %d of %d tokens (one reservation: %d)", streams, codes, spent, limit, reservation)
	if codes[200] == 0 || codes[200]+codes[429] != streams {
		t.Fatalf("answers %v", codes)
	}
	if spent != int64(codes[200])*cost {
		t.Errorf("spent %d for %d answers: each cost %d, not %d", spent, codes[200], spent/int64(codes[200]), cost)
	}
	if spent > limit+reservation {
		t.Errorf("spent %d tokens against a budget of %d: over by more than one reservation (%d)", spent, limit, reservation)
	}
	if a, w := p.ledger.reserved("ns/a", "ns", day(time.Now())); a != 0 || w != 0 {
		t.Errorf("reservations left once every stream ended: agent %d, workspace %d", a, w)
	}
}

// TestReservationsReleased: a request that fails or whose client goes away releases its
// reservation (charged what it may have cost), so the budget is not eaten by requests
// that no longer run.
func TestReservationsReleased(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		switch r.URL.Path {
		case "/v1/chat/completions": // thinks until the client leaves
			<-r.Context().Done()
		case "/v1/responses": // streams a little, then hangs
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"abcdefgh\"}\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		default: // refuses
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":{"message":"bad model"}}`)
		}
	}))
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	t.Cleanup(func() { up.CloseClientConnections(); up.Close() })
	auth := &fakeAuth{grants: map[string]Grant{agentCred: {Agent: "ns1/a", Workspace: "ns1", Key: []byte(realKey),
		AgentBudget: Budget{TokensPerDay: 1 << 20}, WorkspaceBudget: Budget{TokensPerDay: 1 << 20}}}}
	p, err := New(Options{Authorizer: auth, Upstreams: map[string]string{"openai": up.URL, "groq": down.URL}, Log: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close(); p.CloseIdleConnections() })
	const body = `{"model":"m","max_tokens":1000,"stream":true,"input":"0123456789abcdef"}`
	in := estimateTokens(int64(len(body)))
	for _, tc := range []struct {
		name, path string
		leave      func(*http.Response) bool // true: the client leaves (cancels) here
		in, out    int64
	}{
		{"the provider refuses", "/llm/openai/v1/embeddings", nil, 0, 0},
		{"the provider is down", "/llm/groq/openai/v1/chat/completions", nil, 0, 0},
		{"the client leaves before the answer", "/llm/openai/v1/chat/completions", nil, in, 0},
		{"the client leaves mid-stream", "/llm/openai/v1/responses", func(res *http.Response) bool {
			b := make([]byte, 16)
			_, err := io.ReadAtLeast(res.Body, b, 16)
			return err == nil
		}, in, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.in > 0 && tc.leave == nil {
				time.AfterFunc(200*time.Millisecond, cancel)
			}
			req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+tc.path, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+agentCred)
			if res, err := srv.Client().Do(req); err == nil {
				if tc.leave != nil && !tc.leave(res) {
					t.Fatal("no stream")
				}
				cancel()
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
			}
			deadline := time.Now().Add(testenv.EventBound)
			for {
				a, w := p.ledger.reserved("ns1/a", "ns1", day(time.Now()))
				if a == 0 && w == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("reservations left: agent %d, workspace %d", a, w)
				}
				time.Sleep(10 * time.Millisecond)
			}
			ds := p.Drain()
			if len(ds) != 1 || ds[0].Usage != (Usage{Requests: 1, InputTokens: tc.in, OutputTokens: tc.out}) {
				t.Errorf("drained %+v, want 1 request, %d input and %d output tokens", ds, tc.in, tc.out)
			}
		})
	}
}

// TestBodiesWaitForRoom: request bodies held in memory at once are bounded: a request whose
// body does not fit while another is in flight waits (is not read, not forwarded) until that
// one ends; one larger than the bound answers 413.
func TestBodiesWaitForRoom(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	forwarded := 0
	inner := streamsToTheCap(t, release, 100)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		forwarded++
		mu.Unlock()
		inner.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { up.CloseClientConnections(); up.Close() })
	seen := func() int { mu.Lock(); defer mu.Unlock(); return forwarded }
	auth := &fakeAuth{grants: map[string]Grant{agentCred: {Agent: "ns1/a", Workspace: "ns1", Key: []byte(realKey)}}}
	p, err := New(Options{Authorizer: auth, Upstreams: map[string]string{"openai": up.URL}, MaxBufferedBodies: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close(); p.CloseIdleConnections() })
	post := func(size int) (*http.Response, error) {
		body := `{"model":"m","stream":true,"pad":"` + strings.Repeat("x", size) + `"}`
		req, _ := http.NewRequest("POST", srv.URL+"/llm/openai/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+agentCred)
		return srv.Client().Do(req)
	}
	first, err := post(40 << 10)
	if err != nil || first.StatusCode != 200 {
		t.Fatalf("first: %v %v", first, err)
	}
	defer first.Body.Close()
	second := make(chan int, 1)
	go func() {
		res, err := post(40 << 10)
		if err != nil {
			second <- 0
			return
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		second <- res.StatusCode
	}()
	// The second request is waiting for room (the gauge says so) before anything is judged.
	for deadline := time.Now().Add(time.Minute); testutil.ToFloat64(p.m.bodiesWaiting) != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the second request never waited for room")
		}
	}
	if n := seen(); n != 1 {
		t.Fatalf("%d requests forwarded while the first body held the room", n)
	}
	if res, err := post(70 << 10); err != nil || res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a body over the bound: %v %v", res, err)
	} else {
		res.Body.Close()
	}
	close(release)
	_, _ = io.Copy(io.Discard, first.Body)
	if code := <-second; code != 200 || seen() != 2 || testutil.ToFloat64(p.m.bodiesWaiting) != 0 {
		t.Errorf("the waiting request: %d, %d forwarded", code, seen())
	}
}
