package arch

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// agentsWorkspace is the phrase that names an agent's files after the tenant.
var agentsWorkspace = regexp.MustCompile(`(?i)agents?'s? workspaces?\b|agent workspaces?\b`)

// TestOneNameForAnAgentsFiles: "workspace" is the tenant; an agent's files are its "home"
// (docs/ARCHITECTURE.md, Words). Code, comments, API docs and the docs say so.
func TestOneNameForAnAgentsFiles(t *testing.T) {
	root := filepath.Join("..", "..")
	self := filepath.Join(root, "test", "arch", "words_test.go")
	read := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "testdata", "bin", "dist":
				return filepath.SkipDir
			}
			return nil
		}
		if ext := filepath.Ext(path); ext != ".go" && ext != ".md" || path == self {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		read++
		for i, line := range strings.Split(string(b), "\n") {
			if m := agentsWorkspace.FindString(line); m != "" {
				t.Errorf("%s:%d: %q: an agent's files are its home (a workspace is the tenant)", path, i+1, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if read < 100 {
		t.Fatalf("read only %d files", read)
	}
}
