package memmerge

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// output runs bin with args and env as Command has it (or as it is, when marked is false).
func output(t *testing.T, marked bool, bin string, args ...string) string {
	t.Helper()
	env := append(os.Environ(), "AGENTPLANE_TEST_MARKER=1")
	if marked {
		var err error
		if bin, args, env, err = Command(bin, args, env); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v: %s", bin, args, err, out)
	}
	return string(out)
}

// A program run through Command is marked mergeable (after this binary's exec of it), one
// run as it is is not, and the program's environment is its own, without Env.
func TestCommandMarksTheProgramAndNothingElse(t *testing.T) {
	if got := output(t, true, "/bin/cat", "/proc/self/ksm_stat"); !mergeAny([]byte(got)) {
		t.Errorf("cat through Command: %s", got)
	}
	if got := output(t, false, "/bin/cat", "/proc/self/ksm_stat"); mergeAny([]byte(got)) {
		t.Errorf("cat as it is: %s", got)
	}
	env := output(t, true, "/usr/bin/env")
	if strings.Contains(env, Env) || !strings.Contains(env, "AGENTPLANE_TEST_MARKER=1") {
		t.Errorf("the program's environment: %s", env)
	}
	// This test process itself is not marked: the mark is the program's alone.
	if self, err := Marked(os.Getpid()); err != nil || self {
		t.Errorf("this process marked: %v %v", self, err)
	}
}

// Check finds the mark kept across exec on this kernel (the project's machines run Linux
// 6.18) and says whether the daemon runs as KSMRun says.
func TestCheck(t *testing.T) {
	off, err := Check()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(KSMRun)
	if err != nil {
		t.Fatal(err)
	}
	if runs := strings.TrimSpace(string(b)) == "1"; runs != (off == "") {
		t.Errorf("%s is %s, Check says %q", KSMRun, b, off)
	}
}

// A failed exec says what failed and exits non-zero.
func TestCommandOfAMissingProgram(t *testing.T) {
	bin, args, env, err := Command("/nonexistent/program", nil, os.Environ())
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "exec /nonexistent/program") {
		t.Errorf("err %v, output %s", err, out)
	}
}
