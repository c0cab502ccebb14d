package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// appendLog appends lines to the gateway log in dir as the gateway does (O_APPEND).
func appendLog(t *testing.T, dir string, lines ...string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, logFileName), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, l := range lines {
		if _, err := f.WriteString(l + "\n"); err != nil {
			t.Fatal(err)
		}
	}
}

func numbered(from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, fmt.Sprintf("line %d", i))
	}
	return out
}

func TestLogsTailAcrossRotation(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	if got, err := readLogs(ctx, dir, 5, nil, time.Millisecond); err != nil || len(got) != 0 {
		t.Fatalf("no log yet: %q, %v", got, err)
	}
	appendLog(t, dir, numbered(1, 30)...)
	// Rotate (copytruncate), then the gateway writes on.
	if err := rotateLog(filepath.Join(dir, logFileName), 10); err != nil {
		t.Fatal(err)
	}
	appendLog(t, dir, numbered(31, 33)...)

	got, err := readLogs(ctx, dir, 5, nil, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if want := numbered(29, 33); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("tail 5 across the rotation: %q, want %q", got, want)
	}
	got, _ = readLogs(ctx, dir, 2, nil, time.Millisecond)
	if want := numbered(32, 33); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("tail 2 from the current file: %q, want %q", got, want)
	}
	got, _ = readLogs(ctx, dir, 5000, nil, time.Millisecond)
	if want := numbered(1, 33); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("tail of everything: %q", got)
	}
	// A last line not yet ended is part of a tail.
	f, _ := os.OpenFile(filepath.Join(dir, logFileName), os.O_WRONLY|os.O_APPEND, 0o600)
	_, _ = f.WriteString("half a li")
	f.Close()
	got, _ = readLogs(ctx, dir, 1, nil, time.Millisecond)
	if len(got) != 1 || got[0] != "half a li" {
		t.Fatalf("unterminated last line: %q", got)
	}
}

func TestLogsTailOfALongFile(t *testing.T) {
	dir := t.TempDir()
	lines := numbered(1, 20000) // several read chunks
	appendLog(t, dir, lines...)
	got, err := readLogs(context.Background(), dir, 3000, nil, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if want := lines[17000:]; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("tail 3000: %d lines, first %q last %q", len(got), got[0], got[len(got)-1])
	}
}

// collector gathers followed lines.
type collector struct {
	mu    sync.Mutex
	lines []string
}

func (c *collector) add(l string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lines = append(c.lines, l)
	return true
}

func (c *collector) get() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.lines...)
}

// waitFor waits until c holds want.
func (c *collector) waitFor(t *testing.T, want []string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if strings.Join(c.get(), "|") == strings.Join(want, "|") {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("followed %q, want %q", c.get(), want)
}

func TestLogsFollowAcrossTruncation(t *testing.T) {
	dir := t.TempDir()
	appendLog(t, dir, numbered(1, 5)...)
	ctx, cancel := context.WithCancel(context.Background())
	var c collector
	done := make(chan error, 1)
	go func() {
		_, err := readLogs(ctx, dir, 2, c.add, time.Millisecond)
		done <- err
	}()
	c.waitFor(t, numbered(4, 5))

	appendLog(t, dir, numbered(6, 8)...)
	c.waitFor(t, numbered(4, 8))

	// A rotation by copytruncate, then more output: nothing is repeated, nothing missed.
	if err := rotateLog(filepath.Join(dir, logFileName), 1); err != nil {
		t.Fatal(err)
	}
	appendLog(t, dir, "after rotation")
	c.waitFor(t, append(numbered(4, 8), "after rotation"))

	// A half-written line is sent once it ends.
	f, _ := os.OpenFile(filepath.Join(dir, logFileName), os.O_WRONLY|os.O_APPEND, 0o600)
	_, _ = f.WriteString("half")
	f.Close()
	appendLog(t, dir, " and the rest")
	c.waitFor(t, append(numbered(4, 8), "after rotation", "half and the rest"))

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("follow ended by its context: %v", err)
	}
}

func TestLogsFollowLinesWrittenBetweenReadAndTruncation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, logFileName)
	appendLog(t, dir, "one")
	var c collector
	f := &logFollower{dir: dir, path: path, emit: c.add, sawDir: true}
	if err := f.step(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Written after that read, then rotated before the next one: taken from gateway.log.1.
	appendLog(t, dir, "two", "three")
	if err := rotateLog(path, 1); err != nil {
		t.Fatal(err)
	}
	appendLog(t, dir, "four")
	if err := f.step(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.get(), "|"); got != "one|two|three|four" {
		t.Fatalf("followed %q", got)
	}
}

func TestLogsFollowEndsWhenTheAgentDirIsRemoved(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "agent")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	appendLog(t, dir, "hello")
	var c collector
	done := make(chan error, 1)
	go func() {
		_, err := readLogs(context.Background(), dir, 10, c.add, time.Millisecond)
		done <- err
	}()
	c.waitFor(t, []string{"hello"})
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, io.EOF) {
		t.Fatalf("follow of a removed agent: %v, want io.EOF", err)
	}
}

func TestLogsFollowStopsWhenTheCallerDoes(t *testing.T) {
	dir := t.TempDir()
	appendLog(t, dir, numbered(1, 10)...)
	n := 0
	_, err := readLogs(context.Background(), dir, 10, func(string) bool { n++; return n < 3 }, time.Millisecond)
	if err != nil || n != 3 {
		t.Fatalf("follow after the caller stopped: %d lines, %v", n, err)
	}
}

func TestSplitLinesCapsLongLines(t *testing.T) {
	long := strings.Repeat("x", 40<<10)
	got := splitLines([]byte("a\r\n" + long + "\nb"))
	if len(got) != 5 || got[0] != "a" || got[4] != "b" || len(got[1]) != 16<<10 || len(got[3]) != 8<<10 {
		t.Fatalf("split: %d parts", len(got))
	}
}

// Following again (runtime.LogRequest.Since set): none of what was written before is sent.
// (The tail is sent before the follower first looks at its context: an ended context shows
// what is sent at once.)
func TestLogsFollowAgainSendsNoTail(t *testing.T) {
	rt := &Runtime{opts: Options{StateDir: t.TempDir()}}
	ag := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}}
	dir := rt.AgentDir(keyOf(ag))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	appendLog(t, dir, numbered(1, 10)...)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var first, again collector
	if _, err := rt.Logs(ctx, ag, runtime.LogRequest{Tail: 5, Follow: first.add}); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Logs(ctx, ag, runtime.LogRequest{Tail: 5, Since: time.Now(), Follow: again.add}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(first.get(), "|") != strings.Join(numbered(6, 10), "|") || len(again.get()) != 0 {
		t.Fatalf("first follow %q, following again %q", first.get(), again.get())
	}
}
