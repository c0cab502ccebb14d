package local

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// Reading the gateway log for Logs: the log is the bounded ring file (gateway.log, copied to
// gateway.log.1 and truncated at MaxLogSize). A claimed warm gateway's log is hard-linked into
// the agent dir (claimLocked), so the agent dir's gateway.log is always the one to read.
const (
	// logPoll is how often a follower looks for new output.
	logPoll = 250 * time.Millisecond
	// logChunk is how much a follower or a tail reads at once; maxTailRead bounds a tail.
	logChunk    = 64 << 10
	maxTailRead = 16 << 20
)

// Logs implements runtime.Runtime: the tail of gateway.log (and gateway.log.1 when the
// current file holds fewer lines), then, when following, what is appended to it, polled every
// logPoll. A truncation by rotation is noticed and the lines written since the last read are
// taken from gateway.log.1. Following ends with io.EOF once the agent dir is removed (the
// agent deleted).
func (r *Runtime) Logs(ctx context.Context, ag *agentsv1.Agent, req runtime.LogRequest) ([]string, error) {
	dir := r.AgentDir(keyOf(ag))
	if !req.Since.IsZero() && req.Follow != nil {
		// When a line was written is not known: none of the tail is sent again.
		return readLogs(ctx, dir, 0, req.Follow, logPoll)
	}
	return readLogs(ctx, dir, max(req.Tail, 1), req.Follow, logPoll)
}

// readLogs is Logs over the log in dir.
func readLogs(ctx context.Context, dir string, tail int, follow func(string) bool, poll time.Duration) ([]string, error) {
	path := filepath.Join(dir, logFileName)
	_, statErr := os.Stat(dir)
	sawDir := statErr == nil
	lines, end, info, whole, err := tailFile(path, tail, follow == nil)
	if err != nil {
		return nil, err
	}
	if len(lines) < tail && whole {
		// Fewer lines than asked in the whole file: the rest is in the rotated copy.
		if old, _, _, _, err := tailFile(path+".1", tail-len(lines), true); err == nil {
			lines = append(old, lines...)
		}
	}
	if follow == nil {
		return lines, nil
	}
	for _, l := range lines {
		if !follow(l) {
			return nil, nil
		}
	}
	f := &logFollower{dir: dir, path: path, off: end, info: info, sawDir: sawDir, emit: follow}
	f.old, _ = os.Stat(path + ".1")
	return nil, f.run(ctx, poll)
}

// tailFile returns the last n lines of path, the offset just after the last complete line,
// the file's info (nil: no file) and whether the lines are all the file holds (it was read
// from its start). With partial, a last line without its newline counts as a line (and the
// offset is the end of the file).
func tailFile(path string, n int, partial bool) (lines []string, end int64, info fs.FileInfo, whole bool, err error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, nil, true, nil
	}
	if err != nil {
		return nil, 0, nil, false, err
	}
	defer f.Close()
	if info, err = f.Stat(); err != nil {
		return nil, 0, nil, false, err
	}
	size := info.Size()
	var buf []byte
	newlines := 0
	off := size
	for off > 0 && newlines <= n && size-off < maxTailRead {
		chunk := min(off, logChunk)
		off -= chunk
		b := make([]byte, chunk)
		if _, err := f.ReadAt(b, off); err != nil && !errors.Is(err, io.EOF) {
			return nil, 0, nil, false, err
		}
		newlines += bytes.Count(b, []byte{'\n'})
		buf = append(b, buf...)
	}
	end = size
	if !partial {
		i := bytes.LastIndexByte(buf, '\n')
		end = off + int64(i+1)
		buf = buf[:i+1]
	}
	if off > 0 {
		// The first line may have started before what was read: drop it.
		if i := bytes.IndexByte(buf, '\n'); i >= 0 {
			buf = buf[i+1:]
		} else {
			buf = nil
		}
	}
	lines = splitLines(buf)
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines, end, info, off == 0, nil
}

// splitLines splits b at newlines (the last line need not end in one), splitting lines longer
// than runtime.MaxLogLine.
func splitLines(b []byte) []string {
	var out []string
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		line := b
		if i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		out = appendLine(out, line)
	}
	return out
}

