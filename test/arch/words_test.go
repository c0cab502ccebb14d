package arch

import (
	"fmt"
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
	found, read := agentsWorkspaceLines(t, root, filepath.Join(root, "test", "arch", "words_test.go"))
	if read < 100 {
		t.Fatalf("read only %d files", read)
	}
	for _, f := range found {
		t.Error(f)
	}
}

// TestWordRulesFireOnPlantedViolations: over testdata/words each rule reports the lines
// planted against it (an agent's files called a workspace in Go and Markdown; "API server"
// said alone in the facade, also beside "Kubernetes API server"), and not the lines that use
// the words as the vocabulary does.
func TestWordRulesFireOnPlantedViolations(t *testing.T) {
	dir := filepath.Join("testdata", "words")
	found, _ := agentsWorkspaceLines(t, dir, "")
	checkPlanted(t, dir, 3, found)
	facade := filepath.Join(dir, "facade")
	checkPlanted(t, facade, 2, apiServerLines(t, facade))
}

// agentsWorkspaceLines are the lines of root's Go and Markdown files (but self's) that call an
// agent's files a workspace, and how many files it read.
func agentsWorkspaceLines(t *testing.T, root, self string) ([]string, int) {
	t.Helper()
	var out []string
	keep := func(path string) bool {
		ext := filepath.Ext(path)
		return (ext == ".go" || ext == ".md") && path != self
	}
	read := walkFiles(t, root, true, []string{".git", "node_modules", "testdata", "bin", "dist"}, keep, func(path string) error {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := agentsWorkspace.FindString(line); m != "" {
				out = append(out, fmt.Sprintf("%s:%d: %q: an agent's files are its home (a workspace is the tenant)", path, i+1, m))
			}
		}
		return nil
	})
	return out, read
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
	for _, f := range apiServerLines(t, filepath.Join("..", "..", "facade")) {
		t.Error(f)
	}
}

// apiServerLines are the lines of dir's Go files that say "API server" alone.
func apiServerLines(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("the Go files of %s: %v (%d)", dir, err, len(files))
	}
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if unnamedAPIServer(line) {
				out = append(out, fmt.Sprintf("%s:%d: %q: in the REST facade say kube-apiserver", f, i+1, strings.TrimSpace(line)))
			}
		}
	}
	return out
}
