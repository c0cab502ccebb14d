package local

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRedact(t *testing.T) {
	in := strings.Join([]string{
		"gateway token=abcd1234 rejected",
		`{"token":"plain-token-value"}`,
		"Authorization: Bearer eyJhbGciOi.xyz",
		"bot 123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw failed",
		"hex 0123456789abcdef0123456789abcdef01 done",
		"the attached value is hunter2hunter2 and the gateway token is my-gateway-token",
		"token mismatch for client",
		"path /home/agent/.openclaw/workspace/file.md is fine",
	}, "\n")
	out := redact(in, []string{"my-gateway-token", "hunter2hunter2", ""})
	for _, leak := range []string{"abcd1234", "plain-token-value", "eyJhbGciOi", "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw",
		"0123456789abcdef0123456789abcdef01", "hunter2hunter2", "my-gateway-token"} {
		if strings.Contains(out, leak) {
			t.Errorf("%q not redacted:\n%s", leak, out)
		}
	}
	for _, keep := range []string{"token mismatch for client", "/home/agent/.openclaw/workspace/file.md", "failed", "done"} {
		if !strings.Contains(out, keep) {
			t.Errorf("%q lost:\n%s", keep, out)
		}
	}
}

func TestCapped(t *testing.T) {
	c := &capped{max: 10}
	for _, s := range []string{"abc", "defgh", "ijklmnop"} {
		if n, err := c.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatal(n, err)
		}
	}
	if string(c.bytes()) != "abcdefghij" || !c.truncated || cap(c.buf) > 10 {
		t.Fatalf("%q %v cap=%d", c.buf, c.truncated, cap(c.buf))
	}
	e := &capped{max: 10}
	if e.bytes() == nil || e.truncated {
		t.Fatal("empty capped")
	}
}

func TestRotateLogAndTail(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "gateway.log")
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i := range 200 {
		f.WriteString(strings.Repeat("x", 20) + " line " + string(rune('a'+i%26)) + "\n")
	}
	if err := rotateLog(p, 1<<20); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p + ".1"); !os.IsNotExist(err) {
		t.Fatal("rotated below the limit")
	}
	tail := tailLog(p)
	if lines := strings.Split(tail, "\n"); len(lines) != tailLines || !strings.HasSuffix(lines[9], "line r") {
		t.Fatalf("tail = %q", tail)
	}
	if err := rotateLog(p, 1000); err != nil {
		t.Fatal(err)
	}
	if info, _ := os.Stat(p); info.Size() != 0 {
		t.Fatalf("log not truncated: %d", info.Size())
	}
	if info, _ := os.Stat(p + ".1"); info.Size() < 1000 {
		t.Fatalf("rotated copy: %v", info)
	}
	// The writer (O_APPEND) goes on at the new end.
	f.WriteString("after\n")
	if b, _ := os.ReadFile(p); string(b) != "after\n" {
		t.Fatalf("after rotation: %q", b)
	}
}

func TestProcStat(t *testing.T) {
	st, err := readProcStat(os.Getpid())
	if err != nil || st.start == 0 || st.state == 'Z' {
		t.Fatalf("%+v %v", st, err)
	}
	if !procAlive(os.Getpid(), st.start) || procAlive(os.Getpid(), st.start+1) {
		t.Fatal("procAlive ignores the start time")
	}
	if procAlive(1<<22+12345, 0) {
		t.Fatal("a nonexistent pid is alive")
	}
}

// TestWarmUpRetryBacksOff: a failed compile-cache warm-up is tried again a minute later (a
// boot that failed on a starved machine soon gets another go), and each failure in a row
// doubles the wait up to ten minutes (one that always fails costs a boot every ten minutes).
func TestWarmUpRetryBacksOff(t *testing.T) {
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for n, want := range map[int]time.Duration{1: time.Minute, 2: 2 * time.Minute, 3: 4 * time.Minute, 4: 8 * time.Minute, 5: 10 * time.Minute, 40: 10 * time.Minute} {
		if got := (warmFailure{at: at, n: n}).retryAt().Sub(at); got != want {
			t.Errorf("after %d failures: retry in %s, want %s", n, got, want)
		}
	}
}
