package secrets

import (
	"fmt"
	"sort"
	"strings"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// EnvNameOf is the environment variable an agent sees a secret as: spec.envName, else the
// secret's name with ASCII letters upper-cased and every other character but digits and '_'
// (and a leading digit) turned into '_', one per character.
func EnvNameOf(s *agentsv1.AgentSecret) string {
	if s.Spec.EnvName != "" {
		return s.Spec.EnvName
	}
	return DeriveEnvName(s.Spec.Name)
}

// DeriveEnvName is the environment variable a secret named name is seen as when it sets no
// envName. Only ASCII is upper-cased (the CRD's CEL rule, which has no Unicode case mapping,
// must reach the same answer): any other character becomes '_'.
func DeriveEnvName(name string) string {
	var b strings.Builder
	i := 0
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z':
			b.WriteRune(r - 'a' + 'A')
		case r >= 'A' && r <= 'Z', r == '_', r >= '0' && r <= '9' && i > 0:
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
		i++
	}
	return b.String()
}

// Reserved environment names: a secret must not be seen as one of them. They change how a
// process (the gateway, node, npm, a shell, git, python or the dynamic loader) loads code or
// finds files, or the platform sets them itself (engine home, gateway token and port, channel
// tokens, heap size, locale). Names compare without regard to ASCII case. This is the one list:
// the REST facade, the controllers and the AgentSecret CRD's CEL rule (ReservedEnvPattern,
// checked against the generated CRD by a test) all use it.
var (
	reservedEnvNames = []string{
		// The loader, shells and the search paths.
		"PATH", "HOME", "TMPDIR", "PWD", "OLDPWD", "SHELL", "ENV", "BASH_ENV", "SHELLOPTS", "BASHOPTS", "PS4",
		"IFS", "CDPATH", "PROMPT_COMMAND", "GLOBIGNORE", "GLIBC_TUNABLES", "GCONV_PATH", "LOCPATH",
		"NLSPATH", "HOSTALIASES", "RES_OPTIONS", "LOCALDOMAIN", "TZDIR", "SSL_CERT_FILE",
		"SSL_CERT_DIR", "GETCONF_DIR", "NIS_PATH", "RESOLV_HOST_CONF", "ZDOTDIR", "INPUTRC",
		"TERMINFO", "TERMINFO_DIRS", "LESSOPEN", "LESSCLOSE", "ICU_DATA",
		// Other interpreters an agent's tools start.
		"PERL5LIB", "PERL5OPT", "PERLLIB", "RUBYLIB", "RUBYOPT", "JAVA_TOOL_OPTIONS",
		"_JAVA_OPTIONS", "GIT_SSH", "GIT_SSH_COMMAND", "GIT_ASKPASS", "GIT_EXEC_PATH",
		"GIT_TEMPLATE_DIR", "GIT_PROXY_COMMAND", "GIT_EXTERNAL_DIFF", "GIT_PAGER", "GIT_EDITOR",
		"SSH_ASKPASS", "EDITOR", "VISUAL", "PAGER",
		// Set by the platform (both runtimes): locale.
		"LANG",
		// Set by the platform (local runtime, as root): the way out of a gateway's network
		// namespace is the manager's egress proxy (ALL_PROXY would route around it).
		"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY",
	}
	reservedEnvPrefixes = []string{
		"LD_", "DYLD_", "BASH_FUNC_", "NODE_", "NPM_CONFIG_", "PYTHON", "GIT_CONFIG",
		// OpenSSL's config and modules (Node loads openssl.cnf, which can load a shared
		// object), glibc's malloc tunables, libuv's (Node's event loop), and the package
		// managers an agent's tools run (pip, uv, corepack, yarn) with their own indexes and
		// hooks.
		"OPENSSL_", "MALLOC_", "UV_", "PIP_", "COREPACK_", "YARN_",
		// The platform's own: engine (OPENCLAW_HOME, OPENCLAW_GATEWAY_TOKEN/_PORT,
		// OPENCLAW_CONFIG_PATH, ...), channel tokens and markers (AGENTPLANE_*), skills hub,
		// XDG directories, and what the kubelet sets.
		"OPENCLAW_", "AGENTPLANE_", "CLAWHUB_", "XDG_", "KUBERNETES_",
	}
)

// ReservedEnvNames is the list of reserved names and of reserved prefixes (each ending in
// '_' or a letter; "NODE_" reserves every name that starts with it), sorted.
func ReservedEnvNames() (names, prefixes []string) {
	names, prefixes = append([]string{}, reservedEnvNames...), append([]string{}, reservedEnvPrefixes...)
	sort.Strings(names)
	sort.Strings(prefixes)
	return names, prefixes
}

// IsReservedEnvName reports whether an agent must not see a secret as name.
func IsReservedEnvName(name string) bool {
	up := strings.ToUpper(name)
	for _, n := range reservedEnvNames {
		if up == n {
			return true
		}
	}
	for _, p := range reservedEnvPrefixes {
		if strings.HasPrefix(up, p) {
			return true
		}
	}
	return false
}

// ReservedEnvError is why a secret may not be given to an agent, or nil.
func ReservedEnvError(s *agentsv1.AgentSecret) error {
	if n := EnvNameOf(s); IsReservedEnvName(n) {
		return fmt.Errorf("envName %s is reserved: %s", n, ReservedEnvReason)
	}
	return nil
}

// ReservedEnvReason says why a name is reserved (REST answers, conditions, the CRD's message).
const ReservedEnvReason = "it changes how the agent's processes load code or find files, or the platform sets it " +
	"(PATH, HOME, TMPDIR, LD_*, NODE_*, NPM_CONFIG_*, OPENSSL_*, PYTHON*, OPENCLAW_*, AGENTPLANE_*, ...)"

// ReservedEnvPattern is an RE2 expression that matches a string whose environment name is
// reserved, read either as an envName (letters of any case, digits, '_') or as a secret name
// that DeriveEnvName turns into one: each letter of a reserved name matches either case, each
// '_' matches any character that is not an ASCII letter or digit. The AgentSecret CRD's CEL
// rule holds this expression verbatim.
func ReservedEnvPattern() string {
	names, prefixes := ReservedEnvNames()
	alts := make([]string, 0, len(names)+len(prefixes))
	for _, n := range names {
		alts = append(alts, charClasses(n)+"$")
	}
	for _, p := range prefixes {
		alts = append(alts, charClasses(p))
	}
	return "^(" + strings.Join(alts, "|") + ")"
}

func charClasses(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r >= 'A' && r <= 'Z':
			b.WriteString("[" + string(r) + string(r-'A'+'a') + "]")
		case r == '_' && i == 0:
			b.WriteString("[^A-Za-z]") // a leading digit becomes '_' too
		case r == '_':
			b.WriteString("[^A-Za-z0-9]")
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
