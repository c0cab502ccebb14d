package local

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentplane/agentplane/internal/devtools/testenv"
)

// TestSandboxAsAnOrdinaryUser: `make run` without root builds the same sandbox in an
// unprivileged user namespace (no setpriv, no per-agent uid: the user's own). Run here as
// nobody when the test runs as root.
func TestSandboxAsAnOrdinaryUser(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Skip(t, "needs root to run bwrap as another user (as an ordinary user, TestSandbox* cover this path)")
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
	files, err := sandboxFiles()
	if err != nil {
		t.Fatal(err)
	}
	defer closeFiles(files)
	cmd.ExtraFiles = files
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bwrap as an ordinary user: %v: %s", err, out)
	}
	got := strings.Fields(string(out))
	if len(got) != 5 || got[0] != "65534" || got[1] != "writable" || got[3] != "hidden" || got[4] != "no-nested-userns" || len(got[2]) != 1 {
		t.Fatalf("inside an unprivileged sandbox: %q, want uid 65534, writable home and /tmp, a few processes, the secret hidden, no nested user namespace", out)
	}
}

// TestOwnTreeStaysInTheHome: giving a home to its sandbox's uid (root chowns what the agent
// may have planted) never reaches out of the home through a symlink in it.
func TestOwnTreeStaysInTheHome(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Skip(t, "only a manager running as root gives homes to per-agent uids")
	}
	base := t.TempDir()
	home, outside := filepath.Join(base, "home"), filepath.Join(base, "outside")
	for _, d := range []string{filepath.Join(home, "sub"), outside} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{filepath.Join(home, "sub", "mine.txt"), filepath.Join(outside, "platform.key")} {
		if err := os.WriteFile(f, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{"dir-link": outside, "file-link": filepath.Join(outside, "platform.key"), "up": ".."} {
		if err := os.Symlink(target, filepath.Join(home, link)); err != nil {
			t.Fatal(err)
		}
	}
	const uid = 1<<30 + 7
	_ = ownTree(home, ".", uid)
	_ = ownTree(home, "dir-link/platform.key", uid)
	_ = ownTree(home, "up/outside", uid)
	owner := func(p string) uint32 {
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		return st.Uid
	}
	if got := owner(filepath.Join(home, "sub", "mine.txt")); got != uid {
		t.Errorf("a file of the home belongs to %d, want %d", got, uid)
	}
	for _, p := range []string{outside, filepath.Join(outside, "platform.key"), base} {
		if got := owner(p); got != 0 {
			t.Errorf("%s, outside the home, was given to %d", p, got)
		}
	}
}

// TestSealCompileCache: what a warm-up left is sealed as plain files and dirs readable by all
// and writable by the manager alone; a symlink (to a platform file, say) is removed, never
// followed; Node's uid-named dirs are bound under the name of each sandbox's uid.
func TestSealCompileCache(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "platform-file")
	tag := filepath.Join("openclaw", "2026.9.6", "1-2", "v24.21.0-x64-964aae3f-4242")
	for _, err := range []error{
		os.WriteFile(outside, []byte("secret"), 0o600),
		os.MkdirAll(filepath.Join(dir, tag), 0o700),
		os.WriteFile(filepath.Join(dir, tag, "0a1b2c3d"), []byte("code cache"), 0o600),
		os.Symlink(outside, filepath.Join(dir, tag, "planted")),
		os.Mkdir(filepath.Join(dir, "v24.21.0-x64-964aae3f-99"), 0o700), // another uid's: not Node's of the warm-up
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	c, err := sealCompileCache(dir, 4242)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Tags) != 1 || c.Tags[0] != tag {
		t.Fatalf("tags %q, want [%s]", c.Tags, tag)
	}
	if _, err := os.Lstat(filepath.Join(dir, tag, "planted")); !os.IsNotExist(err) {
		t.Errorf("the planted symlink is still there (%v)", err)
	}
	for p, want := range map[string]os.FileMode{outside: 0o600, filepath.Join(dir, tag, "0a1b2c3d"): 0o644, filepath.Join(dir, tag): 0o755 | os.ModeDir, dir: 0o755 | os.ModeDir} {
		if info, err := os.Stat(p); err != nil || info.Mode() != want {
			t.Errorf("%s: %v %v, want %v", p, info.Mode(), err, want)
		}
	}
	loaded, err := loadCompileCache(dir)
	if err != nil || len(loaded.Tags) != 1 || loaded.UID != 4242 {
		t.Fatalf("manifest: %+v %v", loaded, err)
	}
	m := loaded.mounts(77)
	if len(m) != 1 || m[0].rw || m[0].src != filepath.Join(dir, tag) || m[0].dst != "/tmp/node-compile-cache/openclaw/2026.9.6/1-2/v24.21.0-x64-964aae3f-77" {
		t.Errorf("mounts for uid 77: %+v", m)
	}
}
