// Package logredact hides secrets in text an engine wrote (gateway logs, console output, crash
// messages): known secret values, verbatim and in their base64 and hex forms, then anything
// that looks like a credential.
package logredact

import (
	"encoding/base64"
	"encoding/hex"
	"regexp"
	"sort"
	"strings"
)

// Marker replaces what is hidden.
const Marker = "[REDACTED]"

// Patterns of things that look like secrets in log lines.
var (
	// key=value / key: value / "key":"value" for secret-sounding keys.
	secretKV = regexp.MustCompile(`(?i)((?:token|secret|password|passwd|api[_-]?key|credential)[A-Za-z0-9_-]*["']?\s*[:=]\s*["']?(?:bearer\s+)?|bearer\s+)([^\s"',;}]{4,})`)
	// Long opaque runs (hex, base64url tokens) and telegram-style bot tokens.
	opaque = regexp.MustCompile(`\b(?:\d{5,}:[A-Za-z0-9_-]{20,}|[A-Za-z0-9_-]{32,})\b`)
)

// MinSecretLen: shorter values (flags like "1" or "100ms" in the attached env) are not
// replaced verbatim, they would garble the message (a 3-letter value would hide every word
// that contains it); the patterns still apply. The same bound applies to each encoded form and
// to each line of a multi-line value.
const MinSecretLen = 6

// Redactor hides a fixed set of secret values (and the patterns) in many strings.
type Redactor struct {
	needles []string // the values and their encoded forms, longest first
	maxLen  int      // the longest needle
}

// New is a Redactor of the given secret values (duplicates and short ones are dropped). Each
// value is also hidden base64-encoded (standard and URL alphabets, padded or not, and as it
// reads inside a longer encoded text at each of the three byte alignments) and hex-encoded
// (lower and upper case), and each line of a multi-line value on its own.
func New(secrets []string) *Redactor {
	seen := map[string]bool{}
	r := &Redactor{}
	add := func(n string) {
		n = strings.NewReplacer("\r", "", "\n", "").Replace(n) // matched across line breaks
		if len(n) >= MinSecretLen && !seen[n] {
			seen[n] = true
			r.needles = append(r.needles, n)
			r.maxLen = max(r.maxLen, len(n))
		}
	}
	for _, v := range secrets {
		if len(v) < MinSecretLen {
			continue
		}
		for _, f := range forms(v) {
			add(f)
		}
		if strings.ContainsAny(v, "\r\n") {
			for _, l := range strings.FieldsFunc(v, func(r rune) bool { return r == '\n' || r == '\r' }) {
				add(l)
			}
		}
	}
	sort.Slice(r.needles, func(i, j int) bool { return len(r.needles[i]) > len(r.needles[j]) })
	return r
}

// forms are v and its encodings.
func forms(v string) []string {
	b := []byte(v)
	out := []string{v, hex.EncodeToString(b), strings.ToUpper(hex.EncodeToString(b))}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		out = append(out, enc.EncodeToString(b))
		raw := enc.WithPadding(base64.NoPadding)
		for align := range 3 {
			// v after align bytes of something else: the characters that depend on v alone.
			// The first ones mix in the bytes before (none, 2 or 3 characters), the last one
			// the bytes after.
			n := align + len(b)
			enc := raw.EncodeToString(append(make([]byte, align), b...))
			out = append(out, enc[[]int{0, 2, 3}[align]:n*8/6])
		}
	}
	return out
}

// MaxLen is the length of the longest text it hides verbatim (0: none): a stream that keeps
// the last MaxLen-1 bytes back before it writes finds a value split across two reads.
func (r *Redactor) MaxLen() int { return r.maxLen }

// Redact hides the secrets in s: the values and their forms (as one run where they overlap),
// then anything that looks like a token. Hidden values never join lines: a value that spans a
// line break is hidden on each line, so s keeps its number of lines.
func (r *Redactor) Redact(s string) string { return hidePatterns(r.hideValues(s)) }

// hidePatterns hides what looks like a token.
func hidePatterns(s string) string {
	s = secretKV.ReplaceAllString(s, "${1}"+Marker)
	return opaque.ReplaceAllString(s, Marker)
}

// RedactValues hides the values and their forms in s, not what merely looks like a token.
func (r *Redactor) RedactValues(s string) string { return r.hideValues(s) }

