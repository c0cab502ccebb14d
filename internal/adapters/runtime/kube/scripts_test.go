package kube

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	utilexec "k8s.io/client-go/util/exec"

	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// localExec runs a pod command on this host, the way the pod would: the scripts are plain
// sh (dash here, dash in the Debian-based gateway image) and coreutils.
func localExec(ctx context.Context, _, _ string, cmd []string, stdin io.Reader, stdout, stderr io.Writer) error {
	c := exec.CommandContext(ctx, cmd[0], cmd[1:]...)
	c.Stdin, c.Stdout, c.Stderr = stdin, stdout, stderr
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
	err := c.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() >= 0 {
		return utilexec.CodeExitError{Err: err, Code: ee.ExitCode()}
	}
	return err
}

// fixture is an agent home on this host:
//
//	home/.openclaw/workspace/{sub/,file.txt,linkin -> sub,linkout -> outside,fileout -> outside/secret}
//	home/.openclaw/workspace-evil/   (shares the workspace's name as a prefix)
//	outside/secret
type fixture struct{ root, home, ws, outside string }

func newFixture(t *testing.T) fixture {
	t.Helper()
	root := t.TempDir()
	f := fixture{root: root, home: filepath.Join(root, "home"), outside: filepath.Join(root, "outside")}
	f.ws = filepath.Join(f.home, ".openclaw", "workspace")
	for _, d := range []string{filepath.Join(f.ws, "sub"), filepath.Join(f.home, ".openclaw", "workspace-evil"), f.outside} {
		must(t, os.MkdirAll(d, 0o755))
	}
	must(t, os.WriteFile(filepath.Join(f.ws, "file.txt"), []byte("hello\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(f.outside, "secret"), []byte("outside secret\n"), 0o644))
	must(t, os.Symlink("sub", filepath.Join(f.ws, "linkin")))
	must(t, os.Symlink(f.outside, filepath.Join(f.ws, "linkout")))
	must(t, os.Symlink(filepath.Join(f.outside, "secret"), filepath.Join(f.ws, "fileout")))
	return f
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestExecCommandArgv(t *testing.T) {
	got, err := execCommand("/home/node/.openclaw/workspace", "", 1500*time.Millisecond,
		map[string]string{"B": "2", "A": "x y $(z)"}, []string{"ls", "-l"})
	must(t, err)
	want := []string{"sh", "-c", execScript, "agentplane-exec", "/home/node/.openclaw/workspace", ".", "2", "2",
		"A=x y $(z)", "B=2", "ls", "-l"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("argv %q", got)
	}
	for _, bad := range []string{"", "1A", "A-B", "A=B", "A B"} {
		if _, err := execCommand("/ws", "", 0, map[string]string{bad: "v"}, []string{"true"}); !errors.Is(err, runtime.ErrExec) {
			t.Errorf("env name %q: %v", bad, err)
		}
	}
	if _, err := execCommand("/ws", "", 0, nil, nil); !errors.Is(err, runtime.ErrExec) {
		t.Errorf("empty argv: %v", err)
	}
	if _, err := execCommand("/ws", "a\x00b", 0, nil, []string{"true"}); !errors.Is(err, runtime.ErrInvalidPath) {
		t.Errorf("NUL in dir: %v", err)
	}
}

func TestCheckRel(t *testing.T) {
	for _, tc := range []struct {
		in, out string
		ok      bool
	}{
		{"a.txt", "a.txt", true},
		{".openclaw/openclaw.json", ".openclaw/openclaw.json", true},
		{"a/./b/../c", "a/c", true},
		{"", "", false},
		{".", "", false},
		{"..", "", false},
		{"../x", "", false},
		{"a/../../x", "", false},
		{"/etc/passwd", "", false},
		{"a\x00b", "", false},
	} {
		out, err := checkRel(tc.in)
		if (err == nil) != tc.ok || out != tc.out {
			t.Errorf("checkRel(%q) = %q, %v", tc.in, out, err)
		}
		if err != nil && !errors.Is(err, runtime.ErrInvalidPath) {
			t.Errorf("checkRel(%q): %v is not ErrInvalidPath", tc.in, err)
		}
	}
}

func TestPathError(t *testing.T) {
	for _, tc := range []struct {
		code   int
		stderr string
		want   error
	}{
		{111, markerInvalidPath + "\n", runtime.ErrInvalidPath},
		{112, markerNotFound + "\n", runtime.ErrNotFound},
		{111, "the command's own failure\n", nil}, // a command may exit 111 itself
		{1, markerInvalidPath + "\n", nil},
		{0, "", nil},
	} {
		if got := pathError(tc.code, []byte(tc.stderr)); got != tc.want { //nolint:errorlint // the sentinel itself, unwrapped, is the contract
			t.Errorf("pathError(%d, %q) = %v", tc.code, tc.stderr, got)
		}
	}
}

// TestExecPrologue runs the real prologue with sh: directories that leave the workspace
// after resolving symlinks are refused with the distinct exit code; others become the cwd.
func TestExecPrologue(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		dir, cwd string // cwd "" = refused
	}{
		{"", f.ws},
		{".", f.ws},
		{"sub", filepath.Join(f.ws, "sub")},
		{"sub/", filepath.Join(f.ws, "sub")},
		{"sub/../sub", filepath.Join(f.ws, "sub")},
		{"linkin", filepath.Join(f.ws, "sub")},
		{filepath.Join(f.ws, "sub"), filepath.Join(f.ws, "sub")}, // absolute, inside
		{"..", ""},
		{"../..", ""},
		{"sub/../..", ""},
		{"../workspace-evil", ""}, // the workspace path is a prefix of it
		{"linkout", ""},           // symlink out
		{"linkin/../../..", ""},
		{"/etc", ""},     // absolute, elsewhere
		{f.outside, ""},  // absolute, elsewhere
		{"missing", ""},  // must exist
		{"file.txt", ""}, // not a directory
		{"-P", ""},
	} {
		argv, err := execCommand(f.ws, tc.dir, 10*time.Second, nil, []string{"pwd", "-P"})
		must(t, err)
		var out, errb bytes.Buffer
		code, err := exitCode(localExec(context.Background(), "", "", argv, nil, &out, &errb))
		must(t, err)
		switch {
		case tc.cwd == "" && !errors.Is(pathError(code, errb.Bytes()), runtime.ErrInvalidPath):
			t.Errorf("dir %q: not refused: code %d stdout %q stderr %q", tc.dir, code, out.String(), errb.String())
		case tc.cwd != "" && (code != 0 || strings.TrimSpace(out.String()) != tc.cwd):
			t.Errorf("dir %q: code %d cwd %q stderr %q, want %q", tc.dir, code, out.String(), errb.String(), tc.cwd)
		}
	}
}

// TestScriptsTakeNoShellInput: values arrive as positional arguments, so shell syntax in a
// directory, an env value or an argument is never run.
func TestScriptsTakeNoShellInput(t *testing.T) {
	f := newFixture(t)
	evil := "$(touch PWNED);`touch PWNED`;touch PWNED"
	must(t, os.Mkdir(filepath.Join(f.ws, evil), 0o755))
	argv, err := execCommand(f.ws, evil, 0, map[string]string{"V": evil}, []string{"sh", "-c", `printf %s "$V"`, evil})
	must(t, err)
	var out, errb bytes.Buffer
	must(t, localExec(context.Background(), "", "", argv, nil, &out, &errb))
	if out.String() != evil {
		t.Errorf("env value %q", out.String())
	}
	for _, cmd := range [][]string{readCommand(f.home, evil), writeCommand(f.home, evil+"/x")} {
		_ = localExec(context.Background(), "", "", cmd, strings.NewReader("x"), io.Discard, io.Discard)
	}
	_ = filepath.Walk(f.root, func(p string, _ os.FileInfo, _ error) error {
		if filepath.Base(p) == "PWNED" {
			t.Errorf("shell syntax in an argument was executed: %s", p)
		}
		return nil
	})
	if _, err := os.Stat("PWNED"); err == nil {
		t.Error("shell syntax in an argument was executed in the test's directory")
	}
}

// TestSeedScript runs the init container's script: it seeds a missing config and never
// touches an existing one.
func TestSeedScript(t *testing.T) {
	root := t.TempDir()
	cfg := filepath.Join(root, "home", ".openclaw", "openclaw.json")
	ws := filepath.Join(root, "home", ".openclaw", "workspace")
	run := func() {
		t.Helper()
		cmd := exec.Command("sh", "-c", seedScript, "seed-config", cfg, ws)
		cmd.Env = append(os.Environ(), SeedEnv+`={"seed":true}`)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("seed: %v: %s", err, out)
		}
	}
	run()
	st, err := os.Stat(cfg)
	must(t, err)
	if b, _ := os.ReadFile(cfg); string(b) != `{"seed":true}` || st.Mode().Perm() != 0o600 {
		t.Errorf("seeded %q mode %v", b, st.Mode())
	}
	if fi, err := os.Stat(ws); err != nil || !fi.IsDir() {
		t.Errorf("workspace not created: %v", err)
	}
	must(t, os.WriteFile(cfg, []byte(`{"edited":true}`), 0o600))
	run()
	if b, _ := os.ReadFile(cfg); string(b) != `{"edited":true}` {
		t.Errorf("existing config overwritten: %q", b)
	}
}
