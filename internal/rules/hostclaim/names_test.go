package hostclaim_test

import (
	"strings"
	"testing"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/rules/hostclaim"
)

func TestHost(t *testing.T) {
	if got := hostclaim.Host(&agentsv1.DomainSpec{Subdomain: "docs"}, "Apps.Example.com."); got != "docs.apps.example.com" {
		t.Fatalf("subdomain host %q", got)
	}
	if got := hostclaim.Host(&agentsv1.DomainSpec{CustomDomain: "docs.example.com."}, "apps.example.com"); got != "docs.example.com" {
		t.Fatalf("custom host %q", got)
	}
}

func TestNameRules(t *testing.T) {
	for name, want := range map[string]bool{"my-AgentPlane": true, "agentplane.io": true, "agent-plane": false, "docs": false} {
		if got := hostclaim.Banned(name, "agentplane"); got != want {
			t.Errorf("Banned(%q) = %v", name, got)
		}
	}
	for label, want := range map[string]bool{"a": true, "a-b1": true, "-a": false, "a-": false, "a.b": false, "A": false, "a_b": false, strings.Repeat("a", 63): true, strings.Repeat("a", 64): false} {
		if got := hostclaim.ValidLabel(label); got != want {
			t.Errorf("ValidLabel(%q) = %v", label, got)
		}
	}
	for host, want := range map[string]bool{"docs.example.com": true, "a.io": true, "localhost": false, "x.y": false, "a.123": false, "ex ample.com": false, "a..b.com": false, strings.Repeat("a.", 127) + "com": false} {
		if got := hostclaim.ValidHostname(host); got != want {
			t.Errorf("ValidHostname(%q) = %v", host, got)
		}
	}
	for host, want := range map[string]bool{"x.agents.localhost": true, "agents.localhost": true, "xagents.localhost": false, "example.com": false} {
		if got := hostclaim.UnderDomain(host, "agents.localhost"); got != want {
			t.Errorf("UnderDomain(%q) = %v", host, got)
		}
	}
}
