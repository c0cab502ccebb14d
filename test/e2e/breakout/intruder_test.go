package breakout

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/internal/devtools/testenv"
	"github.com/agentplane/agentplane/test/e2e/breakout/plan"
)

// TestIntruderWorksOutsideABox is the suite's planted violation: the intruder run on this host
// as root, in no sandbox, pod, cgroup or network namespace of an agent, succeeds at every kind
// of attempt the suite makes (each bounded small here). So each "refused" the runtimes' suites
// report is the box's doing, not an attempt that cannot work.
func TestIntruderWorksOutsideABox(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Skip(t, "the intruder's attempts work unboxed as root only (bpf, perf_event_open)")
	}
	bin := build(t)
	dir := t.TempDir()
	secret := "a-secret-" + strconv.Itoa(os.Getpid())
	holder := exec.Command("sleep", "60")
	holder.Env = append(os.Environ(), "HELD="+secret)
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	host := listen(t, "127.0.0.1")
	_, port, _ := net.SplitHostPort(host)
	file := filepath.Join(dir, "platform-file")
	if err := os.WriteFile(file, []byte("credentials"), 0o600); err != nil {
		t.Fatal(err)
	}
	attempts := []attempt{
		try("proc", "proc", secret, 0),
		try("tcp", "tcp", host, 0),
		try("procnet", "procnet", "", atoi(port)),
		try("userns", "userns", "", 0),
		try("read", "read", file, 0),
		try("memory", "memory", "", 64<<20),
		try("pids", "pids", "/bin/sleep", 32),
		try("fallocate", "fallocate", filepath.Join(dir, "fill"), 64<<20),
	}
	for _, c := range refusedCalls {
		attempts = append(attempts, try(c, "syscall", c, 0))
	}
	arg, _ := json.Marshal(attempts)
	out, err := exec.Command(bin, string(arg)).Output()
	if err != nil {
		t.Fatalf("intruder: %v", err)
	}
	got := map[string]plan.Result{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var r plan.Result
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("intruder output %q: %v", line, err)
		}
		got[r.Name] = r
	}
	for _, a := range attempts {
		if r := got[a.Name]; !r.Done {
			t.Errorf("%s outside a box: not done (%q): the suite's attempt could never work", a.Name, r.Detail)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "fill")); err == nil {
		t.Error("the intruder left its fill file")
	}
}
