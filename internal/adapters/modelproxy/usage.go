package modelproxy

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"sync"
)

// Usage counted for one agent and day (or one model of it).
type Usage struct {
	Requests, InputTokens, OutputTokens int64
	// CostMicros is what the requests cost by the proxy's price table (Options.Prices), in
	// millionths of its currency; Unpriced counts the requests of models it has no price for.
	CostMicros, Unpriced int64
}

// Add is u with v added.
func (u Usage) Add(v Usage) Usage {
	return Usage{Requests: u.Requests + v.Requests, InputTokens: u.InputTokens + v.InputTokens,
		OutputTokens: u.OutputTokens + v.OutputTokens, CostMicros: u.CostMicros + v.CostMicros, Unpriced: u.Unpriced + v.Unpriced}
}

// Tokens is input plus output tokens, what a token budget counts.
func (u Usage) Tokens() int64 { return u.InputTokens + u.OutputTokens }

// maxLine bounds what the scanner keeps of one SSE line or of a JSON body: the tail of
// anything longer (usage sits at the end of a JSON document). Memory per response stays
// under maxLine whatever the answer's size.
const maxLine = 16 << 10

// usageFields are the token counts of every shape the proxy reads: anthropic
// (input_tokens, cache_*, output_tokens), OpenAI chat (prompt_tokens, completion_tokens),
// OpenAI responses (input_tokens, output_tokens) and Google (promptTokenCount,
// candidatesTokenCount, thoughtsTokenCount).
type usageFields struct {
	InputTokens          *int64 `json:"input_tokens"`
	OutputTokens         *int64 `json:"output_tokens"`
	CacheCreation        *int64 `json:"cache_creation_input_tokens"`
	CacheRead            *int64 `json:"cache_read_input_tokens"`
	PromptTokens         *int64 `json:"prompt_tokens"`
	CompletionTokens     *int64 `json:"completion_tokens"`
	PromptTokenCount     *int64 `json:"promptTokenCount"`
	CandidatesTokenCount *int64 `json:"candidatesTokenCount"`
	ThoughtsTokenCount   *int64 `json:"thoughtsTokenCount"`
}

// usageMeter accumulates the last value seen of each field: every shape reports
// cumulative counts (anthropic message_delta, Google chunks) or reports them once.
type usageMeter struct {
	key  []byte
	last usageFields
}

func (m *usageMeter) result() (in, out int64) {
	v := func(p *int64) int64 {
		if p == nil {
			return 0
		}
		return *p
	}
	l := m.last
	in = v(l.InputTokens) + v(l.CacheCreation) + v(l.CacheRead) + v(l.PromptTokens) + v(l.PromptTokenCount)
	out = v(l.OutputTokens) + v(l.CompletionTokens) + v(l.CandidatesTokenCount) + v(l.ThoughtsTokenCount)
	return in, out
}

// seen reports whether any input and any output count was reported.
func (m *usageMeter) seen() (in, out bool) {
	l := m.last
	in = l.InputTokens != nil || l.PromptTokens != nil || l.PromptTokenCount != nil
	out = l.OutputTokens != nil || l.CompletionTokens != nil || l.CandidatesTokenCount != nil
	return in, out
}

// scan finds the last usage object in b: the key must follow '{' or ',' (so an escaped
// "usage" inside a string never matches) and hold an object (null is skipped).
func (m *usageMeter) scan(b []byte) {
	for end := len(b); end > 0; {
		i := bytes.LastIndex(b[:end], m.key)
		if i < 0 {
			return
		}
		end = i
		if !keyPosition(b, i) {
			continue
		}
		rest := bytes.TrimLeft(b[i+len(m.key):], " \t\r\n")
		if len(rest) == 0 || rest[0] != ':' {
			continue
		}
		rest = bytes.TrimLeft(rest[1:], " \t\r\n")
		if len(rest) == 0 || rest[0] != '{' {
			continue
		}
		var f usageFields
		if err := json.NewDecoder(bytes.NewReader(rest)).Decode(&f); err != nil {
			continue
		}
		m.merge(f)
		return
	}
}

func keyPosition(b []byte, i int) bool {
	for j := i - 1; j >= 0; j-- {
		switch b[j] {
		case ' ', '\t', '\r', '\n':
			continue
		case '{', ',':
			return true
		default:
			return false
		}
	}
	return false
}

func (m *usageMeter) merge(f usageFields) {
	set := func(dst **int64, src *int64) {
		if src != nil {
			*dst = src
		}
	}
	set(&m.last.InputTokens, f.InputTokens)
	set(&m.last.OutputTokens, f.OutputTokens)
	set(&m.last.CacheCreation, f.CacheCreation)
	set(&m.last.CacheRead, f.CacheRead)
	set(&m.last.PromptTokens, f.PromptTokens)
	set(&m.last.CompletionTokens, f.CompletionTokens)
	set(&m.last.PromptTokenCount, f.PromptTokenCount)
	set(&m.last.CandidatesTokenCount, f.CandidatesTokenCount)
	set(&m.last.ThoughtsTokenCount, f.ThoughtsTokenCount)
}

// lineBufs recycles the scanners' line buffers.
var lineBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// usageScanner reads usage from a response as it passes: SSE data lines one by one, a JSON
// body as a whole (its tail). It keeps at most about 2*maxLine bytes.
type usageScanner struct {
	meter usageMeter
	sse   bool
	buf   *[]byte
	head  [5]byte // the current SSE line's first bytes
	headN int
	start bool  // the next byte starts a line
	text  int64 // bytes of generated text in the SSE data lines seen (textBytes)
}

