package modelproxy

import (
	"net/http"
	"net/url"
	"path"
	"strings"
)

// endpoint is a provider route the proxy forwards: a method and a path.Match pattern of the
// provider's own path (the path after /llm/<provider>). Everything else a provider's API
// offers (files, batches, fine-tuning, stored responses, assistants, uploads, keys and
// credits) is data or state of everyone who shares the key: the proxy answers 403 and never
// forwards it.
type endpoint struct {
	method, pattern string
	// infer: a model call, metered and reserved against token budgets; else a model list.
	infer bool
	// noOutput: the call produces no output tokens (embeddings); free: it costs none at all
	// (token counters).
	noOutput, free bool
	// chat: OpenAI-style chat completions, whose streams carry usage only when asked.
	chat bool
	// capField is where the request's output cap goes ("a.b": field b of object a), which the
	// proxy writes when the client sets none (capOutput); "" for calls without output.
	capField string
}

// openAIRoutes are the inference routes of an OpenAI-style API under base ("/v1" ...); chatCap
// is the chat completions' output cap field (OpenAI's own current models take
// max_completion_tokens only, the compatible APIs max_tokens).
func openAIRoutes(base, chatCap string) []endpoint {
	return []endpoint{
		{method: http.MethodPost, pattern: base + "/chat/completions", infer: true, chat: true, capField: chatCap},
		{method: http.MethodPost, pattern: base + "/responses", infer: true, capField: "max_output_tokens"},
		{method: http.MethodPost, pattern: base + "/embeddings", infer: true, noOutput: true},
		{method: http.MethodGet, pattern: base + "/models"},
		{method: http.MethodGet, pattern: base + "/models/*"},
	}
}

// anthropicRoutes: the Messages API (and its token counter) and the model list.
func anthropicRoutes() []endpoint {
	return []endpoint{
		{method: http.MethodPost, pattern: "/v1/messages", infer: true, capField: "max_tokens"},
		{method: http.MethodPost, pattern: "/v1/messages/count_tokens", infer: true, noOutput: true, free: true},
		{method: http.MethodGet, pattern: "/v1/models"},
		{method: http.MethodGet, pattern: "/v1/models/*"},
	}
}

// googleRoutes: the Gemini API's model methods (generate, stream, count, embed) and model
// list, on v1beta and v1. Tuned models, files, cached contents and corpora are not served.
func googleRoutes() []endpoint {
	var out []endpoint
	for _, v := range []string{"/v1beta", "/v1"} {
		for _, m := range []string{"generateContent", "streamGenerateContent", "countTokens", "embedContent", "batchEmbedContents"} {
			e := endpoint{method: http.MethodPost, pattern: v + "/models/*:" + m, infer: true,
				noOutput: m != "generateContent" && m != "streamGenerateContent", free: m == "countTokens"}
			if !e.noOutput {
				e.capField = "generationConfig.maxOutputTokens"
			}
			out = append(out, e)
		}
		out = append(out, endpoint{method: http.MethodGet, pattern: v + "/models"},
			endpoint{method: http.MethodGet, pattern: v + "/models/*"})
	}
	return out
}

// endpoint returns the allowed route that method and the decoded provider path p match.
func (p Provider) endpoint(method, rest string) (endpoint, bool) {
	for _, e := range p.routes {
		if e.method != method {
			continue
		}
		if ok, _ := path.Match(e.pattern, rest); ok {
			return e, true
		}
	}
	return endpoint{}, false
}

// cleanRest decodes the escaped provider path rest and refuses any it cannot forward as it
// matched: undecodable escapes, dot segments, empty segments and encoded slashes (all of
// which a provider's router could read as another route).
func cleanRest(rest string) (string, bool) {
	if rest == "" || strings.Contains(strings.ToLower(rest), "%2f") || strings.Contains(rest, "\\") {
		return "", false
	}
	p, err := url.PathUnescape(rest)
	if err != nil || p != path.Clean(p) || !strings.HasPrefix(p, "/") || strings.ContainsAny(p, "\x00\r\n") {
		return "", false
	}
	return p, true
}

// droppedHeaders never reach a provider, whoever sent them: credentials (the proxy injects
// the real key itself), and the headers that pick the organisation, project or billing
// account a call runs as (OpenAI-Organization, OpenAI-Project; Google's x-goog-user-project
// selects the quota and billing project; Groq and others follow OpenAI's names). Names are
// compared lower-cased with '_' read as '-' (some servers treat them alike).
var droppedHeaders = map[string]bool{
	"authorization": true, "proxy-authorization": true, "x-api-key": true, "api-key": true,
	"x-goog-api-key": true, "cookie": true, "openai-organization": true, "openai-project": true,
	"x-goog-user-project": true, "x-goog-request-params": true, "x-goog-authenticated-user": true,
}

// droppedHeader reports whether the header called name must not be forwarded: a named one, or
// any whose name speaks of an organisation, a project or an account.
func droppedHeader(name string) bool {
	n := strings.ReplaceAll(strings.ToLower(name), "_", "-")
	if droppedHeaders[n] {
		return true
	}
	for _, s := range []string{"organization", "organisation", "project", "account"} {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}

// scrubHeaders removes every header droppedHeader names.
func scrubHeaders(h http.Header) {
	for k := range h {
		if droppedHeader(k) {
			delete(h, k)
		}
	}
}

// scrubQuery removes credentials from a query (Google reads ?key= and ?access_token=).
func scrubQuery(raw string) string {
	if raw == "" {
		return ""
	}
	q, err := url.ParseQuery(raw)
	if err != nil {
		return ""
	}
	for k := range q {
		switch strings.ToLower(k) {
		case "key", "access_token", "api_key", "api-key":
			delete(q, k)
		}
	}
	return q.Encode()
}
