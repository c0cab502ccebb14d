package local

import (
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"github.com/agentplane/agentplane/internal/adapters/logredact"
)

// Crash messages quote the end of the gateway log; a failed copy's also its start.
const (
	tailLines = 10
	tailBytes = 8 << 10
	headLines = 6
)

// rotateLog copies the log to <path>.1 and truncates it once it is larger than max. The
// gateway keeps its O_APPEND descriptor, so it goes on writing at the new end; lines written
// between the copy and the truncation are lost (copytruncate).
func rotateLog(path string, max int64) error {
	info, err := os.Stat(path)
	if err != nil || info.Size() <= max {
		return nil
	}
	src, err := os.Open(path)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(path+".1.tmp", os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	if err := dst.Close(); err != nil {
		return err
	}
	if err := os.Rename(path+".1.tmp", path+".1"); err != nil {
		return err
	}
	return os.Truncate(path, 0)
}

// tailLog returns the last lines of the log (at most tailLines and tailBytes).
func tailLog(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(info.Size()-tailBytes, 0)
	buf := make([]byte, info.Size()-off)
	n, _ := f.ReadAt(buf, off)
	s := string(buf[:n])
	if off > 0 {
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[i+1:] // drop the partial first line
		}
	}
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > tailLines {
		lines = lines[len(lines)-tailLines:]
	}
	return strings.Join(lines, "\n")
}

// headTailLog is the first headLines lines of the log, a line "...", and its last lines
// (tailLog); the whole log when those would meet. What a stuck copy of a template logged
// after its thaw says why, and its last lines can be minutes of a poll.
func headTailLog(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	buf := make([]byte, tailBytes)
	n, _ := io.ReadFull(f, buf)
	whole := n < len(buf)
	text := strings.TrimRight(string(buf[:n]), "\n")
	lines := strings.Split(text, "\n")
	if whole && len(lines) <= headLines+tailLines {
		return text
	}
	if !whole {
		lines = lines[:len(lines)-1] // a partial line
	}
	return strings.Join(lines[:min(headLines, len(lines))], "\n") + "\n...\n" + tailLog(path)
}

// redact hides secrets in s: the given values verbatim (longest first), then anything that
// looks like a token.
func redact(s string, secrets []string) string { return logredact.Redact(s, secrets) }

// initExitLine is what tini -v (a checkpointable sandbox's init, tiniArgs) logs as its child
// ends: an exit status or the signal's description (strsignal).
var initExitLine = regexp.MustCompile(`^\[INFO\s+tini \(\d+\)\] Main child exited (?:normally \(with status '(\d+)'\)|with signal \(with signal '([^']+)'\))$`)

// initExit is how the gateway of a sandbox whose log is log ended, as the sandbox's init
// logged it in the log's last line (false: no such line), in describeExit's words.
func initExit(log string) (code int, desc string, ok bool) {
	if log == "" {
		return 0, "", false
	}
	lines := strings.Split(tailLog(log), "\n")
	m := initExitLine.FindStringSubmatch(lines[len(lines)-1])
	switch {
	case m == nil:
		return 0, "", false
	case m[1] != "":
		n, _ := strconv.Atoi(m[1])
		return n, fmt.Sprintf("exit code %d", n), true
	}
	for sig := syscall.Signal(1); sig < 65; sig++ {
		if strings.EqualFold(sig.String(), m[2]) {
			return 128 + int(sig), fmt.Sprintf("signal %d (%s)", int(sig), sig), true
		}
	}
	return -1, "signal " + m[2], true
}
