package dnsverify

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentplane/agentplane/internal/syskeys"
)

// KeySecret is the core Secret (in the system namespace) holding the key that derives
// verification tokens.
const KeySecret = "agentplane-domain-verification-key"

// keySize is the length of a generated verification key in bytes.
const keySize = 32

// EnsureKey returns the verification key kept in the system namespace, creating it when
// absent (see syskeys.EnsureRandomKey).
func EnsureKey(ctx context.Context, c client.Client, systemNamespace string) ([]byte, error) {
	return syskeys.EnsureRandomKey(ctx, c, systemNamespace, KeySecret, keySize)
}

// Token is the value the TXT record of domain must hold for workspace: the hex HMAC-SHA256
// of "workspace\x00domain" under key. The same workspace and domain always get the same
// token (a re-created Domain keeps its record); other workspaces get other tokens, so a
// record proves ownership to one workspace only.
func Token(key []byte, workspace, domain string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(workspace))
	m.Write([]byte{0})
	m.Write([]byte(CanonicalName(domain)))
	return hex.EncodeToString(m.Sum(nil))
}

// RecordName is the TXT record that proves ownership of domain: `_<brand>-verify.<domain>`.
func RecordName(brand, domain string) string {
	return "_" + strings.ToLower(brand) + "-verify." + CanonicalName(domain)
}

// CanonicalName lowercases a host name and drops a trailing dot.
func CanonicalName(name string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(name)), ".")
}

// Outcome is what a check found.
type Outcome string

// Outcomes of Check.
const (
	// Verified: a TXT value equals the token.
	Verified Outcome = "Verified"
	// Missing: no TXT record at the name (NXDOMAIN or NODATA).
	Missing Outcome = "RecordNotFound"
	// Mismatch: TXT records exist but none holds the token.
	Mismatch Outcome = "TokenMismatch"
	// Unavailable: DNS did not answer; nothing is known.
	Unavailable Outcome = "DNSUnavailable"
)

// Result is the outcome of a check and a sentence for humans (never holding the token).
type Result struct {
	Outcome Outcome
	Message string
}

// Check looks recordName up and compares its TXT values with token.
func Check(ctx context.Context, r Resolver, recordName, token string) Result {
	values, err := r.LookupTXT(ctx, recordName)
	switch {
	case errors.Is(err, ErrNotFound):
		return Result{Missing, fmt.Sprintf("no TXT record %s is visible yet", recordName)}
	case err != nil:
		return Result{Unavailable, fmt.Sprintf("DNS lookup of %s failed: %v", recordName, err)}
	}
	for _, v := range values {
		if strings.EqualFold(strings.Trim(strings.TrimSpace(v), `"`), token) {
			return Result{Verified, fmt.Sprintf("TXT record %s holds the verification token", recordName)}
		}
	}
	return Result{Mismatch, fmt.Sprintf("TXT record %s exists but its value does not match the verification token", recordName)}
}
