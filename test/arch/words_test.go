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

// unnamedAPIServer reports whether line says "API server" other than as "Kubernetes API
// server": in the REST facade's package it would read as the facade itself.
func unnamedAPIServer(line string) bool {
	for i := strings.Index(line, "API server"); i >= 0; {
		if !strings.HasSuffix(line[:i], "Kubernetes ") {
			return true
		}
		next := strings.Index(line[i+1:], "API server")
		if next < 0 {
			break
		}
		i += 1 + next
	}
	return false
}

// TestTheFacadeCallsKubeAPIServerByName: package facade is the REST facade, so its code and
// comments call Kubernetes' API server kube-apiserver (or the Kubernetes API server), never
// "the API server", which there would mean the facade too.
func TestTheFacadeCallsKubeAPIServerByName(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "facade", "*.go"))
	if err != nil || len(files) < 10 {
		t.Fatalf("the facade's files: %v (%d)", err, len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if unnamedAPIServer(line) {
				t.Errorf("%s:%d: %q: in the REST facade say kube-apiserver", f, i+1, strings.TrimSpace(line))
			}
		}
	}
}
