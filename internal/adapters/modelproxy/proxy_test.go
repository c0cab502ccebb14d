package modelproxy

import (
	"bufio"
	"encoding/json"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/agentplane/agentplane/internal/devtools/testenv"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCredentialSwap(t *testing.T) {
	h := newHarness(t, logr.Discard())
	for _, tc := range []struct {
		name, path, hdr          string
		wantPath, wantQuery      string
		wantAuth, wantAPI, wantG string
	}{
		{"anthropic x-api-key", "/llm/anthropic/v1/messages?beta=true", "X-Api-Key",
			"/v1/messages", "beta=true", "", realKey, ""},
		{"openai bearer", "/llm/openai/v1/chat/completions", "Authorization",
			"/v1/chat/completions", "", "Bearer " + realKey, "", ""},
		{"groq path", "/llm/groq/openai/v1/chat/completions", "Authorization",
			"/openai/v1/chat/completions", "", "Bearer " + realKey, "", ""},
		{"google header", "/llm/google/v1beta/models/gemini:generateContent", "X-Goog-Api-Key",
			"/v1beta/models/gemini:generateContent", "", "", "", realKey},
		{"google query", "/llm/google/v1beta/models/gemini:generateContent?alt=json&key=" + agentCred, "",
			"/v1beta/models/gemini:generateContent", "alt=json", "", "", realKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, body := h.call(t, tc.path, tc.hdr, agentCred, `{"model":"m"}`)
			if res.StatusCode != 200 {
				t.Fatalf("status %d: %s", res.StatusCode, body)
			}
			s := h.fake.last()
			if s.Path != tc.wantPath || s.Query != tc.wantQuery {
				t.Errorf("upstream got %s?%s, want %s?%s", s.Path, s.Query, tc.wantPath, tc.wantQuery)
			}
			if s.Authorization != tc.wantAuth || s.APIKey != tc.wantAPI || s.GoogKey != tc.wantG {
				t.Errorf("upstream credentials: authorization %q x-api-key %q x-goog-api-key %q", s.Authorization, s.APIKey, s.GoogKey)
			}
			for k, vs := range s.Header {
				for _, v := range vs {
					if strings.Contains(v, agentCred) {
						t.Errorf("the agent credential reached the provider in %s", k)
					}
				}
			}
			if strings.Contains(s.Query, agentCred) {
				t.Error("the agent credential reached the provider in the query")
			}
		})
	}
}

func TestUnauthorized(t *testing.T) {
	h := newHarness(t, logr.Discard())
	for _, tc := range []struct {
		name, path, hdr, cred string
		status                int
		shape                 string // a fragment of the body
	}{
		{"anthropic missing", "/llm/anthropic/v1/messages", "", "", 401, `"type":"authentication_error"`},
		{"anthropic unknown", "/llm/anthropic/v1/messages", "X-Api-Key", "nope", 401, `"type":"authentication_error"`},
		{"anthropic bearer is not its header", "/llm/anthropic/v1/messages", "X-Goog-Api-Key", agentCred, 401, `"type":"error"`},
		{"openai missing", "/llm/openai/v1/embeddings", "", "", 401, `"code":"invalid_api_key"`},
		{"openai unknown", "/llm/openai/v1/embeddings", "Authorization", "nope", 401, `"code":"invalid_api_key"`},
		{"google unknown", "/llm/google/v1beta/models/g:generateContent", "X-Goog-Api-Key", "nope", 401, `"status":"UNAUTHENTICATED"`},
		{"unknown provider", "/llm/acme/v1/chat", "Authorization", agentCred, 404, `unknown model provider`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := len(h.fake.seen)
			res, body := h.call(t, tc.path, tc.hdr, tc.cred, `{}`)
			if res.StatusCode != tc.status || !strings.Contains(body, tc.shape) {
				t.Errorf("got %d %s, want %d with %s", res.StatusCode, body, tc.status, tc.shape)
			}
			if !json.Valid([]byte(body)) {
				t.Errorf("not JSON: %s", body)
			}
			if len(h.fake.seen) != n {
				t.Error("a refused request reached the provider")
			}
		})
	}
}

// TestStreamingUnbuffered: the client reads the first event while the provider still holds
// the rest back.
func TestStreamingUnbuffered(t *testing.T) {
	h := newHarness(t, logr.Discard())
	req, _ := http.NewRequest("POST", h.srv.URL+"/llm/anthropic/v1/messages", strings.NewReader(`{"stream":true,"block":1}`))
	req.Header.Set("X-Api-Key", agentCred)
	res, err := h.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	rd := bufio.NewReader(res.Body)
	var first []string
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if line == "\n" {
			break
		}
		first = append(first, line)
	}
	if len(first) != 2 || first[0] != "event: message_start\n" {
		t.Fatalf("first event %q", first)
	}
	close(h.fake.release) // only now does the provider send the rest
	rest := new(strings.Builder)
	if _, err := rd.WriteTo(rest); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(rest.String(), "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n") {
		t.Errorf("rest of stream %q", rest)
	}
}

