package images

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestEnsurePrunesUnusedTarballs: a hit marks its tarball used; building one removes the
// tarballs (and partial ones) nobody asked for in unusedFor, and keeps the rest.
func TestEnsurePrunesUnusedTarballs(t *testing.T) {
	dir := t.TempDir()
	s, err := BinarySpec("agentplane.local/test:dev", "/bin/true", "/true", "65534:65534")
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-unusedFor - time.Hour)
	files := map[string]string{
		"stale":   filepath.Join(dir, "agentplane.local_agentplane_dev-0000000000000000.tar"),
		"partial": filepath.Join(dir, "agentplane.local_agentplane_dev-1111111111111111.tar.tmp"),
		"recent":  filepath.Join(dir, "agentplane.local_agentplane_dev-2222222222222222.tar"),
		"other":   filepath.Join(dir, "notes.txt"),
		"hit":     cacheFile(dir, s),
	}
	for name, f := range files {
		if err := os.WriteFile(f, []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
		if name != "recent" {
			if err := os.Chtimes(f, old, old); err != nil {
				t.Fatal(err)
			}
		}
	}

	// A hit returns the cached file untouched and marks it used.
	if got, err := Ensure(dir, s); err != nil || got != files["hit"] {
		t.Fatalf("Ensure = %s, %v", got, err)
	}
	if b, _ := os.ReadFile(files["hit"]); string(b) != "hit" {
		t.Fatalf("a hit rebuilt the tarball: %q", b)
	}

	// A build prunes.
	s2, err := BinarySpec("agentplane.local/test:dev2", "/bin/true", "/true", "65534:65534")
	if err != nil {
		t.Fatal(err)
	}
	built, err := Ensure(dir, s2)
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range files {
		_, err := os.Stat(f)
		if gone := os.IsNotExist(err); gone != (name == "stale" || name == "partial") {
			t.Errorf("%s (%s): gone=%v", name, filepath.Base(f), gone)
		}
	}
	if _, err := os.Stat(built); err != nil {
		t.Errorf("the built tarball: %v", err)
	}
}
