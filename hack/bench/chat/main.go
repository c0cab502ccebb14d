// Command chat measures a chat turn's first token through the platform (POST
// /v0/agents/{id}/chat: the facade, the engine double's gateway, the model proxy) against the
// fake provider's own first token, in one run: a fake OpenAI-style provider on loopback that
// thinks for -think before its first token, called directly and through a chat turn, in
// alternating rounds. Each chat turn also records when the provider wrote its first token,
// so the overhead of the path (the provider's first token to the chat's) is measured turn by
// turn. Target: at most 300 ms over the provider.
//
//	go run ./hack/bench/chat -n 20   (needs KUBEBUILDER_ASSETS: . /tmp/tpl/env.sh, or make envtest)
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/agentplane/agentplane/hack/bench/internal/report"
	"github.com/agentplane/agentplane/pkg/agentplanetest"
)

func main() {
	n := flag.Int("n", 20, "rounds (one direct call and one chat turn each, alternating which goes first)")
	think := flag.Duration("think", 50*time.Millisecond, "the provider's think time before its first token")
	jsonOut := report.Flag()
	flag.Parse()
	if err := run(*n, *think, *jsonOut); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// provider is a fake OpenAI-style provider that records when it wrote each answer's first
// token.
type provider struct {
	think time.Duration
	mu    sync.Mutex
	first []time.Time
}

func (p *provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "text/event-stream")
	rc := http.NewResponseController(w)
	chunk := func(s string) { fmt.Fprintf(w, "data: %s\n\n", s); _ = rc.Flush() }
	chunk(`{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`)
	time.Sleep(p.think) // the model thinking: the benchmark's baseline includes it on both sides
	p.mu.Lock()
	p.first = append(p.first, time.Now())
	p.mu.Unlock()
	chunk(`{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hello"}}]}`)
	chunk(`{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" there"}}]}`)
	chunk(`{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`)
	chunk(`{"id":"c1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18}}`)
	chunk("[DONE]")
}

func (p *provider) lastFirst() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.first[len(p.first)-1]
}

func run(n int, think time.Duration, jsonOut string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	prov := &provider{think: think}
	up := httptest.NewServer(prov)
	defer up.Close()
	env := agentplanetest.NewEnvironment()
	cfg, err := env.Start()
	if err != nil {
		return fmt.Errorf("start the control plane: %w", err)
	}
	defer func() { _ = env.Stop() }()
	ctrllog.SetLogger(logr.Discard())
	p, err := agentplanetest.Start(ctx, cfg, agentplanetest.WithLogger(logr.Discard()),
		agentplanetest.WithModelProviders(map[string]string{"openai": up.URL}))
	if err != nil {
		return err
	}
	defer func() { _ = p.Stop() }()
	tok, err := p.Token("bench-chat")
	if err != nil {
		return err
	}
	agent, err := setUp(p.URL(), tok)
	if err != nil {
		return err
	}
	for range 2 { // warm-up: connections, the engine's first turn
		if _, _, err := chatFirst(p.URL(), tok, agent); err != nil {
			return err
		}
	}
	var direct, chat, over []time.Duration
	for i := range n {
		sides := []func() error{
			func() error { d, err := directFirst(up.URL); direct = append(direct, d); return err },
			func() error {
				d, at, err := chatFirst(p.URL(), tok, agent)
				chat, over = append(chat, d), append(over, at.Sub(prov.lastFirst()))
				return err
			},
		}
		if i%2 == 1 {
			slices.Reverse(sides)
		}
		for _, side := range sides {
			if err := side(); err != nil {
				return err
			}
		}
	}
	return print(n, think, direct, chat, over, jsonOut)
}

