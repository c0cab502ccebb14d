package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/internal/devtools/images"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
)

// Revision is an earlier commit of this repository, built from its git history: the upgrade
// tests install it and move to the tree under test.
type Revision struct {
	// Commit is the full commit hash.
	Commit string
	// Src is the commit's tree (its chart is Src/dist/chart).
	Src string
	// Bin is the commit's agentplane binary, built static as make build does.
	Bin string
}

// BuildRevision extracts commit from the repository's history and builds its agentplane
// binary, once per commit: both are kept in the cache directory (beside the images), so a
// rerun builds nothing. A clone without the commit (a shallow one) fails the test: the upgrade
// it proves needs the history.
func BuildRevision(t testing.TB, commit string) Revision {
	t.Helper()
	full, err := git("rev-parse", "--verify", commit+"^{commit}")
	if err != nil {
		t.Fatalf("the upgrade test builds commit %s from this clone's history, which lacks it "+
			"(a shallow clone? `git fetch --unshallow`): %v", commit, err)
	}
	dir := filepath.Join(filepath.Dir(images.CacheDir()), "revisions", full)
	rev := Revision{Commit: full, Src: filepath.Join(dir, "src"), Bin: filepath.Join(dir, "agentplane")}
	if _, err := os.Stat(rev.Bin); err == nil {
		return rev
	}
	if err := buildRevision(rev); err != nil {
		t.Fatalf("build commit %s: %v", full, err)
	}
	return rev
}

// buildRevision writes rev.Src (git archive) and then rev.Bin; the binary is renamed into
// place last, so a half-done build is redone.
func buildRevision(rev Revision) error {
	if err := os.RemoveAll(rev.Src); err != nil {
		return err
	}
	if err := os.MkdirAll(rev.Src, 0o755); err != nil {
		return err
	}
	archive := exec.Command("git", "-C", testenv.RepoRoot(), "archive", "--format=tar", rev.Commit)
	untar := exec.Command("tar", "-x", "-C", rev.Src)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return err
	}
	untar.Stdin = pipe
	var stderr bytes.Buffer
	archive.Stderr, untar.Stderr = &stderr, &stderr
	if err := untar.Start(); err != nil {
		return err
	}
	if err := archive.Run(); err != nil {
		_ = untar.Wait()
		return fmt.Errorf("git archive: %v: %s", err, stderr.String())
	}
	if err := untar.Wait(); err != nil {
		return fmt.Errorf("tar: %v: %s", err, stderr.String())
	}
	tmp := rev.Bin + ".tmp"
	// Built as BuildAgentplane builds (goBuildStatic: the same flags reuse the packages the
	// tests compiled for this revision, the dependencies both go.mods pin alike, instead of
	// compiling them all again), with the shipped image's tags (a revision before them builds
	// the same without).
	if err := goBuildStatic(rev.Src, tmp, "./cmd/agentplane", "-tags", ShippedTags); err != nil {
		return err
	}
	return os.Rename(tmp, rev.Bin)
}

func git(args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-C", testenv.RepoRoot()}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}
