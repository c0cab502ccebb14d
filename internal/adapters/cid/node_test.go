package cid

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/devtools/testenv"
)

// TestAgainstNodeImporter checks Compute against an independent implementation:
// the JavaScript ipfs-unixfs-importer, installed by testdata/install.sh into a
// cache directory and run by testdata/cidvectors.mjs. It fails (does not skip)
// when npm or node is missing, unless AGENTPLANE_SKIP_NODE=1 is set.
func TestAgainstNodeImporter(t *testing.T) {
	if os.Getenv("AGENTPLANE_SKIP_NODE") == "1" {
		testenv.Skip(t, "AGENTPLANE_SKIP_NODE=1: not checking against the JavaScript importer")
	}
	for _, tool := range []string{"node", "npm", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found on PATH: this test checks CIDs against the JavaScript importer and needs Node.js and npm "+
				"(set AGENTPLANE_SKIP_NODE=1 to skip it explicitly)", tool)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	install := exec.CommandContext(ctx, "bash", filepath.Join("testdata", "install.sh"))
	install.Stderr = &stderr
	out, err := install.Output()
	if err != nil {
		t.Fatalf("testdata/install.sh failed: %v\n%s", err, stderr.String())
	}
	dir := strings.TrimSpace(string(out))

	tmp := t.TempDir()
	var paths []string
	for _, v := range vectors {
		p := filepath.Join(tmp, v.name+".bin")
		writeFile(t, p, v.open())
		paths = append(paths, p)
	}

	stderr.Reset()
	node := exec.CommandContext(ctx, "node", append([]string{filepath.Join(dir, "cidvectors.mjs")}, paths...)...)
	node.Stderr = &stderr
	out, err = node.Output()
	if err != nil {
		t.Fatalf("node cidvectors.mjs failed: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(vectors) {
		t.Fatalf("node printed %d lines for %d files:\n%s", len(lines), len(vectors), out)
	}

	for i, v := range vectors {
		var jsCID, jsPath string
		var jsSize int64
		if _, err := fmt.Sscanf(lines[i], "%s %d %s", &jsCID, &jsSize, &jsPath); err != nil || jsPath != paths[i] {
			t.Fatalf("unexpected node output line %q (want path %s): %v", lines[i], paths[i], err)
		}
		f, err := os.Open(paths[i])
		if err != nil {
			t.Fatal(err)
		}
		got, n, err := Compute(f)
		_ = f.Close()
		if err != nil {
			t.Fatalf("%s: Compute: %v", v.name, err)
		}
		t.Logf("%-20s %9d bytes  go=%s  js=%s", v.name, n, got, jsCID)
		if got.String() != jsCID || n != jsSize {
			t.Errorf("%s: Go computed %s (%d bytes), JavaScript importer %s (%d bytes)", v.name, got, n, jsCID, jsSize)
		}
		if v.want != jsCID {
			t.Errorf("%s: hard-coded vector %q disagrees with the JavaScript importer %q", v.name, v.want, jsCID)
		}
	}
}

func writeFile(t *testing.T, path string, r io.Reader) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, r); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
