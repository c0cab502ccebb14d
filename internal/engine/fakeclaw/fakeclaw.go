// Package fakeclaw provides the engine test double: an engine dir whose bin/openclaw is the
// fakeclaw program (./cmd/fakeclaw), which speaks the part of openclaw's command line that
// agentplane uses with the same output shapes. The openclaw engine's command builders and
// parsers work on it unchanged, so runtime and controller tests can use it in place of the real
// engine. See the program's doc comment for its surface and the FAKECLAW_* fault injection.
package fakeclaw

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
)

var (
	once   sync.Once
	dir    string
	errDir error
)

// EngineDir builds the fake once per process and returns an engine dir with the same layout as
// the real one: <dir>/bin/openclaw. The dir is under the user cache dir, keyed by this source
// tree, and rebuilt (atomically replaced) by every process, so it always matches the source.
// It needs the go command (PATH or GOROOT).
func EngineDir() (string, error) {
	once.Do(func() { dir, errDir = build() })
	return dir, errDir
}

// MustEngineDir is EngineDir for tests: it fails tb when the fake cannot be built.
func MustEngineDir(tb testing.TB) string {
	tb.Helper()
	d, err := EngineDir()
	if err != nil {
		tb.Fatalf("fakeclaw: %v", err)
	}
	return d
}

func build() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("cannot locate the fakeclaw source")
	}
	src := filepath.Dir(file)
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	sum := sha256.Sum256([]byte(src))
	out := filepath.Join(cache, "agentplane", "fakeclaw", hex.EncodeToString(sum[:6]))
	bin := filepath.Join(out, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return "", err
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	// Build next to the target and rename: concurrent test processes never see a partial file.
	tmp := filepath.Join(bin, ".openclaw."+strconv.Itoa(os.Getpid()))
	cmd := exec.Command(goBin, "build", "-o", tmp, "./cmd/fakeclaw")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("go build ./cmd/fakeclaw: %v\n%s", err, b)
	}
	if err := os.Rename(tmp, filepath.Join(bin, "openclaw")); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return out, nil
}
