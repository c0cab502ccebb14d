// Command modelproxy measures what the model credential proxy (internal/adapters/modelproxy) adds to
// a model call, against the same fake provider called directly, in the same run:
//
//	go run ./hack/bench/modelproxy -c 32 -d 10s -rounds 6
//
// The fake provider answers a small OpenAI chat JSON with usage (and, in the SSE variant, a
// streamed request, four chat chunks and a usage chunk) over loopback. Each variant runs -c
// workers for -d on each side, direct and through the proxy interleaved: -rounds rounds of
// d/rounds each, the side that goes first alternating (a machine that slows down or warms up
// during the run weighs on both sides alike). The proxied side goes through the real Authorizer
// (internal/adapters/modelproxy/kubeaccess: credential MAC, agent, token Secret, attached secret opened with
// AES-GCM, workspace, read from an in-memory cache that deep-copies like the manager's), the
// route allow-list, budget reservations and the stream's usage request in the path. It
// prints p50 and p99 latency of both, what the proxy adds, throughput and the ratio
// proxy/direct, and the Authorizer's cost per call alone. -delay makes the provider think before it answers (a real provider takes
// hundreds of milliseconds): with 0, load generator, proxy and provider compete for the
// same cores and the proxied path does twice the network work of the direct one.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/agentplane/agentplane/hack/bench/internal/report"
	"github.com/agentplane/agentplane/internal/adapters/modelproxy"
)

const jsonAnswer = `{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18}}`

var sseAnswer = []string{
	`data: {"id":"c1","choices":[{"index":0,"delta":{"role":"assistant","content":"hel"}}],"usage":null}` + "\n\n",
	`data: {"id":"c1","choices":[{"index":0,"delta":{"content":"lo"}}],"usage":null}` + "\n\n",
	`data: {"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}` + "\n\n",
	`data: {"id":"c1","choices":[],"usage":{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18}}` + "\n\n",
	"data: [DONE]\n\n",
}

func main() {
	c := flag.Int("c", 32, "concurrent workers")
	d := flag.Duration("d", 6*time.Second, "time on each side (direct, proxied) per variant")
	rounds := flag.Int("rounds", 6, "interleaved rounds (direct and proxied alternate which goes first)")
	cpu := flag.String("cpuprofile", "", "write a CPU profile of each variant's runs (both sides) to this file")
	flag.DurationVar(&delay, "delay", 0, "provider think time before each answer")
	jsonOut = report.Flag()
	flag.Parse()
	if *rounds < 1 {
		*rounds = 1
	}
	if err := run(*c, *d, *rounds, *cpu); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// delay is the provider's think time.
var delay time.Duration

// jsonOut is -json: where the results go for `make bench`.
var jsonOut *string

func provider(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	if delay > 0 {
		time.Sleep(delay)
	}
	if r.Header.Get("Authorization") != "Bearer sk-bench" {
		http.Error(w, "bad key", http.StatusUnauthorized)
		return
	}
	if r.URL.Query().Get("stream") == "" {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, jsonAnswer)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	for _, e := range sseAnswer {
		_, _ = io.WriteString(w, e)
		fl.Flush()
	}
}

func serve(h http.Handler) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	s := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() { _ = s.Close() }, nil
}

// result is one run: every request's latency and the run's wall time.
type result struct {
	lat  []time.Duration
	wall time.Duration
}

func (r result) q(p float64) time.Duration { return r.lat[int(p*float64(len(r.lat)-1))] }
func (r result) rps() float64              { return float64(len(r.lat)) / r.wall.Seconds() }

// add is r and o as one run: their latencies together (unsorted until sorted), their wall
// times summed.
func (r result) add(o result) result {
	return result{lat: append(r.lat, o.lat...), wall: r.wall + o.wall}
}

// sorted is r with its latencies in order, as q needs.
func (r result) sorted() result {
	slices.Sort(r.lat)
	return r
}

// interleave loads the provider directly (at direct) and through the proxy (at proxied, with
// cred) for d each, in rounds of d/rounds, the side that goes first alternating.
func interleave(direct, proxied, cred, body string, c int, d time.Duration, rounds int) (result, result, error) {
	var res [2]result
	for i := range rounds {
		order := []int{0, 1}
		if i%2 == 1 {
			order = []int{1, 0}
		}
		for _, side := range order {
			url, key := direct, "sk-bench"
			if side == 1 {
				url, key = proxied, cred
			}
			r, err := load(url, key, body, c, d/time.Duration(rounds))
			if err != nil {
				return result{}, result{}, err
			}
			res[side] = res[side].add(r)
		}
	}
	return res[0].sorted(), res[1].sorted(), nil
}

