// Package logredact hides secrets in text an engine wrote (gateway logs, crash messages):
// known secret values verbatim, then anything that looks like a credential.
package logredact

import (
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
// replaced verbatim, they would garble the message; the patterns still apply.
const MinSecretLen = 6

// Redactor hides a fixed set of secret values (and the patterns) in many strings.
type Redactor struct {
	secrets []string // longest first
}

// New is a Redactor of the given secret values (duplicates and short ones are dropped).
func New(secrets []string) *Redactor {
	seen := map[string]bool{}
	var keep []string
	for _, v := range secrets {
		if len(v) >= MinSecretLen && !seen[v] {
			seen[v] = true
			keep = append(keep, v)
		}
	}
	sort.Slice(keep, func(i, j int) bool { return len(keep[i]) > len(keep[j]) })
	return &Redactor{secrets: keep}
}

// Redact hides the secrets in s: the values verbatim (longest first), then anything that
// looks like a token.
func (r *Redactor) Redact(s string) string {
	for _, v := range r.secrets {
		s = strings.ReplaceAll(s, v, Marker)
	}
	s = secretKV.ReplaceAllString(s, "${1}"+Marker)
	return opaque.ReplaceAllString(s, Marker)
}

// Redact is New(secrets).Redact(s).
func Redact(s string, secrets []string) string { return New(secrets).Redact(s) }