func print(n int, think time.Duration, direct, chat, over []time.Duration, jsonOut string) error {
	q := func(d []time.Duration, f float64) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[int(f*float64(len(s)-1))]
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	fmt.Printf("chat first token: a fake OpenAI-style provider (think time %s) called directly and through a chat turn (facade, engine double, model proxy), %d alternating rounds\n", think, n)
	fmt.Printf("  %-34s %9s %9s\n", "", "p50", "p90")
	fmt.Printf("  %-34s %8.1fms %8.1fms\n", "provider's first token (direct)", ms(q(direct, .5)), ms(q(direct, .9)))
	fmt.Printf("  %-34s %8.1fms %8.1fms\n", "chat's first token", ms(q(chat, .5)), ms(q(chat, .9)))
	fmt.Printf("  %-34s %8.1fms %8.1fms\n", "added: provider's token to chat's", ms(q(over, .5)), ms(q(over, .9)))
	ratio := ms(q(chat, .5)) / ms(q(direct, .5))
	fmt.Printf("  ratio chat / direct (p50): %.2f; added p90 %.1f ms against a target of at most 300 ms over the provider\n", ratio, ms(q(over, .9)))
	row := fmt.Sprintf("think time %s, %d alternating rounds, engine double (local runtime)", think, n)
	return report.Write(jsonOut, []report.Result{
		{Bench: "chat", Row: row, Metric: "first token p50", Value: ms(q(chat, .5)), Unit: "ms",
			Baseline: "the provider's first token, called directly", BaselineValue: ms(q(direct, .5)), Ratio: ratio, RatioOf: "chat / direct"},
		{Bench: "chat", Row: row, Metric: "added to the first token p90", Value: ms(q(over, .9)), Unit: "ms",
			Baseline: "target", BaselineValue: 300, Ratio: ms(q(over, .9)) / 300, RatioOf: "added / 300 ms target; <= 1 meets it"},
	})
}

// setUp creates an agent that holds an openai key (served by the proxy) and whose gateway
// serves chat.
func setUp(url, tok string) (string, error) {
	var a struct{ Agent struct{ ID string } }
	if err := call(url, tok, "POST", "/v0/agents", map[string]any{"name": "bench-chat"}, &a); err != nil {
		return "", err
	}
	var s struct{ Secret struct{ ID string } }
	if err := call(url, tok, "POST", "/v0/secrets", map[string]any{"name": "OPENAI_API_KEY", "value": "sk-bench", "provider": "openai"}, &s); err != nil {
		return "", err
	}
	id := a.Agent.ID
	if err := call(url, tok, "POST", "/v0/agents/"+id+"/secrets", map[string]any{"secretIds": []string{s.Secret.ID}}, nil); err != nil {
		return "", err
	}
	var c struct{ Config map[string]any }
	if err := call(url, tok, "GET", "/v0/agents/"+id+"/config", nil, &c); err != nil {
		return "", err
	}
	gw, _ := c.Config["gateway"].(map[string]any)
	gw["http"] = map[string]any{"endpoints": map[string]any{"chatCompletions": map[string]any{"enabled": true}}}
	c.Config["agents"] = map[string]any{"defaults": map[string]any{"model": map[string]any{"primary": "openai/bench"}}}
	return id, call(url, tok, "PUT", "/v0/agents/"+id+"/config", map[string]any{"config": c.Config}, nil)
}

func call(url, tok, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url+path, rd)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	if out != nil {
		return json.Unmarshal(raw, out)
	}
	return nil
}

// directFirst is the time from a streamed request to the provider to its first token.
func directFirst(up string) (time.Duration, error) {
	start := time.Now()
	resp, err := http.Post(up+"/v1/chat/completions", "application/json", strings.NewReader(`{"stream":true}`))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"content":"hello"`) {
			d := time.Since(start)
			_, _ = io.Copy(io.Discard, resp.Body)
			return d, nil
		}
	}
	return 0, fmt.Errorf("the provider's stream had no token")
}

// chatFirst is the time from a chat turn's request to its first text event, and when that
// event arrived.
func chatFirst(url, tok, agent string) (time.Duration, time.Time, error) {
	start := time.Now()
	req, _ := http.NewRequest("POST", url+"/v0/agents/"+agent+"/chat", strings.NewReader(`{"message":"hi"}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, time.Time{}, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var d time.Duration
	var at time.Time
	for sc.Scan() {
		l := sc.Text()
		if l == "event: text" && d == 0 {
			at = time.Now()
			d = at.Sub(start)
		}
		if l == "event: error" || l == "event: refused" {
			sc.Scan()
			return 0, at, fmt.Errorf("chat turn: %s", sc.Text())
		}
	}
	if d == 0 {
		return 0, at, fmt.Errorf("the chat turn had no text")
	}
	return d, at, nil
}
