// Package hostclaim holds the rules of the host names Domains serve, shared by the domain
// controller and the REST facade: how a Domain's host is formed and which names are allowed.
// Who holds a host (the claim) and the domain slots are admission's (internal/rules/admission).
package hostclaim

import (
	"regexp"
	"strings"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// Defaults for the platform's names.
const (
	// DefaultBrand is the service's brand: names containing it are refused, and it names the
	// verification record `_<brand>-verify.<domain>`.
	DefaultBrand = "agentplane"
	// DefaultAppsDomain is the parent of subdomains. `.localhost` names resolve to loopback
	// (RFC 6761) in browsers and most resolvers, so local mode works without DNS setup;
	// clusters set their real apps domain.
	DefaultAppsDomain = "agents.localhost"
)

var (
	labelRE    = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	hostnameRE = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\.)+[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`)
)

// Host is the host name a Domain serves: `<subdomain>.<appsDomain>` or the custom domain.
func Host(spec *agentsv1.DomainSpec, appsDomain string) string {
	if spec.Subdomain != "" {
		return strings.ToLower(spec.Subdomain) + "." + strings.TrimSuffix(strings.ToLower(appsDomain), ".")
	}
	return strings.TrimSuffix(strings.ToLower(spec.CustomDomain), ".")
}

// ChosenName is the part of the host the workspace chose: the subdomain label or the custom
// domain.
func ChosenName(spec *agentsv1.DomainSpec) string {
	if spec.Subdomain != "" {
		return spec.Subdomain
	}
	return spec.CustomDomain
}

// Banned reports whether name contains the brand (case-insensitive).
func Banned(name, brand string) bool {
	return brand != "" && strings.Contains(strings.ToLower(name), strings.ToLower(brand))
}

// ValidLabel reports whether s is a lowercase DNS label (RFC 1123, 1 to 63 characters), the
// CRD's rule for subdomains.
func ValidLabel(s string) bool { return len(s) <= 63 && labelRE.MatchString(s) }

// ValidHostname reports whether s is a lowercase host name of at least two labels whose
// last label starts with a letter (4 to 253 characters), the CRD's rule for custom domains.
func ValidHostname(s string) bool {
	return len(s) >= 4 && len(s) <= 253 && hostnameRE.MatchString(s)
}

// UnderDomain reports whether host is parent or a name below it.
func UnderDomain(host, parent string) bool {
	host, parent = strings.TrimSuffix(host, "."), strings.TrimSuffix(strings.ToLower(parent), ".")
	return parent != "" && (host == parent || strings.HasSuffix(host, "."+parent))
}
