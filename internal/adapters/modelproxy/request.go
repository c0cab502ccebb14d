package modelproxy

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

const (
	// DefaultMaxOutputTokens is the output a request reserves against a token budget when it
	// names no limit of its own (max_tokens, max_completion_tokens, max_output_tokens,
	// generationConfig.maxOutputTokens).
	DefaultMaxOutputTokens = 4096
	// BytesPerToken turns bytes into an estimate of tokens: a request's body (its input, for
	// reservations and for answers that report none) and the text a stream relayed (its
	// output, when the stream ended before reporting usage). About four bytes of English
	// text per token; JSON framing makes the input estimate an overestimate.
	BytesPerToken = 4
	// maxChoices bounds the n (candidateCount) a reservation multiplies output by.
	maxChoices = 128
)

// request is what the proxy reads from a model request's body.
type request struct {
	body   []byte
	model  string // the model the request names (modelName)
	stream bool   // the client asked for a stream
	input  int64  // estimated input tokens
	output int64  // output tokens the request may produce at most (or the default)
	// capped: the client set an output limit of its own; else the proxy writes the default
	// into the body it forwards (capOutput), so the reservation bounds what it can cost.
	capped bool
	// hiddenInput names input the provider keeps and the body does not carry (OpenAI's
	// previous_response_id or conversation): the field, "" when there is none.
	hiddenInput string
}

// reservation is what the request reserves against token budgets before it is forwarded.
func (r request) reservation() int64 { return r.input + r.output }

// shape holds the fields of every provider's request the proxy reads.
type shape struct {
	Model               *string         `json:"model"`
	Stream              *bool           `json:"stream"`
	StreamOptions       json.RawMessage `json:"stream_options"`
	MaxTokens           *int64          `json:"max_tokens"`
	MaxCompletionTokens *int64          `json:"max_completion_tokens"`
	MaxOutputTokens     *int64          `json:"max_output_tokens"`
	N                   *int64          `json:"n"`
	PreviousResponseID  *string         `json:"previous_response_id"`
	Conversation        json.RawMessage `json:"conversation"`
	GenerationConfig    *struct {
		MaxOutputTokens *int64 `json:"maxOutputTokens"`
		CandidateCount  *int64 `json:"candidateCount"`
	} `json:"generationConfig"`
}

// readRequest reads what e's body says about cost and streaming. A body that is not JSON
// reserves the defaults (the provider refuses it anyway). Google streams by route; rest is
// the decoded provider path.
func readRequest(e endpoint, rest string, body []byte) request {
	r := request{body: body, input: estimateTokens(int64(len(body)))}
	if !e.infer {
		return r
	}
	var s shape
	_ = json.Unmarshal(body, &s)
	r.model = modelName(s.Model, rest)
	r.stream = (s.Stream != nil && *s.Stream) || strings.HasSuffix(rest, ":streamGenerateContent")
	switch {
	case s.PreviousResponseID != nil && *s.PreviousResponseID != "":
		r.hiddenInput = "previous_response_id"
	case len(s.Conversation) > 0 && string(s.Conversation) != "null":
		r.hiddenInput = "conversation"
	}
	if e.noOutput {
		return r
	}
	limit, choices := first(s.MaxTokens, s.MaxCompletionTokens, s.MaxOutputTokens), first(s.N)
	if g := s.GenerationConfig; g != nil {
		limit, choices = first(limit, g.MaxOutputTokens), first(choices, g.CandidateCount)
	}
	out := int64(DefaultMaxOutputTokens)
	if limit != nil && *limit > 0 {
		out, r.capped = min(*limit, 1<<30), true
	}
	if choices != nil && *choices > 1 {
		out *= min(*choices, maxChoices)
	}
	r.output = out
	return r
}

// maxModelName bounds the model name usage is counted under (agentsv1.ModelTally's).
const maxModelName = 200

// modelName is the model a request names: its body's model field, or Google's in its path
// (/v1beta/models/{model}:generateContent), valid UTF-8 and at most maxModelName bytes ("":
// none).
func modelName(field *string, rest string) string {
	m := ""
	if field != nil {
		m = *field
	} else if _, after, ok := strings.Cut(rest, "/models/"); ok {
		m, _, _ = strings.Cut(after, ":")
	}
	m = strings.ToValidUTF8(strings.TrimSpace(m), "")
	for len(m) > maxModelName {
		_, size := utf8.DecodeLastRuneInString(m)
		m = m[:len(m)-size]
	}
	return m
}

// capOutput returns body with the output cap DefaultMaxOutputTokens set at field ("a.b": b in
// the object a, made when absent), the rest of the request as it was, and whether it did; a
// body that is not a JSON object is left as it is (the provider refuses it).
func capOutput(body []byte, field string) ([]byte, bool) {
	var top map[string]json.RawMessage
	if field == "" || json.Unmarshal(body, &top) != nil || top == nil {
		return body, false
	}
	limit := json.RawMessage(strconv.Itoa(DefaultMaxOutputTokens))
	if outer, inner, nested := strings.Cut(field, "."); nested {
		obj := map[string]json.RawMessage{}
		if raw, ok := top[outer]; ok && json.Unmarshal(raw, &obj) != nil {
			return body, false
		}
		if obj == nil {
			obj = map[string]json.RawMessage{}
		}
		obj[inner] = limit
		top[outer], _ = json.Marshal(obj)
	} else {
		top[field] = limit
	}
	out, err := json.Marshal(top)
	if err != nil {
		return body, false
	}
	return out, true
}

// first is the first non-nil of vs.
func first(vs ...*int64) *int64 {
	for _, v := range vs {
		if v != nil {
			return v
		}
	}
	return nil
}

func estimateTokens(n int64) int64 { return (n + BytesPerToken - 1) / BytesPerToken }

// askUsage returns body with stream_options.include_usage set to true (an OpenAI-style chat
// completion stream reports its usage only then), and whether it changed it. The usage chunk
// this adds (empty choices, before [DONE]) reaches the client: it is part of the chunk
// format every OpenAI-compatible client reads, and OpenRouter and Mistral send it unasked.
func askUsage(body []byte) ([]byte, bool) {
	var s shape
	if err := json.Unmarshal(body, &s); err != nil {
		return body, false
	}
	if len(s.StreamOptions) == 0 { // absent: insert it first, the rest untouched
		i := bytes.IndexByte(body, '{')
		if i < 0 {
			return body, false
		}
		sep := ","
		if rest := bytes.TrimSpace(body[i+1:]); len(rest) > 0 && rest[0] == '}' {
			sep = ""
		}
		out := make([]byte, 0, len(body)+40)
		out = append(out, body[:i+1]...)
		out = append(out, `"stream_options":{"include_usage":true}`+sep...)
		return append(out, body[i+1:]...), true
	}
	var opts map[string]json.RawMessage
	if err := json.Unmarshal(s.StreamOptions, &opts); err != nil || opts == nil {
		opts = map[string]json.RawMessage{}
	}
	if v, ok := opts["include_usage"]; ok && bytes.Equal(bytes.TrimSpace(v), []byte("true")) {
		return body, false
	}
	opts["include_usage"] = json.RawMessage("true")
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return body, false
	}
	top["stream_options"], _ = json.Marshal(opts)
	out, err := json.Marshal(top)
	if err != nil {
		return body, false
	}
	return out, true
}
