package modelproxy

import (
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// Provider is a model provider the proxy knows.
type Provider struct {
	Name     string // "anthropic", "openai", ...
	Upstream string // default origin, e.g. "https://api.anthropic.com"
	// BasePath is what the engine's baseUrl adds after /llm/<name>: "" or "/v1" ...; the engine's
	// baseUrl for the provider is <proxy base>/llm/<Name><BasePath>.
	BasePath string
	// API is OpenClaw's adapter for models.providers.<name>.api: "anthropic-messages",
	// "openai-completions", "openai-responses", "google-generative-ai".
	API string

	style style // where the credential travels, how errors look, where usage is
	// routes are the inference routes forwarded (routes.go); every other path answers 403.
	routes []endpoint
	// askUsage: the provider's chat completion streams report usage only when the request
	// sets stream_options.include_usage, which the proxy then sets.
	askUsage bool
}

// style is a provider family's wire convention.
type style int

const (
	styleOpenAI    style = iota // Authorization: Bearer, {"error":{"message","type","param","code"}}, "usage"
	styleAnthropic              // x-api-key, {"type":"error","error":{"type","message"}}, "usage"
	styleGoogle                 // x-goog-api-key or ?key=, {"error":{"code","message","status"}}, "usageMetadata"
)

// providers is the registry, by name. Base URLs and adapters as openclaw 2026.9.6 documents
// them (docs/providers/*.md and the bundled plugin catalogs).
var providers = map[string]Provider{}

func init() {
	for _, p := range []Provider{
		{Name: "anthropic", Upstream: "https://api.anthropic.com", BasePath: "", API: "anthropic-messages", style: styleAnthropic},
		{Name: "openai", Upstream: "https://api.openai.com", BasePath: "/v1", API: "openai-responses"},
		{Name: "openrouter", Upstream: "https://openrouter.ai", BasePath: "/api/v1", API: "openai-completions"},
		{Name: "groq", Upstream: "https://api.groq.com", BasePath: "/openai/v1", API: "openai-completions"},
		{Name: "mistral", Upstream: "https://api.mistral.ai", BasePath: "/v1", API: "openai-completions"},
		// DeepSeek's documented base URL has no /v1 (the API answers on both).
		{Name: "deepseek", Upstream: "https://api.deepseek.com", BasePath: "", API: "openai-completions"},
		{Name: "xai", Upstream: "https://api.x.ai", BasePath: "/v1", API: "openai-responses"},
		{Name: "together", Upstream: "https://api.together.xyz", BasePath: "/v1", API: "openai-completions"},
		{Name: "google", Upstream: "https://generativelanguage.googleapis.com", BasePath: "/v1beta", API: "google-generative-ai", style: styleGoogle},
	} {
		switch p.style {
		case styleAnthropic:
			p.routes = anthropicRoutes()
		case styleGoogle:
			p.routes = googleRoutes()
		default:
			chatCap := "max_tokens"
			if p.Name == "openai" {
				chatCap = "max_completion_tokens"
			}
			p.routes = openAIRoutes(p.BasePath, chatCap)
			if p.Name == "deepseek" {
				p.routes = append(p.routes, openAIRoutes("/v1", chatCap)...)
			}
			// Mistral reports usage in a stream's last chunk unasked (and documents no
			// stream_options); the others follow OpenAI.
			p.askUsage = p.Name != "mistral"
		}
		providers[p.Name] = p
	}
}

// Lookup returns the provider called name.
func Lookup(name string) (Provider, bool) {
	p, ok := providers[name]
	return p, ok
}

// Providers lists the known providers, sorted by name.
func Providers() []Provider {
	out := make([]Provider, 0, len(providers))
	for _, p := range providers {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// credential reads the agent's credential where the provider's client puts it.
func (p Provider) credential(r *http.Request) string {
	switch p.style {
	case styleAnthropic:
		if v := r.Header.Get("X-Api-Key"); v != "" {
			return v
		}
		return bearer(r)
	case styleGoogle:
		if v := r.Header.Get("X-Goog-Api-Key"); v != "" {
			return v
		}
		return r.URL.Query().Get("key")
	default:
		return bearer(r)
	}
}

func bearer(r *http.Request) string {
	v := r.Header.Get("Authorization")
	if len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
		return strings.TrimSpace(v[7:])
	}
	return ""
}

// inject strips every incoming credential and account header from out (droppedHeader, also
// in the query) and sets the real key the provider's way.
func (p Provider) inject(out *http.Request, key string) {
	scrubHeaders(out.Header)
	out.URL.RawQuery = scrubQuery(out.URL.RawQuery)
	switch p.style {
	case styleAnthropic:
		out.Header.Set("X-Api-Key", key)
	case styleGoogle:
		out.Header.Set("X-Goog-Api-Key", key)
	default:
		out.Header.Set("Authorization", "Bearer "+key)
	}
}

// usageKey is the JSON key of the usage object in the provider's answers.
func (p Provider) usageKey() string {
	if p.style == styleGoogle {
		return `"usageMetadata"`
	}
	return `"usage"`
}

// errKind is a refusal the proxy answers itself.
type errKind int

const (
	errUnauthorized errKind = iota
	errRateLimit
	errBadGateway
	errUnavailable
	errNotFound
	errForbidden
	errTooLarge
	errUnsupported // a parameter the proxy does not forward (writeParamError names it)
)

// writeError answers status with msg in the provider's error shape.
func (p Provider) writeError(w http.ResponseWriter, status int, kind errKind, msg string) {
	p.writeParamError(w, status, kind, "", msg)
}

// writeParamError is writeError naming the request's parameter at fault (param, "" for none)
// where the provider's shape has a place for it (OpenAI's).
func (p Provider) writeParamError(w http.ResponseWriter, status int, kind errKind, param, msg string) {
	var body any
	switch p.style {
	case styleAnthropic:
		typ := map[errKind]string{errUnauthorized: "authentication_error", errRateLimit: "rate_limit_error",
			errBadGateway: "api_error", errUnavailable: "overloaded_error", errNotFound: "not_found_error",
			errForbidden: "permission_error", errTooLarge: "request_too_large", errUnsupported: "invalid_request_error"}[kind]
		type detail struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		}
		body = struct {
			Type  string `json:"type"`
			Error detail `json:"error"`
		}{"error", detail{typ, msg}}
	case styleGoogle:
		st := map[errKind]string{errUnauthorized: "UNAUTHENTICATED", errRateLimit: "RESOURCE_EXHAUSTED",
			errBadGateway: "UNAVAILABLE", errUnavailable: "UNAVAILABLE", errNotFound: "NOT_FOUND",
			errForbidden: "PERMISSION_DENIED", errTooLarge: "INVALID_ARGUMENT", errUnsupported: "INVALID_ARGUMENT"}[kind]
		type detail struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Status  string `json:"status"`
		}
		body = map[string]detail{"error": {status, msg, st}}
	default:
		typ, code := "invalid_request_error", "invalid_api_key"
		switch kind {
		case errRateLimit:
			typ, code = "rate_limit_error", "rate_limit_exceeded"
		case errBadGateway, errUnavailable:
			typ, code = "server_error", "upstream_unavailable"
		case errNotFound:
			typ, code = "invalid_request_error", "unknown_provider"
		case errForbidden:
			typ, code = "invalid_request_error", "route_not_allowed"
		case errTooLarge:
			typ, code = "invalid_request_error", "request_too_large"
		case errUnsupported:
			typ, code = "invalid_request_error", "unsupported_parameter"
		}
		type detail struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    string  `json:"code"`
		}
		d := detail{Message: msg, Type: typ, Code: code}
		if param != "" {
			d.Param = &param
		}
		body = map[string]detail{"error": d}
	}
	b, _ := json.Marshal(body)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// upstreamURL is origin + the provider path rest (decoded, cleaned, starting with "/") +
// query: the provider sees the path the allow-list matched, escaped afresh.
func upstreamURL(origin *url.URL, rest, rawQuery string) *url.URL {
	u := *origin
	u.Path = strings.TrimSuffix(origin.Path, "/") + rest
	u.RawPath = ""
	u.RawQuery = rawQuery
	u.Fragment, u.RawFragment = "", ""
	return &u
}
