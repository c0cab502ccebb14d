package syscallpolicy_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/agentplane/agentplane/internal/adapters/runtime/syscallpolicy"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
)

var update = flag.Bool("update", false, "rewrite config/seccomp/agentplane-agent.json from the list")

// ShippedProfile is the profile platform teams install on their nodes (docs/SECURITY.md).
const shippedProfile = "config/seccomp/agentplane-agent.json"

// TestShippedProfileIsTheList: the profile in the repository is the one Profile builds from
// the list (go test ./internal/adapters/runtime/syscallpolicy -update rewrites it).
func TestShippedProfileIsTheList(t *testing.T) {
	want, err := syscallpolicy.Profile()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(testenv.RepoRoot(), shippedProfile)
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("%s is not the list's profile (%v): go test ./internal/adapters/runtime/syscallpolicy -update", shippedProfile, err)
	}
}

// TestProfileRefusesTheList: the profile as a container runtime reads it for a container
// without capabilities (every gateway drops ALL) refuses each call of the list with its errno,
// new user namespaces through clone, and what it does not name; ordinary calls run.
func TestProfileRefusesTheList(t *testing.T) {
	body, err := syscallpolicy.Profile()
	if err != nil {
		t.Fatal(err)
	}
	// No conditions: what each rule means does not depend on how a runtime's loader reads them.
	var raw seccomp.Seccomp
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatal(err)
	}
	for _, s := range raw.Syscalls {
		if s.Includes != nil || s.Excludes != nil {
			t.Errorf("rule %v has conditions: includes %+v, excludes %+v", s.Names, s.Includes, s.Excludes)
		}
	}
	spec := &specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{}}}
	p, err := seccomp.LoadProfile(string(body), spec)
	if err != nil {
		t.Fatal(err)
	}
	if p.DefaultAction != specs.ActErrno {
		t.Errorf("default action %s, want an error for what the profile does not name", p.DefaultAction)
	}
	actions := map[string][]specs.LinuxSyscall{}
	for _, s := range p.Syscalls {
		for _, n := range s.Names {
			actions[n] = append(actions[n], s)
		}
	}
	for _, r := range syscallpolicy.Refused {
		for _, s := range actions[r.Name] {
			if s.Action == specs.ActAllow && (r.Flags == 0 || !refusesFlags(s, uint64(r.Flags))) {
				t.Errorf("%s is allowed: %+v", r.Name, s)
			}
			if s.Action == specs.ActErrno && (s.ErrnoRet == nil || *s.ErrnoRet != uint(r.Errno)) {
				t.Errorf("%s answers %v, want errno %d", r.Name, s.ErrnoRet, r.Errno)
			}
		}
		if r.Flags == 0 && len(actions[r.Name]) != 1 {
			t.Errorf("%s has rules %+v, want one that refuses it", r.Name, actions[r.Name])
		}
	}
	for _, n := range []string{"read", "write", "epoll_wait", "clone", "execve"} {
		if !slices.ContainsFunc(actions[n], func(s specs.LinuxSyscall) bool { return s.Action == specs.ActAllow }) {
			t.Errorf("%s is not allowed: a gateway needs it", n)
		}
	}
}

// refusesFlags reports whether an allow rule for clone admits it only without flags.
func refusesFlags(s specs.LinuxSyscall, flags uint64) bool {
	return slices.ContainsFunc(s.Args, func(a specs.LinuxSeccompArg) bool {
		return a.Op == specs.OpMaskedEqual && a.Value&flags != 0 && a.ValueTwo == 0
	})
}
