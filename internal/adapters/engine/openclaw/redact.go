package openclaw

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/agentplane/agentplane/internal/adapters/engine"
)

// RedactedMarker replaces secret values in a config shown to clients. It is OpenClaw's own
// marker (`openclaw config get gateway.auth.token` prints it too).
const RedactedMarker = "__OPENCLAW_REDACTED__"

// Which config paths hold secrets: OpenClaw's own rule (src/config/sensitive-paths.ts),
// matched against the dotted path, plus every value of env.vars (environment overrides are
// where users put API keys).
var (
	sensitivePatterns = []*regexp.Regexp{
		regexp.MustCompile(`(?i)token$`),
		regexp.MustCompile(`(?i)password`),
		regexp.MustCompile(`(?i)secret`),
		regexp.MustCompile(`(?i)api.?key`),
		regexp.MustCompile(`(?i)encrypt.?key`),
		regexp.MustCompile(`(?i)private.?key`),
		regexp.MustCompile(`(?i)serviceaccount(?:ref)?$`),
	}
	notSensitiveSuffixes = []string{
		"maxtokens", "maxoutputtokens", "maxinputtokens", "maxcompletiontokens", "contexttokens",
		"totaltokens", "tokencount", "tokenlimit", "tokenbudget", "passwordfile",
	}
	envPlaceholderRE = regexp.MustCompile(`^\$\{[^}]*\}$`)
)

func isSensitivePath(path []string) bool {
	p := strings.Join(path, ".")
	lower := strings.ToLower(p)
	if strings.HasPrefix(lower, "env.vars.") {
		return true
	}
	for _, s := range notSensitiveSuffixes {
		if strings.HasSuffix(lower, s) {
			return false
		}
	}
	for _, re := range sensitivePatterns {
		if re.MatchString(p) {
			return true
		}
	}
	return false
}

// isLiteralSecret: a non-empty string that is not a whole ${VAR} reference.
func isLiteralSecret(s string) bool {
	t := strings.TrimSpace(s)
	return t != "" && !envPlaceholderRE.MatchString(t) && t != RedactedMarker
}

// isSecretRef: {source, provider, id} objects hold a reference, never secret material.
func isSecretRef(m map[string]any) bool {
	_, s := m["source"].(string)
	_, id := m["id"].(string)
	return s && id
}

// RedactConfig implements engine.Engine. It replaces the gateway token and every other literal
// secret (the channels' tokens, API keys, passwords, env.vars) with RedactedMarker. SecretRefs
// and ${VAR} references stay: they name where a secret is, not what it is. Non-secret bytes of
// a config without secrets are returned unchanged (comments included).
func (e *Engine) RedactConfig(config []byte) ([]byte, error) {
	cfg, err := parseConfig(config)
	if err != nil {
		return nil, err
	}
	if !redact(cfg, nil) {
		return config, nil
	}
	return marshalConfig(cfg)
}

// redact rewrites v in place and reports whether it changed anything.
func redact(v any, path []string) bool {
	changed := false
	switch t := v.(type) {
	case map[string]any:
		if isSecretRef(t) {
			return false
		}
		for k, child := range t {
			p := append(path[:len(path):len(path)], k)
			if s, ok := child.(string); ok {
				if isSensitivePath(p) && isLiteralSecret(s) {
					t[k] = RedactedMarker
					changed = true
				}
				continue
			}
			changed = redact(child, p) || changed
		}
	case []any:
		for i, child := range t {
			p := append(path[:len(path):len(path)], strconv.Itoa(i))
			if s, ok := child.(string); ok {
				// An array element is sensitive when its array is (e.g. a list of tokens).
				if isSensitivePath(path) && isLiteralSecret(s) {
					t[i] = RedactedMarker
					changed = true
				}
				continue
			}
			changed = redact(child, p) || changed
		}
	}
	return changed
}

// RestoreRedacted implements engine.Engine: wherever candidate still holds RedactedMarker, the
// value at the same path in current is put back. A marker with nothing to restore (a path that
// current lacks, or a non-string) is an ErrInvalidConfig. A candidate without markers is
// returned unchanged.
func (e *Engine) RestoreRedacted(candidate, current []byte) ([]byte, error) {
	cand, err := parseConfig(candidate)
	if err != nil {
		return nil, err
	}
	if !containsMarker(cand) {
		return candidate, nil
	}
	cur, err := parseConfig(current)
	if err != nil {
		return nil, fmt.Errorf("current config: %w", err)
	}
	if err := restore(cand, cur, nil); err != nil {
		return nil, err
	}
	return marshalConfig(cand)
}

func containsMarker(v any) bool {
	switch t := v.(type) {
	case string:
		return strings.TrimSpace(t) == RedactedMarker
	case map[string]any:
		for _, c := range t {
			if containsMarker(c) {
				return true
			}
		}
	case []any:
		for _, c := range t {
			if containsMarker(c) {
				return true
			}
		}
	}
	return false
}

// restore walks cand; cur is the value at the same path in the current config (nil if none).
func restore(cand, cur any, path []string) error {
	put := func(p []string, curV any) (any, error) {
		if s, ok := curV.(string); ok && s != RedactedMarker {
			return s, nil
		}
		return nil, fmt.Errorf("%w: %s is %s but the current config has no value to restore",
			engine.ErrInvalidConfig, strings.Join(p, "."), RedactedMarker)
	}
	switch t := cand.(type) {
	case map[string]any:
		curM, _ := cur.(map[string]any)
		for k, child := range t {
			p := append(path[:len(path):len(path)], k)
			var curChild any
			if curM != nil {
				curChild = curM[k]
			}
			if s, ok := child.(string); ok && strings.TrimSpace(s) == RedactedMarker {
				v, err := put(p, curChild)
				if err != nil {
					return err
				}
				t[k] = v
				continue
			}
			if err := restore(child, curChild, p); err != nil {
				return err
			}
		}
	case []any:
		curA, _ := cur.([]any)
		for i, child := range t {
			p := append(path[:len(path):len(path)], strconv.Itoa(i))
			var curChild any
			if i < len(curA) {
				curChild = curA[i]
			}
			if s, ok := child.(string); ok && strings.TrimSpace(s) == RedactedMarker {
				v, err := put(p, curChild)
				if err != nil {
					return err
				}
				t[i] = v
				continue
			}
			if err := restore(child, curChild, p); err != nil {
				return err
			}
		}
	}
	return nil
}
