package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryBenchmarkWritesResults checks the report's list against the tree: each program it
// runs exists and takes -json (report.Flag), and each Go benchmark's package exists and
// defines the benchmark it names, so `make bench` does not find out after an hour.
func TestEveryBenchmarkWritesResults(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	names := map[string]bool{}
	for _, b := range benches {
		if names[b.Name] {
			t.Errorf("%s listed twice", b.Name)
		}
		names[b.Name] = true
		var dir, want string
		switch {
		case b.goTest != nil:
			dir = b.goTest[len(b.goTest)-1]
			for i, a := range b.goTest {
				if a == "-bench" {
					want = "func " + b.goTest[i+1] + "(b *testing.B)"
				}
			}
		default:
			dir, want = b.args[0], "report.Flag()"
		}
		src, err := readGo(filepath.Join(root, dir))
		if err != nil {
			t.Errorf("%s: %v", b.Name, err)
			continue
		}
		if !strings.Contains(src, want) {
			t.Errorf("%s: %s has no %q", b.Name, dir, want)
		}
	}
}

// readGo returns the Go sources of dir, concatenated.
func readGo(dir string) (string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		return "", os.ErrNotExist
	}
	var b strings.Builder
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		b.Write(raw)
	}
	return b.String(), nil
}
