package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// requestCounter counts the manager's API requests by method and resource.
type requestCounter struct {
	mu     sync.Mutex
	counts map[string]int
	// throttled counts the API server's 429 answers (priority and fairness), retried by
	// client-go and counted again in counts.
	throttled int
	// throttledBy counts the 429s by request and by what the API server said.
	throttledBy map[string]int
}

// throttleKey names a 429: the request (method, path, whether a watch) and the API server's
// message (priority and fairness says "too many requests", the watch cache of a resource
// whose storage is still starting "storage is (re)initializing").
func throttleKey(req *http.Request, resp *http.Response) string {
	var body bytes.Buffer
	_, _ = body.ReadFrom(resp.Body)
	resp.Body = io.NopCloser(bytes.NewReader(body.Bytes()))
	var status metav1.Status
	_ = json.Unmarshal(body.Bytes(), &status)
	watch := ""
	if req.URL.Query().Get("watch") == "true" {
		watch = " (watch)"
	}
	return fmt.Sprintf("%s %s%s: %q", req.Method, req.URL.Path, watch, status.Message)
}

// countRequests returns a copy of cfg whose requests are counted.
func countRequests(cfg *rest.Config) (*rest.Config, *requestCounter) {
	rc := &requestCounter{counts: map[string]int{}, throttledBy: map[string]int{}}
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			rc.add(req)
			resp, err := rt.RoundTrip(req)
			if err == nil && resp.StatusCode == http.StatusTooManyRequests {
				rc.mu.Lock()
				rc.throttled++
				rc.throttledBy[throttleKey(req, resp)]++
				rc.mu.Unlock()
			}
			return resp, err
		})
	})
	return out, rc
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// add counts req as "<METHOD> <resource>[/<subresource>]" (watches apart).
func (rc *requestCounter) add(req *http.Request) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	// .../namespaces/<ns>/<resource>/<name>/<sub> or .../<resource>[/<name>[/<sub>]]
	var resource string
	for i := 0; i < len(parts); i++ {
		if parts[i] == "namespaces" && i+2 < len(parts) {
			i++
			continue
		}
		if i >= 2 && (parts[0] == "api" && i >= 2 || parts[0] == "apis" && i >= 3) {
			resource = parts[i]
			if i+2 < len(parts) {
				resource += "/" + parts[i+2]
			}
			break
		}
	}
	key := req.Method + " " + resource
	if req.URL.Query().Get("watch") == "true" {
		key = "WATCH " + resource
	}
	rc.mu.Lock()
	rc.counts[key]++
	rc.mu.Unlock()
}

// reset forgets the requests counted so far.
func (rc *requestCounter) reset() {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	clear(rc.counts)
	clear(rc.throttledBy)
	rc.throttled = 0
}

// print shows the most frequent requests, per agent, and returns the requests per agent.
func (rc *requestCounter) print(n int) float64 {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	keys := make([]string, 0, len(rc.counts))
	total := 0
	for k, v := range rc.counts {
		keys = append(keys, k)
		total += v
	}
	sort.Slice(keys, func(i, j int) bool { return rc.counts[keys[i]] > rc.counts[keys[j]] })
	fmt.Printf("  manager API requests: %d (%.1f per agent), %d answered 429; most frequent:\n", total, float64(total)/float64(n), rc.throttled)
	for _, k := range keys[:min(len(keys), 10)] {
		fmt.Printf("    %-48s %6d  (%.2f per agent)\n", k, rc.counts[k], float64(rc.counts[k])/float64(n))
	}
	if len(rc.throttledBy) > 0 {
		fmt.Printf("  answered 429:\n")
		for k, v := range rc.throttledBy {
			fmt.Printf("    %4d  %s\n", v, k)
		}
	}
	return float64(total) / float64(n)
}