func run(c int, d time.Duration, rounds int, cpuprofile string) error {
	up, stopUp, err := serve(http.HandlerFunc(provider))
	if err != nil {
		return err
	}
	defer stopUp()
	ctx := context.Background()
	authz, cred, err := realAuthorizer(ctx, "sk-bench")
	if err != nil {
		return err
	}
	p, err := modelproxy.New(modelproxy.Options{Authorizer: authz, Upstreams: map[string]string{"openai": up}})
	if err != nil {
		return err
	}
	defer p.CloseIdleConnections()
	mux := http.NewServeMux()
	mux.Handle("/llm/", p)
	px, stopPx, err := serve(mux)
	if err != nil {
		return err
	}
	defer stopPx()

	fmt.Printf("model proxy overhead: fake OpenAI-style provider on loopback (think time %s), %d workers, %s per side in %d interleaved rounds, real Authorizer\n", delay, c, d, rounds)
	fmt.Printf("  %-5s %-6s %9s %9s %9s %9s %11s %11s %6s\n", "body", "path", "p50", "p99", "+p50", "+p99", "req/s", "requests", "ratio")
	var results []report.Result
	for _, v := range []struct{ name, query, body string }{{"json", "", jsonBody}, {"sse", "?stream=1", sseBody}} {
		if cpuprofile != "" {
			f, err := os.Create(cpuprofile + "." + v.name)
			if err != nil {
				return err
			}
			_ = pprof.StartCPUProfile(f)
		}
		direct, proxied, err := interleave(up+"/v1/chat/completions"+v.query, px+"/llm/openai/v1/chat/completions"+v.query, cred, v.body, c, d, rounds)
		if cpuprofile != "" {
			pprof.StopCPUProfile()
		}
		if err != nil {
			return err
		}
		fmt.Printf("  %-5s %-6s %9s %9s %9s %9s %11.0f %11d\n", v.name, "direct", us(direct.q(.5)), us(direct.q(.99)), "", "", direct.rps(), len(direct.lat))
		fmt.Printf("  %-5s %-6s %9s %9s %9s %9s %11.0f %11d %6.2f\n", v.name, "proxy", us(proxied.q(.5)), us(proxied.q(.99)),
			us(proxied.q(.5)-direct.q(.5)), us(proxied.q(.99)-direct.q(.99)), proxied.rps(), len(proxied.lat), proxied.rps()/direct.rps())
		row := fmt.Sprintf("%s answers, %d workers, think time %s, %d interleaved rounds, real Authorizer", v.name, c, delay, rounds)
		ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
		results = append(results,
			report.Result{Bench: "modelproxy", Row: row, Metric: "throughput", Value: proxied.rps(), Unit: "req/s",
				Baseline: "the provider called directly", BaselineValue: direct.rps(), Ratio: proxied.rps() / direct.rps(), RatioOf: "proxy / direct; target >= 0.9"},
			report.Result{Bench: "modelproxy", Row: row, Metric: "p50 latency", Value: ms(proxied.q(.5)), Unit: "ms",
				Baseline: "the provider called directly", BaselineValue: ms(direct.q(.5)), Ratio: ms(proxied.q(.5)) / ms(direct.q(.5)), RatioOf: "proxy / direct; target: at most 1 ms added"})
	}
	var tokens, requests int64
	for _, dl := range p.Drain() {
		tokens += dl.Usage.InputTokens + dl.Usage.OutputTokens
		requests += dl.Usage.Requests
	}
	fmt.Printf("  usage counted by the proxy: %d requests, %d tokens (18 per answer: %v)\n", requests, tokens, tokens == 18*requests)
	per, err := authorizeCost(ctx, authz, cred)
	if err != nil {
		return err
	}
	fmt.Printf("  the real Authorizer alone: %.1fµs per call\n", float64(per)/float64(time.Microsecond))
	fmt.Printf("  targets: added p50 <= 1 ms, throughput ratio >= 0.9\n")
	return report.Write(*jsonOut, results)
}

func us(d time.Duration) string { return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond)) }

const (
	jsonBody = `{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`
	sseBody  = `{"model":"m","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
)

// load runs c workers posting body to url for d and returns every latency, sorted.
func load(url, cred, body string, c int, d time.Duration) (result, error) {
	tr := &http.Transport{MaxIdleConns: c, MaxIdleConnsPerHost: c}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	var mu sync.Mutex
	var all []time.Duration
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(d)
	for range c {
		wg.Go(func() {
			var mine []time.Duration
			for time.Now().Before(end) {
				t := time.Now()
				req, _ := http.NewRequest("POST", url, strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+cred)
				req.Header.Set("Content-Type", "application/json")
				res, err := client.Do(req)
				if err == nil {
					_, err = io.Copy(io.Discard, res.Body)
					res.Body.Close()
					if err == nil && res.StatusCode != 200 {
						err = fmt.Errorf("%s: status %d", url, res.StatusCode)
					}
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				mine = append(mine, time.Since(t))
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	wall := time.Since(start)
	if firstErr != nil {
		return result{}, firstErr
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	return result{lat: all, wall: wall}, nil
}
