package auth

import (
	"strings"
	"testing"
)

func TestModelCredential(t *testing.T) {
	tok := NewGatewayToken()
	cred := NewModelCredential("ws-a", "agt-1", tok)
	if strings.Contains(cred, tok) {
		t.Fatal("the credential holds the gateway token")
	}
	ns, name, ok := ParseModelCredential(cred)
	if !ok || ns != "ws-a" || name != "agt-1" {
		t.Fatalf("parse: %q %q %v", ns, name, ok)
	}
	if !VerifyModelCredential(cred, "ws-a", "agt-1", tok) {
		t.Fatal("the agent's own credential is refused")
	}
	for _, tc := range []struct {
		what                 string
		cred, ns, name, gwtk string
	}{
		{"rotated token", cred, "ws-a", "agt-1", NewGatewayToken()},
		{"another agent", cred, "ws-a", "agt-2", tok},
		{"another workspace", cred, "ws-b", "agt-1", tok},
		{"no token", cred, "ws-a", "agt-1", ""},
		{"tampered", cred[:len(cred)-2] + "AA", "ws-a", "agt-1", tok},
	} {
		if VerifyModelCredential(tc.cred, tc.ns, tc.name, tc.gwtk) {
			t.Errorf("%s: accepted", tc.what)
		}
	}
	for _, bad := range []string{"", "sk-ant-123", "apx1.", "apx1.!!!.x", "apx1." + "d3MtYQ" + ".x"} {
		if _, _, ok := ParseModelCredential(bad); ok {
			t.Errorf("parsed %q", bad)
		}
	}
}
