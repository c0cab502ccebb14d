package secrets

import (
	"os"
	"regexp"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

func TestReservedEnvNames(t *testing.T) {
	for _, tc := range []struct {
		name     string
		reserved bool
	}{
		{"NODE_OPTIONS", true}, {"node_options", true}, {"NODE_PATH", true}, {"NODE_EXTRA_CA_CERTS", true},
		{"LD_PRELOAD", true}, {"Ld_Library_Path", true}, {"PATH", true}, {"HOME", true}, {"TMPDIR", true},
		{"BASH_ENV", true}, {"ENV", true}, {"PYTHONPATH", true}, {"npm_config_script_shell", true},
		{"OPENCLAW_GATEWAY_TOKEN", true}, {"OPENCLAW_CONFIG_PATH", true}, {"AGENTPLANE_TELEGRAM_BOT_TOKEN", true},
		{"AGENTPLANE_AGENT_HOME", true}, {"XDG_CONFIG_HOME", true}, {"GIT_CONFIG_GLOBAL", true}, {"LANG", true},
		{"OPENAI_API_KEY", false}, {"NODEX", false}, {"PATHS", false}, {"HOMEPAGE_TOKEN", false},
		{"ENVIRONMENT", false}, {"TELEGRAM_BOT_TOKEN", false}, {"MY_PATH", false}, {"GITHUB_TOKEN", false},
		{"LDAP_PASSWORD", false}, {"FAKECLAW_FAIL", false},
		// Node's OpenSSL config and modules, libuv, glibc's malloc, pagers, zsh, readline and
		// the package managers' indexes and hooks.
		{"OPENSSL_CONF", true}, {"openssl_modules", true}, {"UV_THREADPOOL_SIZE", true}, {"MALLOC_CHECK_", true},
		{"LESSOPEN", true}, {"ZDOTDIR", true}, {"INPUTRC", true}, {"PIP_INDEX_URL", true}, {"COREPACK_NPM_REGISTRY", true},
		{"ICU_DATA", true}, {"OPENSSL", false}, {"UVICORN_TOKEN", false}, {"PIPELINE_KEY", false},
	} {
		if got := IsReservedEnvName(tc.name); got != tc.reserved {
			t.Errorf("IsReservedEnvName(%q) = %v, want %v", tc.name, got, tc.reserved)
		}
	}
}

func TestReservedEnvErrorCoversDerivedNames(t *testing.T) {
	for _, tc := range []struct {
		name, envName string
		reserved      bool
	}{
		{"ld_preload", "", true}, {"ld-preload", "", true}, {"node.options", "", true}, {"Path", "", true},
		{"openclaw home", "", true}, {"my-key", "NODE_OPTIONS", true}, {"ld_preload", "SAFE_NAME", false},
		{"openai", "", false}, {"1env", "", false},
	} {
		s := &agentsv1.AgentSecret{Spec: agentsv1.AgentSecretSpec{Name: tc.name, EnvName: tc.envName}}
		if err := ReservedEnvError(s); (err != nil) != tc.reserved {
			t.Errorf("ReservedEnvError(%q, %q) = %v, want reserved %v", tc.name, tc.envName, err, tc.reserved)
		}
	}
	if got := DeriveEnvName("ld-preload"); got != "LD_PRELOAD" {
		t.Errorf("DeriveEnvName = %q", got)
	}
	if got := DeriveEnvName("9lıves"); got != "_L_VES" {
		t.Errorf("DeriveEnvName keeps to ASCII: %q", got)
	}
}

// The pattern the CRD's CEL rule uses agrees with IsReservedEnvName on envNames and on the
// names secrets derive theirs from.
func TestReservedEnvPatternAgreesWithList(t *testing.T) {
	re := regexp.MustCompile(ReservedEnvPattern())
	names, prefixes := ReservedEnvNames()
	var corpus []string
	for _, n := range append(names, prefixes...) {
		lower := strings.ToLower(n)
		corpus = append(corpus, n, lower, n+"X", n+"_1", "X"+n, n[:len(n)-1],
			strings.ReplaceAll(lower, "_", "-"), strings.ReplaceAll(lower, "_", "."), strings.ReplaceAll(n, "_", "ü"))
	}
	corpus = append(corpus, "OPENAI_API_KEY", "9JAVA_OPTIONS", "-java-options", "ſhell", "KELVIN_K")
	for _, s := range corpus {
		want := IsReservedEnvName(DeriveEnvName(s))
		if got := re.MatchString(s); got != want {
			t.Errorf("pattern matches %q = %v, but its environment name %q reserved = %v", s, got, DeriveEnvName(s), want)
		}
	}
}

// The AgentSecret CRD refuses what the REST door refuses: its CEL rule holds ReservedEnvPattern
// for envName and for name (regenerate with `make manifests` after changing the list, and
// update the marker in api/v1alpha1/agentsecret_types.go).
func TestCRDRuleHoldsReservedEnvPattern(t *testing.T) {
	raw, err := os.ReadFile("../../../config/crd/bases/agentplane.io_agentsecrets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	want := "has(self.envName) ? !self.envName.matches('" + ReservedEnvPattern() + "') : !self.name.matches('" + ReservedEnvPattern() + "')"
	for _, v := range spec.XValidations {
		if v.Rule == want {
			return
		}
	}
	t.Fatalf("the AgentSecret CRD has no rule %q; its rules: %+v", want, spec.XValidations)
}
