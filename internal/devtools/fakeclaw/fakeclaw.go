// Package fakeclaw provides the engine test double: an engine dir whose bin/openclaw is the
// fakeclaw program (package program), which speaks the part of openclaw's command line that
// agentplane uses with the same output shapes. The openclaw engine's command builders and
// parsers work on it unchanged, so runtime and controller tests can use it in place of the real
// engine. See the program's doc comment for its surface and the FAKECLAW_* fault injection.
//
// Nothing is compiled at test time: bin/openclaw is a two-line shell script that runs the
// current executable again with AGENTPLANE_FAKECLAW=1, and this package's init hands such a
// process to program.Main before any test starts. So every binary that links this package (a
// test binary of this module or of a module that depends on it) carries the fake inside, and
// no go command, source tree or writable module cache is needed.
package fakeclaw

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/agentplane/agentplane/internal/devtools/fakeclaw/program"
)

// SwitchEnv is the environment variable that turns a binary linking this package into the fake.
const SwitchEnv = "AGENTPLANE_FAKECLAW"

func init() {
	if os.Getenv(SwitchEnv) == "1" {
		os.Exit(program.Main(os.Args[1:]))
	}
}

var (
	once   sync.Once
	dir    string
	errDir error
)

// EngineDir returns an engine dir with the same layout as the real one, <dir>/bin/openclaw,
// whose openclaw is this executable in the fake's role. It is made once per executable under
// the temporary directory; dirs of executables that no longer exist are removed on the way.
func EngineDir() (string, error) {
	once.Do(func() { dir, errDir = makeDir() })
	return dir, errDir
}

// MustEngineDir is EngineDir for tests: it fails tb when the dir cannot be made.
func MustEngineDir(tb testing.TB) string {
	tb.Helper()
	d, err := EngineDir()
	if err != nil {
		tb.Fatalf("fakeclaw: %v", err)
	}
	return d
}

// sandboxReadOnlyEnv is local.ReadOnlyPathsEnv (this package is imported by the runtime's
// tests, so it does not import the runtime).
const sandboxReadOnlyEnv = "AGENTPLANE_SANDBOX_READONLY"

// exeFile records, in each engine dir, the executable its script runs.
const exeFile = "executable"

func makeDir() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("locate this executable: %w", err)
	}
	if real, err := filepath.EvalSymlinks(exe); err == nil {
		exe = real
	}
	root := filepath.Join(os.TempDir(), "agentplane-fakeclaw")
	// Agents' sandboxes show the fake engine's dirs (test engines are scripts that exec the
	// fake from elsewhere), here and in the processes this one starts.
	if !slices.Contains(filepath.SplitList(os.Getenv(sandboxReadOnlyEnv)), root) {
		os.Setenv(sandboxReadOnlyEnv, strings.Trim(os.Getenv(sandboxReadOnlyEnv)+string(filepath.ListSeparator)+root, string(filepath.ListSeparator)))
	}
	sum := sha256.Sum256([]byte(exe))
	out := filepath.Join(root, hex.EncodeToString(sum[:8]))
	removeStale(root, out)
	bin := filepath.Join(out, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return "", err
	}
	// The program itself is linked (or copied) into the engine dir: a sandboxed gateway sees
	// the engine dir and not the test binary's own dir.
	prog := filepath.Join(bin, "fakeclaw-program")
	if err := linkOrCopy(exe, prog); err != nil {
		return "", err
	}
	script := "#!/bin/sh\n" + SwitchEnv + "=1 exec " + shellQuote(prog) + " \"$@\"\n"
	// Write next to the target and rename: concurrent processes never see a partial file.
	for name, data := range map[string]string{filepath.Join(bin, "openclaw"): script, filepath.Join(out, exeFile): exe} {
		tmp := name + "." + strconv.Itoa(os.Getpid())
		if err := os.WriteFile(tmp, []byte(data), 0o755); err != nil {
			return "", err
		}
		if err := os.Rename(tmp, name); err != nil {
			os.Remove(tmp)
			return "", err
		}
	}
	return out, nil
}

// removeStale removes the engine dirs under root, other than keep, whose executable is gone
// (go test deletes its binaries after the run).
func removeStale(root, keep string) {
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		d := filepath.Join(root, e.Name())
		if d == keep {
			continue
		}
		exe, err := os.ReadFile(filepath.Join(d, exeFile))
		if err != nil {
			continue
		}
		if _, err := os.Stat(string(exe)); os.IsNotExist(err) {
			os.RemoveAll(d)
		}
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// linkOrCopy makes dst the same file as src: a hard link, or a copy across file systems. A dst
// that is already src is kept.
func linkOrCopy(src, dst string) error {
	if a, err := os.Stat(src); err == nil {
		if b, err := os.Stat(dst); err == nil && os.SameFile(a, b) {
			return nil
		}
	}
	tmp := dst + "." + strconv.Itoa(os.Getpid())
	os.Remove(tmp)
	if err := os.Link(src, tmp); err != nil {
		in, err := os.Open(src)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			os.Remove(tmp)
			return err
		}
		if err := out.Close(); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
