package modelproxy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/agentplane/agentplane/internal/devtools/testenv"
)

// TestStreamsAskForUsage: an OpenAI-style chat stream that does not ask for its usage is
// forwarded asking for it (OpenAI reports a stream's usage only then), so it is counted; the
// usage chunk reaches the client. A request that asked, or one to a provider that reports
// usage unasked, is forwarded as sent (each with an output limit of its own: without one the
// proxy writes the default in, TestOutputCapWrittenWhenTheClientSetsNone).
func TestStreamsAskForUsage(t *testing.T) {
	h := newHarness(t, logr.Discard())
	for _, tc := range []struct {
		name, path, body string
		rewritten        bool
		in, out          int64
	}{
		{"stream without stream_options", "/llm/openai/v1/chat/completions", `{"model":"m","stream":true}`, true, 13, 9},
		{"stream_options without usage", "/llm/groq/openai/v1/chat/completions", `{"model":"m","stream":true,"stream_options":{"include_usage":false}}`, true, 13, 9},
		{"stream_options null", "/llm/deepseek/chat/completions", `{"stream_options":null,"model":"m","stream":true}`, true, 13, 9},
		{"already asked", "/llm/openai/v1/chat/completions", `{"model":"m","max_tokens":100,"stream":true,"stream_options":{"include_usage":true}}`, false, 13, 9},
		{"not a stream", "/llm/openai/v1/chat/completions", `{"model":"m","max_tokens":100}`, false, 11, 7},
		{"mistral reports usage unasked", "/llm/mistral/v1/chat/completions", `{"model":"m","max_tokens":100,"stream":true}`, false, 11, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, body := h.call(t, tc.path, "Authorization", agentCred, tc.body)
			sent := h.fake.last().Body
			if !tc.rewritten && sent != tc.body {
				t.Errorf("the provider got %s, want the body as sent", sent)
			}
			if tc.rewritten {
				var got struct {
					Model         string `json:"model"`
					Stream        bool   `json:"stream"`
					StreamOptions struct {
						IncludeUsage bool `json:"include_usage"`
					} `json:"stream_options"`
				}
				if err := json.Unmarshal([]byte(sent), &got); err != nil || !got.StreamOptions.IncludeUsage || !got.Stream || got.Model != "m" {
					t.Errorf("the provider got %s (%v)", sent, err)
				}
				if !strings.Contains(body, `"usage":{"prompt_tokens":13`) {
					t.Errorf("the client did not get the usage chunk: %s", body)
				}
			}
			ds := h.proxy.Drain()
			if len(ds) != 1 || ds[0].Usage.InputTokens != tc.in || ds[0].Usage.OutputTokens != tc.out {
				t.Errorf("drained %+v, want %d/%d tokens", ds, tc.in, tc.out)
			}
		})
	}
}

// cutProvider streams chunks chat chunks of text (each textLen bytes of content), then
// either hangs until the client leaves (hang) or breaks the connection.
func cutProvider(t *testing.T, chunks, textLen int, hang bool) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for range chunks {
			fmt.Fprintf(w, "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q}}],\"usage\":null}\n\n", strings.Repeat("w", textLen))
		}
		w.(http.Flusher).Flush()
		if hang {
			<-r.Context().Done()
			return
		}
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close() // the chunked body never ends
		}
	}))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	return srv
}

