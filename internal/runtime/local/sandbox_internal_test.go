package local

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestSandboxAsAnOrdinaryUser: `make run` without root builds the same sandbox in an
// unprivileged user namespace (no setpriv, no per-agent uid: the user's own). Run here as
// nobody when the test runs as root.
func TestSandboxAsAnOrdinaryUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run bwrap as another user (as an ordinary user, TestSandbox* cover this path)")
	}
	bw, err := exec.LookPath("bwrap")
	if err != nil {
		t.Fatalf("bubblewrap is not installed: %v", err)
	}
	const nobody = 65534
	base := t.TempDir()
	home := filepath.Join(base, "home")
	secret := filepath.Join(base, "platform-secret")
	for _, err := range []error{os.Mkdir(home, 0o700), os.Chown(home, nobody, nobody), os.Chmod(base, 0o755), os.Chmod(filepath.Dir(base), 0o755), os.WriteFile(secret, []byte("x"), 0o644)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	s := &sandbox{bwrap: bw, system: systemBinds()}
	bin, args := s.wrap(sandboxSpec{home: home, dir: home, binary: "/bin/sh", dieWithParent: true,
		args: []string{"-c", "id -u; touch mine /tmp/mine && echo writable; ls /proc | grep -c '^[0-9]'; cat " + secret + " 2>/dev/null || echo hidden; unshare -U true 2>/dev/null || echo no-nested-userns"}})
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bwrap as an ordinary user: %v: %s", err, out)
	}
	got := strings.Fields(string(out))
	if len(got) != 5 || got[0] != "65534" || got[1] != "writable" || got[3] != "hidden" || got[4] != "no-nested-userns" || len(got[2]) != 1 {
		t.Fatalf("inside an unprivileged sandbox: %q, want uid 65534, writable home and /tmp, a few processes, the secret hidden, no nested user namespace", out)
	}
}
