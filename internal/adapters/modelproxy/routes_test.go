package modelproxy

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-logr/logr"
)

func (f *fakeProvider) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.seen)
}

// send sends method path (raw, as written) to srv with the agent's credential the provider's
// way and extra headers, and returns the status and body.
func send(t *testing.T, srv *httptest.Server, method, path, body string, hdr http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case strings.HasPrefix(path, "/llm/anthropic/"):
		req.Header.Set("X-Api-Key", agentCred)
	case strings.HasPrefix(path, "/llm/google/"):
		req.Header.Set("X-Goog-Api-Key", agentCred)
	default:
		req.Header.Set("Authorization", "Bearer "+agentCred)
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	client := &http.Client{Transport: srv.Client().Transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestOnlyInferenceRoutesForwarded: a provider's files, batches, fine-tuning, stored
// responses, account routes (data of everyone on the key) answer 403 and never reach it,
// whatever the method or the path's spelling; inference routes and model lists go through.
func TestOnlyInferenceRoutesForwarded(t *testing.T) {
	h := newHarness(t, logr.Discard())
	direct := httptest.NewServer(h.proxy) // the proxy's own listener serves it without a mux
	t.Cleanup(func() { direct.CloseClientConnections(); direct.Close() })
	allowed := []struct{ method, path, upstream string }{
		{"POST", "/llm/openai/v1/chat/completions", "/v1/chat/completions"},
		{"POST", "/llm/openai/v1/responses", "/v1/responses"},
		{"POST", "/llm/openai/v1/embeddings", "/v1/embeddings"},
		{"GET", "/llm/openai/v1/models", "/v1/models"},
		{"GET", "/llm/openai/v1/models/gpt-5", "/v1/models/gpt-5"},
		{"POST", "/llm/anthropic/v1/messages?beta=true", "/v1/messages"},
		{"POST", "/llm/anthropic/v1/messages/count_tokens", "/v1/messages/count_tokens"},
		{"GET", "/llm/anthropic/v1/models", "/v1/models"},
		{"POST", "/llm/google/v1beta/models/gemini-2.5-pro:generateContent", "/v1beta/models/gemini-2.5-pro:generateContent"},
		{"POST", "/llm/google/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", "/v1beta/models/gemini-2.5-pro:streamGenerateContent"},
		{"POST", "/llm/google/v1beta/models/text-embedding-004:embedContent", "/v1beta/models/text-embedding-004:embedContent"},
		{"GET", "/llm/google/v1beta/models", "/v1beta/models"},
		{"POST", "/llm/openrouter/api/v1/chat/completions", "/api/v1/chat/completions"},
		{"POST", "/llm/groq/openai/v1/chat/completions", "/openai/v1/chat/completions"},
		{"POST", "/llm/deepseek/chat/completions", "/chat/completions"},
		{"POST", "/llm/deepseek/v1/chat/completions", "/v1/chat/completions"},
		{"POST", "/llm/mistral/v1/embeddings", "/v1/embeddings"},
		{"POST", "/llm/xai/v1/responses", "/v1/responses"},
		{"POST", "/llm/together/v1/chat/completions", "/v1/chat/completions"},
	}
	for _, srv := range []*httptest.Server{h.srv, direct} {
		for _, tc := range allowed {
			status, body := send(t, srv, tc.method, tc.path, `{"model":"m"}`, nil)
			if status == http.StatusForbidden {
				t.Errorf("%s %s: refused: %s", tc.method, tc.path, body)
				continue
			}
			if got := h.fake.last(); got.Path != tc.upstream || got.Method != tc.method {
				t.Errorf("%s %s: the provider got %s %s, want %s", tc.method, tc.path, got.Method, got.Path, tc.upstream)
			}
		}
	}
	refused := []struct{ method, path, shape string }{
		{"POST", "/llm/openai/v1/files", `"code":"route_not_allowed"`},
		{"GET", "/llm/openai/v1/files/file-abc/content", `"code":"route_not_allowed"`},
		{"POST", "/llm/openai/v1/batches", ""},
		{"POST", "/llm/openai/v1/fine_tuning/jobs", ""},
		{"GET", "/llm/openai/v1/responses/resp_123", ""},
		{"GET", "/llm/openai/v1/responses/resp_123/input_items", ""},
		{"POST", "/llm/openai/v1/assistants", ""},
		{"POST", "/llm/openai/v1/uploads", ""},
		{"POST", "/llm/openai/v1/vector_stores", ""},
		{"GET", "/llm/openai/v1/organization/usage/completions", ""},
		{"DELETE", "/llm/openai/v1/models/ft:gpt-4o:acme", ""},
		{"GET", "/llm/openai/v1/chat/completions", ""},    // stored completions list
		{"POST", "/llm/openai/v1/models", ""},             // wrong method
		{"POST", "/llm/openai/v1/chat/completions/", ""},  // not the route's spelling
		{"POST", "/llm/openai/v1//chat/completions", ""},  // empty segment
		{"POST", "/llm/openai/v1/chat%2Fcompletions", ""}, // encoded slash
		{"POST", "/llm/openai/v1/chat/completions/../../v1/files", ""},
		{"POST", "/llm/openai/v1/chat/completions/%2e%2e/%2e%2e/v1/files", ""},
		{"POST", "/llm/openai", ""},
		{"POST", "/llm/anthropic/v1/messages/batches", `"type":"permission_error"`},
		{"GET", "/llm/anthropic/v1/files", ""},
		{"GET", "/llm/anthropic/v1/organizations/me", ""},
		{"POST", "/llm/google/upload/v1beta/files", `"status":"PERMISSION_DENIED"`},
		{"GET", "/llm/google/v1beta/files", ""},
		{"POST", "/llm/google/v1beta/cachedContents", ""},
		{"POST", "/llm/google/v1beta/tunedModels/mine:generateContent", ""},
		{"POST", "/llm/google/v1beta/models/x%2F..%2F..%2Ffiles:generateContent", ""},
		{"POST", "/llm/openrouter/api/v1/credits", ""},
		{"GET", "/llm/openrouter/api/v1/key", ""},
		{"GET", "/llm/openrouter/api/v1/generation", ""},
		{"POST", "/llm/groq/openai/v1/batches", ""},
		{"POST", "/llm/groq/openai/v1/files", ""},
		{"POST", "/llm/mistral/v1/fine_tuning/jobs", ""},
	}
	for _, srv := range []*httptest.Server{h.srv, direct} {
		for _, tc := range refused {
			n := h.fake.count()
			status, body := send(t, srv, tc.method, tc.path, `{"model":"m"}`, nil)
			if h.fake.count() != n {
				t.Errorf("%s %s reached the provider (%s)", tc.method, tc.path, h.fake.last().Path)
			}
			// The facade's mux redirects a path with dot or empty segments to its clean form
			// (nothing forwarded); the proxy's own listener refuses it.
			if (status == http.StatusMovedPermanently || status == http.StatusTemporaryRedirect) && srv == h.srv {
				continue
			}
			if status != http.StatusForbidden || !json.Valid([]byte(body)) || !strings.Contains(body, "is not a model inference route") ||
				!strings.Contains(body, tc.shape) {
				t.Errorf("%s %s: %d %s, want 403 in the provider's JSON shape", tc.method, tc.path, status, body)
			}
		}
	}
}

func TestCleanRest(t *testing.T) {
	for in, want := range map[string]string{
		"/v1/chat/completions":                  "/v1/chat/completions",
		"/v1beta/models/gemini%2D2:countTokens": "/v1beta/models/gemini-2:countTokens",
		"/v1/chat/completions/..":               "",
		"/v1/%2e%2e/files":                      "",
		"/v1/chat%2fcompletions":                "",
		"/v1/chat/completions%00":               "",
		"/v1/chat/%zz":                          "",
		"/v1\\files":                            "",
		"/":                                     "/",
	} {
		got, ok := cleanRest(in)
		if ok != (want != "") || got != want {
			t.Errorf("cleanRest(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

// TestAgentHeadersScrubbed: the agent cannot pick the organisation, project or billing
// account a call runs as, nor put its own (or any) credential next to the real key, in any
// spelling of the header or in the query; hop-by-hop headers stop at the proxy. The
// provider's own request headers pass.
func TestAgentHeadersScrubbed(t *testing.T) {
	h := newHarness(t, logr.Discard())
	const evil = "EVIL-value-from-the-agent"
	hdr := http.Header{
		"Openai-Organization": {evil}, "Openai-Project": {evil}, "openai-organization": {evil},
		"X-Goog-User-Project": {evil}, "Groq-Organization": {evil}, "Anthropic-Workspace-Project": {evil},
		"Api-Key": {evil}, "X_api_key": {evil}, "Proxy-Authorization": {evil},
		"Cookie": {"session=" + evil}, "X-Hop": {evil}, "Keep-Alive": {evil},
		"Connection": {"X-Hop, Upgrade"}, "Upgrade": {"websocket"},
		"Anthropic-Version": {"2023-06-01"}, "Anthropic-Beta": {"prompt-caching-2024-07-31"}, "Openai-Beta": {"x=1"},
	}
	for _, tc := range []struct{ path, auth, key string }{
		{"/llm/openai/v1/chat/completions", "Bearer " + realKey, ""},
		{"/llm/anthropic/v1/messages", "", realKey},
		{"/llm/google/v1beta/models/g:generateContent?key=" + evil + "&KEY=" + evil + "&%6Bey=" + evil + "&access_token=" + evil + "&alt=json", "", ""},
	} {
		// A second credential in the header the provider does not read the agent's from.
		hdr.Del("X-Api-Key")
		hdr.Del("Authorization")
		if tc.key != "" {
			hdr.Set("Authorization", "Bearer "+evil)
		} else {
			hdr.Set("X-Api-Key", evil)
		}
		status, body := send(t, h.srv, "POST", tc.path, `{"model":"m"}`, hdr)
		if status != 200 {
			t.Fatalf("%s: %d %s", tc.path, status, body)
		}
		s := h.fake.last()
		for k, vs := range s.Header {
			for _, v := range vs {
				if strings.Contains(v, evil) {
					t.Errorf("%s: %s: %q reached the provider", tc.path, k, v)
				}
			}
		}
		if s.Header.Get("Upgrade") != "" || s.Header.Get("Connection") != "" {
			t.Errorf("%s: a protocol switch reached the provider: %v", tc.path, s.Header)
		}
		if strings.Contains(s.Query, evil) || strings.Contains(s.Query, "access_token") {
			t.Errorf("%s: query %q reached the provider", tc.path, s.Query)
		}
		if got := s.Header.Values("Authorization"); tc.auth != "" && (len(got) != 1 || got[0] != tc.auth) {
			t.Errorf("%s: Authorization %q", tc.path, got)
		}
		if got := s.Header.Values("X-Api-Key"); tc.key != "" && (len(got) != 1 || got[0] != tc.key) {
			t.Errorf("%s: x-api-key %q", tc.path, got)
		}
		if s.Header.Get("Anthropic-Version") != "2023-06-01" || s.Header.Get("Anthropic-Beta") == "" || s.Header.Get("Openai-Beta") != "x=1" {
			t.Errorf("%s: the provider's request headers were dropped: %v", tc.path, s.Header)
		}
	}
	if q := h.fake.last().Query; q != "alt=json" {
		t.Errorf("google query %q, want alt=json", q)
	}
	if g := h.fake.last().GoogKey; g != realKey {
		t.Errorf("google key %q", g)
	}
}