// TestCutStreamsAreCharged: a stream that ends before it reports usage (the client leaves, or
// the provider breaks off) is charged the text it relayed (BytesPerToken) and the request's
// input estimate; before, it cost nothing.
func TestCutStreamsAreCharged(t *testing.T) {
	const chunks, textLen = 10, 400
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"` + strings.Repeat("p", 200) + `"}]}`
	wantIn := estimateTokens(int64(len(body))) // the client's body, BytesPerToken
	wantOut := int64(chunks * textLen / BytesPerToken)
	for _, hang := range []bool{true, false} {
		name := map[bool]string{true: "the client leaves", false: "the provider breaks off"}[hang]
		t.Run(name, func(t *testing.T) {
			up := cutProvider(t, chunks, textLen, hang)
			auth := &fakeAuth{grants: map[string]Grant{agentCred: {Agent: "ns1/a", Workspace: "ns1", Key: []byte(realKey)}}}
			p, err := New(Options{Authorizer: auth, Upstreams: map[string]string{"openai": up.URL}})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(p)
			t.Cleanup(func() { srv.CloseClientConnections(); srv.Close(); p.CloseIdleConnections() })
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/llm/openai/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+agentCred)
			res, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			rd := bufio.NewReader(res.Body)
			for n := 0; n < chunks; {
				line, err := rd.ReadString('\n')
				if err != nil {
					t.Fatalf("after %d chunks: %v", n, err)
				}
				if strings.HasPrefix(line, "data: ") {
					n++
				}
			}
			cancel()
			res.Body.Close()
			var ds []Delta
			deadline := time.Now().Add(testenv.EventBound)
			for len(ds) == 0 || ds[0].Usage.Tokens() == 0 {
				if time.Now().After(deadline) {
					t.Fatalf("drained %+v, want %d input and %d output tokens charged", ds, wantIn, wantOut)
				}
				time.Sleep(10 * time.Millisecond)
				ds = append(ds, p.Drain()...)
			}
			if u := ds[0].Usage; u.InputTokens != wantIn || u.OutputTokens != wantOut {
				t.Errorf("charged %+v, want %d input and %d output tokens", u, wantIn, wantOut)
			}
		})
	}
}

func TestTextBytes(t *testing.T) {
	for line, want := range map[string]int64{
		`{"choices":[{"delta":{"content":"hello"}}]}`:                                 5,
		`{"type":"content_block_delta","delta":{"type":"text_delta","text":"ab\"c"}}`: 5,
		`{"delta":{"type":"input_json_delta","partial_json":"{\"a\":1}"}}`:            9,
		`{"type":"response.output_text.delta","delta":"xyz"}`:                         3,
		`{"candidates":[{"content":{"parts":[{"text":"gem"}]}}]}`:                     3,
		`{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"{}"}}]}}]}`:    2,
		`{"id":"content","model":"text"}`:                                             0,
		`{"usage":null,"choices":[]}`:                                                 0,
	} {
		if got := textBytes([]byte(line)); got != want {
			t.Errorf("textBytes(%s) = %d, want %d", line, got, want)
		}
	}
}

func TestReadRequest(t *testing.T) {
	chat := endpoint{method: "POST", infer: true, chat: true}
	in := func(body string) int64 { return estimateTokens(int64(len(body))) }
	for _, tc := range []struct {
		e           endpoint
		rest, body  string
		stream      bool
		output      int64
		reservation int64 // 0: input + output
	}{
		{chat, "/v1/chat/completions", `{"max_tokens":100}`, false, 100, 0},
		{chat, "/v1/chat/completions", `{"max_completion_tokens":50,"n":3,"stream":true}`, true, 150, 0},
		{chat, "/v1/responses", `{"max_output_tokens":7}`, false, 7, 0},
		{chat, "/v1beta/models/g:streamGenerateContent", `{"generationConfig":{"maxOutputTokens":9,"candidateCount":2}}`, true, 18, 0},
		{chat, "/v1/messages", `{}`, false, DefaultMaxOutputTokens, 0},
		{chat, "/v1/messages", `{"max_tokens":-5}`, false, DefaultMaxOutputTokens, 0},
		{chat, "/v1/messages", `not json`, false, DefaultMaxOutputTokens, 0},
		{endpoint{infer: true, noOutput: true}, "/v1/embeddings", `{"input":"abc","max_tokens":99}`, false, 0, 0},
		{endpoint{}, "/v1/models", ``, false, 0, 0},
	} {
		r := readRequest(tc.e, tc.rest, []byte(tc.body))
		if r.stream != tc.stream || r.output != tc.output || r.input != in(tc.body) || r.reservation() != in(tc.body)+tc.output {
			t.Errorf("%s %s: %+v", tc.rest, tc.body, r)
		}
	}
}

func TestAskUsage(t *testing.T) {
	for in, want := range map[string]string{
		`{"stream":true}`:      `{"stream_options":{"include_usage":true},"stream":true}`,
		` { "stream" : true }`: ` {"stream_options":{"include_usage":true}, "stream" : true }`,
		`{"stream":true,"stream_options":{"include_usage":false}}`: `{"stream":true,"stream_options":{"include_usage":true}}`,
		`{"stream":true,"stream_options":{"x":1}}`:                 `{"stream":true,"stream_options":{"include_usage":true,"x":1}}`,
		`{"stream":true,"stream_options":{"include_usage":true}}`:  `{"stream":true,"stream_options":{"include_usage":true}}`,
		`not json`: `not json`,
	} {
		if got, _ := askUsage([]byte(in)); string(got) != want {
			t.Errorf("askUsage(%s) = %s, want %s", in, got, want)
		}
	}
}