func TestUsageCounted(t *testing.T) {
	h := newHarness(t, logr.Discard())
	for _, tc := range []struct {
		name, path, hdr, body string
		in, out               int64
		model                 string // as the request names it
	}{
		{"anthropic sse", "/llm/anthropic/v1/messages", "X-Api-Key", `{"model":"claude-x","stream":true}`, 30, 15, "claude-x"},
		{"openai chat json", "/llm/openai/v1/chat/completions", "Authorization", `{"model":"gpt-y"}`, 11, 7, "gpt-y"},
		{"openai chat sse", "/llm/openrouter/api/v1/chat/completions", "Authorization", `{"stream":true,"model":"vendor/m"}`, 13, 9, "vendor/m"},
		{"openai responses json", "/llm/openai/v1/responses", "Authorization", `{}`, 17, 3, agentsv1.UnnamedModel},
		{"google json", "/llm/google/v1beta/models/g:generateContent", "X-Goog-Api-Key", `{}`, 19, 4, "g"},
		{"no usage (the provider's 404)", "/llm/openai/v1/embeddings", "Authorization", `{"model":"e"}`, 0, 0, "e"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h.call(t, tc.path, tc.hdr, agentCred, tc.body)
			ds := h.proxy.Drain()
			u := Usage{Requests: 1, InputTokens: tc.in, OutputTokens: tc.out}
			want := Delta{Agent: "ns1/a", Workspace: "ns1", Day: "2026-03-10", Usage: u, Models: map[string]Usage{tc.model: u}}
			if len(ds) != 1 || !reflect.DeepEqual(ds[0], want) {
				t.Errorf("drained %+v, want %+v", ds, want)
			}
		})
	}
	if got := testutil.ToFloat64(h.proxy.m.tokens.WithLabelValues("anthropic", "input")); got != 30 {
		t.Errorf("anthropic input tokens metric %v", got)
	}
	// The request is counted when its handler returns, which may come just after the client
	// has read the answer.
	deadline := time.Now().Add(testenv.EventBound)
	for testutil.ToFloat64(h.proxy.m.requests.WithLabelValues("openai", "404")) != 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := testutil.ToFloat64(h.proxy.m.requests.WithLabelValues("openai", "404")); got != 1 {
		t.Errorf("openai 404 requests metric %v", got)
	}
	if got := testutil.ToFloat64(h.proxy.m.streams); got != 0 {
		t.Errorf("active streams %v after all answers", got)
	}
	if n, err := testutil.GatherAndCount(h.reg); err != nil || n == 0 {
		t.Errorf("registry: %d series, %v", n, err)
	}
}

func TestUpstreamDown(t *testing.T) {
	h := newHarness(t, logr.Discard())
	h.fake.Close()
	for _, tc := range []struct{ path, hdr, shape string }{
		{"/llm/anthropic/v1/messages", "X-Api-Key", `{"type":"error","error":{"type":"api_error"`},
		{"/llm/openai/v1/chat/completions", "Authorization", `"type":"server_error"`},
	} {
		res, body := h.call(t, tc.path, tc.hdr, agentCred, `{}`)
		if res.StatusCode != 502 || !strings.Contains(body, tc.shape) {
			t.Errorf("%s: %d %s", tc.path, res.StatusCode, body)
		}
		if strings.Contains(body, realKey) || strings.Contains(body, agentCred) {
			t.Errorf("the error leaks a credential: %s", body)
		}
	}
	if ds := h.proxy.Drain(); len(ds) != 1 || ds[0].Usage.Requests != 2 {
		t.Errorf("failed requests count as requests: %+v", ds)
	}
}

// TestLogsHoldNoSecrets captures every log line at the highest verbosity.
func TestLogsHoldNoSecrets(t *testing.T) {
	var mu sync.Mutex
	var logs strings.Builder
	log := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		logs.WriteString(prefix + " " + args + "\n")
	}, funcr.Options{Verbosity: 10})
	h := newHarness(t, log)
	const prompt = "PROMPT-MARKER-7f3a"
	h.call(t, "/llm/anthropic/v1/messages", "X-Api-Key", agentCred, `{"stream":true,"messages":[{"content":"`+prompt+`"}]}`)
	h.call(t, "/llm/openai/v1/chat/completions", "Authorization", agentCred, `{"messages":[{"content":"`+prompt+`"}]}`)
	h.call(t, "/llm/openai/v1/chat/completions", "Authorization", "wrong-"+agentCred, `{}`)
	h.call(t, "/llm/google/v1beta/models/g:generateContent?key="+agentCred, "", "", `{"contents":"`+prompt+`"}`)
	h.fake.Close()
	h.call(t, "/llm/openai/v1/chat/completions", "Authorization", agentCred, `{"messages":[{"content":"`+prompt+`"}]}`)
	mu.Lock()
	out := logs.String()
	mu.Unlock()
	for _, secret := range []string{realKey, agentCred, prompt, "hello"} {
		if strings.Contains(out, secret) {
			t.Errorf("logs contain %q:\n%s", secret, out)
		}
	}
	for _, want := range []string{`"provider"="anthropic"`, `"agent"="ns1/a"`, `"status"=200`, `"status"=502`, `"bytes"=`, `"duration"=`} {
		if !strings.Contains(out, want) {
			t.Errorf("logs lack %s:\n%s", want, out)
		}
	}
}

