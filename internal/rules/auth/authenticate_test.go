package auth

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// fakeLookup holds the objects authentication reads, and counts the reads.
type fakeLookup struct {
	keys       map[string]*agentsv1.ApiKey
	agents     map[string]*agentsv1.Agent
	workspaces map[string]*agentsv1.Workspace
	// gateway maps agent names to their gateway tokens.
	gateway map[string]string
	// fail, when set, is every read's error.
	fail  error
	reads int
}

func (f *fakeLookup) ApiKey(_ context.Context, _, name string) (*agentsv1.ApiKey, error) {
	f.reads++
	return f.keys[name], f.fail
}

func (f *fakeLookup) Agent(_ context.Context, _, name string) (*agentsv1.Agent, error) {
	f.reads++
	return f.agents[name], f.fail
}

func (f *fakeLookup) GatewayToken(_ context.Context, a *agentsv1.Agent) (string, error) {
	f.reads++
	return f.gateway[a.Name], f.fail
}

func (f *fakeLookup) GatewayTokenOwner(_ context.Context, tok string) (string, string, error) {
	f.reads++
	for agent, t := range f.gateway {
		if t == tok && tok != "" {
			return "ws", agent, f.fail
		}
	}
	return "", "", f.fail
}

func (f *fakeLookup) Workspace(_ context.Context, name string) (*agentsv1.Workspace, error) {
	f.reads++
	return f.workspaces[name], f.fail
}

var testNow = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

func testSigner(t *testing.T, key string) *Signer {
	t.Helper()
	s, err := NewSigner(bytes.Repeat([]byte(key), 32))
	if err != nil {
		t.Fatal(err)
	}
	return s.WithClock(func() time.Time { return testNow })
}

// newLookup is a workspace ws where ann is an admin, a key of ann (key-ann, role viewer), a
// key of bob (key-bob, not a member: role member), and agent a1 (gateway token gw_one).
func newLookup() *fakeLookup {
	key := func(name, user string, role agentsv1.Role) *agentsv1.ApiKey {
		return &agentsv1.ApiKey{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: name},
			Spec: agentsv1.ApiKeySpec{UserID: user, Role: role, Scopes: []string{ScopeAgentsRead}}}
	}
	return &fakeLookup{
		keys:   map[string]*agentsv1.ApiKey{"key-ann": key("key-ann", "ann", agentsv1.RoleViewer), "key-bob": key("key-bob", "bob", agentsv1.RoleMember)},
		agents: map[string]*agentsv1.Agent{"a1": {ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "a1", UID: "uid-a1"}}},
		workspaces: map[string]*agentsv1.Workspace{"ws": {ObjectMeta: metav1.ObjectMeta{Name: "ws"},
			Spec: agentsv1.WorkspaceSpec{Members: []agentsv1.WorkspaceMember{{UserID: "ann", Role: agentsv1.RoleAdmin}}}}},
		gateway: map[string]string{"a1": "gw_one"},
	}
}

