package auth

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestMintPlatform: a platform token names its agent and UID, carries a binding to the
// gateway token (never the token itself), reads only, and expires after PlatformTokenTTL.
func TestMintPlatform(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s, _ := NewSigner(bytes.Repeat([]byte("k"), 32))
	s = s.WithClock(func() time.Time { return now })
	tok, exp, err := s.MintPlatform(PlatformToken{Workspace: "ws", Agent: "a1", AgentUID: "u1", GatewayToken: "gw_secret"})
	if err != nil {
		t.Fatal(err)
	}
	if !exp.Equal(now.Add(time.Hour)) {
		t.Fatalf("expires %s, want an hour after minting", exp)
	}
	c, err := s.Parse(tok)
	if err != nil {
		t.Fatal(err)
	}
	if !c.IsPlatform() || c.Agent != "a1" || c.AgentUID != "u1" || c.Workspace != "ws" || c.Subject != "agent:a1" {
		t.Fatalf("claims %+v", c)
	}
	if c.GatewayBinding != GatewayBinding("gw_secret") || c.GatewayBinding == GatewayBinding("gw_other") {
		t.Fatal("the binding does not tell gateway tokens apart")
	}
	if strings.Contains(tok, "gw_secret") || c.GatewayBinding == GatewayTokenHash("gw_secret")[:32] {
		t.Fatal("the token reveals the gateway token or its index hash")
	}
	if len(c.Scopes) != 1 || c.Scopes[0] != ScopeAgentsRead {
		t.Fatalf("scopes %v, want agents:read only", c.Scopes)
	}
	later := s.WithClock(func() time.Time { return now.Add(time.Hour + time.Minute) })
	if _, err := later.Parse(tok); !errors.Is(err, ErrTokenExpired) {
		t.Fatalf("after an hour: %v, want expired", err)
	}
}
