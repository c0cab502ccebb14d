package local_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

func TestReadWriteFile(t *testing.T) {
	f := newFixture(t)
	ws := stoppedAgent(t, f, "files", nil)
	home := filepath.Dir(filepath.Dir(ws))
	a := newAgent("files")
	ctx := context.Background()

	if err := f.rt.WriteFile(ctx, a, ".openclaw/workspace/notes/today.md", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	got, err := f.rt.ReadFile(ctx, a, ".openclaw/workspace/notes/today.md")
	if err != nil || string(got) != "hello" {
		t.Fatalf("read back %q %v", got, err)
	}
	if info, _ := os.Stat(filepath.Join(ws, "notes/today.md")); info.Mode().Perm() != 0o644 {
		t.Errorf("new file mode %v", info.Mode())
	}
	// An existing file keeps its mode.
	if err := os.Chmod(filepath.Join(ws, "notes/today.md"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := f.rt.WriteFile(ctx, a, ".openclaw/workspace/notes/today.md", []byte("again")); err != nil {
		t.Fatal(err)
	}
	if info, _ := os.Stat(filepath.Join(ws, "notes/today.md")); info.Mode().Perm() != 0o640 {
		t.Errorf("rewritten file mode %v", info.Mode())
	}
	entries, _ := os.ReadDir(filepath.Join(ws, "notes"))
	if len(entries) != 1 {
		t.Errorf("temp files left: %v", entries)
	}

	if err := f.rt.WriteFile(ctx, a, "top.txt", []byte("top")); err != nil {
		t.Fatal(err)
	}
	if got, err := f.rt.ReadFile(ctx, a, "./top.txt"); err != nil || string(got) != "top" {
		t.Fatalf("top.txt: %q %v", got, err)
	}
	for _, p := range []string{"missing.txt", "top.txt/below", "no/such/dir/file"} {
		if _, err := f.rt.ReadFile(ctx, a, p); !errors.Is(err, runtime.ErrNotFound) {
			t.Errorf("ReadFile(%q) = %v, want ErrNotFound", p, err)
		}
	}
	if _, err := f.rt.ReadFile(ctx, a, "missing.txt"); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("missing: %v", err)
	}
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte("outside"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(home, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(outside), filepath.Join(home, "escape-dir")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"../state.json", "/etc/passwd", "escape", "escape-dir/secret", "a/../../x", "", ".", ".openclaw"} {
		if _, err := f.rt.ReadFile(ctx, a, p); !errors.Is(err, runtime.ErrInvalidPath) {
			t.Errorf("ReadFile(%q) = %v, want ErrInvalidPath", p, err)
		}
	}
	for _, p := range []string{"../state.json", "/tmp/x", "escape-dir/new", "a/../../x", ""} {
		if err := f.rt.WriteFile(ctx, a, p, []byte("x")); !errors.Is(err, runtime.ErrInvalidPath) {
			t.Errorf("WriteFile(%q) = %v, want ErrInvalidPath", p, err)
		}
	}
	if b, _ := os.ReadFile(outside); string(b) != "outside" {
		t.Fatal("a write went through a symlink out of the home")
	}
	if _, err := f.rt.ReadFile(ctx, newAgent("ghost"), "x"); !errors.Is(err, runtime.ErrNotRunning) {
		t.Errorf("unknown agent: %v", err)
	}
}

func TestWritingTheConfigKeepsTheToken(t *testing.T) {
	f := newFixture(t)
	a := newAgent("cfg")
	d := desired("tok-config-kept-0000000")
	o := waitPhase(t, f, a, d, runtime.PhaseRunning)
	ctx := context.Background()

	// A config written without the token (as a client would after redaction).
	cfg := []byte(`{"gateway":{"mode":"local","auth":{"mode":"token"}}}`)
	if err := f.rt.WriteFile(ctx, a, ".openclaw/openclaw.json", cfg); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(f.rt.AgentDir(keyOf(a)), "home/.openclaw/openclaw.json")
	if info, _ := os.Stat(path); info.Mode().Perm() != 0o600 {
		t.Fatalf("config mode %v", info.Mode())
	}
	// The next Ensure puts the token back; the gateway keeps serving with it.
	ensure(t, f, a, d)
	b, _ := os.ReadFile(path)
	if !strings.Contains(string(b), d.GatewayToken) {
		t.Fatalf("token not restored: %s", b)
	}
	waitStatus(t, o.Endpoint, d.GatewayToken, 404)
}

func TestArchiveAndRestoreWorkspace(t *testing.T) {
	f := newFixture(t)
	a := newAgent("snap")
	d := desired("tok-snap-0000000000000")
	waitPhase(t, f, a, d, runtime.PhaseRunning)
	pid := gatewayPID(t, f, a)
	ctx := context.Background()
	ws := filepath.Join(f.rt.AgentDir(keyOf(a)), "home/.openclaw/workspace")
	if err := os.WriteFile(filepath.Join(ws, "keep.md"), []byte("v1"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("keep.md", filepath.Join(ws, "alias")); err != nil {
		t.Fatal(err)
	}
	var snap bytes.Buffer
	if err := f.rt.ArchiveWorkspace(ctx, a, &snap); err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	if err := f.rt.ArchiveWorkspace(ctx, a, &again); err != nil || !bytes.Equal(snap.Bytes(), again.Bytes()) {
		t.Fatalf("archive not deterministic: %v", err)
	}

	if err := os.WriteFile(filepath.Join(ws, "keep.md"), []byte("v2"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "new.md"), []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := f.rt.RestoreWorkspace(ctx, a, bytes.NewReader(snap.Bytes())); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "alias")); string(b) != "v1" {
		t.Fatalf("restored content %q", b)
	}
	if _, err := os.Stat(filepath.Join(ws, "new.md")); !os.IsNotExist(err) {
		t.Fatalf("new.md survived the restore: %v", err)
	}
	// The gateway was restarted to see the restored files, and runs again.
	waitGone(t, pid)
	waitPhase(t, f, a, d, runtime.PhaseRunning)
	if p := gatewayPID(t, f, a); p == pid {
		t.Fatal("gateway not restarted")
	}

	// A bad stream is refused and changes nothing.
	if err := f.rt.RestoreWorkspace(ctx, a, strings.NewReader("not a tar stream, clearly not one")); err == nil {
		t.Fatal("garbage restored")
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "keep.md")); string(b) != "v1" {
		t.Fatalf("content after a failed restore %q", b)
	}
}
