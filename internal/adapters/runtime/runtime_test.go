package runtime_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// The script both runtimes run for ExecRequest.StdinFile: the command finds its input in a
// private file named by the variable, keeps its exit code, and the file's directory is gone
// after.
func TestWrapStdinFile(t *testing.T) {
	argv, err := runtime.WrapStdinFile(&runtime.StdinFile{Env: "CFG", Name: "openclaw.json"},
		[]string{"sh", "-c", `cat "$CFG"; echo; echo "$CFG"; stat -c %a "$(dirname "$CFG")"; exit 3`})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin = strings.NewReader(`{"a":1}`)
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	var out bytes.Buffer
	cmd.Stdout = &out
	var exit *exec.ExitError
	if err := cmd.Run(); !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("exit: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || lines[0] != `{"a":1}` || !strings.HasSuffix(lines[1], "/openclaw.json") || lines[2] != "700" {
		t.Fatalf("output %q", out.String())
	}
	if _, err := os.Stat(lines[1]); !os.IsNotExist(err) {
		t.Errorf("%s is left: %v", lines[1], err)
	}
	for _, f := range []runtime.StdinFile{{Env: "A=B", Name: "x"}, {Env: "A", Name: "../x"}, {Env: "A", Name: ""}} {
		if _, err := runtime.WrapStdinFile(&f, []string{"true"}); !errors.Is(err, runtime.ErrExec) {
			t.Errorf("%+v accepted", f)
		}
	}
}