func appendLine(out []string, line []byte) []string {
	line = bytes.TrimSuffix(line, []byte{'\r'})
	for len(line) > runtime.MaxLogLine {
		out = append(out, string(line[:runtime.MaxLogLine]))
		line = line[runtime.MaxLogLine:]
	}
	return append(out, string(line))
}

// logFollower polls one log file for one caller.
type logFollower struct {
	dir, path string
	off       int64       // read up to here
	info      fs.FileInfo // the file read (nil: none yet)
	old       fs.FileInfo // gateway.log.1 when last looked at (nil: none)
	sawDir    bool        // the agent dir existed
	pending   []byte      // a line not yet ended
	emit      func(string) bool
	stopped   bool // emit returned false
}

func (f *logFollower) run(ctx context.Context, poll time.Duration) error {
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := f.step(ctx); err != nil || f.stopped {
			return err
		}
	}
}

// step reads what was appended since the last step.
func (f *logFollower) step(ctx context.Context) error {
	file, err := os.Open(f.path)
	if errors.Is(err, fs.ErrNotExist) {
		_, derr := os.Stat(f.dir)
		if derr == nil {
			f.sawDir = true
		} else if errors.Is(derr, fs.ErrNotExist) && (f.sawDir || f.info != nil) {
			return io.EOF // the agent dir is gone: the agent was deleted
		}
		return nil // no output yet
	}
	if err != nil {
		return err
	}
	defer file.Close()
	info, err := file.Stat()
	if err != nil {
		return err
	}
	old, _ := os.Stat(f.path + ".1")
	rotated := old != nil && (f.old == nil || !os.SameFile(f.old, old) || !old.ModTime().Equal(f.old.ModTime()) || old.Size() != f.old.Size())
	f.old = old
	switch {
	case f.info != nil && !os.SameFile(f.info, info):
		// Another file (a claimed gateway's log linked in): read it from the start.
		f.off, f.pending = 0, nil
	case rotated:
		// Copied to gateway.log.1 and truncated since the last read: what was written since
		// is at the end of the copy (lines written between the copy and the truncation are
		// lost), then the file from its start.
		f.catchUp(f.path + ".1")
		f.off = 0
		if info.Size() >= old.Size() {
			f.off = old.Size() // copied but not truncated yet: go on after the copy
		}
	case info.Size() < f.off:
		f.off = 0 // truncated by someone else
	}
	f.info = info
	for f.off < info.Size() && !f.stopped && ctx.Err() == nil {
		b := make([]byte, min(info.Size()-f.off, logChunk))
		n, err := file.ReadAt(b, f.off)
		if n == 0 && err != nil {
			return nil // read again next time
		}
		f.off += int64(n)
		f.feed(b[:n])
	}
	return nil
}

// catchUp emits what the rotated copy holds past the offset read.
func (f *logFollower) catchUp(old string) {
	file, err := os.Open(old)
	if err != nil {
		return
	}
	defer file.Close()
	info, err := file.Stat()
	if err != nil || info.Size() < f.off {
		return
	}
	b, err := io.ReadAll(io.LimitReader(io.NewSectionReader(file, f.off, info.Size()-f.off), maxTailRead))
	if err == nil {
		f.feed(b)
	}
}

// feed emits the complete lines of pending+b and keeps the rest.
func (f *logFollower) feed(b []byte) {
	f.pending = append(f.pending, b...)
	for !f.stopped {
		i := bytes.IndexByte(f.pending, '\n')
		if i < 0 {
			if len(f.pending) >= runtime.MaxLogLine {
				f.send(f.pending[:runtime.MaxLogLine])
				f.pending = f.pending[runtime.MaxLogLine:]
				continue
			}
			break
		}
		f.send(f.pending[:i])
		f.pending = f.pending[i+1:]
	}
	f.pending = append([]byte(nil), f.pending...) // do not pin what was read
}

func (f *logFollower) send(line []byte) {
	for _, l := range appendLine(nil, line) {
		if !f.stopped && !f.emit(l) {
			f.stopped = true
		}
	}
}