// TestOutputCapWrittenWhenTheClientSetsNone: a request that names no output limit reserves
// DefaultMaxOutputTokens, and the provider gets that limit in the request, in the field its
// API reads, so the call cannot cost more than it reserved; a request with a limit of its own
// goes as it came.
func TestOutputCapWrittenWhenTheClientSetsNone(t *testing.T) {
	h := newHarness(t, logr.Discard())
	limit := strconv.Itoa(DefaultMaxOutputTokens)
	for _, tc := range []struct {
		name, path, hdr, body, want string
	}{
		{"openai chat", "/llm/openai/v1/chat/completions", "Authorization", `{"model":"m"}`, `"max_completion_tokens":` + limit},
		{"openai-compatible chat", "/llm/openrouter/api/v1/chat/completions", "Authorization", `{"model":"m"}`, `"max_tokens":` + limit},
		{"openai responses", "/llm/openai/v1/responses", "Authorization", `{"model":"m"}`, `"max_output_tokens":` + limit},
		{"anthropic messages", "/llm/anthropic/v1/messages", "X-Api-Key", `{"model":"m"}`, `"max_tokens":` + limit},
		{"google", "/llm/google/v1beta/models/gemini:generateContent", "X-Goog-Api-Key", `{"contents":[],"generationConfig":{"temperature":0.5}}`,
			`"generationConfig":{"maxOutputTokens":` + limit + `,"temperature":0.5}`},
		{"the client's own limit", "/llm/openai/v1/chat/completions", "Authorization", `{"model":"m","max_tokens":7}`, `{"model":"m","max_tokens":7}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, body := h.call(t, tc.path, tc.hdr, agentCred, tc.body)
			if res.StatusCode != 200 {
				t.Fatalf("status %d: %s", res.StatusCode, body)
			}
			if got := h.fake.last().Body; !strings.Contains(got, tc.want) {
				t.Errorf("the provider got %s, want %s in it", got, tc.want)
			}
		})
	}
}

// TestHiddenInputRefusedUnderABudget: a Responses call that refers to input the provider
// keeps (previous_response_id, conversation) cannot have its cost reserved, so under a token
// budget it is refused as OpenAI refuses the parameter where it keeps no responses (400,
// unsupported_parameter, the parameter named: OpenClaw then sends the turn again with its
// full history) and never reaches the provider; without a budget it is forwarded as sent.
func TestHiddenInputRefusedUnderABudget(t *testing.T) {
	for _, tc := range []struct {
		name, body, param string
		budget            Budget
		scope             string
	}{
		{name: "previous_response_id under an agent budget", body: `{"model":"m","previous_response_id":"resp_1","input":"go on"}`,
			param: "previous_response_id", budget: Budget{TokensPerDay: 100000}, scope: "agent"},
		{name: "conversation under a workspace budget", body: `{"model":"m","conversation":"conv_1","input":"go on"}`,
			param: "conversation", budget: Budget{TokensPerDay: 100000}, scope: "workspace"},
		{name: "previous_response_id without a budget", body: `{"model":"m","previous_response_id":"resp_1","input":"go on"}`},
		{name: "full input under a budget", body: `{"model":"m","previous_response_id":null,"input":"all of it"}`,
			budget: Budget{TokensPerDay: 100000}, scope: "agent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, logr.Discard())
			g := Grant{Agent: "ns1/a", Workspace: "ns1", Key: []byte(realKey)}
			if tc.scope == "agent" {
				g.AgentBudget = tc.budget
			} else {
				g.WorkspaceBudget = tc.budget
			}
			h.auth.set(agentCred, g)
			res, body := h.call(t, "/llm/openai/v1/responses", "Authorization", agentCred, tc.body)
			if tc.param == "" {
				if res.StatusCode != 200 || !strings.Contains(h.fake.last().Body, `"input"`) {
					t.Fatalf("status %d (%s), provider got %q: want the call forwarded", res.StatusCode, body, h.fake.last().Body)
				}
				return
			}
			var e struct {
				Error struct {
					Type, Code, Message string
					Param               *string
				}
			}
			if err := json.Unmarshal([]byte(body), &e); err != nil || res.StatusCode != 400 ||
				e.Error.Code != "unsupported_parameter" || e.Error.Type != "invalid_request_error" || e.Error.Param == nil || *e.Error.Param != tc.param {
				t.Fatalf("status %d, body %s: want 400 unsupported_parameter naming %s", res.StatusCode, body, tc.param)
			}
			if got := h.fake.last(); got.Path != "" {
				t.Errorf("the provider got %s %s; a refused call must not reach it", got.Path, got.Body)
			}
		})
	}
}
