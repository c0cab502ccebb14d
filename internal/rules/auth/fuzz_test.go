package auth

import (
	"strings"
	"testing"
)

// FuzzParseBearer: any header either yields a non-empty printable token without spaces or an
// error — never a panic.
func FuzzParseBearer(f *testing.F) {
	for _, seed := range []string{
		"Bearer abc.def.ghi", "bearer gw_xyz", "Basic Zm9vOmJhcg==", "", "Bearer ", "Bearer  two  spaces",
		"Bearer tok\x00en", "BEARER " + strings.Repeat("a", 9000), "Bearer\tx", "Bearer é",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, header string) {
		tok, err := ParseBearer(header)
		if err != nil {
			if tok != "" {
				t.Fatalf("error with a token: %q", tok)
			}
			return
		}
		if tok == "" || len(tok) > maxTokenLen {
			t.Fatalf("bad token length %d from %q", len(tok), header)
		}
		for i := 0; i < len(tok); i++ {
			if tok[i] <= ' ' || tok[i] > '~' {
				t.Fatalf("token %q has byte %#x", tok, tok[i])
			}
		}
	})
}

func TestParseBearer(t *testing.T) {
	cases := map[string]string{
		"Bearer abc":     "abc",
		"bearer abc":     "abc",
		"  Bearer  abc ": "abc",
		"Basic abc":      "",
		"Bearer":         "",
		"Bearer a b":     "",
		"":               "",
	}
	for in, want := range cases {
		got, err := ParseBearer(in)
		if got != want || (want == "") != (err != nil) {
			t.Errorf("ParseBearer(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestHasScope(t *testing.T) {
	if !HasScope([]string{ScopeFilesWrite}, ScopeFilesRead) {
		t.Error("a write scope implies its read scope")
	}
	if HasScope([]string{ScopeFilesRead}, ScopeFilesWrite) {
		t.Error("a read scope must not grant write")
	}
	if !HasScope([]string{ScopeAll}, ScopeAgentsExec) {
		t.Error("* grants everything")
	}
	if HasScope(nil, ScopeAgentsRead) {
		t.Error("no scopes grant nothing")
	}
}