var dataPrefix = [5]byte{'d', 'a', 't', 'a', ':'}

func (s *usageScanner) isData() bool { return s.headN == len(s.head) && s.head == dataPrefix }

// newUsageScanner returns nil when the content type carries no usage the proxy reads.
func newUsageScanner(p Provider, contentType string) *usageScanner {
	mt, _, _ := mime.ParseMediaType(contentType)
	s := &usageScanner{meter: usageMeter{key: []byte(p.usageKey())}, start: true}
	switch mt {
	case "text/event-stream":
		s.sse = true
	case "application/json":
	default:
		return nil
	}
	s.buf = lineBufs.Get().(*[]byte)
	*s.buf = (*s.buf)[:0]
	return s
}

func (s *usageScanner) write(p []byte) {
	if !s.sse {
		s.appendTail(p)
		return
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		seg := p
		if i >= 0 {
			seg = p[:i]
		}
		if s.start {
			s.start = false
			s.headN = 0
			*s.buf = (*s.buf)[:0]
		}
		s.headN += copy(s.head[s.headN:], seg)
		s.appendTail(seg)
		if i < 0 {
			return
		}
		if s.isData() {
			s.meter.scan(*s.buf)
			s.text += textBytes(*s.buf)
		}
		s.start = true
		p = p[i+1:]
	}
}

// appendTail appends p, keeping only the last maxLine bytes once past 2*maxLine.
func (s *usageScanner) appendTail(p []byte) {
	b := *s.buf
	if len(p) >= maxLine {
		b = append(b[:0], p[len(p)-maxLine:]...)
	} else {
		b = append(b, p...)
		if len(b) > 2*maxLine {
			b = b[:copy(b, b[len(b)-maxLine:])]
		}
	}
	*s.buf = b
}

// finish scans what is left and returns the tokens counted.
func (s *usageScanner) finish() (in, out int64) {
	if s.buf == nil {
		return s.meter.result()
	}
	if !s.sse || (!s.start && s.isData()) {
		s.meter.scan(*s.buf)
	}
	if s.sse && !s.start && s.isData() {
		s.text += textBytes(*s.buf)
	}
	if cap(*s.buf) <= 2*maxLine+maxLine {
		lineBufs.Put(s.buf)
	}
	s.buf = nil
	return s.meter.result()
}

// textKeys name the JSON strings that carry generated text in every stream shape the proxy
// reads: chat deltas (content, reasoning, refusal, tool call arguments), Anthropic deltas
// (text, thinking, partial_json), responses events (delta) and Gemini parts (text).
var textKeys = [][]byte{[]byte(`"content"`), []byte(`"text"`), []byte(`"delta"`), []byte(`"arguments"`),
	[]byte(`"partial_json"`), []byte(`"thinking"`), []byte(`"reasoning"`), []byte(`"reasoning_content"`), []byte(`"refusal"`)}

// textBytes is the length of the string values of textKeys in the JSON line b (escaped as
// sent): what the proxy charges, at BytesPerToken, as the output of a stream that ended
// before it reported usage.
func textBytes(b []byte) int64 {
	var n int64
	for _, k := range textKeys {
		for from := 0; ; {
			i := bytes.Index(b[from:], k)
			if i < 0 {
				break
			}
			i += from
			from = i + len(k)
			if !keyPosition(b, i) {
				continue
			}
			rest := bytes.TrimLeft(b[from:], " \t")
			if len(rest) == 0 || rest[0] != ':' {
				continue
			}
			rest = bytes.TrimLeft(rest[1:], " \t")
			if len(rest) == 0 || rest[0] != '"' {
				continue
			}
			n += int64(stringLen(rest[1:]))
		}
	}
	return n
}

// stringLen is the length of a JSON string's body up to its closing quote (or the end).
func stringLen(b []byte) int {
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return len(b)
}

// metered is what a relayed answer carried.
type metered struct {
	bytes           int64 // bytes relayed
	in, out         int64 // tokens reported
	inSeen, outSeen bool  // an input (output) count was reported
	sse             bool
	text            int64 // SSE: bytes of generated text (textBytes)
	complete        bool  // the body ended with EOF, not cut by an error or a close
}

// meteredBody passes the upstream body through, feeding the scanner, and calls done once,
// at EOF, error or close, with what passed.
type meteredBody struct {
	rc       io.ReadCloser
	scan     *usageScanner
	bytes    int64
	complete bool
	once     sync.Once
	done     func(metered)
}

func (b *meteredBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 {
		b.bytes += int64(n)
		if b.scan != nil {
			b.scan.write(p[:n])
		}
	}
	if err != nil {
		b.complete = err == io.EOF
		b.finish()
	}
	return n, err
}

func (b *meteredBody) Close() error {
	err := b.rc.Close()
	b.finish()
	return err
}

func (b *meteredBody) finish() {
	b.once.Do(func() {
		m := metered{bytes: b.bytes, complete: b.complete}
		if s := b.scan; s != nil {
			m.in, m.out = s.finish()
			m.inSeen, m.outSeen = s.meter.seen()
			m.sse, m.text = s.sse, s.text
		}
		b.done(m)
	})
}