// RedactValuesCut is RedactValues for a text cut short (output over its cap): a value it ends
// in the middle of, as far as MinSecretLen bytes or more of it are there, is hidden too.
func (r *Redactor) RedactValuesCut(s string) string {
	s = r.hideValues(s)
	cut := len(s)
	for _, n := range r.needles {
		for k := min(len(n)-1, len(s)); k >= MinSecretLen && len(s)-k < cut; k-- {
			if strings.HasSuffix(s, n[:k]) {
				cut = len(s) - k
				break
			}
		}
	}
	if cut == len(s) {
		return s
	}
	return s[:cut] + Marker
}

// hideValues replaces every run of bytes covered by a needle, line by line, with Marker. Line
// breaks do not count: a value the runtime split into two lines (or that the engine wrapped)
// is found across them.
func (r *Redactor) hideValues(s string) string {
	flat, at := s, []int(nil) // s without line breaks; at[i] is where flat[i] is in s
	if strings.ContainsAny(s, "\r\n") {
		var b strings.Builder
		at = make([]int, 0, len(s))
		for i := 0; i < len(s); i++ {
			if s[i] != '\n' && s[i] != '\r' {
				b.WriteByte(s[i])
				at = append(at, i)
			}
		}
		flat = b.String()
	}
	var mask []bool
	for _, n := range r.needles {
		for from := 0; len(n) <= len(flat)-from; {
			i := strings.Index(flat[from:], n)
			if i < 0 {
				break
			}
			if mask == nil {
				mask = make([]bool, len(s))
			}
			for j := from + i; j < from+i+len(n); j++ {
				if at != nil {
					mask[at[j]] = true
				} else {
					mask[j] = true
				}
			}
			from += i + 1
		}
	}
	if mask == nil {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if !mask[i] {
			b.WriteByte(s[i])
			i++
			continue
		}
		for i < len(s) && mask[i] {
			i++
		}
		b.WriteString(Marker)
	}
	return b.String()
}

// Redact is New(secrets).Redact(s).
func Redact(s string, secrets []string) string { return New(secrets).Redact(s) }

// RedactLines hides the secrets in lines as one text (a value split across two lines is hidden
// too) and returns as many lines.
func (r *Redactor) RedactLines(lines []string) []string {
	out := r.hideLines(lines)
	for i, l := range out {
		out[i] = hidePatterns(l)
	}
	return out
}

// hideLines hides the values in lines as one text and returns as many lines.
func (r *Redactor) hideLines(lines []string) []string {
	if len(lines) == 0 {
		return nil
	}
	return strings.Split(r.hideValues(strings.Join(lines, "\n")), "\n")
}

// Follower redacts a followed stream of lines. It holds lines back until at least MaxLen-1
// bytes follow them, so a value split across two lines (or two reads) is still hidden, and
// it remembers as much of what it let out, so a value that began there is hidden where it
// continues. Flush lets out what it holds (call it when the stream pauses or ends).
type Follower struct {
	red     *Redactor
	seen    []string // lines let out, the last MaxLen-1 bytes or more
	pending []string
}

// NewFollower is a Follower that redacts with red.
func NewFollower(red *Redactor) *Follower { return &Follower{red: red} }

// SetRedactor redacts what it holds and what follows with red (a secret attached meanwhile).
func (f *Follower) SetRedactor(red *Redactor) { f.red = red }

// Pending is how many lines it holds back.
func (f *Follower) Pending() int { return len(f.pending) }

// Write takes the next lines and returns, redacted, those that may go out.
func (f *Follower) Write(lines ...string) []string {
	f.pending = append(f.pending, lines...)
	keep := f.red.MaxLen() - 1
	n, after := len(f.pending), 0
	for n > 0 && after < keep {
		n--
		after += len(f.pending[n]) + 1
	}
	return f.emit(n)
}

// Flush returns, redacted, every line it holds.
func (f *Follower) Flush() []string { return f.emit(len(f.pending)) }

// emit lets the first n pending lines out: redacted together with what came before and after
// them.
func (f *Follower) emit(n int) []string {
	if n == 0 {
		return nil
	}
	all := append(append([]string{}, f.seen...), f.pending...)
	out := f.red.hideLines(all)[len(f.seen) : len(f.seen)+n]
	for i, l := range out {
		out[i] = hidePatterns(l) // only the lines that go out: the patterns are line by line
	}
	f.seen = append(f.seen, f.pending[:n]...)
	f.pending = f.pending[n:]
	// Keep the last MaxLen-1 bytes (whole lines) of what went out.
	keep, size, from := f.red.MaxLen()-1, 0, len(f.seen)
	for from > 0 && size < keep {
		from--
		size += len(f.seen[from]) + 1
	}
	f.seen = append([]string(nil), f.seen[from:]...)
	return out
}
