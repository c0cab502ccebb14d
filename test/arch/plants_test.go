package arch

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// planted are the positions ("file:line", the file's base name) of the lines of dir's files
// (not below it) that carry a want marker: the violations planted for a rule.
func planted(t *testing.T, dir string) map[string]bool {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		src, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(src), "\n") {
			if wantMarker.MatchString(line) {
				want[fmt.Sprintf("%s:%d", e.Name(), i+1)] = true
			}
		}
	}
	return want
}

// checkPlanted: a rule run over dir reported findings (each "file:line[:column]: what"): there
// must be one at every planted line, at least min of them, and none where nothing is planted.
func checkPlanted(t *testing.T, dir string, min int, findings []string) {
	t.Helper()
	want := planted(t, dir)
	if len(want) < min {
		t.Fatalf("%s plants only %d violations", dir, len(want))
	}
	got := map[string]bool{}
	for _, f := range findings {
		pos := strings.Split(strings.SplitN(f, ": ", 2)[0], ":")
		if len(pos) < 2 {
			t.Fatalf("finding %q has no position", f)
		}
		got[filepath.Base(pos[0])+":"+pos[1]] = true
	}
	for pos := range want {
		if !got[pos] {
			t.Errorf("the planted violation at %s was not found (found: %q)", pos, findings)
		}
	}
	for pos := range got {
		if !want[pos] {
			t.Errorf("%s was reported, but nothing is planted there", pos)
		}
	}
}

// walkFiles calls visit with each file below root that keep accepts, but in the directories
// below root named in skip and, unless modules, those holding a module of their own
// (hack/tools/*, examples/*), and returns how many it visited.
func walkFiles(t *testing.T, root string, modules bool, skip []string, keep func(path string) bool, visit func(path string) error) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == root {
			return err
		}
		if d.IsDir() {
			if slices.Contains(skip, d.Name()) {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && !modules {
				return filepath.SkipDir
			}
			return nil
		}
		if !keep(path) {
			return nil
		}
		n++
		return visit(path)
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
