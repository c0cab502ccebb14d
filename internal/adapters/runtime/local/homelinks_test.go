package local_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// The tests here are what code inside agent A can do to its own home: replace its engine dir
// (~/.openclaw) with a symlink to agent B's, or to any dir of this host, and then have the
// platform act on A (rotate A's gateway token, snapshot A's workspace, reset it, run a
// command). The manager resolves every path of a home inside the home: it refuses the link
// and B's files and the host's dir are left as they were.

// plantedLink makes an attacker agent and a victim agent (stopped, their configs written),
// gives the victim a workspace file, and replaces the attacker's ~/.openclaw with a symlink
// to target(victim's home); it returns the victim's home.
func plantedLink(t *testing.T, f *fixture, target func(victimHome string) string) (victimHome string) {
	t.Helper()
	victimWS := stoppedAgent(t, f, "victim", nil)
	victimHome = filepath.Dir(filepath.Dir(victimWS))
	if err := os.MkdirAll(victimWS, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(victimWS, "victim-notes.txt"), []byte("the victim's own"), 0o600); err != nil {
		t.Fatal(err)
	}
	attackerWS := stoppedAgent(t, f, "attacker", nil)
	attackerState := filepath.Dir(attackerWS)
	if err := os.RemoveAll(attackerState); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target(victimHome), attackerState); err != nil {
		t.Fatal(err)
	}
	return victimHome
}

// toVictimState points the link at the victim's engine dir.
func toVictimState(victimHome string) string { return filepath.Join(victimHome, ".openclaw") }

func TestTokenRotationDoesNotFollowALinkOutOfTheHome(t *testing.T) {
	f := newFixture(t)
	victimHome := plantedLink(t, f, toVictimState)
	cfg := filepath.Join(victimHome, ".openclaw", "openclaw.json")
	before, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	d := desired("tok-attacker-rotated-0000")
	d.Stopped = true
	_, err = f.rt.Ensure(context.Background(), newAgent("attacker"), d)
	if !errors.Is(err, runtime.ErrInvalidPath) {
		t.Errorf("Ensure with a new token through a planted link: %v, want ErrInvalidPath", err)
	}
	after, _ := os.ReadFile(cfg)
	if !bytes.Equal(before, after) || strings.Contains(string(after), "tok-attacker-rotated") {
		t.Fatalf("the victim's engine config changed through the attacker's link:\n%s", after)
	}
}

func TestSnapshotDoesNotFollowALinkOutOfTheHome(t *testing.T) {
	f := newFixture(t)
	plantedLink(t, f, toVictimState)
	var out bytes.Buffer
	err := f.rt.ArchiveWorkspace(context.Background(), newAgent("attacker"), &out)
	if !errors.Is(err, runtime.ErrInvalidPath) {
		t.Errorf("archive through a planted link: %v, want ErrInvalidPath", err)
	}
	if strings.Contains(out.String(), "victim-notes.txt") || strings.Contains(out.String(), "the victim's own") {
		t.Fatal("the attacker's snapshot holds the victim's workspace")
	}
}

func TestResetDoesNotFollowALinkOutOfTheHome(t *testing.T) {
	f := newFixture(t)
	victimHome := plantedLink(t, f, toVictimState)
	var tarball bytes.Buffer
	tw := tar.NewWriter(&tarball)
	_ = tw.WriteHeader(&tar.Header{Name: "planted.txt", Mode: 0o644, Size: 4, Typeflag: tar.TypeReg})
	_, _ = tw.Write([]byte("evil"))
	_ = tw.Close()
	err := f.rt.RestoreWorkspace(context.Background(), newAgent("attacker"), &tarball)
	if !errors.Is(err, runtime.ErrInvalidPath) {
		t.Errorf("restore through a planted link: %v, want ErrInvalidPath", err)
	}
	ws := filepath.Join(victimHome, ".openclaw", "workspace")
	if _, err := os.Stat(filepath.Join(ws, "planted.txt")); err == nil {
		t.Fatal("the attacker's reset wrote into the victim's workspace")
	}
	if b, err := os.ReadFile(filepath.Join(ws, "victim-notes.txt")); err != nil || string(b) != "the victim's own" {
		t.Fatalf("the victim's workspace after the attacker's reset: %q, %v", b, err)
	}
}

func TestCommandsDoNotMakeDirsThroughALinkOutOfTheHome(t *testing.T) {
	f := newFixture(t)
	host := t.TempDir() // any dir of this host
	plantedLink(t, f, func(string) string { return host })
	_, err := f.rt.Exec(context.Background(), newAgent("attacker"), runtime.ExecRequest{Argv: []string{"true"}})
	if !errors.Is(err, runtime.ErrInvalidPath) {
		t.Errorf("exec with a planted link: %v, want ErrInvalidPath", err)
	}
	if entries, _ := os.ReadDir(host); len(entries) > 0 {
		t.Fatalf("the manager made %v in a host dir through the attacker's link", entries[0].Name())
	}
}

func TestFileWritesDoNotFollowALinkOutOfTheHome(t *testing.T) {
	f := newFixture(t)
	victimHome := plantedLink(t, f, toVictimState)
	err := f.rt.WriteFile(context.Background(), newAgent("attacker"), ".openclaw/openclaw.json", []byte(`{"planted":true}`))
	if !errors.Is(err, runtime.ErrInvalidPath) {
		t.Errorf("write through a planted link: %v, want ErrInvalidPath", err)
	}
	if b, _ := os.ReadFile(filepath.Join(victimHome, ".openclaw", "openclaw.json")); strings.Contains(string(b), "planted") {
		t.Fatal("the attacker's write landed in the victim's engine config")
	}
}
