package modelproxy

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	clocktesting "k8s.io/utils/clock/testing"
)

// seen is what the fake provider received.
type seen struct {
	Path, Query                    string
	Method, Body                   string
	Authorization, APIKey, GoogKey string
	Header                         http.Header
}

// fakeProvider answers like the real APIs, with usage: anthropic SSE (input 25 + cache read
// 5, output 15), OpenAI chat JSON (11/7) and SSE (13/9, only when stream_options asks for
// it), responses JSON (17/3), Google JSON (19/4). A request whose body holds "block" waits on release between the first event and
// the rest.
type fakeProvider struct {
	*httptest.Server
	release chan struct{}
	mu      sync.Mutex
	seen    []seen
}

func newFakeProvider(t *testing.T) *fakeProvider {
	f := &fakeProvider{release: make(chan struct{})}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(func() {
		f.CloseClientConnections()
		f.Close()
	})
	return f
}

func (f *fakeProvider) last() seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.seen) == 0 {
		return seen{}
	}
	return f.seen[len(f.seen)-1]
}

func (f *fakeProvider) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.seen = append(f.seen, seen{Path: r.URL.Path, Query: r.URL.RawQuery, Method: r.Method, Body: string(body), Authorization: r.Header.Get("Authorization"),
		APIKey: r.Header.Get("X-Api-Key"), GoogKey: r.Header.Get("X-Goog-Api-Key"), Header: r.Header.Clone()})
	f.mu.Unlock()
	stream := strings.Contains(string(body), `"stream":true`)
	block := strings.Contains(string(body), "block")
	switch {
	case strings.HasSuffix(r.URL.Path, "/v1/messages"):
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		f.events(w, block,
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"content\":[],\"usage\":{\"input_tokens\":25,\"cache_read_input_tokens\":5,\"output_tokens\":1}}}\n\n",
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"say \\\"usage\\\":{\\\"output_tokens\\\":999}\"}}\n\n",
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":15}}\n\n",
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	case strings.HasSuffix(r.URL.Path, "/chat/completions") && stream:
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		w.WriteHeader(200)
		events := []string{
			"data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}],\"usage\":null}\n\n",
			"data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":null}\n\n",
		}
		// Like OpenAI, the usage chunk comes only when the request asks for it.
		if strings.Contains(string(body), `"include_usage":true`) {
			events = append(events, "data: {\"id\":\"c1\",\"choices\":[],\"usage\":{\"prompt_tokens\":13,\"completion_tokens\":9,\"total_tokens\":22}}\n\n")
		}
		f.events(w, block, append(events, "data: [DONE]\n\n")...)
	case strings.HasSuffix(r.URL.Path, "/chat/completions"):
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, "{\n  \"id\": \"c2\",\n  \"choices\": [{\"index\": 0, \"message\": {\"role\": \"assistant\", \"content\": \"hello\"}}],\n  \"usage\": {\n    \"prompt_tokens\": 11,\n    \"completion_tokens\": 7\n  }\n}\n")
	case strings.HasSuffix(r.URL.Path, "/responses"):
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"resp_1","output":[{"type":"message","content":[{"type":"output_text","text":"ok"}]}],"usage":{"input_tokens":17,"output_tokens":3,"total_tokens":20},"user":null,"metadata":{}}`)
	case strings.Contains(r.URL.Path, ":generateContent"):
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		fmt.Fprint(w, `{"candidates":[{"content":{"parts":[{"text":"ok"}]}}],"usageMetadata":{"promptTokenCount":19,"candidatesTokenCount":4,"totalTokenCount":23},"modelVersion":"gemini"}`)
	default:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(404)
		fmt.Fprint(w, `{"error":"no such route"}`)
	}
}

func (f *fakeProvider) events(w http.ResponseWriter, block bool, events ...string) {
	fl := w.(http.Flusher)
	for i, e := range events {
		if _, err := io.WriteString(w, e); err != nil {
			return
		}
		fl.Flush()
		if i == 0 && block {
			<-f.release
		}
	}
}

// fakeAuth grants credential "cred-<agent>" to agents it knows.
type fakeAuth struct {
	mu     sync.Mutex
	grants map[string]Grant // by credential
}

func (a *fakeAuth) Authorize(_ context.Context, provider, credential string) (Grant, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	g, ok := a.grants[credential]
	if !ok {
		return Grant{}, ErrUnauthorized
	}
	return g, nil
}

func (a *fakeAuth) set(cred string, g Grant) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.grants[cred] = g
}

const (
	realKey   = "sk-REAL-provider-key-0123456789"
	agentCred = "agent-cred-ns1-a"
)

// harness is a proxy in front of a fake provider.
type harness struct {
	fake  *fakeProvider
	auth  *fakeAuth
	proxy *Proxy
	srv   *httptest.Server
	clock *clocktesting.FakePassiveClock
	reg   *prometheus.Registry
}

// t0 is 2026-03-10 12:00:10 UTC.
var t0 = time.Date(2026, 3, 10, 12, 0, 10, 0, time.UTC)

func newHarness(t *testing.T, log logr.Logger) *harness {
	h := &harness{fake: newFakeProvider(t), clock: clocktesting.NewFakePassiveClock(t0), reg: prometheus.NewRegistry(),
		auth: &fakeAuth{grants: map[string]Grant{agentCred: {Agent: "ns1/a", Workspace: "ns1", Key: []byte(realKey)}}}}
	up := map[string]string{}
	for _, p := range Providers() {
		up[p.Name] = h.fake.URL
	}
	var err error
	h.proxy, err = New(Options{Authorizer: h.auth, Upstreams: up, Clock: h.clock, Log: log, Registerer: h.reg})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/llm/", h.proxy)
	h.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		h.srv.CloseClientConnections()
		h.srv.Close()
		h.proxy.CloseIdleConnections()
		h.srv.Client().CloseIdleConnections()
	})
	return h
}

// call sends body to the proxy's path with the credential in header hdr (none if "").
func (h *harness) call(t *testing.T, path, hdr, cred, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest("POST", h.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if hdr == "Authorization" {
		req.Header.Set(hdr, "Bearer "+cred)
	} else if hdr != "" {
		req.Header.Set(hdr, cred)
	}
	res, err := h.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(b)
}
