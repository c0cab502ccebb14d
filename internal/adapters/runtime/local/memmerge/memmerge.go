// Package memmerge starts a program whose memory the kernel's same-page merging (KSM) may
// merge with other processes' identical pages: prctl(PR_SET_MEMORY_MERGE) marks every
// mapping of a process mergeable, and Linux (6.7 on, and its stable backports) keeps the mark
// across fork and exec. So a gateway started through it (bwrap, its sandbox's init, Node and
// Node's children) and a gateway CRIU restores through it (the restored tree is forked from
// CRIU) are marked as a whole.
//
// Go's os/exec cannot run a prctl between fork and exec, so the mark is set by a process in
// between: every binary that links this package is that process when Env is set in its
// environment (as the local runtime's network helper is): its init marks itself and execs
// the program, before the rest of the binary's packages are initialized.
package memmerge

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// Env, set in a process's environment, makes the binary mark itself mergeable and exec its
// arguments (the program's path first), without Env in the program's environment.
const Env = "AGENTPLANE_MEMORY_MERGE_EXEC"

func init() {
	if os.Getenv(Env) != "" {
		os.Exit(run(os.Args[1:]))
	}
}

// run marks this process mergeable and execs argv; it returns only when it cannot.
func run(argv []string) int {
	if len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "agentplane memory merge: no program to run")
		return 127
	}
	if err := unix.Prctl(unix.PR_SET_MEMORY_MERGE, 1, 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "agentplane memory merge: prctl(PR_SET_MEMORY_MERGE): %v\n", err)
		return 126
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, Env+"=") })
	err := unix.Exec(argv[0], argv, env)
	fmt.Fprintf(os.Stderr, "agentplane memory merge: exec %s: %v\n", argv[0], err)
	return 127
}

// Command is the command line that runs bin with args and env with its memory mergeable:
// this executable, with Env set, given bin and args.
func Command(bin string, args, env []string) (string, []string, []string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", nil, nil, fmt.Errorf("memory merge: this executable: %w", err)
	}
	return self, append([]string{bin}, args...), append(slices.Clip(env), Env+"=1"), nil
}

// KSMRun is where the kernel says whether its merging daemon runs ("1").
const KSMRun = "/sys/kernel/mm/ksm/run"

// Check tries the whole way once: it runs cat through Command and reads the mark in the
// /proc/self/ksm_stat cat prints, an error when cat is not marked (a kernel without
// PR_SET_MEMORY_MERGE, or one that drops the mark at exec: before Linux 6.7 and its
// backports). And it says whether the kernel's merging daemon runs: until it does (KSMRun,
// which only root sets), marked memory is not merged; off says why.
func Check() (off string, err error) {
	bin, args, env, err := Command("/bin/cat", []string{"/proc/self/ksm_stat"}, os.Environ())
	if err != nil {
		return "", err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	switch {
	case err != nil:
		return "", fmt.Errorf("memory merge: a marked cat: %v: %s", err, strings.TrimSpace(string(out)))
	case !mergeAny(out):
		return "", errors.New("memory merge: this kernel drops a process's PR_SET_MEMORY_MERGE at exec (Linux 6.7 or a backport keeps it)")
	}
	b, err := os.ReadFile(KSMRun)
	switch {
	case err != nil:
		return "", fmt.Errorf("the kernel's same-page merging (CONFIG_KSM): %w", err)
	case strings.TrimSpace(string(b)) != "1":
		return fmt.Sprintf("the kernel's merging daemon does not run (%s is %s; as root: echo 1 > %s)", KSMRun, strings.TrimSpace(string(b)), KSMRun), nil
	}
	return "", nil
}

// Marked reports whether process pid's memory is marked mergeable as a whole (its
// /proc/<pid>/ksm_stat says ksm_merge_any: yes).
func Marked(pid int) (bool, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/ksm_stat", pid))
	if err != nil {
		return false, err
	}
	return mergeAny(b), nil
}

// mergeAny reports whether a ksm_stat file's text says ksm_merge_any: yes.
func mergeAny(ksmStat []byte) bool {
	for _, line := range strings.Split(string(ksmStat), "\n") {
		if v, ok := strings.CutPrefix(line, "ksm_merge_any:"); ok {
			return strings.TrimSpace(v) == "yes"
		}
	}
	return false
}
