package testenv

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Running reports whether pid runs: it exists and has not exited. A process that exited but
// is not reaped yet (a zombie) does not run: a gateway born from a template is, once
// restored, the child of the host's init, which reaps it a moment after it exits.
func Running(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command's closing parenthesis: "pid (comm) S ...".
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}