func userToken(t *testing.T, s *Signer, key, user string) string {
	t.Helper()
	c := Claims{Workspace: "ws"}
	c.ID, c.Subject = key, user
	tok, err := s.Mint(c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func platformToken(t *testing.T, s *Signer, uid, gateway string) string {
	t.Helper()
	tok, _, err := s.MintPlatform(PlatformToken{Workspace: "ws", Agent: "a1", AgentUID: uid, GatewayToken: gateway})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestAuthenticate: each kind of credential resolves to its identity, or is refused with the
// reason the door words.
func TestAuthenticate(t *testing.T) {
	s := testSigner(t, "k")
	for _, tc := range []struct {
		name     string
		tok      string
		needUser bool
		change   func(*fakeLookup)
		want     error
		check    func(*testing.T, *Identity)
	}{
		{name: "a member's key: the workspace's role", tok: userToken(t, s, "key-ann", "ann"), check: func(t *testing.T, id *Identity) {
			if id.Role != agentsv1.RoleAdmin || id.UserID != "ann" || id.KeyID != "key-ann" || id.BoundAgent != "" || id.Workspace.Name != "ws" {
				t.Fatalf("%+v", id)
			}
		}},
		{name: "a key of a user the workspace does not list: the key's role", tok: userToken(t, s, "key-bob", "bob"), check: func(t *testing.T, id *Identity) {
			if id.Role != agentsv1.RoleMember {
				t.Fatalf("role %s, want the key's", id.Role)
			}
		}},
		{name: "a key that does not exist", tok: userToken(t, s, "key-gone", "ann"), want: ErrTokenInvalid},
		{name: "another user's key", tok: userToken(t, s, "key-bob", "ann"), want: ErrTokenInvalid},
		{name: "revoked", tok: userToken(t, s, "key-ann", "ann"), change: func(f *fakeLookup) { f.keys["key-ann"].Spec.Revoked = true }, want: ErrTokenRevoked},
		{name: "the key expired", tok: userToken(t, s, "key-ann", "ann"), change: func(f *fakeLookup) {
			f.keys["key-ann"].Spec.ExpiresAt = &metav1.Time{Time: testNow}
		}, want: ErrTokenExpired},
		{name: "the key expires later", tok: userToken(t, s, "key-ann", "ann"), change: func(f *fakeLookup) {
			f.keys["key-ann"].Spec.ExpiresAt = &metav1.Time{Time: testNow.Add(time.Second)}
		}},
		{name: "no user where one is needed", tok: userToken(t, s, "key-ann", ""), needUser: true, want: ErrMissingUser},
		{name: "the workspace is gone", tok: userToken(t, s, "key-ann", "ann"), change: func(f *fakeLookup) { delete(f.workspaces, "ws") }, want: ErrTokenInvalid},
		{name: "the workspace is being deleted", tok: userToken(t, s, "key-ann", "ann"), change: func(f *fakeLookup) {
			f.workspaces["ws"].DeletionTimestamp = &metav1.Time{Time: testNow}
		}, want: ErrTokenInvalid},
		{name: "a platform token: bound, reads only", tok: platformToken(t, s, "uid-a1", "gw_one"), needUser: true, check: func(t *testing.T, id *Identity) {
			if id.BoundAgent != "a1" || id.Role != agentsv1.RoleMember || len(id.Scopes) != 1 || id.Scopes[0] != ScopeAgentsRead {
				t.Fatalf("%+v", id)
			}
		}},
		{name: "a platform token after the gateway token's rotation", tok: platformToken(t, s, "uid-a1", "gw_old"), want: ErrTokenRevoked},
		{name: "a platform token of a deleted agent", tok: platformToken(t, s, "uid-a1", "gw_one"), change: func(f *fakeLookup) { delete(f.agents, "a1") }, want: ErrTokenRevoked},
		{name: "a platform token of the agent's predecessor", tok: platformToken(t, s, "uid-before", "gw_one"), want: ErrTokenRevoked},
		{name: "a platform token of an agent without a gateway token", tok: platformToken(t, s, "uid-a1", "gw_one"), change: func(f *fakeLookup) { delete(f.gateway, "a1") }, want: ErrTokenRevoked},
		{name: "a gateway token: bound, the gateway's scopes", tok: "gw_one", check: func(t *testing.T, id *Identity) {
			if id.BoundAgent != "a1" || id.UserID != "" || id.Role != agentsv1.RoleMember || len(id.Scopes) != len(GatewayScopes) {
				t.Fatalf("%+v", id)
			}
		}},
		{name: "an unknown gateway token", tok: "gw_unknown", want: ErrTokenInvalid},
		{name: "a read that fails fails as it is", tok: userToken(t, s, "key-ann", "ann"), change: func(f *fakeLookup) { f.fail = errTestRead }, want: errTestRead},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLookup()
			if tc.change != nil {
				tc.change(l)
			}
			id, err := Authenticate(context.Background(), l, s, testNow, tc.tok, tc.needUser)
			if tc.want != nil || err != nil {
				if !errors.Is(err, tc.want) {
					t.Fatalf("got %+v, %v; want %v", id, err, tc.want)
				}
				return
			}
			if tc.check != nil {
				tc.check(t, id)
			}
		})
	}
}

var errTestRead = errors.New("kube-apiserver unreachable")

// TestBogusTokensReadNothing: bogus bearer tokens of every JWT shape (malformed, signed by
// another key, expired, a platform token of another key) are refused before anything is
// read: a forged token costs kube-apiserver nothing.
func TestBogusTokensReadNothing(t *testing.T) {
	s, other := testSigner(t, "k"), testSigner(t, "o")
	expired := testSigner(t, "k").WithClock(func() time.Time { return testNow.Add(-2 * PlatformTokenTTL) })
	for name, tok := range map[string]string{
		"not a JWT":                        "not.a.jwt",
		"another key's token":              userToken(t, other, "key-ann", "ann"),
		"another key's platform token":     platformToken(t, other, "uid-a1", "gw_one"),
		"an expired platform token":        platformToken(t, expired, "uid-a1", "gw_one"),
		"a token without its workspace":    mustMint(t, s, Claims{}),
		"a token of the right key, no jti": "x" + userToken(t, s, "key-ann", "ann")[1:],
	} {
		l := newLookup()
		if _, err := Authenticate(context.Background(), l, s, testNow, tok, true); err == nil || l.reads != 0 {
			t.Errorf("%s: %v after %d reads, want refused after none", name, err, l.reads)
		}
	}
}

func mustMint(t *testing.T, s *Signer, c Claims) string {
	t.Helper()
	tok, err := s.Mint(c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestCheckBound: a credential bound to one agent opens that agent's routes that take it;
// another agent reads as missing; routes that do not take it need a user.
func TestCheckBound(t *testing.T) {
	for _, tc := range []struct {
		bound, path string
		takes       bool
		want        error
	}{
		{"", "a2", false, nil},
		{"a1", "a1", true, nil},
		{"a1", "", true, nil},
		{"a1", "a2", true, ErrOtherAgent},
		{"a1", "a2", false, ErrOtherAgent},
		{"a1", "a1", false, ErrNeedsUser},
		{"a1", "", false, ErrNeedsUser},
	} {
		if err := CheckBound(tc.bound, tc.path, tc.takes); !errors.Is(err, tc.want) {
			t.Errorf("bound %q, path %q, takes %v: %v, want %v", tc.bound, tc.path, tc.takes, err, tc.want)
		}
	}
}
